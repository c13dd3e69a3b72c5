"""GPU encode / decode throughput of the sub-4-bit codecs through taco.codec, as a share of a
same-run device-to-device copy (taco bench's accounting: encode moves input + wire bytes, decode
wire + output bytes, the copy 2 x size), bf16 tensors [size / 8192, 4096].

    python3 throughput.py --variants int3-g128-had,nvfp4 --sizes 256M,1G --json out.json

taco bench itself was not in this call (its binary does not fit the call's upload beside the
extension); `python -m taco.bench.codec` measured Python's calls at 99-101% of taco bench's rate
from 64 MiB up (bench/records/2026-12-03-h200-python3).
"""
import argparse
import json

import torch

import taco.codec as tc
from taco.bench.codec import bench_python, parse_size, time_calls


def copy_us(size, cols=4096, rotate=4):
    xs = [torch.empty(size // 2 // cols, cols, device="cuda", dtype=torch.bfloat16).normal_() for _ in range(rotate)]
    ys = [torch.empty_like(x) for x in xs]
    n_iter = max(20, min(2000, (256 << 20) // size * 20))
    for i in range(3):
        ys[i % rotate].copy_(xs[i % rotate])
    torch.cuda.synchronize()
    return time_calls(lambda i: ys[i % rotate].copy_(xs[i % rotate]), n_iter)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--variants", required=True)
    p.add_argument("--sizes", default="256M,1G")
    p.add_argument("--json", required=True)
    a = p.parse_args()
    rows = []
    print(f"{torch.cuda.get_device_name()}  torch {torch.__version__}")
    print(f"{'variant':16} {'size':>6} {'op':7} {'us':>9} {'GB/s':>8} {'% copy':>7}")
    for size in (parse_size(s) for s in a.sizes.split(",")):
        c_us = copy_us(size)
        c_gbps = 2 * size / (c_us * 1e-6) / 1e9
        print(f"{'copy':16} {size >> 20:>5}M {'':7} {c_us:9.1f} {c_gbps:8.1f}")
        rows.append({"variant": "copy", "size_bytes": size, "median_us": c_us, "gbps": c_gbps})
        for v in a.variants.split(","):
            t = bench_python(v, size)
            wire = tc.wire_bytes(v, (size // 2 // 4096, 4096))
            for op in ("encode", "decode"):
                gbps = (size + wire) / (t[op] * 1e-6) / 1e9
                rows.append({"variant": v, "size_bytes": size, "op": op, "median_us": t[op], "gbps": gbps,
                             "pct_copy": 100 * gbps / c_gbps, "wire_bytes": wire, "copy_us": c_us})
                print(f"{v:16} {size >> 20:>5}M {op:7} {t[op]:9.1f} {gbps:8.1f} {100 * gbps / c_gbps:6.1f}%")
            torch.cuda.empty_cache()
    with open(a.json, "w") as f:
        json.dump({"device": torch.cuda.get_device_name(), "torch": torch.__version__, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
