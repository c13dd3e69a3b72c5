// Number formats: exhaustive decode/encode checks against independent oracles (values from the
// bit-field definition, nearest-value search over every code), hand-picked exact codes, E8M0,
// integer rounding, scale rounding, Hadamard and the fixed-order group sum.
#include "catch.hpp"
#include "codecs/hadamard.hpp"
#include "core/dtype.hpp"
#include "formats/e8m0.hpp"
#include "formats/elem.hpp"
#include "formats/fp8.hpp"
#include "formats/intq.hpp"
#include "formats/minifloat.hpp"
#include "formats/scale.hpp"

#include <cmath>
#include <functional>
#include <limits>
#include <random>
#include <vector>

using namespace taco;

namespace {

const float kNaN = std::numeric_limits<float>::quiet_NaN();
const float kInf = std::numeric_limits<float>::infinity();

// A small float format described only by its field widths, for the brute-force oracle.
struct Fmt {
  const char* name;
  int ebits, mbits, bias, ncodes;
  float max;
  std::function<uint32_t(float, bool)> enc;
  std::function<float(uint32_t)> dec;
};

std::vector<Fmt> formats() {
  return {
      {"e4m3", 4, 3, 7, 256, 448.0f,
       [](float x, bool s) { return uint32_t(float_to_fp8_e4m3(x, s)); },
       [](uint32_t c) { return fp8_e4m3_to_float(uint8_t(c)); }},
      {"e5m2", 5, 2, 15, 256, 57344.0f,
       [](float x, bool s) { return uint32_t(float_to_fp8_e5m2(x, s)); },
       [](uint32_t c) { return fp8_e5m2_to_float(uint8_t(c)); }},
      {"e2m1", 2, 1, 1, 16, 6.0f, [](float x, bool) { return uint32_t(float_to_fp4_e2m1(x)); },
       [](uint32_t c) { return fp4_e2m1_to_float(uint8_t(c)); }},
  };
}

// The value a code means, from the field definition (no shared code with the library).
double field_value(const Fmt& f, uint32_t c) {
  const int sbit = f.ebits + f.mbits;
  const int e = int((c >> f.mbits) & ((1u << f.ebits) - 1)), m = int(c & ((1u << f.mbits) - 1));
  const double sign = (c >> sbit) & 1 ? -1.0 : 1.0;
  if (e == 0) return sign * std::ldexp(double(m), 1 - f.bias - f.mbits);
  return sign * std::ldexp(double((1 << f.mbits) + m), e - f.bias - f.mbits);
}

bool is_special(const Fmt& f, uint32_t c) {
  const uint32_t mag = c & ((1u << (f.ebits + f.mbits)) - 1);
  if (f.ebits == 4) return mag == 0x7f;         // E4M3 NaN
  if (f.ebits == 5) return (mag >> 2) == 0x1f;  // E5M2 Inf/NaN
  return false;
}

// Round-to-nearest-even by exhaustive search: the finite code nearest to x; on a tie the one
// with an even mantissa; |x| beyond max + half a step (or the tie there going up) overflows.
uint32_t oracle_encode(const Fmt& f, float xf, bool saturate) {
  const double x = xf;
  const uint32_t sign = std::signbit(xf) ? (1u << (f.ebits + f.mbits)) : 0u;
  double best_d = INFINITY;
  uint32_t best = 0;
  const uint32_t half = uint32_t(f.ncodes / 2);
  for (uint32_t c = 0; c < half; ++c) {  // magnitudes only
    if (is_special(f, c)) continue;
    const double d = std::fabs(std::fabs(x) - field_value(f, c));
    if (d < best_d || (d == best_d && (c & 1) == 0)) {
      best_d = d;
      best = c;
    }
  }
  // Overflow: the next (virtual) step above max would be nearer or tie-even.
  const double step_top = std::ldexp(1.0, int(std::floor(std::log2(f.max))) - f.mbits);
  const double virtual_next = double(f.max) + step_top;
  const uint32_t max_code = [&] {
    for (uint32_t c = 0; c < half; ++c)
      if (!is_special(f, c) && field_value(f, c) == f.max) return c;
    return 0u;
  }();
  const bool next_is_even = ((max_code + 1) & 1) == 0;
  const double dist_next = std::fabs(std::fabs(x) - virtual_next);
  const bool over =
      std::fabs(x) > virtual_next || dist_next < best_d || (dist_next == best_d && next_is_even);
  if (over) {
    if (saturate || f.ebits == 2) return sign | max_code;
    return f.ebits == 4 ? (sign | 0x7f) : (sign | 0x7c);
  }
  return sign | best;
}

std::vector<float> test_values() {
  std::vector<float> v;
  for (uint32_t h = 0; h < 65536; ++h) v.push_back(bf16_to_float(uint16_t(h)));
  std::mt19937 rng(12345);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  for (int i = 0; i < 20000; ++i) v.push_back(std::ldexp(u(rng), int(rng() % 50) - 25));
  return v;
}

}  // namespace

