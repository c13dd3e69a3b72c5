#include "synth/det_math.hpp"

#include <array>
#include <cstdint>
#include <cstring>
#include <limits>

namespace taco::detmath {
namespace {

uint64_t to_bits(double x) {
  uint64_t u;
  std::memcpy(&u, &x, 8);
  return u;
}
double from_bits(uint64_t u) {
  double x;
  std::memcpy(&x, &u, 8);
  return x;
}

// ln 2 split so that k * kLn2Hi is exact for |k| < 2^21 (kLn2Hi has 32 significant bits).
constexpr double kLn2Hi = 0x1.62e42feep-1;
constexpr double kLn2Lo = 0x1.a39ef35793c76p-33;
constexpr double kInvLn2 = 0x1.71547652b82fep+0;
constexpr double kSqrt2 = 0x1.6a09e667f3bcdp+0;

// Series coefficients, evaluated at compile time (correctly rounded IEEE arithmetic, so the
// same doubles with every compiler): kInvFact[n] = 1/n! (by repeated division), and
// kLogCoef[k] = 2/(2k+1).
constexpr int kExpDegree = 13;    // |r| <= 0.347: r^14/14! < 5e-18, below half an ulp of 1
constexpr int kExpm1Degree = 17;  // |x| < 0.5: x^18/18! < 1e-21 relative to x
constexpr int kLogTerms = 12;     // |s| <= 0.1716: s^25/25 < 1e-20 relative to s

constexpr std::array<double, kExpm1Degree + 2> inv_factorials() {
  std::array<double, kExpm1Degree + 2> c{};
  c[0] = 1.0;
  for (int n = 1; n < int(c.size()); ++n) c[size_t(n)] = c[size_t(n - 1)] / double(n);
  return c;
}
constexpr std::array<double, kLogTerms> log_coefficients() {
  std::array<double, kLogTerms> c{};
  for (int k = 0; k < kLogTerms; ++k) c[size_t(k)] = 2.0 / double(2 * k + 1);
  return c;
}
constexpr auto kInvFact = inv_factorials();
constexpr auto kLogCoef = log_coefficients();

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
  // log(m) = 2 atanh(s) = s (2 + 2/3 s^2 + 2/5 s^4 + ...), s = (m - 1) / (m + 1).
  const double f = m - 1.0;  // exact (Sterbenz)
  const double s = f / (2.0 + f);
  const double z = s * s;
  double p = kLogCoef[kLogTerms - 1];
  for (int j = kLogTerms - 2; j >= 0; --j) p = kLogCoef[size_t(j)] + z * p;
  const double log_m = s * p;
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
  // Taylor series in Horner form.
  double p = kInvFact[kExpDegree];
  for (int n = kExpDegree - 1; n >= 0; --n) p = kInvFact[size_t(n)] + r * p;
  // p * 2^k, in two steps where 2^k alone would leave the double range.
  if (k > 1023) return p * pow2(k - 1) * 2.0;
  if (k < -1022) return p * pow2(k + 54) * 0x1p-54;
  return p * pow2(k);
}

double expm1(double x) {
  if (x > -0.5 && x < 0.5) {
    // x (1 + x/2! + x^2/3! + ...): no cancellation near 0.
    double p = kInvFact[kExpm1Degree + 1];
    for (int n = kExpm1Degree; n >= 1; --n) p = kInvFact[size_t(n)] + x * p;
    return x * p;
  }
  return exp(x) - 1.0;
}

double pow(double x, double y) {
  return exp(y * log(x));
}

}  // namespace taco::detmath
