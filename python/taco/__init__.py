"""taco: exact codecs for tensor-parallel (TP) communication, compressed collectives, and TP
training with compression in the loop.

  taco.codec    encode / decode / decode_reduce / qdq on numpy arrays and torch tensors: the CPU
                reference on host memory, the fused CUDA kernels on GPU tensors; the same bytes
  taco.dist     compressed all_reduce / reduce_scatter / all_gather over torch.distributed, and
                SimGroup, N TP ranks simulated in one process with the same numerics
  taco.tp       Megatron-style TP building blocks with compression (autograd functions, parallel
                linears, per-site codec configuration, error feedback)
  taco.train    python -m taco.train: Llama- or GPT-2-style TP training with compression in the
                loop, and TP trace capture
  taco.capture  trace writer and reader, single-process TP emulation, .pt converter

The C++ command line `taco` (study, bench, comm, report) works on the same codecs.
"""


def _version():
    try:
        from ._C import version
        return version
    except ImportError:
        pass
    import re
    from pathlib import Path
    cmake = Path(__file__).resolve().parents[2] / "CMakeLists.txt"  # a source checkout
    try:
        m = re.search(r"project\(taco VERSION ([0-9.]+)", cmake.read_text())
        return m.group(1) if m else "unknown"
    except OSError:
        return "unknown"


__version__ = _version()