TEST_CASE("minifloat decode matches the bit-field definition for every code", "[formats]") {
  for (const Fmt& f : formats()) {
    CAPTURE(f.name);
    int finite = 0;
    for (uint32_t c = 0; c < uint32_t(f.ncodes); ++c) {
      CAPTURE(c);
      const float v = f.dec(c);
      if (is_special(f, c)) {
        if (f.ebits == 5 && (c & 3) == 0)
          REQUIRE(std::isinf(v));
        else
          REQUIRE(std::isnan(v));
        continue;
      }
      REQUIRE(double(v) == field_value(f, c));
      REQUIRE(std::signbit(v) == bool((c >> (f.ebits + f.mbits)) & 1));
      ++finite;
    }
    // E4M3: 2 NaN codes; E5M2: 2 Inf + 6 NaN; E2M1: none.
    REQUIRE(finite == (f.ebits == 4 ? 254 : f.ebits == 5 ? 248 : 16));
  }
  REQUIRE(fp8_e4m3_to_float(0x7e) == 448.0f);
  REQUIRE(fp8_e4m3_to_float(0x01) == std::ldexp(1.0f, -9));
  REQUIRE(fp8_e5m2_to_float(0x7b) == 57344.0f);
  REQUIRE(fp8_e5m2_to_float(0x01) == std::ldexp(1.0f, -16));
  REQUIRE(fp4_e2m1_to_float(0x7) == 6.0f);
  REQUIRE(fp4_e2m1_to_float(0x1) == 0.5f);
}

TEST_CASE("minifloat encode inverts decode on every finite code", "[formats]") {
  for (const Fmt& f : formats()) {
    CAPTURE(f.name);
    for (uint32_t c = 0; c < uint32_t(f.ncodes); ++c) {
      CAPTURE(c);
      const float v = f.dec(c);
      if (std::isnan(v)) continue;
      if (std::isinf(v)) {  // E5M2 Inf: kept only without saturation
        REQUIRE(f.enc(v, false) == c);
        REQUIRE(f.enc(v, true) == (c & 0x80u) + 0x7bu);
        continue;
      }
      REQUIRE(f.enc(v, true) == c);
      REQUIRE(f.enc(v, false) == c);
    }
  }
}

TEST_CASE("minifloat encode is round-to-nearest-even (exhaustive nearest-code oracle)",
          "[formats]") {
  const std::vector<float> values = test_values();
  for (const Fmt& f : formats()) {
    CAPTURE(f.name);
    int64_t checked = 0;
    for (float x : values) {
      if (std::isnan(x)) continue;
      for (bool sat : {true, false}) {
        CAPTURE(x, sat);
        REQUIRE(f.enc(x, sat) == oracle_encode(f, x, sat));
        ++checked;
      }
    }
    REQUIRE(checked > 2 * 65000);
  }
}

