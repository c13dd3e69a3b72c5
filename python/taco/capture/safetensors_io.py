"""safetensors writer and reader, numpy only (https://github.com/huggingface/safetensors format):
an 8-byte little-endian header length N, N bytes of UTF-8 JSON
  {"<name>": {"dtype": "BF16", "shape": [..], "data_offsets": [begin, end]}, ...,
   "__metadata__": {"<key>": "<string>", ...}}
padded with spaces to a multiple of 8, then the row-major little-endian data.

Arrays are given as raw element bytes: bf16 as uint16 bits, fp8 as uint8 bits.
"""
import json
import os
import struct

import numpy as np

from ..errors import CaptureInputError

# safetensors dtype -> (bytes per element, numpy dtype of the stored bits)
DTYPES = {"F64": (8, np.float64), "F32": (4, np.float32), "F16": (2, np.uint16), "BF16": (2, np.uint16),
          "F8_E4M3": (1, np.uint8), "F8_E5M2": (1, np.uint8)}
ALIGN = 8


def write_safetensors(path, tensors, metadata=None):
    """tensors: list of (name, numpy array, safetensors dtype). Written atomically."""
    header = {}
    offset = 0
    blobs = []
    seen = set()
    for name, arr, dtype in tensors:
        if dtype not in DTYPES:
            raise CaptureInputError(f"tensor '{name}': safetensors dtype {dtype} not supported here")
        if name in seen or name == "__metadata__":
            raise CaptureInputError(f"duplicate or reserved tensor name '{name}'")
        seen.add(name)
        size, npt = DTYPES[dtype]
        a = np.ascontiguousarray(arr)
        if a.dtype.itemsize != size:
            raise CaptureInputError(f"tensor '{name}': {dtype} needs {size}-byte elements, got {a.dtype}")
        b = a.astype(a.dtype.newbyteorder("<"), copy=False).tobytes() if a.dtype.byteorder == ">" else a.tobytes()
        header[name] = {"dtype": dtype, "shape": [int(d) for d in a.shape], "data_offsets": [offset, offset + len(b)]}
        blobs.append(b)
        offset += len(b)
    if metadata:
        header["__metadata__"] = {str(k): str(v) for k, v in metadata.items()}
    text = json.dumps(header, separators=(",", ":")).encode("utf-8")
    text += b" " * ((-len(text)) % ALIGN)
    tmp = f"{path}.tmp-{os.getpid()}"
    try:
        with open(tmp, "wb") as f:
            f.write(struct.pack("<Q", len(text)))
            f.write(text)
            for b in blobs:
                f.write(b)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise


def read_safetensors(path):
    """Returns (metadata dict, {name: (dtype, numpy array of the stored bits, shaped)}), file order."""
    with open(path, "rb") as f:
        raw = f.read()
    if len(raw) < 8:
        raise CaptureInputError(f"{path}: too short for a safetensors file")
    (n,) = struct.unpack("<Q", raw[:8])
    if 8 + n > len(raw):
        raise CaptureInputError(f"{path}: header length {n} runs past the end of the file")
    try:
        header = json.loads(raw[8:8 + n].decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as ex:
        raise CaptureInputError(f"{path}: malformed safetensors header: {ex}") from None
    meta = header.pop("__metadata__", {})
    data = raw[8 + n:]
    out = {}
    for name, d in sorted(header.items(), key=lambda kv: kv[1]["data_offsets"][0]):
        size, npt = DTYPES[d["dtype"]]
        b, e = d["data_offsets"]
        arr = np.frombuffer(data[b:e], dtype=np.dtype(npt).newbyteorder("<")).reshape(d["shape"])
        out[name] = (d["dtype"], arr)
    return meta, out
