"""The TACO codec and FP8 group-128 written as a PyTorch user would, compiled with torch.compile,
timed on one GPU: the baseline that `taco bench`'s fused kernels are compared with in the same
device run (scripts/gpu_check.sh).

Usage: python3 bench/torch_taco.py [--log2n 28] [--out FILE.json]
Prints one JSON object: per function the median time (CUDA events, 20 runs after warm-up) and
GB/s counted like `taco bench` (input read + codes + scales written, 1 GB = 1e9 B).
"""
import argparse
import json
import math
import sys

import torch

from torch_timing import emit, median_us


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--log2n", type=int, default=28, help="elements = 2^log2n (28: 512 MiB of bf16)")
    ap.add_argument("--out", default="", help="also write the JSON here")
    ap.add_argument("--iters", type=int, default=20)
    a = ap.parse_args()
    if not torch.cuda.is_available():
        print(json.dumps({"error": "no CUDA device"}))
        return 0
    torch.backends.cuda.matmul.allow_tf32 = True
    dev = torch.device("cuda:0")
    N, G = 1 << a.log2n, 128
    x = torch.randn(N, device=dev, dtype=torch.bfloat16)

    h = torch.tensor([[1.0]], device=dev)
    while h.shape[0] < G:
        h = torch.cat([torch.cat([h, h], 1), torch.cat([h, -h], 1)], 0)
    H = h / math.sqrt(G)  # fp32, orthonormal, symmetric

    def taco_encode(x):
        g = x.view(-1, G).float()
        ms = (g * g).mean(dim=1, keepdim=True)
        s_a = torch.clamp(448.0 / torch.sqrt(torch.clamp(ms + 1e-6, min=1e-12)), 1e-3, 1e3)
        y = (g * s_a) @ H
        m = y.abs().amax(dim=1, keepdim=True)
        s_q = torch.clamp(torch.clamp(m, min=1e-12) / 448.0, 1e-12, 1e6)
        q = torch.clamp(y / s_q, -448.0, 448.0).to(torch.float8_e4m3fn)
        return q, s_q, s_a

    def taco_decode(q, s_q, s_a):
        y = q.float() * s_q
        return ((y @ H) / torch.clamp(s_a, min=1e-12)).to(torch.bfloat16)

    def g128_encode(x):
        g = x.view(-1, G).float()
        s = torch.clamp(g.abs().amax(dim=1, keepdim=True) / 448.0, min=1.1754944e-38)
        return (g / s).to(torch.float8_e4m3fn), s

    def g128_decode(q, s):
        return (q.float() * s).to(torch.bfloat16)

    def bench(fn, *args):
        return median_us(fn, *args, iters=a.iters)

    res = {"numel": N, "torch": torch.__version__, "gpu": torch.cuda.get_device_name(0), "results": {}}
    wire_taco = N + 8 * N // G
    wire_g128 = N + 4 * N // G
    cases = [
        ("taco_encode", taco_encode, (x,), 2 * N + wire_taco),
        ("g128_encode", g128_encode, (x,), 2 * N + wire_g128),
    ]
    for name, fn, args, nbytes in cases:
        try:
            cf = torch.compile(fn)
            us = bench(cf, *args)
            res["results"][name] = {"median_us": us, "gbps": nbytes / (us * 1e-6) / 1e9, "bytes": nbytes}
        except Exception as ex:  # report, keep going
            res["results"][name] = {"error": str(ex)[:300]}
    try:
        q, s_q, s_a = torch.compile(taco_encode)(x)
        us = bench(torch.compile(taco_decode), q, s_q, s_a)
        res["results"]["taco_decode"] = {"median_us": us, "gbps": (wire_taco + 2 * N) / (us * 1e-6) / 1e9,
                                         "bytes": wire_taco + 2 * N}
        q, s = torch.compile(g128_encode)(x)
        us = bench(torch.compile(g128_decode), q, s)
        res["results"]["g128_decode"] = {"median_us": us, "gbps": (wire_g128 + 2 * N) / (us * 1e-6) / 1e9,
                                         "bytes": wire_g128 + 2 * N}
    except Exception as ex:
        res["results"]["decode"] = {"error": str(ex)[:300]}
    emit(res, a.out, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
