#pragma once
// Bit-exact float32 -> small floating-point format encoding: FP8 E4M3 / E5M2, FP4 E2M1 and the
// unsigned E4M3 used for NVFP4 block scales (UE4M3). One generic encoder, the format as data
// (a traits struct). Round to nearest, ties to even, on the exact float32 value; subnormals
// are produced; the semantics are those of CUDA's __nv_cvt_float_to_fp8 (cuda_fp8.hpp), so
// the GPU kernels can use the hardware conversion and get the same bytes:
//
//  format  bias  max finite  min subnormal  overflow, saturating  overflow, non-saturating  NaN in
//  E4M3     7     448 (0x7e)   2^-9           +-448 (0x7e/0xfe)     NaN 0x7f / 0xff (signed)  0x7f
//  E5M2    15   57344 (0x7b)   2^-16          +-57344 (0x7b/0xfb)   +-Inf (0x7c / 0xfc)       0x7f
//  E2M1     1       6 (0x7)    0.5            +-6 (0x7 / 0xf)       +-6 (no Inf or NaN)       0x0
//  UE4M3    7     448 (0x7e)   2^-9           448; negatives -> 0   NaN 0x7f (also negatives) 0x7f
//
//  * "Overflow" means the correctly rounded magnitude exceeds the max finite value (E4M3: |x| >
//    464, the midpoint 464 itself rounds to the even 448; E5M2: |x| >= 61440). +-Inf inputs
//    overflow, so saturating mode maps them to +-max (CUDA SATFINITE).
//  * NaN inputs give the positive canonical NaN (sign dropped, as CUDA does). E2M1 has no NaN:
//    NaN -> +0 (toolkit policy; codecs zero non-finite values before encoding anyway).
//  * -0 keeps its sign; values at or below half the min subnormal round to +-0.
//  * UE4M3 (NVFP4 scale) is the E4M3 bit layout with the sign bit always 0. Codes 0x80..0xff are
//    not UE4M3 codes and decode to NaN. Negative values that round to -0 give +0.
//
// The encoder is branch-free (selects only) so the compiler can vectorize the hot loops:
//  normal range:    add the rebias and the round-to-nearest-even increment to the float bits and
//                   shift (a mantissa carry correctly propagates into the exponent);
//  subnormal range: |x| + 2^(23 + emin_sub) in float32, whose ulp is the target's subnormal
//                   step, so the FPU's own round-to-nearest-even does the rounding.
#include "core/dtype.hpp"

#include <cstdint>
#include <limits>

