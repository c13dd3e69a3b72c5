"""The block-scaled integer codecs in `taco codec encode/decode` (int8, int4 and the 3- and 2-bit
int3 / int2) against taco_pyref.int_encode / int_decode, a NumPy re-implementation written from
docs/variants.md: the wire bytes must be identical and the decoded values bitwise equal, with and
without Hadamard / randomized Hadamard, symmetric and asymmetric, at the default and a clipping
target range, on random and edge-case inputs (ties, zeros, subnormal and huge values, NaN/Inf,
outliers, partial tail groups, groups straddling rows, odd element counts).
"""
import re

import numpy as np
import pytest

import taco_pyref
from cli_oracle import assert_cli_matches, run

F32 = np.float32

VARIANTS = {
    "int8-g128-had": dict(bits=8, group=128, hadamard=True),
    "int8-g128-asym": dict(bits=8, group=128, asym=True),
    "int4-g32": dict(bits=4, group=32),
    "int4-g32-had": dict(bits=4, group=32, hadamard=True),
    "int4:asym:g32": dict(bits=4, group=32, asym=True),
    "int3-g32": dict(bits=3, group=32),
    "int3-g32-had": dict(bits=3, group=32, hadamard=True),
    "int3-g64-had": dict(bits=3, group=64, hadamard=True),
    "int3-g128-had": dict(bits=3, group=128, hadamard=True),
    "int3:g512": dict(bits=3, group=512),
    "int3:g16:rht:seed=5": dict(bits=3, group=16, rht_seed=5),
    "int3:asym:g32": dict(bits=3, group=32, asym=True),
    "int3:g32:T=4": dict(bits=3, group=32, target=4.0),
    "int2-g32": dict(bits=2, group=32),
    "int2-g32-had": dict(bits=2, group=32, hadamard=True),
    "int2-g64-had": dict(bits=2, group=64, hadamard=True),
    "int2-g128-had": dict(bits=2, group=128, hadamard=True),
    "int2:g1024:had": dict(bits=2, group=1024, hadamard=True),
    "int2:asym:g64:had": dict(bits=2, group=64, hadamard=True, asym=True),
    "int2:g128:had:T=2": dict(bits=2, group=128, hadamard=True, target=2.0),
}


def cases():
    rng = np.random.default_rng(11)
    out = {}
    out["normal"] = (rng.standard_normal((32, 1024)) * 0.02).astype(F32)
    lap = rng.laplace(0, 0.01, (32, 1024))
    lap[rng.random(lap.shape) < 0.005] *= 50
    out["laplace_outliers"] = lap.astype(F32)
    # Quotients on the rounding ties of every format: multiples of 1/2 up to the group max 127.
    ties = (rng.integers(-254, 255, (8, 512)) / 2).astype(F32)
    ties[:, ::16] = 127.0
    out["ties"] = ties
    # ... and multiples of 1/2 up to 3: int3's scale is 1, int2's quotients 0.5 are ties too.
    ties3 = (rng.integers(-6, 7, (8, 512)) / 2).astype(F32)
    ties3[:, ::16] = 3.0
    out["ties3"] = ties3
    out["zeros"] = np.zeros((4, 512), F32)
    out["subnormal"] = (rng.standard_normal((4, 512)) * 1e-40).astype(F32)  # scale clamps to FLT_MIN
    huge = (rng.standard_normal((8, 512)) * 1e37).astype(F32)
    huge[0, :3] = [3.0e38, -3.3e38, 1e38]  # the transform overflows to Inf, which encodes as 0
    out["huge"] = huge
    special = rng.standard_normal((8, 512)).astype(F32)
    special[0, 5] = np.nan
    special[1, 7] = np.inf
    special[2, 9] = -np.inf
    special[3, :] = np.nan
    special[5, :] = -0.0
    out["nan_inf"] = special
    one = (rng.standard_normal((16, 512)) * 1e-3).astype(F32)
    one[np.arange(16), rng.integers(0, 512, 16)] *= 1e4
    out["one_outlier"] = one
    out["tail"] = rng.standard_normal((3, 1000)).astype(F32)  # 3000 = 23 * 128 + 56
    out["straddle"] = rng.standard_normal((7, 37)).astype(F32)  # 259 elements: odd, groups cross rows
    out["odd"] = rng.standard_normal((1, 13)).astype(F32)  # 13 codes: a partial 3-byte unit
    out["single"] = np.array([[2.5]], F32)
    return out


