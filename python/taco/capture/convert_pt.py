"""Convert PyTorch dumps (torch.save'd tensors, or dicts/lists of tensors) to safetensors with
__metadata__, or straight to a taco trace.

Dumps this reads (anchors.md section 5): TensorRT-LLM's per-op .pt files (e.g.
"...Linear-1.AllReduce-input.input.pt": all-reduce inputs), SGLang's Pass<n>.pt dicts,
TransformerEngine DumpTensors' {"high_precision": ..., "quantized": ...} files (the quantized
entry needs TE and --unsafe-pickle, or --exclude it), Megatron activation dumps, or anything
torch.save wrote.

Tensor names: the input's path relative to --root (default: the inputs' common directory),
without ".pt", then "." and the key path inside the file (dict keys, list indices), e.g.
"rank_0/iter_000010/decoder.3.fc1_activation.high_precision". A file holding one bare tensor
gives just the path.

Metadata: --set KEY=VALUE applies to every tensor; --name-pattern REGEX (repeatable, first match
wins) sets fields per tensor from named groups, e.g. (?P<tp_rank>\\d+) or (?P<layer>\\d+). Keys
that are not taco fields (layer, site, direction, collective, tp_rank, tp_size, step, model) go
to extra. In safetensors, metadata shared by all tensors goes to __metadata__; metadata that
differs between tensors needs --sidecar FILE.json ({tensor name: {key: value}}, what
`taco import --sidecar` reads) or a .h5 output, which stores it per tensor.

  python -m taco.capture.convert_pt dumps/rank*/iter_*/*.pt --root dumps --out te.safetensors \\
      --preset te --set model=my-gpt --set tp_size=2 --sidecar te.meta.json
  python -m taco.capture.convert_pt pass0.pt --out pass0.h5 --name-pattern 'layers\\.(?P<layer>\\d+)\\.'

safetensors keeps the dtype (BF16, F16, F32, F64, F8_E4M3, F8_E5M2). A .h5 trace stores
bf16/f16/f32 as they are, fp8 as f32 (exact), f64 as f32 (rounded; extra.dtype_orig says so).
Integer and bool tensors are skipped. Exit 2 with one line on bad input; no partial output.
"""
import argparse
import json
import os
import re
import sys

import numpy as np

from ..errors import CaptureInputError, check_not_an_input, run_cli
from .trace_writer import META_INT_FIELDS, META_STR_FIELDS

META_FIELDS = META_INT_FIELDS + META_STR_FIELDS

PRESETS = {
    # TE DumpTensors: {log_dir}/tensor_dumps/rank_{r}/iter_{iter:06d}/{layer}_{tensor}.pt
    "te": [r"rank_(?P<tp_rank>\d+)/iter_(?P<step>\d+)/(?:[^/]*?\.)?(?P<layer>\d+)\.[^/]*_(?P<tensor>activation|"
           r"gradient|weight|output|wgrad|dgrad)\b",
           r"rank_(?P<tp_rank>\d+)/iter_(?P<step>\d+)/"],
    # SGLang: TP{tp}_PP{pp}_Rank{r}_pid{pid}/Pass{n}.pt with module-name keys
    "sglang": [r"TP(?P<tp_rank>\d+)_PP\d+_Rank\d+_pid\d+/Pass(?P<step>\d+)\.(?:.*?\.)?layers\.(?P<layer>\d+)\.",
               r"TP(?P<tp_rank>\d+)_PP\d+_Rank\d+_pid\d+/Pass(?P<step>\d+)"],
    # TensorRT-LLM: DATA_FOLDER/rank{ID}/{loop}.{Model}-{idx}.{Op}-...-{input|output}.{param}.pt
    "trtllm": [r"rank(?P<tp_rank>\d+)/(?P<step>\d+)\.(?:.*?\.)?(?:layers|h)[.-](?P<layer>\d+)\.",
               r"rank(?P<tp_rank>\d+)/(?P<step>\d+)\."],
}