TEST_CASE("hand-picked FP8/FP4 codes: ties, subnormals, max, overflow, NaN, signed zero",
          "[formats]") {
  const float two = 2.0f;
  // E4M3
  REQUIRE(float_to_fp8_e4m3(1.0f) == 0x38);
  REQUIRE(float_to_fp8_e4m3(448.0f) == 0x7e);
  REQUIRE(float_to_fp8_e4m3(464.0f) == 0x7e);            // tie between 448 (even) and 480: 448
  REQUIRE(float_to_fp8_e4m3(464.0001f, true) == 0x7e);   // saturates
  REQUIRE(float_to_fp8_e4m3(464.0001f, false) == 0x7f);  // NaN
  REQUIRE(float_to_fp8_e4m3(-500.0f, false) == 0xff);    // CUDA keeps the sign on overflow NaN
  REQUIRE(float_to_fp8_e4m3(kInf, true) == 0x7e);
  REQUIRE(float_to_fp8_e4m3(-kInf, true) == 0xfe);
  REQUIRE(float_to_fp8_e4m3(kNaN) == 0x7f);
  REQUIRE(float_to_fp8_e4m3(-kNaN) == 0x7f);  // canonical NaN, sign dropped
  REQUIRE(float_to_fp8_e4m3(-0.0f) == 0x80);
  REQUIRE(float_to_fp8_e4m3(std::ldexp(1.0f, -9)) == 0x01);
  REQUIRE(float_to_fp8_e4m3(std::ldexp(1.0f, -10)) == 0x00);  // tie with 0: even
  REQUIRE(float_to_fp8_e4m3(std::ldexp(1.5f, -9)) == 0x02);   // tie between 1 and 2 steps: even
  REQUIRE(float_to_fp8_e4m3(std::ldexp(1.0f, -6)) == 0x08);   // min normal
  REQUIRE(float_to_fp8_e4m3(1.0625f) == 0x38);                // tie 1 (even) / 1.125
  REQUIRE(float_to_fp8_e4m3(1.1875f) == 0x3a);                // tie 1.125 / 1.25 (even)
  REQUIRE(float_to_fp8_e4m3(std::ldexp(1.0f, -7) * 1.9375f) ==
          0x08);  // subnormal rounds up to min normal
  // E5M2
  REQUIRE(float_to_fp8_e5m2(57344.0f) == 0x7b);
  REQUIRE(float_to_fp8_e5m2(61440.0f, true) == 0x7b);
  REQUIRE(float_to_fp8_e5m2(61440.0f, false) == 0x7c);  // tie rounds to the even Inf
  REQUIRE(float_to_fp8_e5m2(61439.0f, false) == 0x7b);
  REQUIRE(float_to_fp8_e5m2(-kInf, false) == 0xfc);
  REQUIRE(float_to_fp8_e5m2(kNaN) == 0x7f);
  REQUIRE(float_to_fp8_e5m2(448.0f) == 0x5f);
  REQUIRE(float_to_fp8_e5m2(std::ldexp(1.0f, -16)) == 0x01);
  REQUIRE(float_to_fp8_e5m2(std::ldexp(1.0f, -17)) == 0x00);
  // E2M1: 0, 0.5, 1, 1.5, 2, 3, 4, 6
  REQUIRE(float_to_fp4_e2m1(0.25f) == 0x0);
  REQUIRE(float_to_fp4_e2m1(0.75f) == 0x2);
  REQUIRE(float_to_fp4_e2m1(2.5f) == 0x4);
  REQUIRE(float_to_fp4_e2m1(5.0f) == 0x6);
  REQUIRE(float_to_fp4_e2m1(7.0f) == 0x7);
  REQUIRE(float_to_fp4_e2m1(-100.0f) == 0xf);
  REQUIRE(float_to_fp4_e2m1(kNaN) == 0x0);
  REQUIRE(float_to_fp4_e2m1(-0.0f) == 0x8);
  // UE4M3
  REQUIRE(float_to_ue4m3(two) == float_to_fp8_e4m3(two));
  REQUIRE(float_to_ue4m3(-two, true) == 0x00);
  REQUIRE(float_to_ue4m3(-two, false) == 0x7f);
  REQUIRE(float_to_ue4m3(-0.0f) == 0x00);
  REQUIRE(float_to_ue4m3(1000.0f, true) == 0x7e);
  REQUIRE(std::isnan(ue4m3_to_float(0x80)));
  REQUIRE(ue4m3_to_float(0x7e) == 448.0f);
}

