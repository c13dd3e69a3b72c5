"""Step time of one Megatron-style transformer layer under tensor parallelism (TP), with plain and
compressed TP collectives: forward and backward, bf16 GEMMs, the model code of taco.train
(QKV, attention, output projection, MLP) on taco.tp's collectives.

Two modes:
  shard (one GPU)   what one rank of TP=N computes, at the shard shapes, with its codec work
                    (taco.tp.TP.loopback: the same kernels on buffers of the same sizes, nothing
                    sent). Step time = compute + codecs; the communication is left to the step-time
                    model (`taco model`), which adds it per interconnect.
  dist (torchrun)   real TP over NCCL, one GPU per rank: plain against compressed, the speed-up,
                    and the exposed communication (step minus the same rank's loopback step).

    python -m taco.bench.layer --models gpt-345m,qwen2.5-3b --tp 2,4,8 --variants bf16,taco,fp8-g128 \\
        --json layer.json
    torchrun --nproc_per_node 2 -m taco.bench.layer --mode dist --models gpt-345m --variants bf16,taco

Shard mode times CUDA-graph replays of the layer's forward and backward (and of each part), so
the figures are GPU time, not the Python time of launching a small layer's many kernels
(--no-graphs times eagerly; the JSON says which). Parts (medians, ms): gemm = the layer's 12 GEMMs (forward, input and weight gradients of its four
linears) timed alone at the same shapes; attention = scaled-dot-product attention forward and
backward alone; codec = the layer's TP collectives' codec kernels alone (loopback); comm_exposed
(dist only); other = step minus those (norms, activations, residual adds, rotary embedding).
Output: a table and JSON (schema taco.layer/1, docs/step-model.md).
"""
import argparse
import json
import os
import platform
import sys
import time

from ..errors import TacoInputError, run_cli

MODELS = {  # the paper's setups (methods.md): GPT-345M; Qwen2.5-3B (hidden 2048, 16 heads, 2 KV heads, 11008)
    "gpt-345m": dict(arch="gpt2", hidden=1024, heads=16, kv_heads=16, ffn=4096, seq=2048, micro_batch=8),
    "qwen2.5-3b": dict(arch="llama", hidden=2048, heads=16, kv_heads=2, ffn=11008, seq=2048, micro_batch=2),
    "tiny": dict(arch="llama", hidden=128, heads=4, kv_heads=2, ffn=256, seq=64, micro_batch=2),
}


def timed(fn, warmup, reps):
    """Median, 10th and 90th percentile of fn()'s time in ms (CUDA events on a GPU, the host clock
    on the CPU, where the benchmark only checks that it runs)."""
    import torch
    for _ in range(warmup):
        fn()
    ts = []
    for _ in range(reps):
        if torch.cuda.is_available():
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            fn()
            b.record()
            b.synchronize()
            ts.append(a.elapsed_time(b))
        else:
            t0 = time.perf_counter()
            fn()
            ts.append((time.perf_counter() - t0) * 1e3)
    ts.sort()
    pick = lambda q: ts[min(len(ts) - 1, int(q * len(ts)))]  # noqa: E731
    return {"median": pick(0.5), "p10": pick(0.1), "p90": pick(0.9), "samples": len(ts)}


def graphed(fn, enabled):
    """fn captured in a CUDA graph (its replay), so that the GPU time is not the Python time of
    launching it; fn itself when graphs are off or the capture fails."""
    import torch
    if not enabled or not torch.cuda.is_available():
        return fn, False
    try:
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(3):  # allocations, library handles and kernel choices before the capture
                fn()
        torch.cuda.current_stream().wait_stream(side)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            fn()
        g.replay()
        torch.cuda.synchronize()
        return g.replay, True
    except RuntimeError as ex:
        print(f"layer: CUDA graph capture failed ({str(ex).splitlines()[0]}); timing eagerly", file=sys.stderr)
        torch.cuda.synchronize()
        return fn, False


