"""Copy chosen tensors (and optionally only their first rows) out of taco traces into one trace.

Values are copied as stored (bf16/f16 bit patterns stay bit-exact); every dataset attribute is
kept; the new file's root attributes name the inputs. Filters combine with AND; a filter left
out keeps everything.

  python -m taco.capture.subset run/trace.rank*.step000030.h5 --layers 0,2,5 --rows 512 \\
      --out samples/step30.h5
"""
import argparse
import os
import sys

import numpy as np

from ..errors import CaptureInputError, check_not_an_input, run_cli
from .trace_writer import FORMAT_NAME, FORMAT_VERSION, META_INT_FIELDS, META_STR_FIELDS, TraceWriter


def _ints(text, flag):
    if text is None:
        return None
    try:
        return {int(x) for x in text.split(",") if x.strip()}
    except ValueError:
        raise CaptureInputError(f"{flag} must be comma-separated integers, got {text!r}") from None


def _strs(text):
    return None if text is None else {x.strip() for x in text.split(",") if x.strip()}


def _attr_str(v):
    return v.decode() if isinstance(v, bytes) else str(v)


def main(argv=None):
    p = argparse.ArgumentParser(prog="python -m taco.capture.subset", description=__doc__.split("\n\n")[0])
    p.add_argument("inputs", nargs="+", help="taco traces (.h5)")
    p.add_argument("--out", required=True)
    p.add_argument("--layers")
    p.add_argument("--steps")
    p.add_argument("--ranks", help="tp_rank values")
    p.add_argument("--sites")
    p.add_argument("--directions")
    p.add_argument("--collectives")
    p.add_argument("--rows", type=int, default=0, help="keep only the first N rows (tokens) of each tensor")
    p.add_argument("--gzip", type=int, default=9)
    a = p.parse_args(argv)
    import h5py

    want_int = {"layer": _ints(a.layers, "--layers"), "step": _ints(a.steps, "--steps"),
                "tp_rank": _ints(a.ranks, "--ranks")}
    want_str = {"site": _strs(a.sites), "direction": _strs(a.directions), "collective": _strs(a.collectives)}
    if a.rows < 0:
        raise CaptureInputError(f"--rows must be >= 0, got {a.rows}")
    for path in a.inputs:
        if not os.path.isfile(path):
            raise CaptureInputError(f"{path}: no such file")
    check_not_an_input(a.out, a.inputs)
    sources = []
    picked = []
    for path in a.inputs:
        try:
            f = h5py.File(path, "r")
        except OSError as ex:
            raise CaptureInputError(f"{path}: not an HDF5 file ({ex})") from None
        with f:
            if _attr_str(f.attrs.get("taco_format", "")) != FORMAT_NAME or "tensors" not in f:
                raise CaptureInputError(f"{path}: not a taco trace")
            if int(f.attrs.get("taco_format_version", -1)) != FORMAT_VERSION:
                raise CaptureInputError(f"{path}: unknown taco_format_version {f.attrs.get('taco_format_version')}")
            sources.append(f"{os.path.basename(path)} [{_attr_str(f.attrs.get('created_by', ''))}]")
            for key in sorted(f["tensors"].keys()):
                ds = f["tensors"][key]
                at = {k: ds.attrs[k] for k in ds.attrs.keys()}
                if any(w is not None and int(at.get(k, -1)) not in w for k, w in want_int.items()):
                    continue
                if any(w is not None and _attr_str(at.get(k, "")) not in w for k, w in want_str.items()):
                    continue
                data = ds[: a.rows] if a.rows and ds.ndim >= 2 else ds[()]
                picked.append((at, np.asarray(data), path))
    if not picked:
        raise CaptureInputError("no tensor matched the filters")
    first_root = {}
    with h5py.File(a.inputs[0], "r") as f:
        for k in f.attrs.keys():
            if k not in ("taco_format", "taco_format_version", "created_by"):
                first_root[k] = _attr_str(f.attrs[k])
    prov = {f"origin.{k}": v for k, v in first_root.items()}
    prov["generator"] = "taco.capture.subset"
    prov["command"] = " ".join(["python", "-m", "taco.capture.subset"] + list(argv if argv is not None
                                                                              else sys.argv[1:]))
    prov["source"] = "; ".join(sources)
    with TraceWriter(a.out, provenance=prov, compression_level=a.gzip) as w:
        for at, data, path in picked:
            meta = {k: int(at.get(k, -1)) for k in META_INT_FIELDS}
            meta.update({k: _attr_str(at.get(k, "")) for k in META_STR_FIELDS})
            extra = {k[len("extra."):]: _attr_str(v) for k, v in at.items() if k.startswith("extra.")}
            w.add(_attr_str(at["name"]), data, _attr_str(at["dtype"]), meta=meta, extra=extra)
        w.commit()
    print(f"{a.out}: {len(picked)} tensors from {len(a.inputs)} file(s), {os.path.getsize(a.out) / 2**20:.2f} MiB")
    return 0


if __name__ == "__main__":
    sys.exit(run_cli(main))
