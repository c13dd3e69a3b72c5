#pragma once
// Integer element codes with round-to-nearest-even: symmetric INT8 [-127, 127] / INT4 [-7, 7]
// (two's complement bytes / nibbles; -128 and -8 are never produced) and asymmetric unsigned
// UINT8 [0, 255] / UINT4 [0, 15] with an integer zero point. Integers always saturate (clamp);
// NaN -> 0 (codecs zero non-finite values before this anyway).
#include <cmath>
#include <cstdint>

namespace taco {

// Round to nearest even for |v| <= 2^22: adding 1.5 * 2^23 puts the units digit in the last
// mantissa place, so the FPU's own round-to-nearest-even rounds; subtracting is then exact.
// (GPU: rintf / __float2int_rn give the same.)
inline float rne_small(float v) {
  constexpr float kMagic = 12582912.0f;  // 1.5 * 2^23
  return (v + kMagic) - kMagic;
}

inline float clamp_nan0(float v, float lo, float hi) {
  const float c = v > hi ? hi : (v < lo ? lo : v);
  return std::isnan(v) ? 0.0f : c;
}

// round(clamp(v, -qmax, qmax)); qmax = 127 or 7.
inline int32_t quantize_int_sym(float v, float qmax) {
  return int32_t(rne_small(clamp_nan0(v, -qmax, qmax)));
}

// clamp(round(v) + z, 0, qmax) with integer addition (adding z in float could move a value that
// is just below a .5 tie onto it). qmax = 255 or 15, z in [0, qmax].
inline int32_t quantize_int_asym(float v, int32_t z, int32_t qmax) {
  const int32_t r = int32_t(rne_small(clamp_nan0(v, -4194304.0f, 4194304.0f))) + z;
  return r < 0 ? 0 : (r > qmax ? qmax : r);
}

// Two's complement nibble -> value.
inline int32_t int4_from_nibble(uint32_t nib) {
  return int32_t((nib & 0xfu) ^ 0x8u) - 8;
}

}  // namespace taco
