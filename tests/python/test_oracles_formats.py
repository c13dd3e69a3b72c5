"""Number formats of `taco codec cast` against ml_dtypes (float8_e4m3fn, float8_e5m2,
float4_e2m1fn, float8_e8m0fnu, bfloat16) and NumPy integer rounding, on all 65,536 bf16 bit
patterns and on a million fp32 values with ties, subnormals, max, overflow, NaN and +-0.

ml_dtypes' FP8 casts do not saturate, so the non-saturating mode is compared exactly and the
saturating mode after clamping to +-max. NaN codes are compared as "is NaN" (CUDA, and taco,
return the positive canonical NaN; ml_dtypes keeps the sign). Documented differences: E2M1 has no
NaN (taco: NaN -> +0); E8M0 on float32 subnormal inputs (ml_dtypes rounds their bit pattern,
taco rounds the value; checked here against the value rule).
"""
import subprocess

import ml_dtypes
import numpy as np
import pytest
import scipy.linalg

import taco_pyref

F32 = np.float32


def bf16_patterns():
    return (np.arange(65536, dtype=np.uint32) << 16).view(F32)


def format_ties(dtype):
    """Midpoints between consecutive finite values of a small format, and their neighbours."""
    with np.errstate(invalid="ignore"):
        vals = np.arange(256, dtype=np.uint8).view(dtype).astype(np.float64)
    vals = np.unique(vals[np.isfinite(vals)])
    mids = (vals[:-1] + vals[1:]) / 2
    out = [mids.astype(F32)]
    out.append(np.nextafter(out[0], np.inf, dtype=F32))
    out.append(np.nextafter(out[0], -np.inf, dtype=F32))
    out.append(vals.astype(F32))
    return np.concatenate(out)


@pytest.fixture(scope="module")
def values():
    rng = np.random.default_rng(20260701)
    parts = [bf16_patterns()]
    parts.append(rng.integers(0, 2**32, size=400_000, dtype=np.uint64).astype(np.uint32).view(F32))
    parts.append((rng.standard_normal(400_000) * np.exp2(rng.uniform(-30, 30, 400_000))).astype(F32))
    for dt in (ml_dtypes.float8_e4m3fn, ml_dtypes.float8_e5m2, ml_dtypes.float4_e2m1fn):
        t = format_ties(dt)
        parts += [t, -t]
    special = [0.0, -0.0, 448.0, 464.0, 464.00003, 480.0, 57344.0, 61440.0, 61439.996, 6.0, 7.0,
               2.0**-9, 2.0**-10, 1.5 * 2.0**-9, 2.0**-16, 2.0**-17, 2.0**-127, 1.5 * 2.0**-127, 2.0**127,
               1.5 * 2.0**127, 3.4028235e38, 1e-45, np.inf, -np.inf, np.nan, 126.5, 127.5, -2.5, 7.5]
    parts.append(np.array(special + [-v for v in special], dtype=F32))
    x = np.concatenate(parts)
    fill = 1_065_536 - x.size
    if fill > 0:
        parts.append((rng.standard_normal(fill) * 100).astype(F32))
    return np.concatenate(parts)


