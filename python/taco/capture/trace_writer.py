"""Writes taco traces (traces/README.md, format version 1) with h5py and numpy alone.

A trace is one HDF5 file: root attributes naming the format, and one dataset per tensor under
/tensors, named t000000, t000001, ... in write order. bf16 and f16 tensors are stored as their
uint16 bit patterns, f32 as float32. Datasets are chunked by whole rows (about 1 MiB a chunk),
byte-shuffled and gzip-compressed.

The file is written to "<path>.tmp-<pid>" and renamed over <path> by commit(), so a failure
never leaves a half-written trace (close() without commit() removes the temporary file).

This module needs no torch: callers hand it numpy arrays. For bf16 give the uint16 bits
(torch: ``t.view(torch.int16).numpy().view(np.uint16)``; ml_dtypes: ``a.view(np.uint16)``).
"""
import os
import subprocess

import numpy as np

from .. import __version__
from ..errors import CaptureInputError

FORMAT_NAME = "taco-trace"
FORMAT_VERSION = 1
CHUNK_BYTES = 1 << 20           # target bytes per chunk (whole rows)
META_INT_FIELDS = ("layer", "tp_rank", "tp_size", "step")
META_STR_FIELDS = ("site", "direction", "collective", "model")
SITES = ("attn_out", "mlp_out", "attn_qkv", "mlp_fc1")
DIRECTIONS = ("fwd", "bwd")
COLLECTIVES = ("all_reduce", "reduce_scatter", "all_gather", "all_to_all", "send_recv")
STORED_NUMPY = {"bf16": np.uint16, "f16": np.uint16, "f32": np.float32}


