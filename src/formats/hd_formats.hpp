#pragma once
// The 4-bit element codes (E2M1, INT4), the UE4M3 scale code and NVFP4's two-level scale rule,
// written once for the host and the device (TACO_HD). The GPU kernels call these functions;
// tests/cpu/test_hd_formats.cpp runs them on the host against the CPU reference
// (formats/minifloat.hpp, intq.hpp, scale.hpp and QuantCodec's two-level rule), so CI checks the
// kernels' arithmetic without a GPU.
//
// Integer steps are the CPU reference's, line for line. Every float step is one correctly
// rounded operation (add_rn, mul_rn, div_rn), which host and device evaluate alike: the host is
// built with -ffp-contract=off, and the device side spells the _rn intrinsics (nothing to
// contract, whatever --fmad says). No step flushes subnormals on either side (no fast-math).
#include <cmath>
#include <cstdint>

#include "formats/scale_division.hpp"  // TACO_HD

#if !defined(__CUDA_ARCH__)
#include <cstring>
#endif

namespace taco::gpu {

TACO_HD uint32_t hd_bits(float x) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(x);
#else
  uint32_t u;
  std::memcpy(&u, &x, 4);
  return u;
#endif
}
TACO_HD float hd_float(uint32_t u) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  float f;
  std::memcpy(&f, &u, 4);
  return f;
#endif
}
TACO_HD uint64_t hd_bits64(double x) {
#if defined(__CUDA_ARCH__)
  return uint64_t(__double_as_longlong(x));
#else
  uint64_t u;
  std::memcpy(&u, &x, 8);
  return u;
#endif
}
TACO_HD double hd_double(uint64_t u) {
#if defined(__CUDA_ARCH__)
  return __longlong_as_double((long long)u);
#else
  double x;
  std::memcpy(&x, &u, 8);
  return x;
#endif
}
TACO_HD float add_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fadd_rn(a, b);
#else
  return a + b;
#endif
}
TACO_HD float mul_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fmul_rn(a, b);
#else
  return a * b;
#endif
}
TACO_HD float div_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fdiv_rn(a, b);
#else
  return a / b;
#endif
}
// The same in fp64 (TAH-Quant's token entropy, codecs/tahquant_hd.hpp).
TACO_HD double add_rn(double a, double b) {
#if defined(__CUDA_ARCH__)
  return __dadd_rn(a, b);
#else
  return a + b;
#endif
}
TACO_HD double mul_rn(double a, double b) {
#if defined(__CUDA_ARCH__)
  return __dmul_rn(a, b);
#else
  return a * b;
#endif
}
TACO_HD double div_rn(double a, double b) {
#if defined(__CUDA_ARCH__)
  return __ddiv_rn(a, b);
#else
  return a / b;
#endif
}
// IEEE maxNum / minNum (a NaN operand is ignored); |x|.
TACO_HD float max_num(float a, float b) {
#if defined(__CUDA_ARCH__)
  return fmaxf(a, b);
#else
  return std::fmax(a, b);
#endif
}
TACO_HD float min_num(float a, float b) {
#if defined(__CUDA_ARCH__)
  return fminf(a, b);
#else
  return std::fmin(a, b);
#endif
}
TACO_HD float abs_f(float a) {
#if defined(__CUDA_ARCH__)
  return fabsf(a);
#else
  return std::fabs(a);
#endif
}
// The low bytes of four words as one word, a's in the low byte.
TACO_HD uint32_t low_bytes(uint32_t a, uint32_t b, uint32_t c, uint32_t d) {
#if defined(__CUDA_ARCH__)
  return __byte_perm(__byte_perm(a, b, 0x0040), __byte_perm(c, d, 0x0040), 0x5410);
#else
  return (a & 0xffu) | ((b & 0xffu) << 8) | ((c & 0xffu) << 16) | ((d & 0xffu) << 24);
#endif
}

inline constexpr float kHdFltMin = 1.17549435e-38f, kHdFltMax = 3.40282347e+38f;

// ---- generic minifloat encode (formats/minifloat.hpp encode_minifloat) -----------------------
// The CPU encoder with the sign bit as a parameter (0x80 for FP8, 0x8 for E2M1); the CPU's
// signed compares are unsigned ones here (every value compared is below 2^31 where it is
// selected).
template <int Mbits, int Bias, uint32_t SignBit, uint32_t MaxCode, uint32_t OvfCode,
          uint32_t NanCode>
TACO_HD uint32_t minifloat_code(float x, bool saturate) {
  constexpr int kShift = 23 - Mbits;
  constexpr uint32_t kRebias = uint32_t(127 - Bias) << 23;
  constexpr uint32_t kMinNormal = uint32_t(127 + 1 - Bias) << 23;
  constexpr uint32_t kSubMagic = uint32_t(127 + 1 - Bias - Mbits + 23) << 23;
  constexpr uint32_t kHalfMinus1 = (1u << (kShift - 1)) - 1u;
  const uint32_t u = hd_bits(x);
  const uint32_t a = u & 0x7fffffffu;
  const uint32_t sign = (u >> 31) * SignBit;
  const uint32_t normal = (a - kRebias + kHalfMinus1 + ((a >> kShift) & 1u)) >> kShift;
  const uint32_t sub = hd_bits(add_rn(hd_float(a), hd_float(kSubMagic))) - kSubMagic;
  uint32_t mag = a < kMinNormal ? sub : normal;
  const uint32_t ovf = saturate ? MaxCode : OvfCode;
  mag = mag > MaxCode ? ovf : mag;
  return a > 0x7f800000u ? NanCode : (mag | sign);
}

