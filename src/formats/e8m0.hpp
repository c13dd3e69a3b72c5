#pragma once
// E8M0 (OCP MX scale): 8 exponent bits, no sign, no mantissa, bias 127. Code c encodes 2^(c-127)
// for c in [0, 254] (2^-127 .. 2^127); 0xff is NaN. There is no zero.
//
// Three ways to get a code from a positive float, all exact (subnormal floats included):
//  e8m0_floor(x)  largest power of two <= x      (OCP MX block scale: 2^(floor(log2 amax) - emax))
//  e8m0_ceil(x)   smallest power of two >= x     (DeepSeek / TE "power-of-two scale": never clips)
//  float_to_e8m0  round to nearest, ties (x = 1.5 * 2^k) upward; this is what ml_dtypes'
//                 float8_e8m0fnu cast does for normal floats. NaN -> 0xff. Out of range:
//                 saturating mode clamps to [2^-127, 2^127] (x <= 0 -> 0x00, +Inf -> 0xfe);
//                 non-saturating mode returns NaN for x <= 0, +Inf and x >= 1.5 * 2^127.
//                 Positive x below 2^-127 round to 2^-127 (0x00) in both modes.
#include "core/dtype.hpp"

#include <cstdint>
#include <limits>

namespace taco {

inline constexpr int kE8M0MinExp = -127, kE8M0MaxExp = 127;

// floor(log2(x)) for finite x > 0, exact, subnormals included.
inline int floor_log2(float x) {
  const uint32_t a = float_bits(x) & 0x7fffffffu;
  const int e = int(a >> 23);
  if (e != 0) return e - 127;
  return -149 + (31 - __builtin_clz(a));  // subnormal: a * 2^-149, a != 0
}

// True when the finite x > 0 is an exact power of two.
inline bool is_pow2(float x) {
  const uint32_t a = float_bits(x) & 0x7fffffffu;
  return (a >> 23) != 0 ? (a & 0x7fffffu) == 0 : (a & (a - 1u)) == 0;
}

inline uint8_t e8m0_from_exp(int k) {
  k = k < kE8M0MinExp ? kE8M0MinExp : (k > kE8M0MaxExp ? kE8M0MaxExp : k);
  return uint8_t(k + 127);
}

inline float e8m0_to_float(uint8_t c) {
  if (c == 0xff) return std::numeric_limits<float>::quiet_NaN();
  if (c == 0) return bits_float(0x00400000u);  // 2^-127 is a float subnormal
  return bits_float(uint32_t(c) << 23);
}

// x must be finite; x <= 0 gives the smallest code.
inline uint8_t e8m0_floor(float x) {
  return x > 0 ? e8m0_from_exp(floor_log2(x)) : uint8_t(0);
}
inline uint8_t e8m0_ceil(float x) {
  return x > 0 ? e8m0_from_exp(floor_log2(x) + (is_pow2(x) ? 0 : 1)) : uint8_t(0);
}

inline uint8_t float_to_e8m0(float x, bool saturate = true) {
  if (x != x) return 0xff;
  if (!(x > 0)) return saturate ? 0 : 0xff;
  if (x == std::numeric_limits<float>::infinity()) return saturate ? 0xfe : 0xff;
  const uint32_t a = float_bits(x);
  int k = floor_log2(x);
  // The bit just below the leading one decides (it is set iff x >= 1.5 * 2^k).
  const int lead = (a >> 23) != 0 ? 23 : 31 - __builtin_clz(a);
  if (lead > 0 && ((a >> (lead - 1)) & 1u)) ++k;
  if (k > kE8M0MaxExp) return saturate ? 0xfe : 0xff;
  return e8m0_from_exp(k);
}

}  // namespace taco
