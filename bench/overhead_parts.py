"""Where the host time of one taco.codec call goes, on CUDA tensors at 1 MiB: the Python call,
the extension alone with its arguments prepared, and two PyTorch ops on the same tensor, each in
a host-bound loop (GPU events over 2000 calls, and the host clock).

    PYTHONPATH=python python3 bench/overhead_parts.py     # needs a CUDA build of taco._C
"""
import time, torch, taco.codec as tc
from taco.bench.codec import time_calls
x = torch.randn(512, 1024, device="cuda").to(torch.bfloat16)  # 1 MiB
y = torch.empty_like(x)
c = tc.get_codec("taco")
w = tc.encode(x, "taco")
px = (x.data_ptr(), 1, x.numel(), 0); pw = (w.data.data_ptr(), 3, w.data.numel(), 0); py = (y.data_ptr(), 1, y.numel(), 0)
st = torch.cuda.current_stream().cuda_stream
cases = {
  "tc.encode": lambda i: tc.encode(x, "taco", out=w.data),
  "tc.decode": lambda i: tc.decode(w, out=y),
  "_C encode (tuples ready)": lambda i: c.encode(px, pw, 1, 512, 1024, st),
  "_C decode_reduce (ready)": lambda i: c.decode_reduce([pw], py, 1, 512, 1024, st),
  "torch.neg(x, out=y)": lambda i: torch.neg(x, out=y),
  "y.copy_(x)": lambda i: y.copy_(x),
}
for name, fn in cases.items():
    for i in range(50): fn(i)
    torch.cuda.synchronize()
    us = time_calls(fn, 2000)
    t = time.perf_counter()
    for i in range(2000): fn(i)
    host = (time.perf_counter() - t) / 2000 * 1e6
    torch.cuda.synchronize()
    print(f"{name:<28} {us:7.2f} us per call (GPU events)  {host:7.2f} us host")