// ---- E2M1 (OCP MX / NVFP4 element) --------------------------------------------------------
// Round to nearest even, saturating to +-6, NaN -> +0 (code 0): encode_minifloat<E2M1Traits>.
TACO_HD uint32_t e2m1_code(float x) {
  return minifloat_code<1, 1, 0x8u, 0x7u, 0x7u, 0x0u>(x, true);
}

// Code -> value, exact: the code's exponent and mantissa bits placed at the bottom of a float's
// exponent field and the top of its mantissa make that float 2^126 times smaller than the E2M1
// value (for exponent 0 a float subnormal of the same proportion), and the multiply by 2^126 is
// exact. The sign goes to the float's sign (code 8 is -0).
TACO_HD float e2m1_value(uint32_t code) {
  const uint32_t bits = ((code & 0x7u) << 22) | ((code & 0x8u) << 28);
  return mul_rn(hd_float(bits), 0x1p126f);
}

// ---- E2M1, eight codes at a time: the kernels' encode ------------------------------------
// The kernels quantize the quotients t * 2^-14 (kE2M1Shift, folded into the division by the
// scale), where every E2M1 value and rounding midpoint is a normal float: there
//  * round to E2M1's grid on the float adder: min(|x|, 6 * 2^-14) plus M = 2^(E + 22), where 2^E
//    is that value's binade, at least 2^-14 (for E2M1's subnormal 0.5 step), has its ulp at the
//    grid's step, so the add rounds to the grid with ties to the even code, and subtracting M
//    is exact (Sterbenz); the clamp to 6 is E2M1's saturation (rounding below 6 then saturating
//    is the same as saturating first);
//  * the rounded value, an E2M1 value times 2^-14, converts exactly to E5M2 with the code's
//    bits shifted left by one and the sign in bit 7 (E5M2's subnormal 2^-15 is E2M1's 0.5, its
//    exponent field E2M1's): on the GPU one conversion instruction per pair of values;
//  * two words of four E5M2 bytes (even and odd elements) become eight nibbles with shifts and
//    masks.
// Equal to e2m1_code(t) for every t that is not NaN whose t * 2^-14 is that quotient rounded,
// i.e. |t| >= 2^-112 (the scaling is exact above the float subnormals); quotients below 2^-16
// give the signed zero code like every |t| <= 0.25 (tests/cpu/test_hd_formats.cpp). A NaN gives
// code 7 (e2m1_code gives 0): the kernels zero NaN values before they divide.
inline constexpr float kE2M1Shift = 0x1p-14f;

// x = t * 2^-14 rounded to E2M1's grid (scaled), with x's sign: float bits.
TACO_HD uint32_t e2m1_round_scaled(float x) {
  const float xc = min_num(abs_f(x), 6.0f * kE2M1Shift);
  const float e = max_num(xc, kE2M1Shift);
  const float m = hd_float(hd_bits(mul_rn(e, 0x1p22f)) & 0x7f800000u);
  const float r = add_rn(add_rn(xc, m), -m);
  return hd_bits(r) | (hd_bits(x) & 0x80000000u);
}

// Four E5M2 codes of exactly representable values (bits as from e2m1_round_scaled), a's in the
// low byte: the hardware conversion on the GPU, the reference encoder on the host.
TACO_HD uint32_t e5m2x4_exact(uint32_t a, uint32_t b, uint32_t c, uint32_t d) {
#if defined(__CUDA_ARCH__)
  uint32_t w;
  asm("{\n .reg .b16 lo, hi;\n cvt.rn.satfinite.e5m2x2.f32 lo, %2, %1;\n"
      " cvt.rn.satfinite.e5m2x2.f32 hi, %4, %3;\n mov.b32 %0, {lo, hi};\n}"
      : "=r"(w)
      : "f"(__uint_as_float(a)), "f"(__uint_as_float(b)), "f"(__uint_as_float(c)),
        "f"(__uint_as_float(d)));
  return w;
#else
  auto code = [](uint32_t v) {
    return minifloat_code<2, 15, 0x80u, 0x7bu, 0x7cu, 0x7fu>(hd_float(v), true);
  };
  return code(a) | (code(b) << 8) | (code(c) << 16) | (code(d) << 24);
#endif
}

