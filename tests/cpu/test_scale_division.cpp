// The GPU kernels' division by a per-group scale (reciprocal + negated-remainder correction,
// formats/scale_division.hpp) against IEEE division, on the ranges its comment promises.
#include "catch.hpp"
#include "formats/scale_division.hpp"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>

namespace {

uint32_t bits(float x) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  return u;
}
float from_bits(uint32_t u) {
  float x;
  std::memcpy(&x, &u, 4);
  return x;
}
// Random float with exponent uniform in [lo, hi] and a random mantissa and sign.
float log_uniform(std::mt19937_64& rng, int lo, int hi, bool signed_) {
  const int e = lo + int(rng() % uint64_t(hi - lo + 1));
  const float m = 1.0f + float(rng() & 0x7fffff) * std::ldexp(1.0f, -23);
  const float x = std::ldexp(m, e);
  return signed_ && (rng() & 1) ? -x : x;
}

}  // namespace

using taco::gpu::div_by_scale;
using taco::gpu::scale_divisor;

TEST_CASE("reciprocal division equals IEEE division for every quotient a code can resolve",
          "[formats][division]") {
  std::mt19937_64 rng(12345);
  int64_t checked = 0;
  for (int i = 0; i < 4000000; ++i) {
    const float b = log_uniform(rng, -80, 119, false);
    // Quotients from 2^-20 to 2^99, numerators near b * q (mantissas random, so near-ties too).
    float a = log_uniform(rng, -20, 99, true) * b;
    if (!std::isfinite(a) || a == 0.0f) continue;
    if (i % 4 == 1) a = from_bits(bits(a) ^ 1u);  // one ulp off a product of b
    const float want = a / b;
    if (!(std::fabs(want) >= std::ldexp(1.0f, -20)) || !(std::fabs(want) < std::ldexp(1.0f, 100)))
      continue;
    const float got = div_by_scale(a, scale_divisor(b));
    if (bits(got) != bits(want))
      FAIL("a=" << a << " b=" << b << " got " << got << " want " << want);
    ++checked;
  }
  REQUIRE(checked > 3000000);
}

TEST_CASE("reciprocal division is exact for every numerator when the divisor is moderate",
          "[formats][division]") {
  std::mt19937_64 rng(777);
  int64_t checked = 0;
  for (int i = 0; i < 4000000; ++i) {
    const float b = log_uniform(rng, -20, 19, false);
    const float a = log_uniform(rng, -100, 99, true);
    const float want = a / b;
    const float got = div_by_scale(a, scale_divisor(b));
    if (bits(got) != bits(want))
      FAIL("a=" << a << " b=" << b << " got " << got << " want " << want);
    ++checked;
  }
  REQUIRE(checked == 4000000);
  // Signed zeros keep their sign (the copysign-free form's point), at both ends of the range.
  for (const float b : {std::ldexp(1.0f, -80), 0.75f, 3.0f, std::ldexp(1.0f, 119)}) {
    REQUIRE(bits(div_by_scale(0.0f, scale_divisor(b))) == bits(0.0f));
    REQUIRE(bits(div_by_scale(-0.0f, scale_divisor(b))) == bits(-0.0f));
  }
}

TEST_CASE("reciprocal division keeps the sign of quotients too small for any code",
          "[formats][division]") {
  std::mt19937_64 rng(99);
  for (int i = 0; i < 1000000; ++i) {
    const float b = log_uniform(rng, -80, 119, false);
    const float a = log_uniform(rng, -149, -100, true);
    const float got = div_by_scale(a, scale_divisor(b));
    REQUIRE(std::signbit(got) == std::signbit(a));
    // Below 2^-20 only the sign matters to an 8-bit code; the magnitude stays tiny.
    if (std::fabs(a / b) < std::ldexp(1.0f, -21)) REQUIRE(std::fabs(got) < std::ldexp(1.0f, -20));
  }
}
