"""Independent NumPy re-implementation of the TACO codec, written from docs methods.md section 1.4
(and the bit-exactness rules in src/codecs/codec.hpp), used as an oracle for the C++ wire bytes.
The per-group scalars are applied as one factor after the transform (s_a * 1/sqrt(G) / s_q when
encoding, s_q * 1/sqrt(G) / s_a when decoding), the float order the toolkit pins in
src/codecs/quant_codec.hpp ("TACO rules").

Every step is float32 NumPy arithmetic in the order the spec gives (NumPy never fuses a*b+c, and
its float32 add/mul/div/sqrt are correctly rounded), so the bytes must match the C++ reference
exactly. Element encoding uses ml_dtypes' round-to-nearest-even casts (the values are already
clamped to +-448, inside both FP8 ranges, so saturation never matters).

    wire = encode(x, group=128, fmt="e4m3", hadamard=True, dual=True)
"""
import ml_dtypes
import numpy as np

F32 = np.float32
FP8 = {"e4m3": (ml_dtypes.float8_e4m3fn, 448.0), "e5m2": (ml_dtypes.float8_e5m2, 57344.0)}


def splitmix64_signs(n, seed):
    """RHT sign vector (True = negate): bit i%64 of the (i//64)-th SplitMix64 output."""
    mask = (1 << 64) - 1
    state, out, word = seed & mask, [], 0
    for i in range(n):
        if i % 64 == 0:
            state = (state + 0x9E3779B97F4A7C15) & mask
            z = state
            z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & mask
            z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & mask
            word = z ^ (z >> 31)
        out.append(bool((word >> (i % 64)) & 1))
    return np.array(out)