CASES = cases()


@pytest.mark.parametrize("variant", list(VARIANTS))
@pytest.mark.parametrize("case", list(CASES))
def test_wire_bytes_and_decode_match_the_reference(taco, tmp_path, variant, case):
    x = CASES[case]
    kw = VARIANTS[variant]
    dkw = {k: v for k, v in kw.items() if k != "target"}
    assert_cli_matches(taco, tmp_path, variant, x, taco_pyref.int_encode(x, **kw),
                       lambda want: taco_pyref.int_decode(want, x.size, **dkw))


def test_reference_codes_and_layout_by_hand():
    """The oracle itself, on values worked out by hand from the docs: one group of 16, amax 3
    (scale 1), codes rne(x) with ties to even, 8 codes in 3 bytes."""
    x = np.array([0, 1, 2, 3, -3, -2, -1, 0, 0.5, 1.5, 2.5, -0.5, -2.5, 3, -3, 1.49], F32)
    w = taco_pyref.int_encode(x, bits=3, group=16)
    assert w == bytes([0x88, 0x56, 0x1F, 0x90, 0xE0, 0x35]) + np.float32(1).tobytes()
    assert taco_pyref.int_decode(w, 16, bits=3, group=16).tolist() == [0, 1, 2, 3, -3, -2, -1, 0, 0, 2, 2, 0,
                                                                         -2, 3, -3, 1]
    # INT2: ternary, 4 codes per byte, code k at bit 2k (-1 = 0b11); |x| / amax = 0.5 is a tie -> 0.
    x2 = np.array([4, -4, 2, -2, 2.04, -1.96, 0, 4], F32)
    w2 = taco_pyref.int_encode(x2, bits=2, group=16)
    assert w2[:2] == bytes([0x0D, 0x41]) and w2[2:] == np.float32(4).tobytes()
    # int4's nibbles are the same stream: element 2i in the low nibble.
    assert taco_pyref.pack_codes([1, -1, 7], 4) == bytes([0xF1, 0x07])


@pytest.mark.parametrize("variant,bpe", [("int3-g32", 0.5), ("int3-g32-had", 0.5), ("int3-g64-had", 0.4375),
                                         ("int3-g128-had", 0.40625), ("int2-g32", 0.375), ("int2-g32-had", 0.375),
                                         ("int2-g64-had", 0.3125), ("int2-g128-had", 0.28125)])
def test_presets_bytes_per_element(taco, tmp_path, variant, bpe):
    x = CASES["normal"][:, :1024]  # [32, 1024]
    np.save(tmp_path / "x.npy", x)
    r = run(taco, "codec", "encode", "--variant", variant, tmp_path / "x.npy", tmp_path / "x.bin")
    assert (tmp_path / "x.bin").stat().st_size == bpe * x.size
    assert re.search(rf"\({bpe} B/elem\)", r.stdout), r.stdout
    assert variant in run(taco, "codec", "list").stdout


def test_error_feedback_over_int3_hadamard_is_v_minus_its_decode(taco, tmp_path):
    """ef:int3-g32-had through the CLI is the plain codec on one tensor (stateless use), and the
    residual recursion e' = v - D(C(v)) run with the oracle stays bounded over steps."""
    x = CASES["laplace_outliers"]
    np.save(tmp_path / "x.npy", x)
    run(taco, "codec", "encode", "--variant", "ef:int3-g32-had", tmp_path / "x.npy", tmp_path / "x.bin")
    kw = VARIANTS["int3-g32-had"]
    assert (tmp_path / "x.bin").read_bytes() == taco_pyref.int_encode(x, **kw)
    e = np.zeros(x.size, F32)
    total = np.zeros(x.size, np.float64)
    for t in range(1, 41):
        v = x.ravel() + e
        d = taco_pyref.int_decode(taco_pyref.int_encode(v, **kw), v.size, **kw)
        e = v - d
        total += d
        if t == 1:
            first = np.linalg.norm(e)
    assert np.linalg.norm(e) < 2 * first
    # The time average converges: its error is ||e_T|| / T.
    avg_err = np.linalg.norm(total / 40 - x.ravel()) / np.linalg.norm(x)
    assert avg_err < 0.1 * first / np.linalg.norm(x)
