"""taco's codecs on arrays: the bytes a compressed TP collective would send, and what the receiver
sees after decoding them.

Inputs are numpy arrays, torch tensors (CPU or CUDA) or any DLPack array, in float32, bfloat16 or
float16, C-contiguous. Host arrays run the CPU reference codec; CUDA tensors run the fused GPU
kernels on the caller's current CUDA stream, with no host copy and no synchronisation. Both write
the same bytes, so a wire encoded on one side decodes on the other.

    >>> import torch, taco.codec as tc
    >>> x = torch.randn(4096, 1024, dtype=torch.bfloat16, device="cuda")
    >>> w = tc.encode(x, "taco")          # Wire: codes + two fp32 scales per group of 128
    >>> w.nbytes / x.numel()              # 1.0625 bytes per element
    >>> y = tc.decode(w)                  # bfloat16, what the receiver sees
    >>> s = tc.decode_reduce([w, w])      # sum of decodes in fp32, rounded once

Shapes: a tensor of shape (..., cols) is a [rows, cols] block (rows = numel / cols) as the codec
sees it; codecs with flat groups (g<G>, TACO) group the row-major order. `chunks=N` cuts the rows
into N equal blocks encoded independently, as a collective's per-peer chunks are.
Variants: presets ("taco", "fp8-g128", "mxfp8", "int4-g32", "bf16", ...) or the variant grammar
(docs/variants.md); `variants()` lists them and which run on CUDA tensors.
"""
import json
import sys
import warnings
from functools import lru_cache

import numpy as np

from .errors import TacoInputError

try:
    from . import _C
except ImportError as ex:  # pragma: no cover - depends on the install
    raise ImportError("taco._C is not built: run `pip install .` at the repository root "
                      f"(the package's C++ extension; {ex})") from None

__all__ = ["Wire", "encode", "decode", "decode_reduce", "qdq", "wire_bytes", "variants", "get_codec",
           "codec_range", "out_of_range"]

_VALUE_DTYPES = ("float32", "bfloat16", "float16")


@lru_cache(maxsize=256)
def get_codec(variant):
    """The parsed codec of a variant string (parsed once, then cached). ValueError for a bad variant,
    TypeError for one that is not a string."""
    if not isinstance(variant, str):
        raise TypeError(f"variant must be a string, got {type(variant).__name__} {variant!r}")
    if not variant.strip():
        raise ValueError(f"variant must be a non-empty string, got {variant!r}")
    return _C.Codec(variant)


def variants():
    """Every preset: [{"name", "definition", "description", "gpu"}], gpu = runs on CUDA tensors."""
    return _C.variants()


class Wire:
    """An encoded tensor: `data` holds codes and scales as one uint8 buffer (same library and device
    as the input), `chunks` blocks of `chunk_bytes` bytes each, block k encoding rows
    [k * rows, (k + 1) * rows) of the [chunks * rows, cols] view of a tensor of `shape`."""

    __slots__ = ("_data", "variant", "shape", "dtype", "chunks", "rows", "cols", "_codec", "_args")

    def __init__(self, data, variant, shape, dtype, chunks, rows, cols, codec=None, args=None):
        self._data, self.variant, self.shape, self.dtype = data, variant, shape, dtype
        self.chunks, self.rows, self.cols = chunks, rows, cols
        self._codec = codec if codec is not None else get_codec(variant)
        self._args = args  # what the extension takes for `data` (_torch_args), as encode passed it

    @property
    def data(self):
        return self._data

    @property
    def nbytes(self):
        return int(self.data.shape[0])

    @property
    def chunk_bytes(self):
        return self.nbytes // self.chunks

    @property
    def layout(self):
        """Byte offsets inside one chunk: codes, scales, aux (TACO's s_a, zero points), tensor scale."""
        return json.loads(self._codec.layout_json(self.rows, self.cols))

    def __repr__(self):
        return (f"Wire({self.variant!r}, shape={self.shape}, dtype={self.dtype}, chunks={self.chunks}, "
                f"{self.nbytes} bytes)")


# ---- arrays of either library ----------------------------------------------------------------

_TENSOR = []  # [torch.Tensor] once torch is imported; torch is used only when the caller imported it


