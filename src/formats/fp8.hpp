#pragma once
// FP8 decoding (exact) and encoding (round to nearest even, saturating or not; the rules and
// the NaN/Inf policy are in formats/minifloat.hpp).
//  E4M3 ("fn"): bias 7, no Inf, 0x7f/0xff are NaN, max normal 448, min subnormal 2^-9.
//  E5M2:        bias 15, IEEE-like Inf/NaN, max normal 57344, min subnormal 2^-16.
#include "formats/minifloat.hpp"

#include <cmath>
#include <cstdint>
#include <limits>

namespace taco {

inline float fp8_e4m3_to_float(uint8_t b) {
  const float sign = (b & 0x80) ? -1.0f : 1.0f;
  const int e = (b >> 3) & 0xf, m = b & 0x7;
  if (e == 0xf && m == 0x7) return std::numeric_limits<float>::quiet_NaN();
  if (e == 0) return sign * std::ldexp(float(m), -9);
  return sign * std::ldexp(float(8 + m), e - 10);
}

inline float fp8_e5m2_to_float(uint8_t b) {
  const float sign = (b & 0x80) ? -1.0f : 1.0f;
  const int e = (b >> 2) & 0x1f, m = b & 0x3;
  if (e == 0x1f) return m ? std::numeric_limits<float>::quiet_NaN() : sign * INFINITY;
  if (e == 0) return sign * std::ldexp(float(m), -16);
  return sign * std::ldexp(float(4 + m), e - 17);
}

// saturate = true is CUDA's __NV_SATFINITE (overflow and +-Inf -> +-max finite); false is
// __NV_NOSAT (overflow -> NaN for E4M3, +-Inf for E5M2).
inline uint8_t float_to_fp8_e4m3(float x, bool saturate = true) {
  return uint8_t(encode_minifloat<E4M3Traits>(x, saturate));
}
inline uint8_t float_to_fp8_e5m2(float x, bool saturate = true) {
  return uint8_t(encode_minifloat<E5M2Traits>(x, saturate));
}

}  // namespace taco