namespace taco {

struct E4M3Traits {
  static constexpr int kEbits = 4, kMbits = 3, kBias = 7;
  static constexpr uint32_t kSignBit = 0x80, kMaxCode = 0x7e, kOvfCode = 0x7f, kNanCode = 0x7f;
};
struct E5M2Traits {
  static constexpr int kEbits = 5, kMbits = 2, kBias = 15;
  static constexpr uint32_t kSignBit = 0x80, kMaxCode = 0x7b, kOvfCode = 0x7c, kNanCode = 0x7f;
};
struct E2M1Traits {
  static constexpr int kEbits = 2, kMbits = 1, kBias = 1;
  static constexpr uint32_t kSignBit = 0x8, kMaxCode = 0x7, kOvfCode = 0x7, kNanCode = 0x0;
};

// Encodes x; returns the code in the low 8 (FP8) or 4 (FP4) bits.
template <class F>
inline uint32_t encode_minifloat(float x, bool saturate) {
  constexpr int kShift = 23 - F::kMbits;                               // dropped mantissa bits
  constexpr uint32_t kRebias = uint32_t(127 - F::kBias) << 23;         // float -> target exponent
  constexpr uint32_t kMinNormal = uint32_t(127 + 1 - F::kBias) << 23;  // bits of 2^(1-bias)
  constexpr uint32_t kSubMagic = uint32_t(127 + 1 - F::kBias - F::kMbits + 23) << 23;
  constexpr uint32_t kHalfMinus1 = (1u << (kShift - 1)) - 1u;
  static_assert(kShift > 0 && kShift < 23, "format mantissa must be narrower than float32");

  const uint32_t u = float_bits(x);
  const uint32_t a = u & 0x7fffffffu;
  const uint32_t sign = (u >> 31) * F::kSignBit;
  // a - kRebias wraps for small a, but that result is then not selected.
  const uint32_t normal = (a - kRebias + kHalfMinus1 + ((a >> kShift) & 1u)) >> kShift;
  const uint32_t sub = float_bits(bits_float(a) + bits_float(kSubMagic)) - kSubMagic;
  // Selects as masks (all values compared are < 2^31, so signed compares are exact): GCC
  // will not if-convert a ternary over a float add under -ftrapping-math, masks vectorize.
  const uint32_t m_sub = 0u - uint32_t(int32_t(a) < int32_t(kMinNormal));
  uint32_t mag = (sub & m_sub) | (normal & ~m_sub);
  const uint32_t ovf = saturate ? F::kMaxCode : F::kOvfCode;
  const uint32_t m_ovf = 0u - uint32_t(int32_t(mag) > int32_t(F::kMaxCode));
  mag = (ovf & m_ovf) | (mag & ~m_ovf);
  const uint32_t m_nan = 0u - uint32_t(int32_t(a) > int32_t(0x7f800000u));
  return (F::kNanCode & m_nan) | ((mag | sign) & ~m_nan);
}

// Exact decoding of the generic layout (E4M3 "fn": exponent 15 with mantissa 7 is NaN, no Inf;
// E5M2: IEEE-like; E2M1: all finite). Used to build lookup tables, so clarity over speed.
template <class F>
inline float decode_minifloat(uint32_t code) {
  constexpr uint32_t kMantMask = (1u << F::kMbits) - 1u;
  constexpr uint32_t kExpMask = (1u << F::kEbits) - 1u;
  const bool neg = (code & F::kSignBit) != 0;
  const uint32_t mag = code & (F::kSignBit - 1u);
  const uint32_t e = mag >> F::kMbits, m = mag & kMantMask;
  float v;
  if (F::kEbits == 5 && e == kExpMask) {
    v = m ? std::numeric_limits<float>::quiet_NaN() : std::numeric_limits<float>::infinity();
  } else if (F::kEbits == 4 && mag == 0x7f) {
    v = std::numeric_limits<float>::quiet_NaN();
  } else if (e == 0) {  // m * 2^(1 - bias - M)
    v = float(m) * bits_float(uint32_t(127 + 1 - F::kBias - F::kMbits) << 23);
  } else {  // (2^M + m) * 2^(e - bias - M)
    v = float((1u << F::kMbits) + m) *
        bits_float(uint32_t(127 + int(e) - F::kBias - F::kMbits) << 23);
  }
  return neg ? -v : v;
}

// ---- FP4 E2M1 (OCP MX / NVFP4 element) ------------------------------------------------------
inline uint8_t float_to_fp4_e2m1(float x) {
  return uint8_t(encode_minifloat<E2M1Traits>(x, true));
}
inline float fp4_e2m1_to_float(uint8_t code) {
  return decode_minifloat<E2M1Traits>(code & 0xfu);
}

// ---- UE4M3 (NVFP4 block scale) ---------------------------------------------------------------
inline uint8_t float_to_ue4m3(float x, bool saturate = true) {
  const uint32_t c = encode_minifloat<E4M3Traits>(x, saturate);
  if (c == 0x80u) return 0;                   // -0 -> +0
  if (c & 0x80u) return saturate ? 0 : 0x7f;  // negative: clamp to 0, or NaN
  return uint8_t(c);
}
inline float ue4m3_to_float(uint8_t code) {
  return (code & 0x80) ? std::numeric_limits<float>::quiet_NaN()
                       : decode_minifloat<E4M3Traits>(code);
}

}  // namespace taco