def _torch_dtypes():
    import torch

    m = {torch.bfloat16: "BF16", torch.float16: "F16", torch.float32: "F32", torch.float64: "F64"}
    for attr, name in (("float8_e4m3fn", "F8_E4M3"), ("float8_e5m2", "F8_E5M2")):
        if hasattr(torch, attr):
            m[getattr(torch, attr)] = name
    return m


def load_pt(path, unsafe_pickle):
    import pickle

    import torch

    if not os.path.isfile(path):
        raise CaptureInputError(f"{path}: no such file")
    if os.path.getsize(path) == 0:
        raise CaptureInputError(f"{path}: empty file")
    with open(path, "rb") as f:
        head = f.read(4)
    # torch.save writes a zip archive (since torch 1.6) or, in the legacy format, a pickle
    # (protocol 2+ starts with 0x80).
    if head[:4] != b"PK\x03\x04" and head[:1] != b"\x80":
        raise CaptureInputError(f"{path}: not a torch.save file (neither a zip archive nor a pickle)")
    try:
        return torch.load(path, map_location="cpu", weights_only=not unsafe_pickle)
    except pickle.UnpicklingError as ex:
        msg = " ".join(str(ex).split())
        if "WeightsUnpickler error:" in msg:   # torch's own text before it is advice, not the cause
            msg = "weights-only load refused: " + msg.split("WeightsUnpickler error:", 1)[1].strip()
        msg = msg[:200]
        hint = "" if unsafe_pickle else " (if you trust the file, --unsafe-pickle loads any pickled object)"
        raise CaptureInputError(f"{path}: cannot unpickle: {msg}{hint}") from None
    except (RuntimeError, EOFError, ValueError, OSError, ImportError, AttributeError, KeyError,
            TypeError, IndexError) as ex:
        msg = " ".join(str(ex).split())[:200]
        raise CaptureInputError(f"{path}: not a readable torch.save file: {type(ex).__name__}: {msg}") from None


def walk(obj, prefix, out, skipped):
    """Collects (name, tensor) pairs from nested dicts/lists/tuples."""
    import torch

    if isinstance(obj, torch.Tensor):
        out.append((prefix, obj))
    elif isinstance(obj, dict):
        for k, v in obj.items():
            walk(v, f"{prefix}.{k}" if prefix else str(k), out, skipped)
    elif isinstance(obj, (list, tuple)):
        for i, v in enumerate(obj):
            walk(v, f"{prefix}.{i}" if prefix else str(i), out, skipped)
    else:
        skipped.append((prefix, type(obj).__name__))


def plain_tensor(name, t, notes):
    """A plain CPU tensor, or None to skip (with a note)."""
    import torch

    if type(t) not in (torch.Tensor, torch.nn.Parameter):
        if hasattr(t, "dequantize"):
            notes.append(f"{name}: {type(t).__name__} dequantized")
            t = t.dequantize()
        else:
            notes.append(f"{name}: skipped a {type(t).__name__} (a tensor subclass taco cannot read)")
            return None
    t = t.detach()
    if t.layout != torch.strided:
        t = t.to_dense()
    return t.cpu().contiguous()


def parse_set(items):
    meta = {}
    for item in items or []:
        if "=" not in item:
            raise CaptureInputError(f"--set {item!r} is not KEY=VALUE")
        k, v = item.split("=", 1)
        if not k:
            raise CaptureInputError(f"--set {item!r} has an empty key")
        meta[k] = v
    return meta


def check_field(name, key, value):
    if key in META_INT_FIELDS:
        try:
            n = int(value)
        except ValueError:
            raise CaptureInputError(f"tensor '{name}': {key} must be an integer, got {value!r}") from None
        if n < -1 or (key == "tp_size" and n == 0):
            raise CaptureInputError(f"tensor '{name}': {key} = {n} is out of range")
        return str(n)
    return str(value)


