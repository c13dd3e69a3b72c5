#pragma once
// Integer element codes of b bits (8, 4, 3, 2) with round-to-nearest-even: symmetric
// [-(2^(b-1) - 1), 2^(b-1) - 1] (INT8 +-127, INT4 +-7, INT3 +-3, INT2 +-1; b-bit two's complement,
// the most negative code -2^(b-1) is never produced) and asymmetric unsigned [0, 2^b - 1] with an
// integer zero point. Integers always saturate (clamp); NaN -> 0 (codecs zero non-finite values
// before this anyway).
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

// Largest symmetric / asymmetric code of a b-bit integer format.
constexpr int32_t int_sym_qmax(int bits) {
  return (int32_t(1) << (bits - 1)) - 1;
}
constexpr int32_t int_asym_qmax(int bits) {
  return (int32_t(1) << bits) - 1;
}

// round(clamp(v, -qmax, qmax)); qmax = int_sym_qmax(bits).
inline int32_t quantize_int_sym(float v, float qmax) {
  return int32_t(rne_small(clamp_nan0(v, -qmax, qmax)));
}

// clamp(round(v) + z, 0, qmax) with integer addition (adding z in float could move a value that
// is just below a .5 tie onto it). qmax = int_asym_qmax(bits), z in [0, qmax].
inline int32_t quantize_int_asym(float v, int32_t z, int32_t qmax) {
  const int32_t r = int32_t(rne_small(clamp_nan0(v, -4194304.0f, 4194304.0f))) + z;
  return r < 0 ? 0 : (r > qmax ? qmax : r);
}

// Value of a b-bit two's complement code (the low b bits of `code`).
inline int32_t int_from_code(uint32_t code, int bits) {
  const uint32_t sign = 1u << (bits - 1);
  return int32_t((code & (2 * sign - 1)) ^ sign) - int32_t(sign);
}

}  // namespace taco