class Layer:
    """One transformer layer (taco.train.model.Block) on a TP object, with its input and gradient."""

    def __init__(self, spec, tp, sp, variant, algo, device):
        import torch

        from ..tp import Compression
        from ..train.config import ModelConfig
        from ..train.model import Block, rope_tables
        n = tp.size
        kv = max(spec["kv_heads"], n)  # fewer KV heads than ranks: each rank holds one (Megatron replicates)
        self.cfg = ModelConfig(arch=spec["arch"], hidden=spec["hidden"], heads=spec["heads"], kv_heads=kv,
                               ffn=spec["ffn"], seq=spec["seq"], compute_dtype="bfloat16")
        tp.compression = Compression(variant if variant != "bf16" else None, algo=algo)
        self.tp, self.sp = tp, sp
        self.block = Block(self.cfg, 0, tp, sp).to(device)
        for p in self.block.parameters():
            torch.nn.init.normal_(p, std=0.02)
        s, b, h = spec["seq"], spec["micro_batch"], spec["hidden"]
        s_local = s // n if sp else s
        g = torch.Generator(device=device).manual_seed(0)
        dtype = torch.bfloat16 if device.type == "cuda" else torch.float32
        self.cfg.compute_dtype = "bfloat16" if device.type == "cuda" else "float32"
        self.x = torch.randn(s_local, b, h, device=device, generator=g).to(dtype).requires_grad_(True)
        self.dy = torch.randn(s_local, b, h, device=device, generator=g).to(dtype)
        self.rope = rope_tables(s, self.cfg.head_dim, self.cfg.rope_theta, device) if spec["arch"] == "llama" else None

    def step(self):
        """Forward and backward (gradients accumulate: the same kernels every call, graph-safe)."""
        y = self.block(self.x, self.rope)
        y.backward(self.dy)