def main(argv=None):
    p = argparse.ArgumentParser(prog="python -m taco.capture.convert_pt", description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    p.add_argument("inputs", nargs="+", help=".pt files written by torch.save")
    p.add_argument("--out", required=True, help="OUT.safetensors, or OUT.h5 for a taco trace")
    p.add_argument("--set", action="append", metavar="KEY=VALUE", help="metadata for every tensor")
    p.add_argument("--name-pattern", action="append", metavar="REGEX",
                   help="regex with named groups searched in each tensor name (first match wins)")
    p.add_argument("--preset", choices=sorted(PRESETS), help="name patterns for a known dump layout "
                   "(tried after --name-pattern)")
    p.add_argument("--include", metavar="REGEX", help="keep only tensors whose name matches")
    p.add_argument("--exclude", metavar="REGEX", help="drop tensors whose name matches")
    p.add_argument("--root", help="directory the names are relative to (default: common directory)")
    p.add_argument("--sidecar", metavar="FILE.json", help="write per-tensor metadata here (safetensors output)")
    p.add_argument("--unsafe-pickle", action="store_true",
                   help="torch.load(weights_only=False): runs code from the pickle; only for trusted files")
    a = p.parse_args(argv)

    out_kind = "h5" if a.out.endswith((".h5", ".hdf5")) else "safetensors" if a.out.endswith(".safetensors") else None
    if out_kind is None:
        raise CaptureInputError(f"--out {a.out}: name it .safetensors or .h5")
    if a.sidecar and out_kind == "h5":
        raise CaptureInputError("--sidecar is for safetensors output; a .h5 trace stores metadata per tensor")
    out_dir = os.path.dirname(os.path.abspath(a.out))
    if not os.path.isdir(out_dir):
        raise CaptureInputError(f"--out {a.out}: directory {out_dir} does not exist")
    check_not_an_input(a.out, a.inputs)
    if a.sidecar:
        check_not_an_input(a.sidecar, a.inputs, "--sidecar")
        if os.path.realpath(a.sidecar) == os.path.realpath(a.out):
            raise CaptureInputError(f"--sidecar {a.sidecar}: is --out too; give the sidecar another name")
    patterns = []
    for text in (a.name_pattern or []) + (PRESETS[a.preset] if a.preset else []):
        try:
            patterns.append(re.compile(text))
        except re.error as ex:
            raise CaptureInputError(f"--name-pattern {text!r}: {ex}") from None
    try:
        include = re.compile(a.include) if a.include else None
        exclude = re.compile(a.exclude) if a.exclude else None
    except re.error as ex:
        raise CaptureInputError(f"--include/--exclude: {ex}") from None
    fixed = parse_set(a.set)
    fixed = {k: check_field("(--set)", k, v) for k, v in fixed.items()}

    paths = [os.path.abspath(x) for x in a.inputs]
    if a.root:
        root = os.path.abspath(a.root)
    else:
        root = os.path.commonpath([os.path.dirname(x) for x in paths])
    dtypes = _torch_dtypes()
    entries, notes = [], []          # entries: (name, tensor, per-tensor metadata dict)
    for path in paths:
        rel = os.path.relpath(path, root).replace(os.sep, "/")
        if rel.startswith("../"):
            raise CaptureInputError(f"{path} is not under --root {root}")
        base = rel[:-3] if rel.endswith(".pt") else rel
        obj = load_pt(path, a.unsafe_pickle)
        found, skipped = [], []
        walk(obj, "", found, skipped)
        if not found:
            raise CaptureInputError(f"{path}: holds no tensors")
        for key, t in found:
            name = f"{base}.{key}" if key else base
            if (include and not include.search(name)) or (exclude and exclude.search(name)):
                continue
            t = plain_tensor(name, t, notes)
            if t is None:
                continue
            if t.dtype not in dtypes:
                notes.append(f"{name}: skipped dtype {t.dtype}")
                continue
            if t.dim() == 0 or t.numel() == 0:
                notes.append(f"{name}: skipped an empty or 0-d tensor")
                continue
            meta = dict(fixed)
            for rx in patterns:
                m = rx.search(name)
                if m:
                    for k, v in m.groupdict().items():
                        if v is not None and k not in fixed:
                            meta[k] = check_field(name, k, v)
                    break
            meta.setdefault("source", rel)
            entries.append((name, t, meta))
    if not entries:
        raise CaptureInputError("no convertible tensor in the inputs" + (f" ({notes[0]})" if notes else ""))
    names = [e[0] for e in entries]
    if len(set(names)) != len(names):
        dup = sorted({n for n in names if names.count(n) > 1})[0]
        raise CaptureInputError(f"two tensors are both named '{dup}' (give --root so the paths differ)")
    if out_kind == "safetensors":
        write_st(a, entries, dtypes)
    else:
        write_h5(a, entries, dtypes)
    for n in notes:
        print(f"taco.capture.convert_pt: note: {n}", file=sys.stderr)
    print(f"{a.out}: {len(entries)} tensors from {len(paths)} file(s)")
    return 0


def _bits(t, st_dtype):
    import torch

    if st_dtype in ("BF16", "F16"):
        return t.view(torch.int16).numpy().view(np.uint16).copy()
    if st_dtype in ("F8_E4M3", "F8_E5M2"):
        return t.view(torch.uint8).numpy().copy()
    return t.numpy().copy()


def write_st(a, entries, dtypes):
    from .safetensors_io import write_safetensors

    keys = sorted({k for _, _, m in entries for k in m})
    common = {}
    varying = []
    for k in keys:
        vals = {m.get(k) for _, _, m in entries}
        if len(vals) == 1 and None not in vals:
            common[k] = vals.pop()
        else:
            varying.append(k)
    varying_fields = [k for k in varying if k in META_FIELDS]
    if varying_fields and not a.sidecar:
        raise CaptureInputError(f"metadata {', '.join(varying_fields)} differs between tensors; safetensors "
                                "__metadata__ holds one value per key: give --sidecar FILE.json or write a .h5 trace")
    common["generator"] = "taco.capture.convert_pt"
    tensors = [(name, _bits(t, dtypes[t.dtype]), dtypes[t.dtype]) for name, t, _ in entries]
    sidecar_tmp = None
    if a.sidecar:
        # The sidecar format `taco import --sidecar` reads: {tensor name: {key: value}}.
        side = {name: {k: m[k] for k in varying if k in m} for name, _, m in entries}
        sidecar_tmp = f"{a.sidecar}.tmp-{os.getpid()}"
        with open(sidecar_tmp, "w") as f:
            json.dump(side, f, indent=1)
    try:
        write_safetensors(a.out, tensors, metadata=common)
    except BaseException:
        if sidecar_tmp and os.path.exists(sidecar_tmp):
            os.remove(sidecar_tmp)
        raise
    if sidecar_tmp:
        os.replace(sidecar_tmp, a.sidecar)


def write_h5(a, entries, dtypes):
    import torch

    from .trace_writer import TraceWriter

    prov = {"generator": "taco.capture.convert_pt",
            "command": " ".join(["python", "-m", "taco.capture.convert_pt"] + sys.argv[1:])}
    with TraceWriter(a.out, provenance=prov) as w:
        for name, t, m in entries:
            st = dtypes[t.dtype]
            extra = {k: v for k, v in m.items() if k not in META_FIELDS}
            if st in ("BF16", "F16"):
                data, dt = _bits(t, st), st.lower()
            else:
                data, dt = t.to(torch.float32).numpy().copy(), "f32"
                if st != "F32":
                    extra["dtype_orig"] = st.lower()
            meta = {k: (int(m[k]) if k in META_INT_FIELDS else m[k]) for k in META_FIELDS if k in m}
            w.add(name, data, dt, meta=meta, extra=extra)
        w.commit()


if __name__ == "__main__":
    sys.exit(run_cli(main))
