// Exact conversions of the 16-bit float types, checked exhaustively against independent
// arithmetic (ldexp on the decoded fields) and round trips.
#include "catch.hpp"
#include "core/dtype.hpp"
#include "core/error.hpp"

#include <cmath>

using namespace taco;

TEST_CASE("bf16 widening is the top half of a float and narrowing round-trips", "[dtype]") {
  int checked = 0;
  for (uint32_t h = 0; h < 65536; ++h) {
    const float f = bf16_to_float(uint16_t(h));
    REQUIRE(float_bits(f) == (h << 16));
    if (std::isnan(f)) {
      REQUIRE(std::isnan(bf16_to_float(float_to_bf16(f))));
    } else {
      REQUIRE(float_to_bf16(f) == h);
      ++checked;
    }
  }
  REQUIRE(checked == 65536 - 254);  // 2 * 127 NaN payloads
}

TEST_CASE("float to bf16 rounds to nearest even", "[dtype]") {
  // 1 + 2^-8 is halfway between bf16 1.0 and 1 + 2^-7: ties to even (1.0).
  REQUIRE(float_to_bf16(1.0f + std::ldexp(1.0f, -8)) == float_to_bf16(1.0f));
  // 1 + 3*2^-8 is halfway between 1+2^-7 (odd) and 1+2^-6 (even): rounds up.
  REQUIRE(bf16_to_float(float_to_bf16(1.0f + 3 * std::ldexp(1.0f, -8))) ==
          1.0f + std::ldexp(1.0f, -6));
  REQUIRE(bf16_to_float(float_to_bf16(1.0f + std::ldexp(1.0f, -8) + std::ldexp(1.0f, -20))) ==
          1.0f + std::ldexp(1.0f, -7));
}

TEST_CASE("fp16 decoding matches the IEEE binary16 definition for all patterns", "[dtype]") {
  for (uint32_t h = 0; h < 65536; ++h) {
    const int sign = (h >> 15) ? -1 : 1;
    const int e = (h >> 10) & 31, m = h & 1023;
    const float f = fp16_to_float(uint16_t(h));
    if (e == 31) {
      REQUIRE((m ? std::isnan(f) : std::isinf(f)));
      continue;
    }
    const double expect =
        sign * (e == 0 ? std::ldexp(double(m), -24) : std::ldexp(1024.0 + m, e - 25));
    REQUIRE(double(f) == expect);
    if (!(e == 0 && m == 0)) REQUIRE(float_to_fp16(f) == h);
  }
  REQUIRE(float_to_fp16(65520.0f) == 0x7c00);  // rounds past the max finite (65504): inf
  REQUIRE(float_to_fp16(65519.0f) == 0x7bff);
  REQUIRE(float_to_fp16(std::ldexp(1.0f, -25)) == 0);  // tie to even (zero)
  REQUIRE(float_to_fp16(std::ldexp(1.5f, -25)) == 1);  // above the tie: min subnormal
}

TEST_CASE("dtype names parse in every spelling and reject the rest", "[dtype]") {
  REQUIRE(parse_dtype("BF16") == DType::BF16);
  REQUIRE(parse_dtype("float16") == DType::F16);
  REQUIRE(parse_dtype("F8_E4M3") == DType::F8E4M3);
  REQUIRE_THROWS_AS(parse_dtype("complex64"), InputError);
}