// Eight E2M1 codes, element k in nibble k (the wire's order), from x_k = t_k * 2^-14.
TACO_HD uint32_t e2m1_word_scaled(const float (&x)[8]) {
  uint32_t r[8];
  for (int k = 0; k < 8; ++k) r[k] = e2m1_round_scaled(x[k]);
  // byte j: s000 ccc0 (E5M2 of a code c, sign s) for element 2j (even) / 2j + 1 (odd)
  const uint32_t even = e5m2x4_exact(r[0], r[2], r[4], r[6]);
  const uint32_t odd = e5m2x4_exact(r[1], r[3], r[5], r[7]);
  // even -> low nibbles (c from bits 1-3, s from bit 7); odd -> high nibbles (c shifted up by 3,
  // s in place); the other bits the shifts bring in are masked off
  return (((even >> 1) | (even >> 4)) & 0x0f0f0f0fu) | (((odd << 3) | odd) & 0xf0f0f0f0u);
}

// ---- INT4, symmetric (formats/intq.hpp quantize_int_sym with qmax 7) ---------------------
// clamp_nan0 then round to nearest even: t + 1.5 * 2^23 has ulp 1, so the add rounds to an
// integer and the sum's low mantissa bits are that integer in two's complement (|t| <= 7): the
// nibble, with neither the subtraction of rne_small nor a float -> int conversion.
TACO_HD float int4_clamp(float t) {
  const float c = t > 7.0f ? 7.0f : (t < -7.0f ? -7.0f : t);
  return t != t ? 0.0f : c;
}
TACO_HD uint32_t int4_code(float t) {
  return hd_bits(add_rn(int4_clamp(t), 12582912.0f)) & 0xfu;
}
// Eight codes, element k in nibble k, for t_k that are not NaN (where the clamp is two min/max).
TACO_HD uint32_t int4_word(const float (&t)[8]) {
  uint32_t b[8];
  for (int k = 0; k < 8; ++k)
    b[k] = hd_bits(add_rn(min_num(max_num(t[k], -7.0f), 7.0f), 12582912.0f));
  const uint32_t even = low_bytes(b[0], b[2], b[4], b[6]), odd = low_bytes(b[1], b[3], b[5], b[7]);
  return (even & 0x0f0f0f0fu) | ((odd << 4) & 0xf0f0f0f0u);
}
// Nibble (two's complement) -> value: 2^23 + (nib ^ 8) as float bits, minus 2^23 + 8 (exact).
TACO_HD float int4_value(uint32_t nib) {
  return add_rn(hd_float(0x4b000000u | ((nib ^ 0x8u) & 0xfu)), -8388616.0f);
}

// ---- UE4M3 (NVFP4 block scale; formats/minifloat.hpp float_to_ue4m3, ue4m3_to_float) ----------
TACO_HD uint32_t e4m3_code_sw(float x, bool saturate) {
  return minifloat_code<3, 7, 0x80u, 0x7eu, 0x7fu, 0x7fu>(x, saturate);
}
// Saturating: negatives (and -0) give +0, NaN 0x7f.
TACO_HD uint32_t ue4m3_code(float x) {
  const uint32_t c = e4m3_code_sw(x, true);
  return (c & 0x80u) ? 0u : c;
}
// Codes 0x7f (E4M3's NaN) and 0x80..0xff (not UE4M3 codes) decode to NaN.
TACO_HD float ue4m3_value(uint32_t code) {
  code &= 0xffu;
  if (code >= 0x7fu) return hd_float(0x7fc00000u);
  const uint32_t e = code >> 3, m = code & 0x7u;
  if (e == 0) return mul_rn(float(m), 0x1p-9f);     // m * 2^-9 (exact)
  return hd_float(((e + 120u) << 23) | (m << 20));  // (8 + m) * 2^(e - 10)
}

// ---- NVFP4's two-level scale (QuantCodec::encode_flat, block_scale) --------------------------
// S_t = (max over blocks of the ideal scale) / 448, at least FLT_MIN, where a block's ideal scale
// is amax / T clamped to [FLT_MIN, FLT_MAX]. The ideal scale is a non-decreasing function of
// the block's amax, so the largest ideal is the ideal of the largest amax: `chunk_amax` is the
// largest finite |value| of the whole chunk (after the transform, if any).
TACO_HD float two_level_ideal(float amax, float target) {
  const float ideal = div_rn(amax, target);
  return ideal < kHdFltMin ? kHdFltMin : (ideal > kHdFltMax ? kHdFltMax : ideal);
}
TACO_HD float two_level_tensor_scale(float chunk_amax, float target) {
  const float st = div_rn(two_level_ideal(chunk_amax, target), 448.0f);
  return st < kHdFltMin ? kHdFltMin : st;
}

struct HdScale {
  uint32_t code;  // the UE4M3 byte stored
  float s;        // the scale values are divided by: ue4m3 value times S_t
};
// A block's code: its ideal scale over S_t rounded into UE4M3 (round_up: the smallest code whose
// value is >= it, else nearest even), at least code 1; the scale is that value times S_t.
TACO_HD HdScale two_level_block_scale(float amax, float target, float tensor_scale, bool round_up) {
  const float r = div_rn(two_level_ideal(amax, target), tensor_scale);
  uint32_t c = ue4m3_code(r);
  if (round_up && c < 0x7eu && ue4m3_value(c) < r) ++c;
  c = c == 0 ? 1u : c;
  return {c, mul_rn(ue4m3_value(c), tensor_scale)};
}

}  // namespace taco::gpu
