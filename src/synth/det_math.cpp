#include "synth/det_math.hpp"

#include <cstdint>
#include <cstring>
#include <limits>

namespace taco::detmath {
namespace {

uint64_t to_bits(double x) { uint64_t u; std::memcpy(&u, &x, 8); return u; }
double from_bits(uint64_t u) { double x; std::memcpy(&x, &u, 8); return x; }

// ln 2 split so that k * kLn2Hi is exact for |k| < 2^21 (kLn2Hi has 32 significant bits).
constexpr double kLn2Hi = 0x1.62e42feep-1;
constexpr double kLn2Lo = 0x1.a39ef35793c76p-33;
constexpr double kInvLn2 = 0x1.71547652b82fep+0;
constexpr double kSqrt2 = 0x1.6a09e667f3bcdp+0;

// 2^k as a double for -1074 <= k <= 1023, built from bits (exact).
double pow2(int k) {
  if (k >= -1022) return from_bits(uint64_t(k + 1023) << 52);
  return from_bits(uint64_t(1) << (k + 1074));  // subnormal power of two
}

}  // namespace

double log(double x) {
  if (x != x) return x;
  if (x < 0) return std::numeric_limits<double>::quiet_NaN();
  if (x == 0) return -std::numeric_limits<double>::infinity();
  if (x == std::numeric_limits<double>::infinity()) return x;
  int k = 0;
  uint64_t b = to_bits(x);
  if ((b >> 52) == 0) {  // subnormal: scale into the normal range first (exact)
    x *= 0x1p54;
    b = to_bits(x);
    k = -54;
  }
  k += int(b >> 52) - 1023;
  double m = from_bits((b & 0x000fffffffffffffULL) | 0x3ff0000000000000ULL);  // [1, 2)
  if (m > kSqrt2) {  // centre the mantissa on 1: m in (sqrt(1/2), sqrt(2)]
    m *= 0.5;
    k += 1;
  }
  // log(m) = 2 atanh(s), s = (m - 1) / (m + 1), |s| <= 0.1716: the odd series
  // 2 (s + s^3/3 + ... + s^23/23) leaves a truncation error below 1e-19 relative.
  const double f = m - 1.0;  // exact (Sterbenz)
  const double s = f / (2.0 + f);
  const double z = s * s;
  double p = 1.0 / 23.0;
  for (int d = 21; d >= 1; d -= 2) p = 1.0 / double(d) + z * p;
  const double log_m = 2.0 * s * p;
  const double kd = double(k);
  return kd * kLn2Hi + (kd * kLn2Lo + log_m);
}

double exp(double x) {
  if (x != x) return x;
  if (x > 709.782712893384) return std::numeric_limits<double>::infinity();
  if (x < -745.2) return 0.0;
  // x = k ln2 + r with |r| <= ln2/2 (plus rounding); k by rounding half away from zero.
  const double t = x * kInvLn2;
  const int k = int(t + (t >= 0 ? 0.5 : -0.5));
  const double kd = double(k);
  const double r = (x - kd * kLn2Hi) - kd * kLn2Lo;
  // Taylor series to r^16/16!, nested as 1 + r(1 + r/2(1 + r/3(...))): error < 1e-20.
  double p = 1.0;
  for (int n = 16; n >= 1; --n) p = 1.0 + r / double(n) * p;
  // p * 2^k, in two steps where 2^k alone would leave the double range.
  if (k > 1023) return p * pow2(k - 1) * 2.0;
  if (k < -1022) return p * pow2(k + 54) * 0x1p-54;
  return p * pow2(k);
}

double expm1(double x) {
  if (x > -0.5 && x < 0.5) {
    // x (1 + x/2 (1 + x/3 (...))): 0.5^22/22! < 1e-27, no cancellation.
    double p = 1.0;
    for (int n = 21; n >= 2; --n) p = 1.0 + x / double(n) * p;
    return x * p;
  }
  return exp(x) - 1.0;
}

double pow(double x, double y) { return exp(y * log(x)); }

}  // namespace taco::detmath
