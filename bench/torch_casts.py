"""PyTorch's plain casts in the codecs' traffic shapes, on one GPU in one run: the device copy
(bf16 to bf16: 2 B read + 2 B written per element, the denominator of `taco bench`'s % copy), the
encode shape (bf16 to fp8: 2 + 1) and the decode shape (fp8 to bf16: 1 + 2), each one PyTorch
elementwise kernel with no scaling. They show what the simplest user code gets for the same
traffic; they are not ceilings (PyTorch's fp8 kernels are not tuned). GB/s counts logical reads
plus writes (1 GB = 1e9 B); median of CUDA-event timings after warm-up; no L2 flush.

Usage: python3 bench/torch_casts.py [--log2n 27] [--iters 50] [--out FILE.json]
"""
import argparse
import json
import sys

import torch

from torch_timing import emit, median_us


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--log2n", type=int, default=27, help="elements = 2^log2n (27: 256 MiB of bf16)")
    ap.add_argument("--iters", type=int, default=50)
    ap.add_argument("--out", default="")
    a = ap.parse_args()
    if not torch.cuda.is_available():
        print(json.dumps({"error": "no CUDA device"}))
        return 0
    n = 1 << a.log2n
    x = torch.randn(n, device="cuda", dtype=torch.bfloat16)
    y = torch.empty_like(x)
    x8 = x.to(torch.float8_e4m3fn)
    y8 = torch.empty_like(x8)
    shapes = {
        "copy_bf16": (lambda: y.copy_(x), 4 * n),
        "encode_shape_bf16_to_fp8": (lambda: y8.copy_(x), 3 * n),
        "decode_shape_fp8_to_bf16": (lambda: y.copy_(x8), 3 * n),
    }
    res = {"device": torch.cuda.get_device_name(0), "torch": torch.__version__, "elements": n}
    for name, (fn, nbytes) in shapes.items():
        us = median_us(fn, iters=a.iters)
        res[name] = {"us": round(us, 2), "GBps": round(nbytes / us / 1e3, 1)}
    copy = res["copy_bf16"]["GBps"]
    for name in shapes:
        res[name]["pct_copy"] = round(100 * res[name]["GBps"] / copy, 1)
    emit(res, a.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