def cast(taco, tmp_path, x, fmt, nosat=False, decode=False):
    src, dst = tmp_path / "x.npy", tmp_path / "y.npy"
    np.save(src, x)
    args = [taco, "codec", "cast", "--format", fmt, str(src), str(dst)]
    args += ["--nosat"] if nosat else []
    args += ["--decode"] if decode else []
    r = subprocess.run(args, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    return np.load(dst)


def ml_codes(x, dtype):
    with np.errstate(invalid="ignore", over="ignore"):
        return x.astype(dtype).view(np.uint8 if np.dtype(dtype).itemsize == 1 else np.uint16)


def ml_values(x, dtype):
    with np.errstate(invalid="ignore", over="ignore"):
        return x.astype(dtype).astype(F32)


@pytest.mark.parametrize("fmt,dtype,fmax", [("e4m3", ml_dtypes.float8_e4m3fn, 448.0),
                                             ("e5m2", ml_dtypes.float8_e5m2, 57344.0)])
def test_fp8_matches_ml_dtypes(taco, tmp_path, values, fmt, dtype, fmax):
    x = values
    assert x.size > 1_000_000
    # Non-saturating: exact codes, NaN wherever ml_dtypes has NaN.
    ours = cast(taco, tmp_path, x, fmt, nosat=True)
    ref = ml_codes(x, dtype)
    ref_nan = np.isnan(ml_values(x, dtype))
    ours_val = cast(taco, tmp_path, x, fmt, nosat=True, decode=True)
    assert np.array_equal(np.isnan(ours_val), ref_nan)
    assert np.array_equal(ours[~ref_nan], ref[~ref_nan])
    # Decoding: bitwise equal to ml_dtypes' widening of the same codes.
    assert np.array_equal(ours_val[~ref_nan].view(np.uint32), ml_values(x, dtype)[~ref_nan].view(np.uint32))
    # Saturating: like ml_dtypes after clamping to +-max; NaN -> 0x7f.
    sat = cast(taco, tmp_path, x, fmt)
    nan = np.isnan(x)
    assert np.array_equal(sat[~nan], ml_codes(np.clip(x[~nan], -fmax, fmax), dtype))
    assert np.all(sat[nan] == 0x7F)
    # Overflow is really exercised: saturated codes where the non-saturating cast overflowed.
    overflow = ~nan & (np.abs(x) > fmax * 1.04)
    assert overflow.sum() > 1000
    assert np.all((sat[overflow] & 0x7F) == (0x7E if fmt == "e4m3" else 0x7B))


def test_e2m1_matches_ml_dtypes(taco, tmp_path, values):
    x = values
    ours = cast(taco, tmp_path, x, "e2m1")
    nan = np.isnan(x)
    assert np.array_equal(ours[~nan], ml_codes(x[~nan], ml_dtypes.float4_e2m1fn))
    assert np.all(ours[nan] == 0)
    dec = cast(taco, tmp_path, x, "e2m1", decode=True)
    assert np.array_equal(dec[~nan].view(np.uint32), ml_values(x[~nan], ml_dtypes.float4_e2m1fn).view(np.uint32))
    r = subprocess.run([taco, "codec", "cast", "--format", "e2m1", "--nosat", str(tmp_path / "x.npy"),
                        str(tmp_path / "z.npy")], capture_output=True, text=True)
    assert r.returncode == 2 and "always saturates" in r.stderr and not (tmp_path / "z.npy").exists()


def test_e8m0_matches_ml_dtypes(taco, tmp_path, values):
    x = values
    ours = cast(taco, tmp_path, x, "e8m0", nosat=True)
    ref = ml_codes(x, ml_dtypes.float8_e8m0fnu)
    sub = (x > 0) & (x < F32(2.0**-126))
    assert sub.sum() > 100
    assert np.array_equal(ours[~sub], ref[~sub])
    # Float subnormals: nearest power of two by value, ties (1.5 * 2^-127) up; nothing below 2^-127.
    xs = x[sub].astype(np.float64)
    assert np.array_equal(ours[sub], np.where(xs >= 1.5 * 2.0**-127, 1, 0).astype(np.uint8))
    # Saturating: no NaN for out-of-range inputs.
    sat = cast(taco, tmp_path, x, "e8m0")
    nan = np.isnan(x)
    assert np.all(sat[nan] == 0xFF)
    assert np.all(sat[~nan & (x <= 0)] == 0x00)
    assert np.all(sat[~nan & (x >= F32(1.5 * 2.0**127))] == 0xFE)
    ok = ~nan & (x > 0) & (x < F32(1.5 * 2.0**127))
    assert np.array_equal(sat[ok], ours[ok])
    dec = cast(taco, tmp_path, np.exp2(np.arange(-127, 128, dtype=np.float64)).astype(F32), "e8m0", decode=True)
    assert np.array_equal(dec, np.exp2(np.arange(-127, 128, dtype=np.float64)).astype(F32))


def test_ue4m3_is_unsigned_e4m3(taco, tmp_path, values):
    x = values
    ours = cast(taco, tmp_path, x, "ue4m3")
    e4 = cast(taco, tmp_path, x, "e4m3")
    pos = ~np.isnan(x) & ~np.signbit(x)
    assert np.array_equal(ours[pos], e4[pos])
    assert np.all(ours[np.signbit(x) & ~np.isnan(x)] == 0)
    # Non-saturating: negatives are NaN, except those that round to -0, which give +0.
    nos = cast(taco, tmp_path, x, "ue4m3", nosat=True)
    assert np.all(nos[(x < 0) & (e4 != 0x80)] == 0x7F)
    assert np.all(nos[(x < 0) & (e4 == 0x80)] == 0x00)


def test_bf16_matches_ml_dtypes(taco, tmp_path, values):
    x = values
    ours = cast(taco, tmp_path, x, "bf16", nosat=True)
    assert ours.dtype == np.uint16
    ref = ml_codes(x, ml_dtypes.bfloat16)
    nan = np.isnan(x)
    assert np.array_equal(ours[~nan], ref[~nan])
    assert np.all(np.isnan(ml_values(ours[nan].view(ml_dtypes.bfloat16), F32)))
    sat = cast(taco, tmp_path, x, "bf16")
    inf = np.isinf(ref.view(ml_dtypes.bfloat16).astype(F32)) & ~nan
    assert inf.sum() >= 6  # +-Inf, +-FLT_MAX and random near-max values
    assert np.array_equal(sat[inf], np.where(np.signbit(x[inf]), 0xFF7F, 0x7F7F).astype(np.uint16))
    assert np.array_equal(sat[~inf & ~nan], ref[~inf & ~nan])


@pytest.mark.parametrize("fmt,lo,hi,bits", [("int8", -127, 127, 8), ("int4", -7, 7, 4), ("int3", -3, 3, 3),
                                          ("int2", -1, 1, 2), ("uint8", 0, 255, 8), ("uint4", 0, 15, 4),
                                          ("uint3", 0, 7, 3), ("uint2", 0, 3, 2)])
def test_ints_round_half_even_and_clamp(taco, tmp_path, values, fmt, lo, hi, bits):
    x = np.concatenate([values, np.arange(-9, 9.5, 0.5, dtype=F32)])  # every tie of the small ints
    with np.errstate(invalid="ignore"):
        q = np.clip(np.rint(x.astype(np.float64)), lo, hi)
    q = np.where(np.isnan(x), 0, q).astype(np.int64)
    expect = (q & ((1 << bits) - 1)).astype(np.uint8)  # b-bit two's complement codes
    assert np.array_equal(cast(taco, tmp_path, x, fmt), expect)
    assert np.array_equal(cast(taco, tmp_path, x, fmt, decode=True), q.astype(F32))


def test_pyref_hadamard_is_scipys_sylvester_matrix():
    rng = np.random.default_rng(1)
    for n in (16, 32, 64, 128, 256, 512):
        x = rng.integers(-1000, 1000, size=(3, n)).astype(F32)  # integers: every sum is exact
        got = taco_pyref.fwht_rows(x)
        want = x.astype(np.float64) @ scipy.linalg.hadamard(n).T
        assert np.array_equal(got.astype(np.float64), want)


def test_cli_hadamard_matches_scipy(taco, tmp_path):
    """The C++ transform inside `taco` (not the oracle): the decoded TACO codes times s_q are
    H (s_a x) / sqrt(G) with scipy's Sylvester H, to FP8 precision."""
    rng = np.random.default_rng(2)
    x = rng.standard_normal((16, 128)).astype(F32)
    np.save(tmp_path / "x.npy", x)
    r = subprocess.run([taco, "codec", "encode", "--variant", "taco", str(tmp_path / "x.npy"),
                        str(tmp_path / "x.bin")], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    w = (tmp_path / "x.bin").read_bytes()
    codes = np.frombuffer(w, np.uint8, count=x.size).view(ml_dtypes.float8_e4m3fn).astype(np.float64)
    s_q = np.frombuffer(w, "<f4", count=16, offset=x.size).astype(np.float64)
    s_a = np.frombuffer(w, "<f4", count=16, offset=x.size + 64).astype(np.float64)
    y = codes.reshape(16, 128) * s_q[:, None]
    want = (x.astype(np.float64) * s_a[:, None]) @ scipy.linalg.hadamard(128) / np.sqrt(128)
    err = np.abs(y - want).max(axis=1) / np.abs(want).max(axis=1)
    assert np.all(err < 2.0**-4)
    # A different ordering of the transform (e.g. sequency order) would not come close.
    perm = want[:, ::-1]
    assert np.all(np.abs(y - perm).max(axis=1) / np.abs(want).max(axis=1) > 0.2)
