"""Timing and output helpers shared by the PyTorch baselines (torch_taco.py, torch_casts.py)."""
import json

import torch


def median_us(fn, *args, iters=20, warmup=5):
    """Median of `iters` CUDA-event timings of fn(*args) after `warmup` calls, in microseconds."""
    for _ in range(warmup):
        fn(*args)
    torch.cuda.synchronize()
    times = []
    for _ in range(iters):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn(*args)
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) * 1e3)
    times.sort()
    return times[len(times) // 2]


def emit(res, out="", indent=None):
    """Prints res as JSON and, when `out` is given, writes the same text there."""
    text = json.dumps(res, indent=indent)
    print(text)
    if out:
        with open(out, "w") as f:
            f.write(text + "\n")
