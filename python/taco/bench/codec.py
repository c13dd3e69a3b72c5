"""The cost of calling the codecs from Python: taco.codec.encode / decode on CUDA tensors, timed
back to back with CUDA events over rotating inputs, beside `taco bench`'s back-to-back rows for the
same variants and sizes (run in the same call, on the same GPU).

    python -m taco.bench.codec --taco build/bin/taco --variants taco,fp8-g128 --sizes 1M,8M,64M,256M \\
        --json out.json

Encodes reuse their wires (`out=` an earlier Wire, the cheapest call in a loop), decodes write
into a preallocated tensor. Added time per call = Python's median per-call time minus taco bench's; share = taco bench's
per-call time over Python's (GB/s ratio). Sizes are bytes of bf16 input, tensors [numel / 4096, 4096]
as taco bench shapes them.
"""
import argparse
import json
import subprocess
import sys
import tempfile

from ..errors import TacoInputError, run_cli


def parse_size(text):
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    t = text.strip().upper()
    try:
        return int(t[:-1]) * units[t[-1]] if t[-1] in units else int(t)
    except (ValueError, IndexError):
        raise TacoInputError(f"bad size {text!r} (e.g. 8M)") from None


def time_calls(fn, n_iter, reps=7):
    """Median over `reps` of (GPU time of n_iter back-to-back calls) / n_iter, in us."""
    import torch
    times = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        for i in range(n_iter):
            fn(i)
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b) * 1000.0 / n_iter)
    times.sort()
    return times[len(times) // 2]


def bench_python(variant, size, cols=4096, rotate=4):
    import torch

    import taco.codec as tc
    numel = size // 2
    xs = [torch.randn(numel // cols, cols, device="cuda").to(torch.bfloat16) for _ in range(rotate)]
    wires = [tc.encode(x, variant) for x in xs]
    outs = [torch.empty_like(x) for x in xs]
    n_iter = max(20, min(2000, (256 << 20) // size * 20))
    for i in range(3):  # warm up (first launches, occupancy queries)
        tc.encode(xs[i % rotate], variant, out=wires[i % rotate])
        tc.decode(wires[i % rotate], out=outs[i % rotate])
    torch.cuda.synchronize()
    enc = time_calls(lambda i: tc.encode(xs[i % rotate], variant, out=wires[i % rotate]), n_iter)
    dec = time_calls(lambda i: tc.decode(wires[i % rotate], out=outs[i % rotate]), n_iter)
    return {"encode": enc, "decode": dec}


def bench_cli(taco, variants, sizes):
    with tempfile.NamedTemporaryFile(suffix=".json") as f:
        cmd = [taco, "bench", "-v", ",".join(variants), "--sizes", ",".join(str(s) for s in sizes), "--ops",
               "encode,decode", "--impl", "fused", "--no-cold", "--batch-max", str(max(sizes)), "--no-verify",
               "--min-samples", "10", "--min-time", "0.1", "--max-noise", "2", "--timeout", "2", "--json", f.name,
               "-q"]
        subprocess.run(cmd, check=True)
        rows = json.load(open(f.name))["results"]
    out = {}
    for r in rows:
        if not r["cold"]:
            out[(r["variant"], r["op"], r["size_bytes"])] = r["median_us"]
    return out, cmd


def main(argv=None):
    p = argparse.ArgumentParser(prog="python -m taco.bench.codec", description=__doc__.split("\n\n")[0])
    p.add_argument("--taco", required=True, help="the taco CLI (for taco bench)")
    p.add_argument("--variants", default="taco,fp8-g128")
    p.add_argument("--sizes", default="1M,8M,64M,256M")
    p.add_argument("--json", default=None)
    a = p.parse_args(argv)
    import torch
    if not torch.cuda.is_available():
        raise TacoInputError("needs a CUDA device")
    variants = [v for v in a.variants.split(",") if v]
    sizes = [parse_size(s) for s in a.sizes.split(",") if s]
    cli, cmd = bench_cli(a.taco, variants, sizes)
    rows = []
    print(f"{'variant':<10} {'op':<7} {'size':>6} {'taco bench us':>14} {'python us':>10} {'added us':>9} {'share':>7}")
    for v in variants:
        for s in sizes:
            py = bench_python(v, s)
            for op in ("encode", "decode"):
                ref = cli[(v, op, s)]
                row = {"variant": v, "op": op, "size_bytes": s, "taco_bench_us": ref, "python_us": py[op],
                       "added_us": py[op] - ref, "share": ref / py[op]}
                rows.append(row)
                print(f"{v:<10} {op:<7} {s >> 20:>5}M {ref:>14.2f} {py[op]:>10.2f} {py[op] - ref:>9.2f} "
                      f"{100 * ref / py[op]:>6.1f}%")
    if a.json:
        env = {"gpu": torch.cuda.get_device_name(0), "torch": torch.__version__, "cuda": torch.version.cuda,
               "command": " ".join([sys.executable, "-m", "taco.bench.codec"] + (argv or sys.argv[1:])),
               "taco_bench_command": " ".join(cmd)}
        with open(a.json, "w") as f:
            json.dump({"schema": "taco.codec_overhead/1", "env": env, "rows": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(run_cli(main))