TEST_CASE("E8M0: floor, ceil and round-to-nearest (ties up) agree with exact powers of two",
          "[formats]") {
  for (int k = -127; k <= 127; ++k) {
    CAPTURE(k);
    const float p = std::ldexp(1.0f, k);  // exact, 2^-127 is a float subnormal
    REQUIRE(e8m0_to_float(uint8_t(k + 127)) == p);
    REQUIRE(floor_log2(p) == k);
    REQUIRE(e8m0_floor(p) == k + 127);
    REQUIRE(e8m0_ceil(p) == k + 127);
    REQUIRE(float_to_e8m0(p) == k + 127);
    if (k < 127) {
      const float mid = p * 1.5f, below = std::nextafter(mid, 0.0f);
      REQUIRE(float_to_e8m0(mid) == k + 128);  // tie goes up
      REQUIRE(float_to_e8m0(below) == k + 127);
      REQUIRE(e8m0_floor(mid) == k + 127);
      REQUIRE(e8m0_ceil(std::nextafter(p, kInf)) == k + 128);
    }
  }
  REQUIRE(e8m0_floor(448.0f) == 8 + 127);
  REQUIRE(e8m0_ceil(448.0f) == 9 + 127);
  REQUIRE(floor_log2(std::ldexp(1.0f, -149)) == -149);
  REQUIRE(e8m0_ceil(std::ldexp(1.0f, -149)) == 0);  // clamped to 2^-127
  REQUIRE(float_to_e8m0(kNaN) == 0xff);
  REQUIRE(float_to_e8m0(0.0f, true) == 0x00);
  REQUIRE(float_to_e8m0(0.0f, false) == 0xff);
  REQUIRE(float_to_e8m0(-1.0f, false) == 0xff);
  REQUIRE(float_to_e8m0(kInf, true) == 0xfe);
  REQUIRE(float_to_e8m0(std::ldexp(1.5f, 127), false) == 0xff);
  REQUIRE(float_to_e8m0(std::ldexp(1.5f, 127), true) == 0xfe);
  REQUIRE(std::isnan(e8m0_to_float(0xff)));
}

TEST_CASE("integer codes round to nearest even and saturate", "[formats]") {
  REQUIRE(quantize_int_sym(2.5f, 127) == 2);
  REQUIRE(quantize_int_sym(3.5f, 127) == 4);
  REQUIRE(quantize_int_sym(-2.5f, 127) == -2);
  REQUIRE(quantize_int_sym(-0.5f, 127) == 0);
  REQUIRE(quantize_int_sym(126.5f, 127) == 126);
  REQUIRE(quantize_int_sym(1e30f, 127) == 127);
  REQUIRE(quantize_int_sym(-kInf, 127) == -127);
  REQUIRE(quantize_int_sym(kNaN, 127) == 0);
  REQUIRE(quantize_int_sym(6.5f, 7) == 6);
  REQUIRE(quantize_int_sym(-9.0f, 7) == -7);
  // Asymmetric: the zero point is added after rounding (0.5 - 2^-25 rounds to 0, not onto a tie).
  REQUIRE(quantize_int_asym(0.5f, 3, 255) == 3);
  REQUIRE(quantize_int_asym(1.5f, 3, 255) == 5);
  REQUIRE(quantize_int_asym(std::nextafter(0.5f, 0.0f), 1, 255) == 1);
  REQUIRE(quantize_int_asym(-10.0f, 3, 255) == 0);
  REQUIRE(quantize_int_asym(1e9f, 3, 15) == 15);
  for (int bits : {2, 3, 4, 8})
    for (uint32_t n = 0; n < (1u << bits); ++n)
      REQUIRE(int_from_code(n, bits) == (n < (1u << (bits - 1)) ? int(n) : int(n) - (1 << bits)));
  // Element-wise casts
  REQUIRE(cast_encode_one(CastFormat::INT8, -3.0f, true) == 0xfd);
  REQUIRE(cast_encode_one(CastFormat::INT4, -3.0f, true) == 0xd);
  REQUIRE(cast_decode_one(CastFormat::INT4, 0xd) == -3.0f);
  REQUIRE(cast_encode_one(CastFormat::UINT4, 20.0f, true) == 15);
  REQUIRE(cast_encode_one(CastFormat::BF16, std::numeric_limits<float>::max(), true) == 0x7f7f);
  REQUIRE(cast_encode_one(CastFormat::BF16, -kInf, true) == 0xff7f);
  REQUIRE(cast_encode_one(CastFormat::BF16, std::numeric_limits<float>::max(), false) == 0x7f80);
  REQUIRE_THROWS_AS(cast_encode(CastFormat::INT8, nullptr, 0, false), taco::InputError);
  REQUIRE_THROWS_AS(parse_cast_format("fp6"), taco::InputError);
}

