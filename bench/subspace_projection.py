"""The projection cost of subspace-confined TP (docs/training.md, `--subspace K`), per TP message
on one rank: every message costs one coordinate projection ([tokens, hidden] x U -> [tokens, K])
and one expansion ([tokens, K] x U^T -> [tokens, hidden]) between its forward and backward passes
(a forward all-reduce expands its sum forward and projects its gradient backward; a backward one
projects a partial gradient and expands the sum). bf16 GEMMs with fp32 accumulation, as the
trainer runs them; median of CUDA-event-timed repeats, inputs rotated so that they exceed L2.

usage: python3 bench/subspace_projection.py [--tokens 16384] [--hidden 768,1024,2048]
           [--fractions 4,8,16,32] [--json OUT]
Prints one row per (hidden, K): microseconds for the projection, the expansion and the sum, and
the sum as a share of the bf16 copy of one [tokens, hidden] message (what a plain all-reduce
at least reads).
"""
import argparse
import json
import statistics
import sys

import torch


def timed(fn, reps=50, warmup=10):
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b) * 1e3)
    return statistics.median(times)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--tokens", type=int, default=16384, help="tokens per message (micro-batch x sequence)")
    p.add_argument("--hidden", default="768,1024,2048")
    p.add_argument("--fractions", default="4,8,16,32", help="K = hidden / fraction")
    p.add_argument("--json", default=None)
    a = p.parse_args(argv)
    if not torch.cuda.is_available():
        print("subspace_projection: no CUDA device", file=sys.stderr)
        return 2
    dev, dt = torch.device("cuda"), torch.bfloat16
    rows = []
    for h in [int(x) for x in a.hidden.split(",")]:
        sets = 4  # rotate inputs: 4 x tokens x hidden x 2 B is several times the 50 MB L2 at 16k tokens
        xs = [torch.randn(a.tokens, h, device=dev, dtype=dt) for _ in range(sets)]
        ys = [torch.empty_like(xs[0]) for _ in range(sets)]
        copy_us = timed(lambda: [y.copy_(x) for x, y in zip(xs, ys)]) / sets
        for f in [int(x) for x in a.fractions.split(",")]:
            k = h // f
            u = torch.linalg.qr(torch.randn(h, k, device=dev, dtype=torch.float32))[0].to(dt)
            cs = [torch.randn(a.tokens, k, device=dev, dtype=dt) for _ in range(sets)]
            proj = timed(lambda: [torch.matmul(x, u) for x in xs]) / sets
            expand = timed(lambda: [torch.matmul(c, u.t()) for c in cs]) / sets
            rows.append({"tokens": a.tokens, "hidden": h, "k": k, "project_us": proj, "expand_us": expand,
                         "per_message_us": proj + expand, "copy_us": copy_us,
                         "share_of_copy": (proj + expand) / copy_us})
    env = {"gpu": torch.cuda.get_device_name(0), "torch": torch.__version__, "cuda": torch.version.cuda}
    print(f"{'tokens':>7} {'hidden':>6} {'K':>5} {'project us':>10} {'expand us':>9} {'per msg us':>10} "
          f"{'copy us':>8} {'x copy':>7}")
    for r in rows:
        print(f"{r['tokens']:>7} {r['hidden']:>6} {r['k']:>5} {r['project_us']:>10.1f} {r['expand_us']:>9.1f} "
              f"{r['per_message_us']:>10.1f} {r['copy_us']:>8.1f} {r['share_of_copy']:>7.2f}")
    if a.json:
        with open(a.json, "w") as fh:
            json.dump({"schema": "taco.subspace_projection/1", "environment": env, "rows": rows}, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
