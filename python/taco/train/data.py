"""Byte-level text corpus from files on disk (e.g. the Python sources of installed packages).

Files are listed under the root directories, shuffled with the seed, and read until
`max_bytes`; each file ends with a newline. The last `val_fraction` of the bytes is held out.
"""
import hashlib
import os
import random
import sysconfig

import numpy as np

from ..errors import CaptureInputError


def default_roots():
    """The interpreter's library and site-packages directories (real Python source text)."""
    paths = sysconfig.get_paths()
    roots = []
    for key in ("purelib", "platlib", "stdlib"):
        p = paths.get(key)
        if p and os.path.isdir(p) and p not in roots:
            roots.append(p)
    return roots


class ByteCorpus:
    def __init__(self, roots, max_bytes, seed=0, suffixes=(".py",), val_fraction=0.05):
        files = []
        for root in roots:
            if not os.path.isdir(root):
                raise CaptureInputError(f"data root {root} is not a directory")
            for dirpath, dirnames, filenames in os.walk(root):
                dirnames.sort()
                for fn in sorted(filenames):
                    if fn.endswith(tuple(suffixes)):
                        files.append(os.path.join(dirpath, fn))
        if not files:
            raise CaptureInputError(f"no {'/'.join(suffixes)} files under {', '.join(roots)}")
        random.Random(seed).shuffle(files)
        chunks, total, used = [], 0, 0
        for path in files:
            try:
                with open(path, "rb") as f:
                    b = f.read()
            except OSError:
                continue
            if not b:
                continue
            b = b[: max_bytes - total]
            chunks.append(b + b"\n")
            total += len(b) + 1
            used += 1
            if total >= max_bytes:
                break
        data = np.frombuffer(b"".join(chunks), dtype=np.uint8)
        if data.size < 4096:
            raise CaptureInputError(f"corpus too small: {data.size} bytes")
        n_val = max(int(data.size * val_fraction), 1)
        self.train, self.val = data[:-n_val], data[-n_val:]
        self.files_used, self.files_found, self.roots = used, len(files), list(roots)
        self.sha256 = hashlib.sha256(data.tobytes()).hexdigest()

    def describe(self):
        return {"roots": self.roots, "files_found": self.files_found, "files_used": self.files_used,
                "train_bytes": int(self.train.size), "val_bytes": int(self.val.size), "sha256": self.sha256}

    @staticmethod
    def batch(data, rng, batch, seq):
        """(inputs, targets), each [batch, seq] int64, from random windows of `data`."""
        if data.size <= seq + 1:
            raise CaptureInputError(f"corpus split of {data.size} bytes is shorter than seq {seq} + 1")
        starts = rng.integers(0, data.size - seq - 1, size=batch)
        win = np.stack([data[s:s + seq + 1] for s in starts]).astype(np.int64)
        return win[:, :-1], win[:, 1:]