def git_commit(default="unknown"):
    """Short commit of the checkout this package sits in ($TACO_GIT_COMMIT wins when set, for
    copies of the tree without .git), or `default` outside a git tree."""
    if os.environ.get("TACO_GIT_COMMIT"):
        return os.environ["TACO_GIT_COMMIT"]
    here = os.path.dirname(os.path.abspath(__file__))
    try:
        out = subprocess.run(["git", "-C", here, "rev-parse", "--short=12", "HEAD"],
                             capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return default
    return out.stdout.strip() if out.returncode == 0 and out.stdout.strip() else default


def created_by():
    return f"taco {__version__} ({git_commit()})"


def chunk_shape(shape, itemsize):
    """Chunks of whole rows (the last dimension is one row), about CHUNK_BYTES each."""
    shape = tuple(int(d) for d in shape)
    if len(shape) == 0:
        return None
    cols = shape[-1]
    row_bytes = max(1, cols * itemsize)
    rows_total = int(np.prod(shape[:-1], dtype=np.int64)) if len(shape) > 1 else 1
    rows = max(1, min(rows_total, CHUNK_BYTES // row_bytes))
    if len(shape) == 1:
        return (cols,)
    # Leading dimensions: fill from the innermost leading dimension outwards.
    chunk = [1] * (len(shape) - 1) + [cols]
    left = rows
    for d in range(len(shape) - 2, -1, -1):
        take = max(1, min(shape[d], left))
        chunk[d] = take
        left //= take
        if left <= 1:
            break
    return tuple(chunk)


def _check_meta(name, meta):
    for key in META_INT_FIELDS:
        v = meta.get(key, -1)
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or int(v) < -1:
            raise CaptureInputError(f"tensor '{name}': {key} must be an integer >= -1, got {v!r}")
    if int(meta.get("tp_size", -1)) == 0:
        raise CaptureInputError(f"tensor '{name}': tp_size must be at least 1 (or -1 for unknown)")
    r, n = int(meta.get("tp_rank", -1)), int(meta.get("tp_size", -1))
    if r >= 0 and n > 0 and r >= n:
        raise CaptureInputError(f"tensor '{name}': tp_rank {r} is not below tp_size {n}")
    for key in META_STR_FIELDS:
        if not isinstance(meta.get(key, ""), str):
            raise CaptureInputError(f"tensor '{name}': {key} must be a string, got {meta.get(key)!r}")
    unknown = set(meta) - set(META_INT_FIELDS) - set(META_STR_FIELDS)
    if unknown:
        raise CaptureInputError(f"tensor '{name}': unknown metadata field(s) {sorted(unknown)} "
                                "(put them in extra)")


class TraceWriter:
    """Usage:
        with TraceWriter(path, provenance={"command": ...}) as w:
            w.add(name, array, "bf16", meta={"layer": 3, ...}, extra={"module": ...})
            w.commit()
    """

    def __init__(self, path, provenance=None, compression_level=4):
        import h5py  # imported here so the rest of the package loads without h5py

        if not 0 <= int(compression_level) <= 9:
            raise CaptureInputError(f"gzip level must be 0..9, got {compression_level}")
        self.path = os.fspath(path)
        parent = os.path.dirname(os.path.abspath(self.path))
        if not os.path.isdir(parent):
            raise CaptureInputError(f"{self.path}: directory {parent} does not exist")
        self._tmp = f"{self.path}.tmp-{os.getpid()}"
        self._level = int(compression_level)
        self._names = set()
        self._count = 0
        self._file = h5py.File(self._tmp, "w")
        try:
            root = self._file.attrs
            root["taco_format"] = FORMAT_NAME
            root["taco_format_version"] = np.int64(FORMAT_VERSION)
            root["created_by"] = created_by()
            for k, v in (provenance or {}).items():
                if k in ("taco_format", "taco_format_version", "created_by"):
                    raise CaptureInputError(f"provenance key '{k}' is reserved")
                root[str(k)] = str(v)
            self._group = self._file.create_group("tensors")
        except BaseException:
            self.close()
            raise

    def __len__(self):
        return self._count

    def add(self, name, data, dtype, meta=None, extra=None):
        """Adds one tensor. `data` is a numpy array: uint16 bits for bf16/f16, float32 for f32."""
        if self._file is None:
            raise RuntimeError("TraceWriter is closed")
        if dtype not in STORED_NUMPY:
            raise CaptureInputError(f"tensor '{name}': dtype must be bf16, f16 or f32, got {dtype!r}")
        if not isinstance(name, str) or not name:
            raise CaptureInputError(f"tensor name must be a non-empty string, got {name!r}")
        if name in self._names:
            raise CaptureInputError(f"duplicate tensor name '{name}'")
        arr = np.asarray(data)
        want = np.dtype(STORED_NUMPY[dtype])
        if dtype == "f32" and arr.dtype != want:
            raise CaptureInputError(f"tensor '{name}': f32 data must be float32, got {arr.dtype}")
        if dtype != "f32":
            if arr.dtype.itemsize != 2 or arr.dtype.kind not in "uifV":
                raise CaptureInputError(f"tensor '{name}': {dtype} data must be 16-bit patterns, got {arr.dtype}")
            arr = arr.view(np.uint16)
        if arr.ndim == 0 or arr.size == 0:
            raise CaptureInputError(f"tensor '{name}': empty or 0-d tensor (shape {arr.shape})")
        meta = dict(meta or {})
        _check_meta(name, meta)
        arr = np.ascontiguousarray(arr)
        ds = self._group.create_dataset(
            f"t{self._count:06d}", data=arr, chunks=chunk_shape(arr.shape, arr.dtype.itemsize),
            shuffle=self._level > 0, compression="gzip" if self._level > 0 else None,
            compression_opts=self._level if self._level > 0 else None)
        a = ds.attrs
        a["name"] = name
        a["dtype"] = dtype
        for key in META_INT_FIELDS:
            a[key] = np.int64(meta.get(key, -1))
        for key in META_STR_FIELDS:
            a[key] = meta.get(key, "")
        for k, v in (extra or {}).items():
            a[f"extra.{k}"] = str(v)
        self._names.add(name)
        self._count += 1

    def commit(self):
        if self._file is None:
            raise RuntimeError("TraceWriter is closed")
        if self._count == 0:
            self.close()
            raise CaptureInputError(f"{self.path}: no tensors to write")
        self._file.close()
        self._file = None
        os.replace(self._tmp, self.path)

    def close(self):
        """Abandons an uncommitted trace: closes and removes the temporary file."""
        if self._file is not None:
            try:
                self._file.close()
            finally:
                self._file = None
                if os.path.exists(self._tmp):
                    os.remove(self._tmp)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False


def read_trace(path):
    """Reads a taco trace into a list of (attrs dict, float32 array). For checks and small tools."""
    import h5py

    out = []
    with h5py.File(path, "r") as f:
        if f.attrs.get("taco_format") != FORMAT_NAME:
            raise CaptureInputError(f"{path}: not a taco trace (taco_format attribute missing or wrong)")
        if int(f.attrs.get("taco_format_version", -1)) != FORMAT_VERSION:
            raise CaptureInputError(f"{path}: unknown taco_format_version {f.attrs.get('taco_format_version')}")
        for key in sorted(f["tensors"].keys()):
            ds = f["tensors"][key]
            attrs = {k: (v.decode() if isinstance(v, bytes) else v) for k, v in ds.attrs.items()}
            out.append((attrs, to_float32(ds[()], attrs["dtype"])))
    return out


def to_float32(raw, dtype):
    if dtype == "bf16":
        return (raw.astype(np.uint32) << 16).view(np.float32)
    if dtype == "f16":
        return raw.view(np.float16).astype(np.float32)
    if dtype == "f32":
        return np.asarray(raw, dtype=np.float32)
    raise CaptureInputError(f"unknown trace dtype {dtype!r}")