TEST_CASE("scale rounding: up never goes below the ideal scale, nearest picks the closer",
          "[formats]") {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(0.0f, 1.0f);
  for (int i = 0; i < 5000; ++i) {
    const float ideal = std::ldexp(0.5f + u(rng), int(rng() % 60) - 30);
    for (ScaleFormat f : {ScaleFormat::BF16, ScaleFormat::F16, ScaleFormat::E8M0}) {
      CAPTURE(ideal, int(f));
      const ScaleCode up = encode_scale(ideal, f, ScaleRound::Up);
      REQUIRE(up.value == decode_scale(up.code, f));
      if (f == ScaleFormat::F16 && (ideal > 65504.0f || ideal < std::ldexp(1.0f, -24))) continue;
      REQUIRE(up.value >= ideal);
      REQUIRE(up.value < ideal * 2.0f);
      const ScaleCode ne = encode_scale(ideal, f, ScaleRound::Nearest);
      REQUIRE(std::fabs(double(ne.value) - ideal) <= std::fabs(double(up.value) - ideal));
    }
  }
  // ue4m3 (relative values): rne and up, never zero
  REQUIRE(encode_scale(3.1f, ScaleFormat::UE4M3, ScaleRound::Nearest).value == 3.0f);
  REQUIRE(encode_scale(3.1f, ScaleFormat::UE4M3, ScaleRound::Up).value == 3.25f);
  REQUIRE(encode_scale(1e-9f, ScaleFormat::UE4M3, ScaleRound::Nearest).code == 1);
  REQUIRE(encode_scale(1e9f, ScaleFormat::UE4M3, ScaleRound::Up).value == 448.0f);
  REQUIRE(encode_scale(1.0f + std::ldexp(1.0f, -10), ScaleFormat::BF16, ScaleRound::Up).value ==
          1.0f + std::ldexp(1.0f, -7));
  REQUIRE(encode_scale(3.0f, ScaleFormat::E8M0, ScaleRound::Up).value == 4.0f);
}