def _tensor_type():
    if not _TENSOR:
        t = sys.modules.get("torch")
        if t is None:
            return None
        _TENSOR.append(t.Tensor)
        codes = _C.dtype_codes  # the extension's numbering (taco::DType)
        _TORCH_CODES.update({getattr(t, name): (code, name) for name, code in codes.items()})
        _RAW_STREAM.append(getattr(t._C, "_cuda_getCurrentRawStream", None))
    return _TENSOR[0]


def _is_torch(x):
    tt = _TENSOR[0] if _TENSOR else _tensor_type()
    return tt is not None and isinstance(x, tt)


def _array(x, what="input"):
    if isinstance(x, np.ndarray) or _is_torch(x):
        return x
    if hasattr(x, "__dlpack__") and hasattr(x, "__dlpack_device__"):
        if x.__dlpack_device__()[0] == 1:  # kDLCPU
            return np.from_dlpack(x)
        import torch
        return torch.utils.dlpack.from_dlpack(x)
    raise TypeError(f"{what}: expected a numpy array, a torch tensor or a DLPack array, got {type(x).__name__}")


def _dtype_name(x):
    if _is_torch(x):
        return str(x.dtype).replace("torch.", "")
    return x.dtype.name


def _check_values(x, what):
    name = _dtype_name(x)
    if name not in _VALUE_DTYPES:
        hint = " (numpy bfloat16 arrays cannot cross DLPack: pass float32, exact for bf16 values, or a torch tensor)" \
            if name == "bfloat16" else ""
        raise TypeError(f"{what}: dtype must be float32, bfloat16 or float16, got {name}{hint}")
    return name


def _empty(like, shape, dtype):
    if _is_torch(like):
        import torch
        return torch.empty(shape, dtype=getattr(torch, dtype), device=like.device)
    return np.empty(shape, dtype=dtype)


_TORCH_CODES = {}  # torch dtype -> (code the extension takes, name)
_RAW_STREAM = []  # torch's raw current-stream getter (None on builds without it)


def _stream(x):
    """The caller's current CUDA stream for a CUDA tensor, else 0."""
    if _is_torch(x) and x.is_cuda:
        return _cuda_stream(x.get_device(), x)
    return 0


def _cuda_stream(device, x):
    raw = _RAW_STREAM[0]
    if raw is not None:
        return raw(device)
    return sys.modules["torch"].cuda.current_stream(x.device).cuda_stream


def _pass(x, what="input"):
    """What the extension takes for an array: a torch tensor as (data pointer, dtype code, numel,
    device), checked here, which skips the DLPack export; anything else as itself (DLPack)."""
    if not _is_torch(x):
        return x
    return _torch_args(x, what)


def _torch_args(x, what):
    """(data pointer, dtype code, numel, device or -1) of a torch tensor; the per-call path, so
    each attribute is read once."""
    code = _TORCH_CODES.get(x.dtype)
    if code is None:
        raise TypeError(f"{what}: dtype must be float32, bfloat16 or float16 (uint8 for wires), got "
                        f"{str(x.dtype).replace('torch.', '')}")
    if not x.is_contiguous():
        raise ValueError(f"{what}: the array is not contiguous (call .contiguous() first)")
    if x.is_cuda:
        return (x.data_ptr(), code[0], x.numel(), x.get_device())
    if x.device.type != "cpu":
        raise TypeError(f"{what}: arrays must live on the CPU or a CUDA device, got {x.device}")
    return (x.data_ptr(), code[0], x.numel(), -1)


_LAYOUTS = {}  # (variant, shape, chunks) -> (rows, cols, chunk bytes, numel, codec name): once per shape


def _layout(codec, variant, shape, chunks):
    key = (variant, shape, chunks)
    hit = _LAYOUTS.get(key)
    if hit is None:
        rows, cols = _geometry(shape, chunks)
        hit = (rows, cols, codec.chunk_bytes(rows, cols), chunks * rows * cols, codec.name)
        if len(_LAYOUTS) > 4096:
            _LAYOUTS.clear()
        _LAYOUTS[key] = hit
    return hit


def _numel(shape):
    n = 1
    for d in shape:
        n *= int(d)
    return n


