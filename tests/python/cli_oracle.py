"""The CLI against a NumPy reference codec: `taco codec encode` must write the reference's bytes,
and `taco codec decode` must give the reference's decoded values bit for bit."""
import subprocess

import numpy as np
import pytest

F32 = np.float32


def run(*args):
    r = subprocess.run([*map(str, args)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    return r


def assert_cli_matches(taco, tmp_path, variant, x, want, decode_ref):
    """want: the reference's wire bytes of x; decode_ref(want) -> its decoded float32 values.
    Returns the CLI's decoded array."""
    np.save(tmp_path / "x.npy", x)
    run(taco, "codec", "encode", "--variant", variant, tmp_path / "x.npy", tmp_path / "x.bin")
    got = (tmp_path / "x.bin").read_bytes()
    assert len(got) == len(want)
    if got != want:
        diff = np.nonzero(np.frombuffer(got, np.uint8) != np.frombuffer(want, np.uint8))[0]
        pytest.fail(f"{variant}: {diff.size} bytes differ, first at {diff[:8]}")
    rows, cols = x.shape
    run(taco, "codec", "decode", "--variant", variant, "--shape", f"{rows},{cols}", tmp_path / "x.bin",
        tmp_path / "y.npy")
    y = np.load(tmp_path / "y.npy")
    assert y.dtype == F32 and y.shape == x.shape
    assert np.array_equal(y.ravel().view(np.uint32), decode_ref(want).view(np.uint32))
    return y
