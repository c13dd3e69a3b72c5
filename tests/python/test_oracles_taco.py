"""The TACO codec in `taco codec encode/decode` against taco_pyref.py, an independent NumPy
re-implementation written from docs methods.md 1.4: the wire bytes must be identical and the
decoded values bitwise equal, for the reference configuration and its ablations, on random and
edge-case inputs (zeros, values near 1e-12, huge values, NaN/Inf, outliers, a partial tail group,
groups straddling rows).
"""

import numpy as np
import pytest

import taco_pyref
from cli_oracle import assert_cli_matches, run

F32 = np.float32

VARIANTS = {
    "taco": {},
    "taco-noh": dict(hadamard=False),
    "taco-nosa": dict(dual=False),
    "taco-e5m2": dict(fmt="e5m2"),
    "taco-g32": dict(group=32),
    "taco-g64": dict(group=64),
    "taco-g256": dict(group=256),
    "taco-g512": dict(group=512),
    "taco-rht": dict(hadamard=False, rht_seed=0),
    "taco-noh-g32": dict(group=32, hadamard=False),
    "taco-noh-g512": dict(group=512, hadamard=False),
    "e4m3:g128:rht:seed=12345:dual": dict(hadamard=False, rht_seed=12345),
    "e4m3:g64:had:dual:T=240:lambda=0.001": dict(group=64, target=240.0, lam=1e-3),
    "e5m2:g16:dual": dict(group=16, fmt="e5m2", hadamard=False),
}


def cases():
    rng = np.random.default_rng(7)
    out = {}
    out["normal"] = (rng.standard_normal((32, 1024)) * 0.02).astype(F32)
    lap = rng.laplace(0, 0.01, (32, 1024))
    lap[rng.random(lap.shape) < 0.005] *= 50
    out["laplace_outliers"] = lap.astype(F32)
    out["zeros"] = np.zeros((4, 512), F32)
    out["tiny"] = (rng.standard_normal((8, 512)) * 1e-12).astype(F32)
    out["tinier"] = (rng.standard_normal((8, 512)) * 1e-15).astype(F32)
    huge = (rng.standard_normal((8, 512)) * 1e30).astype(F32)
    huge[0, :3] = [3.0e38, -3.3e38, 1e38]
    out["huge"] = huge
    special = (rng.standard_normal((8, 512))).astype(F32)
    special[0, 5] = np.nan
    special[1, 7] = np.inf
    special[2, 9] = -np.inf
    special[3, :] = np.nan
    special[4, 100] = 1e-45
    special[5, :] = -0.0
    out["nan_inf"] = special
    one = (rng.standard_normal((16, 512)) * 1e-3).astype(F32)
    one[np.arange(16), rng.integers(0, 512, 16)] *= 1e4
    out["one_outlier"] = one
    out["tail"] = rng.standard_normal((3, 1000)).astype(F32)  # 3000 = 23 * 128 + 56
    out["straddle"] = rng.standard_normal((8, 125)).astype(F32)
    out["single"] = np.array([[2.5]], F32)
    return out


CASES = cases()


@pytest.mark.parametrize("variant", list(VARIANTS))
@pytest.mark.parametrize("case", list(CASES))
def test_wire_bytes_and_decode_match_the_reference(taco, tmp_path, variant, case):
    x = CASES[case]
    kw = VARIANTS[variant]
    dkw = {k: v for k, v in kw.items() if k not in ("target", "lam")}
    y = assert_cli_matches(taco, tmp_path, variant, x, taco_pyref.encode(x, **kw),
                           lambda want: taco_pyref.decode(want, x.size, **dkw))
    assert np.all(np.isfinite(y))


def test_wire_size_formula(taco, tmp_path):
    # Reference configuration: 1 B per code + 8 B per group of 128: 1.0625 B/elem.
    x = CASES["normal"]
    np.save(tmp_path / "x.npy", x)
    r = run(taco, "codec", "encode", "--variant", "taco", tmp_path / "x.npy", tmp_path / "x.bin")
    assert (tmp_path / "x.bin").stat().st_size == x.size + 8 * (x.size // 128)
    assert "1.0625 B/elem" in r.stdout
    # A partial tail group stores all 128 codes (toolkit policy), so 24 groups of codes.
    x = CASES["tail"]
    np.save(tmp_path / "t.npy", x)
    run(taco, "codec", "encode", "--variant", "taco", tmp_path / "t.npy", tmp_path / "t.bin")
    assert (tmp_path / "t.bin").stat().st_size == 24 * 128 + 8 * 24


def test_tail_is_not_corrupted(taco, tmp_path):
    """The tail group decodes as well as the full groups; the authors' layout (only the valid
    codes stored, zero padding at decode) would degrade it."""
    x = CASES["tail"].ravel()
    w = taco_pyref.encode(x)
    y = taco_pyref.decode(w, x.size)
    full = np.linalg.norm(y[:2944] - x[:2944]) / np.linalg.norm(x[:2944])
    tail = np.linalg.norm(y[2944:] - x[2944:]) / np.linalg.norm(x[2944:])
    assert tail < 1.5 * full
    cut = bytearray(w)
    cut[2944 + 56:3072] = bytes(72)
    yc = taco_pyref.decode(bytes(cut), x.size)
    assert np.linalg.norm(yc[2944:] - x[2944:]) / np.linalg.norm(x[2944:]) > 1.5 * tail