def _geometry(shape, chunks):
    """(rows per chunk, cols) of a tensor shape cut into `chunks` row blocks."""
    n = _numel(shape)
    if n == 0:
        raise ValueError("cannot encode an empty tensor")
    if not isinstance(chunks, int) or chunks < 1:
        raise ValueError(f"chunks must be a positive integer, got {chunks!r}")
    cols = int(shape[-1]) if len(shape) else 1
    rows = n // cols
    if rows % chunks:
        raise ValueError(f"{rows} rows of {cols} do not split into {chunks} equal chunks")
    return rows // chunks, cols


# ---- operations --------------------------------------------------------------------------------

def wire_bytes(variant, shape, chunks=1):
    """Bytes of the wire of a tensor of `shape` (cut into `chunks` row blocks)."""
    shape = (int(shape),) if isinstance(shape, int) else tuple(shape)
    rows, cols = _geometry(shape, chunks)
    return chunks * get_codec(variant).chunk_bytes(rows, cols)


def codec_range(variant):
    """(lo, hi): the largest magnitudes a group (the values sharing one scale) may have for `variant`
    to represent it with its normal precision (docs/variants.md, "Range"); None for codecs without
    block scales. Outside, the codec clips the group or decodes it as almost zero, without an error."""
    r = get_codec(variant).range()
    return None if r is None else (r[0], r[1])


def out_of_range(x, variant, *, chunks=1):
    """How many groups of x lie outside codec_range(variant) (for two-level scales, NVFP4, also far
    below the largest group of their chunk): what the study's out_of_range_groups counts. One pass
    over x on the host (CUDA tensors are copied there first)."""
    codec = get_codec(variant)
    if _is_torch(x):
        shape = tuple(x.shape)
        host = x.detach().to("cpu").float().contiguous().numpy()
    else:
        x = _array(x)
        _check_values(x, "input")
        shape = x.shape
        host = np.ascontiguousarray(x, dtype=np.float32)
    rows, cols = _geometry(shape, chunks)
    return codec.out_of_range(host, chunks, rows, cols)


_RANGE_CHECKS = (None, "warn", "raise")


def _check_range(x, variant, chunks, how):
    if how not in _RANGE_CHECKS:
        raise ValueError(f"range_check must be None, 'warn' or 'raise', got {how!r}")
    n = out_of_range(x, variant, chunks=chunks)
    if n == 0:
        return
    lo, hi = codec_range(variant)
    msg = (f"{variant}: {n} group(s) of the input lie outside the range the codec represents "
           f"(group absmax {lo:.3g} to {hi:.3g}; docs/variants.md): they decode clipped, coarser or as "
           "almost zero")
    if how == "raise":
        raise TacoInputError(msg)
    warnings.warn(msg, RuntimeWarning, stacklevel=3)