TEST_CASE("Hadamard: butterflies equal the dense Sylvester matrix, and H H = I", "[hadamard]") {
  std::mt19937 rng(3);
  for (int n : {16, 32, 64, 128, 256, 512, 1024}) {
    CAPTURE(n);
    // Dense Sylvester matrix from the closed form H[i][j] = (-1)^popcount(i & j).
    std::vector<float> x(static_cast<size_t>(n));
    for (auto& v : x) v = float(int(rng() % 2001) - 1000);  // integers: every sum is exact
    std::vector<float> y = x;
    fwht_butterflies(y.data(), n);
    for (int i = 0; i < n; ++i) {
      double acc = 0;
      for (int j = 0; j < n; ++j)
        acc += (__builtin_popcount(unsigned(i & j)) & 1 ? -1.0 : 1.0) * x[size_t(j)];
      REQUIRE(double(y[size_t(i)]) == acc);
    }
    // Orthonormal transform twice is the identity up to the rounding of 1/sqrt(n).
    std::normal_distribution<float> g(0.0f, 1.0f);
    for (auto& v : x) v = g(rng);
    y = x;
    fwht(y.data(), n);
    double energy_in = 0, energy_out = 0;
    for (int i = 0; i < n; ++i) {
      energy_in += double(x[size_t(i)]) * x[size_t(i)];
      energy_out += double(y[size_t(i)]) * y[size_t(i)];
    }
    REQUIRE(energy_out == Approx(energy_in).epsilon(1e-5));
    fwht(y.data(), n);
    for (int i = 0; i < n; ++i) REQUIRE(y[size_t(i)] == Approx(x[size_t(i)]).margin(1e-5));
  }
  REQUIRE(hadamard_scale(64) == 0.125f);
  REQUIRE(hadamard_scale(128) == float(1.0 / std::sqrt(128.0)));
}

TEST_CASE("RHT signs come from SplitMix64 and are balanced", "[hadamard]") {
  // SplitMix64 reference outputs for seed 0 (the published test vector).
  uint64_t st = 0;
  REQUIRE(splitmix64_next(st) == 0xE220A8397B1DCDAFull);
  REQUIRE(splitmix64_next(st) == 0x6E789E6AA1B965F4ull);
  const std::vector<uint32_t> m = rht_sign_masks(128, 0);
  for (int i = 0; i < 64; ++i)
    REQUIRE(m[size_t(i)] == (((0xE220A8397B1DCDAFull >> i) & 1) ? 0x80000000u : 0u));
  for (int i = 64; i < 128; ++i)
    REQUIRE(m[size_t(i)] == (((0x6E789E6AA1B965F4ull >> (i - 64)) & 1) ? 0x80000000u : 0u));
  int neg = 0;
  for (uint32_t v : rht_sign_masks(1024, 99)) neg += v != 0;
  REQUIRE(neg > 400);
  REQUIRE(neg < 624);
  REQUIRE(rht_sign_masks(64, 1) != rht_sign_masks(64, 2));
}

TEST_CASE("lane_tree_sum follows the documented warp order exactly", "[hadamard]") {
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  bool differs_from_sequential = false;
  for (int n : {16, 32, 64, 128, 256, 512, 1024}) {
    for (int trial = 0; trial < 50; ++trial) {
      std::vector<float> v(static_cast<size_t>(n));
      for (auto& x : v) x = std::ldexp(u(rng), int(rng() % 40) - 20);  // wide range: order matters
      // Oracle: 32 (or n) lanes, each summing its slice, then a full xor butterfly on all lanes.
      const int L = std::min(32, n), S = n / L;
      std::vector<float> p(static_cast<size_t>(L));
      for (int l = 0; l < L; ++l) {
        float acc = v[size_t(l * S)];
        for (int j = 1; j < S; ++j) acc = acc + v[size_t(l * S + j)];
        p[size_t(l)] = acc;
      }
      for (int s = L / 2; s >= 1; s /= 2) {
        std::vector<float> q(p);
        for (int l = 0; l < L; ++l) q[size_t(l)] = p[size_t(l)] + p[size_t(l ^ s)];
        p = q;
      }
      for (int l = 1; l < L; ++l) REQUIRE(float_bits(p[size_t(l)]) == float_bits(p[0]));
      REQUIRE(float_bits(lane_tree_sum(v.data(), n)) == float_bits(p[0]));
      float seq = 0;
      for (float x : v) seq = seq + x;
      differs_from_sequential |= float_bits(seq) != float_bits(p[0]);
    }
  }
  REQUIRE(differs_from_sequential);  // the data is able to tell the orders apart
}