def linear_shapes(cfg, n, tokens):
    """(out, in) of one rank's four linears."""
    d = cfg.head_dim
    h_l, kv_l = cfg.heads // n, cfg.kv_heads // n
    fc1 = (2 if cfg.arch == "llama" else 1) * cfg.ffn // n
    return [((h_l + 2 * kv_l) * d, cfg.hidden), (cfg.hidden, h_l * d), (fc1, cfg.hidden), (cfg.hidden, cfg.ffn // n)]


def part_times(layer, spec, n, warmup, reps, device, graphs):
    """GEMMs alone, attention alone, the codec kernels alone (ms)."""
    import torch
    cfg = layer.cfg
    tokens = spec["seq"] * spec["micro_batch"]
    mats = []
    for out_f, in_f in linear_shapes(cfg, n, tokens):
        dt = layer.x.dtype
        x = torch.randn(tokens, in_f, device=device, dtype=dt)
        w = torch.randn(out_f, in_f, device=device, dtype=dt)
        dy = torch.randn(tokens, out_f, device=device, dtype=dt)
        mats.append((x, w, dy))

    def gemms():
        for x, w, dy in mats:
            torch.matmul(x, w.t())     # forward
            torch.matmul(dy, w)        # input gradient
            torch.matmul(dy.t(), x)    # weight gradient

    b, s, d = spec["micro_batch"], spec["seq"], cfg.head_dim
    h_l = cfg.heads // n
    dt = layer.x.dtype
    q, k, v = (torch.randn(b, h_l, s, d, device=device, dtype=dt, requires_grad=True) for _ in range(3))
    go = torch.randn(b, h_l, s, d, device=device, dtype=dt)

    def attention():
        from ..train.model import causal_attention
        o = causal_attention(q, k, v)
        o.backward(go)

    msgs = messages(layer, spec, n)
    tp = layer.tp

    def codecs():
        for m in msgs:
            tp.collective(m["collective"], [m["_x"]], 0, m["site"], m["direction"])

    parts = {"gemm": timed(graphed(gemms, graphs)[0], warmup, reps)["median"],
             "attention": timed(graphed(attention, graphs)[0], warmup, reps)["median"]}
    parts["codec"] = timed(graphed(codecs, graphs)[0], warmup, reps)["median"] if tp.compression.default else 0.0
    if tp.compression.default:
        for m in msgs:
            one = graphed(lambda m=m: tp.collective(m["collective"], [m["_x"]], 0, m["site"], m["direction"]),
                          graphs)[0]
            m["codec_ms"] = timed(one, warmup, reps)["median"]
    return parts, msgs


def messages(layer, spec, n):
    """The layer's TP messages on one rank (methods.md 1.3), each with a tensor of its shape."""
    from .. import dist as td
    s, b, h = spec["seq"], spec["micro_batch"], spec["hidden"]
    full, shard = (s, b, h), (s // n, b, h)
    if layer.sp:
        table = [(site, "fwd", "all_gather", shard) for site in ("attn_qkv", "mlp_fc1")] + \
                [(site, "bwd", "reduce_scatter", full) for site in ("attn_qkv", "mlp_fc1")] + \
                [(site, "fwd", "reduce_scatter", full) for site in ("attn_out", "mlp_out")] + \
                [(site, "bwd", "all_gather", shard) for site in ("attn_out", "mlp_out")]
    else:
        table = [(site, "fwd", "all_reduce", full) for site in ("attn_out", "mlp_out")] + \
                [(site, "bwd", "all_reduce", full) for site in ("attn_qkv", "mlp_fc1")]
    variant = layer.tp.compression.default
    out = []
    for site, direction, coll, shape in table:
        x = torch_randn(shape, layer.x.device)
        out.append({"site": site, "direction": direction, "collective": coll, "elements": x.numel(),
                    "bytes_plain": x.numel() * 2, "bytes_wire": td.wire_bytes_sent(x, variant, coll, n),
                    "codec_ms": 0.0, "_x": x})
    return out


def torch_randn(shape, device):
    import torch
    return torch.randn(*shape, device=device).to(torch.bfloat16)


def environment(mode):
    import torch
    gpu = torch.cuda.is_available()
    env = {"gpu": torch.cuda.get_device_name(0) if gpu else "none (cpu)", "gpus": torch.cuda.device_count(), "torch": torch.__version__,
           "cuda": torch.version.cuda, "driver": None, "nccl": None, "python": platform.python_version(),
           "date_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "mode": mode,
           "command": " ".join([sys.executable, "-m", "taco.bench.layer"] + sys.argv[1:])}
    try:
        env["nccl"] = ".".join(str(v) for v in torch.cuda.nccl.version())
    except Exception:  # noqa: BLE001 - informational
        pass
    try:
        from .. import _C
        env["taco"] = f"{_C.version} ({_C.git_commit})"
    except ImportError:
        env["taco"] = None
    try:
        import subprocess
        env["driver"] = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                                       capture_output=True, text=True, timeout=20).stdout.strip().splitlines()[0]
    except Exception:  # noqa: BLE001 - informational
        pass
    return env


def model_spec(a, name):
    """The model's settings, with --micro-batch when given."""
    return dict(MODELS[name], **({"micro_batch": a.micro_batch} if a.micro_batch else {}))


def run_shard(a, device):
    from ..tp import TP
    rows = []
    for name in a.models:
        spec = model_spec(a, name)
        for n in a.tp:
            for sp in a.sp:
                plain = None
                for variant in a.variants:
                    layer = Layer(spec, TP.loopback(n), sp, variant, a.algo, device)
                    step, used = graphed(layer.step, a.graphs)
                    st = timed(step, a.warmup, a.reps)
                    st["cuda_graph"] = used
                    parts, msgs = part_times(layer, spec, n, a.warmup, a.reps, device, a.graphs)
                    parts["comm_exposed"] = 0.0
                    parts["other"] = max(0.0, st["median"] - parts["gemm"] - parts["attention"] - parts["codec"])
                    if variant == "bf16":
                        plain = st["median"]
                    rows.append(row(name, spec, n, sp, variant, a.algo, "shard", st, parts, msgs, None))
                    print_row(rows[-1], plain)
    return rows


def run_dist(a, device):
    import torch.distributed as dist

    from ..tp import TP
    rank = dist.get_rank()
    n = dist.get_world_size()
    rows = []
    for name in a.models:
        spec = model_spec(a, name)
        for sp in a.sp:
            plain = None
            for variant in a.variants:
                layer = Layer(spec, TP.process(None), sp, variant, a.algo, device)
                st = timed(layer.step, a.warmup, a.reps)
                local = Layer(spec, TP.loopback(n), sp, variant, a.algo, device)
                lt = timed(graphed(local.step, a.graphs)[0], a.warmup, a.reps)
                parts, msgs = part_times(local, spec, n, a.warmup, a.reps, device, a.graphs)
                parts["comm_exposed"] = max(0.0, st["median"] - lt["median"])
                parts["other"] = max(0.0, lt["median"] - parts["gemm"] - parts["attention"] - parts["codec"])
                if variant == "bf16":
                    plain = st["median"]
                r = row(name, spec, n, sp, variant, a.algo, "dist", st, parts, msgs,
                        plain / st["median"] if plain else None)
                rows.append(r)
                if rank == 0:
                    print_row(r, plain)
    return rows


def row(name, spec, n, sp, variant, algo, mode, st, parts, msgs, speedup):
    return {"model": {"name": name, "arch": spec["arch"], "hidden": spec["hidden"], "ffn": spec["ffn"],
                      "heads": spec["heads"], "kv_heads": spec["kv_heads"]},
            "seq": spec["seq"], "micro_batch": spec["micro_batch"], "tp": n, "sp": sp, "dtype": "bfloat16",
            "variant": variant, "algo": "nccl" if variant == "bf16" else algo, "mode": mode, "step_ms": st,
            "parts_ms": parts,
            "messages": [{k: v for k, v in m.items() if not k.startswith("_")} for m in msgs],
            "speedup_vs_plain": speedup}


def print_row(r, plain):
    p = r["parts_ms"]
    sp = " sp" if r["sp"] else ""
    rel = f"{r['step_ms']['median'] / plain:5.2f}x" if plain else "   - "
    print(f"{r['model']['name']:<11} tp{r['tp']}{sp:<3} {r['variant']:<10} step {r['step_ms']['median']:8.3f} ms "
          f"(p10 {r['step_ms']['p10']:.3f}, p90 {r['step_ms']['p90']:.3f})  gemm {p['gemm']:7.3f}  attn "
          f"{p['attention']:6.3f}  codec {p['codec']:6.3f}  comm {p['comm_exposed']:6.3f}  other {p['other']:6.3f}  "
          f"vs plain {rel}", flush=True)


def main(argv=None):
    p = argparse.ArgumentParser(prog="python -m taco.bench.layer", description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__.split("\n\n", 1)[1])
    p.add_argument("--mode", choices=("shard", "dist"), default="shard")
    p.add_argument("--models", default="gpt-345m", help=f"comma-separated: {', '.join(MODELS)}")
    p.add_argument("--tp", default="2,4,8", help="TP degrees (shard mode; dist uses the world size)")
    p.add_argument("--sp", default="off", help="sequence parallelism: off, on or both")
    p.add_argument("--variants", default="bf16,taco,fp8-g128", help="bf16 = plain collectives")
    p.add_argument("--algo", default="auto")
    p.add_argument("--micro-batch", type=int, default=None,
                   help="sequences per micro-batch (default: the model's; the paper's setting is 8)")
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--reps", type=int, default=20)
    p.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    p.add_argument("--no-graphs", dest="graphs", action="store_false",
                   help="time eagerly (default: replay CUDA graphs of each timed function, shard mode)")
    p.add_argument("--json", default=None)
    a = p.parse_args(argv)
    a.models = [m for m in a.models.split(",") if m]
    for m in a.models:
        if m not in MODELS:
            raise TacoInputError(f"unknown model {m!r} (one of {', '.join(MODELS)})")
    try:
        a.tp = [int(t) for t in a.tp.split(",") if t]
    except ValueError:
        raise TacoInputError(f"--tp must be comma-separated integers, got {a.tp!r}") from None
    if any(t < 1 for t in a.tp):
        raise TacoInputError("--tp degrees must be >= 1")
    a.sp = {"off": [False], "on": [True], "both": [False, True]}.get(a.sp)
    if a.sp is None:
        raise TacoInputError("--sp must be off, on or both")
    a.variants = [v for v in a.variants.split(",") if v]
    if a.micro_batch is not None and a.micro_batch < 1:
        raise TacoInputError("--micro-batch must be >= 1")
    if a.warmup < 0 or a.reps < 1:
        raise TacoInputError("--warmup must be >= 0 and --reps >= 1")
    import torch
    if a.device == "cuda" and not torch.cuda.is_available():
        raise TacoInputError("--device cuda but torch sees no GPU (--device cpu checks that it runs)")
    from ..tp import Compression
    for v in a.variants:
        if v != "bf16":
            Compression(v, algo=a.algo)  # bad variants and algorithms: one line before anything runs
    if a.mode == "dist":
        import torch.distributed as dist
        if "WORLD_SIZE" not in os.environ:
            raise TacoInputError("--mode dist runs under torchrun (one process per GPU)")
        local = int(os.environ.get("LOCAL_RANK", 0))
        torch.cuda.set_device(local)
        dist.init_process_group("nccl")
        rows = run_dist(a, torch.device("cuda", local))
        is_main = dist.get_rank() == 0
    else:
        rows = run_shard(a, torch.device(a.device))
        is_main = True
    if a.json and is_main:
        with open(a.json + ".tmp", "w") as f:
            json.dump({"schema": "taco.layer/1", "env": environment(a.mode), "rows": rows}, f, indent=1)
        os.replace(a.json + ".tmp", a.json)
    if a.mode == "dist":
        import torch.distributed as dist
        dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(run_cli(main))