def fwht_rows(v):
    """Unnormalized Walsh-Hadamard of each row (length a power of two): butterflies
    (a, b) -> (a + b, a - b) with strides 1, 2, 4, ... in float32."""
    g, n = v.shape
    h = 1
    while h < n:
        w = v.reshape(g, n // (2 * h), 2, h)
        a, b = w[:, :, 0, :], w[:, :, 1, :]
        v = np.stack([a + b, a - b], axis=2).reshape(g, n)
        h *= 2
    return v


def hadamard_scale(n):
    return F32(1.0 / np.sqrt(np.float64(n)))


def fma32(a, b, c):
    """float32 fma(a, b, c), correctly rounded: a * b is exact in float64, the sum is rounded to
    odd in float64 (two-sum for the error, then the last bit forced odd when inexact), and since
    53 >= 24 + 2 bits, rounding that to float32 is the correctly rounded fma (Boldo-Melquiond)."""
    a64, b64, c64 = (np.asarray(t, dtype=np.float64) for t in (a, b, c))
    p = a64 * b64
    s = p + c64
    bb = s - p
    err = (p - (s - bb)) + (c64 - bb)
    fix = (err != 0) & ((s.view(np.int64) & 1) == 0) & np.isfinite(s)
    s = np.where(fix, np.nextafter(s, np.where(err > 0, np.inf, -np.inf)), s)
    return s.astype(F32)


def lane_tree_sum_squares_rows(v):
    """Per-row sum of squares in the order of a warp owning the row (hadamard.hpp
    lane_tree_sum_squares): lane partial p = v0 * v0, then p = fma(v, v, p); then a tree."""
    g, n = v.shape
    lanes = min(32, n)
    s = n // lanes
    w = v.reshape(g, lanes, s)
    p = w[:, :, 0] * w[:, :, 0]
    for j in range(1, s):
        p = fma32(w[:, :, j], w[:, :, j], p)
    stride = lanes // 2
    while stride >= 1:
        p[:, :stride] = p[:, :stride] + p[:, stride:2 * stride]
        stride //= 2
    return p[:, 0]


def clampf(x, lo, hi):
    """CUDA fmaxf(fminf(x, hi), lo): a NaN operand is ignored, so NaN -> hi."""
    return np.fmax(np.fmin(x, F32(hi)), F32(lo))


def encode(x, group=128, fmt="e4m3", hadamard=True, dual=True, target=448.0, lam=1e-6, rht_seed=None):
    """Wire bytes of one chunk: [codes][g x fp32 s_q][g x fp32 s_a (dual only)]. A partial last
    group is zero-padded and, when a transform runs, stores all `group` codes (toolkit policy)."""
    fp8_type, fmax = FP8[fmt]
    x = np.asarray(x, dtype=F32).ravel()
    n = x.size
    g = -(-n // group)
    v = np.zeros(g * group, dtype=F32)
    v[:n] = x
    v = v.reshape(g, group)
    m = np.full(g, group, dtype=np.int64)
    m[-1] = n - (g - 1) * group
    T, lam, fmax = F32(target), F32(lam), F32(fmax)
    with np.errstate(all="ignore"):
        s_a = np.ones(g, dtype=F32)
        if dual:
            ssum = lane_tree_sum_squares_rows(v)
            var = ssum / m.astype(F32)
            var = var + lam
            var = np.where(var < F32(1e-12), F32(1e-12), var)
            s_a = clampf(fmax / np.sqrt(var), 1e-3, 1e3).astype(F32)
        transformed = hadamard or rht_seed is not None
        if rht_seed is not None:
            v = np.where(splitmix64_signs(group, rht_seed)[None, :], -v, v)
        k = s_a
        if transformed:
            v = fwht_rows(v)
            k = s_a * hadamard_scale(group)
        big = np.fmax.reduce(np.abs(v), axis=1) * k
        mv = np.where(big < F32(1e-12), F32(1e-12), big)
        q = mv / T if abs(T) >= F32(1e-12) else np.zeros_like(mv)
        s_q = clampf(q, 1e-12, 1e6).astype(F32)
        r = k / s_q
        t = np.where(np.isfinite(v), v, F32(0)) * r[:, None]
        t = np.minimum(np.maximum(t, F32(-448.0)), F32(448.0))
        codes = t.astype(fp8_type).view(np.uint8)
    code_bytes = codes.ravel() if transformed else codes.ravel()[:n]
    parts = [code_bytes.tobytes(), s_q.astype("<f4").tobytes()]
    if dual:
        parts.append(s_a.astype("<f4").tobytes())
    return b"".join(parts)


def decode(wire, n, group=128, fmt="e4m3", hadamard=True, dual=True, rht_seed=None):
    """Inverse of encode(): float32 values of the n elements."""
    fp8_type, _ = FP8[fmt]
    g = -(-n // group)
    transformed = hadamard or rht_seed is not None
    ncodes = g * group if transformed else n
    codes = np.zeros(g * group, dtype=np.uint8)
    codes[:ncodes] = np.frombuffer(wire, dtype=np.uint8, count=ncodes)
    s_q = np.frombuffer(wire, dtype="<f4", count=g, offset=ncodes).astype(F32)
    with np.errstate(all="ignore"):
        f = s_q
        if transformed:
            f = f * hadamard_scale(group)
        if dual:
            s_a = np.frombuffer(wire, dtype="<f4", count=g, offset=ncodes + 4 * g).astype(F32)
            f = f / np.where(s_a < F32(1e-12), F32(1e-12), s_a)
        y = codes.view(fp8_type).astype(F32).reshape(g, group)
        if transformed:
            y = fwht_rows(y)
        if rht_seed is not None:
            y = np.where(splitmix64_signs(group, rht_seed)[None, :], -y, y)
        y = y * f[:, None]
        y = np.where(np.isfinite(y), y, F32(0))
    return y.ravel()[:n]


# ---- block-scaled integer codes (docs/variants.md: "Blocks, scales, transforms", the bit layout
# of "Integer codes"), written from the docs, for int8 / int4 / int3 / int2 on g<G> groups ----

FLT_MIN = F32(np.finfo(F32).tiny)
FLT_MAX = F32(np.finfo(F32).max)


def pack_codes(codes, bits):
    """b-bit codes (ints, two's complement or unsigned) as one little-endian bit stream: code i in
    stream bits [b*i, b*i + b), stream bit k = bit k % 8 of byte k // 8; zero bits fill the last
    byte."""
    c = np.asarray(codes, dtype=np.int64) & ((1 << bits) - 1)
    stream = ((c[:, None] >> np.arange(bits)) & 1).astype(np.uint8).ravel()
    return np.packbits(stream, bitorder="little").tobytes()


def unpack_codes(data, count, bits, signed):
    stream = np.unpackbits(np.frombuffer(data, dtype=np.uint8), bitorder="little")
    c = (stream[: count * bits].reshape(count, bits).astype(np.int64) << np.arange(bits)).sum(axis=1)
    return np.where(c >= 1 << (bits - 1), c - (1 << bits), c) if signed else c


def _transform(v, group, rht_seed):
    """Orthonormal Hadamard of each row: the optional sign flips, butterflies, then times
    float32(1 / sqrt(G))."""
    if rht_seed is not None:
        v = np.where(splitmix64_signs(group, rht_seed)[None, :], -v, v)
    return fwht_rows(v) * hadamard_scale(group)


def _inverse(y, group, rht_seed):
    y = fwht_rows(y) * hadamard_scale(group)
    if rht_seed is not None:
        y = np.where(splitmix64_signs(group, rht_seed)[None, :], -y, y)
    return y


def int_encode(x, bits, group, hadamard=False, rht_seed=None, asym=False, target=None):
    """Wire bytes of one chunk of a symmetric (or asym) b-bit integer codec with fp32 scales per
    flat group: [codes, packed][g x fp32 scale][asym: g x uint8 zero point]."""
    qmax = (1 << bits) - 1 if asym else (1 << (bits - 1)) - 1
    T = F32(qmax if target is None else target)
    x = np.asarray(x, dtype=F32).ravel()
    n = x.size
    g = -(-n // group)
    transformed = hadamard or rht_seed is not None
    with np.errstate(all="ignore"):
        v = np.zeros(g * group, dtype=F32)
        v[:n] = np.where(np.isfinite(x), x, F32(0))  # non-finite inputs encode as 0
        v = v.reshape(g, group)
        if transformed:
            v = _transform(v, group, rht_seed)
            v = np.where(np.isfinite(v), v, F32(0))
        if asym:
            lo = np.minimum(v.min(axis=1), F32(0))
            hi = np.maximum(v.max(axis=1), F32(0))
            ideal = (hi - lo) / T
        else:
            ideal = np.abs(v).max(axis=1) / T
        s = np.clip(ideal, FLT_MIN, FLT_MAX).astype(F32)
        q = v / s[:, None]
        if asym:
            z = np.rint(np.clip(-lo / s, F32(0), F32(qmax))).astype(np.int64)
            codes = np.clip(np.rint(np.clip(q, F32(-4194304), F32(4194304))).astype(np.int64) + z[:, None], 0, qmax)
        else:
            codes = np.rint(np.clip(q, F32(-qmax), F32(qmax))).astype(np.int64)
    codes = codes.ravel() if transformed else codes.ravel()[:n]
    parts = [pack_codes(codes, bits), s.astype("<f4").tobytes()]
    if asym:
        parts.append(z.astype(np.uint8).tobytes())
    return b"".join(parts)


def int_decode(wire, n, bits, group, hadamard=False, rht_seed=None, asym=False):
    """Inverse of int_encode(): float32 values (code - z) * s, then the inverse transform."""
    g = -(-n // group)
    transformed = hadamard or rht_seed is not None
    ncodes = g * group if transformed else n
    nbytes = (ncodes * bits + 7) // 8
    codes = np.zeros(g * group, dtype=np.int64)
    codes[:ncodes] = unpack_codes(wire[:nbytes], ncodes, bits, signed=not asym)
    s = np.frombuffer(wire, dtype="<f4", count=g, offset=nbytes).astype(F32)
    z = np.frombuffer(wire, dtype=np.uint8, count=g, offset=nbytes + 4 * g).astype(F32) if asym else np.zeros(g, F32)
    with np.errstate(all="ignore"):
        y = (codes.reshape(g, group).astype(F32) - z[:, None]) * s[:, None]
        if transformed:
            y = _inverse(y, group, rht_seed)
    assert len(wire) == nbytes + (5 if asym else 4) * g
    return y.ravel()[:n]