def encode(x, variant, *, chunks=1, out=None, residual=None, range_check=None):
    """Encodes x; returns a Wire. `out`: a uint8 buffer of wire_bytes(...) to write into, or a Wire
    of an earlier encode of the same variant, shape and chunks, which is rewritten and returned
    (the cheapest call in a loop).
    `residual`: error feedback, a float32 array shaped like x, updated in place
    (v = x + residual; wire = C(v); residual = v - D(wire)).
    `range_check`: "warn" (a RuntimeWarning) or "raise" (TacoInputError, a ValueError) when groups of
    x lie outside the range the codec represents (out_of_range), which the codec would otherwise
    clip or flush to almost zero silently; None (the default) checks nothing and costs nothing."""
    if range_check is not None:
        _check_range(x, variant, chunks, range_check)
    codec = get_codec(variant)
    reuse = type(out) is Wire
    if _is_torch(x):
        # the per-call path of torch tensors: each attribute read once, the shape's work cached
        code = _TORCH_CODES.get(x.dtype)
        if code is None or code[0] == 3:
            raise TypeError(f"input: dtype must be float32, bfloat16 or float16, got {str(x.dtype).replace('torch.', '')}")
        if not x.is_contiguous():
            raise ValueError("input: the array is not contiguous (call .contiguous() first)")
        shape = x.shape
        # a wire of the same encode carries the shape's work already
        hit = reuse and out._codec is codec and out.chunks == chunks and out.shape == shape
        if hit:
            rows, cols, name = out.rows, out.cols, out.variant
            numel = chunks * rows * cols
        else:
            rows, cols, cb, numel, name = _layout(codec, variant, shape, chunks)
        if x.is_cuda:
            dev = x.get_device()
            px = (x.data_ptr(), code[0], numel, dev)
            stream = _cuda_stream(dev, x)
        elif x.device.type == "cpu":
            px, stream = (x.data_ptr(), code[0], numel, -1), 0
        else:
            raise TypeError(f"input: arrays must live on the CPU or a CUDA device, got {x.device}")
        dtype = code[1]
    else:
        x = _array(x)
        dtype = _check_values(x, "input")
        px, stream, shape, hit = x, 0, x.shape, False
        rows, cols, cb, numel, name = _layout(codec, variant, shape, chunks)
    if out is None:
        buf = _empty(x, (chunks * cb,), "uint8")
        po = _pass(buf, "wire")
    elif reuse:
        if not hit and (out.variant, out.shape, out.chunks) != (name, shape, chunks):
            raise ValueError(f"out: a wire of another encode ({out!r}; this one: {name!r}, shape={shape}, "
                             f"chunks={chunks})")
        buf, po = out._data, _wire_args(out)
    else:
        buf, po = out, _pass(out, "wire")
    if residual is None:
        codec.encode(px, po, chunks, rows, cols, stream)
    else:
        codec.encode_ef(px, _pass(_array(residual, "residual"), "residual"), po, chunks, rows, cols, stream)
    args = po if type(po) is tuple else None
    if reuse:
        out.dtype, out._codec, out._args = dtype, codec, args
        return out
    return Wire(buf, name, shape, dtype, chunks, rows, cols, codec, args)


def _check_wires(wires):
    if isinstance(wires, Wire):
        return [wires]
    wires = list(wires)
    if not wires or not all(isinstance(w, Wire) for w in wires):
        raise TypeError("expected one or more Wire objects (from taco.codec.encode)")
    w0 = wires[0]
    for w in wires[1:]:
        if (w.variant, w.shape, w.chunks) != (w0.variant, w0.shape, w0.chunks):
            raise ValueError(f"wires differ: {w0!r} and {w!r}")
    return wires


def decode_reduce(wires, out=None, dtype=None):
    """Sum of the decoded wires, in float32 in list order, rounded once to `dtype` (default: the
    encoded tensor's dtype); written into `out` when given."""
    return _decode_into(_check_wires(wires), out, dtype)


def _decode_into(wires, out, dtype):
    w0 = wires[0]
    if out is None:
        dtype = w0.dtype if dtype is None else str(dtype).replace("torch.", "")
        if dtype not in _VALUE_DTYPES:
            raise TypeError(f"dtype must be float32, bfloat16 or float16, got {dtype}")
        out = _empty(w0.data, w0.shape, dtype)
    elif not _is_torch(out):  # torch tensors are checked by _torch_args
        out = _array(out, "out")
        _check_values(out, "out")
    pw = [_wire_args(w) for w in wires]
    po = _pass(out, "out")
    if type(po) is tuple:
        if po[1] == 3:
            raise TypeError("out: dtype must be float32, bfloat16 or float16, got uint8")
        stream = _cuda_stream(po[3], out) if po[3] >= 0 else 0
    else:
        stream = 0
    w0._codec.decode_reduce(pw, po, w0.chunks, w0.rows, w0.cols, stream)
    return out


def _wire_args(w):
    """What the extension takes for a wire's buffer: the arguments encode passed for it while its
    data pointer is unchanged (one attribute read instead of five), else read again."""
    a = w._args
    if a is not None and w._data.data_ptr() == a[0]:
        return a
    return _pass(w._data, "wire")


def decode(wire, out=None, dtype=None):
    """What the receiver sees: the decoded tensor (dtype: the encoded tensor's by default)."""
    if not isinstance(wire, Wire):
        raise TypeError(f"expected a Wire (from taco.codec.encode), got {type(wire).__name__}")
    return _decode_into((wire,), out, dtype)


def qdq(x, variant, *, chunks=1):
    """decode(encode(x)) in x's dtype: the tensor after one trip over a compressed link."""
    return decode(encode(x, variant, chunks=chunks))
