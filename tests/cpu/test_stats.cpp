// Tensor statistics against hand-computed values, exact FP8 range boundaries, direct
// (non-merged) moment formulas, NumPy/SciPy values, and thread-count invariance.
#include "catch.hpp"
#include "core/error.hpp"
#include "stats/tensor_stats.hpp"

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

using namespace taco;
using Catch::Matchers::WithinRel;

namespace {

const float kNaNf = std::numeric_limits<float>::quiet_NaN();
const float kInff = std::numeric_limits<float>::infinity();

float below(float v) {
  return std::nextafter(v, 0.0f);
}

// Central moments by the textbook two-pass formula in long double (independent of the
// per-row merge the library uses).
struct Direct {
  long double mean = 0, var = 0, kurt = 0;
};
Direct direct(const std::vector<float>& v) {
  long double s = 0;
  for (float x : v) s += x;
  Direct d;
  d.mean = s / v.size();
  long double m2 = 0, m4 = 0;
  for (float x : v) {
    const long double e = x - d.mean;
    m2 += e * e;
    m4 += e * e * e * e;
  }
  d.var = m2 / v.size();
  d.kurt = v.size() * m4 / (m2 * m2);
  return d;
}

bool same_bits(double a, double b) {
  return std::memcmp(&a, &b, sizeof a) == 0;
}

}  // namespace

TEST_CASE("stats of a small tensor match hand-computed values", "[stats]") {
  // rows = tokens, cols = channels; one NaN and one Inf are counted and excluded.
  const std::vector<float> x = {1,    -2,    0,     4,  //
                                0.5f, kNaNf, kInff, -1};
  StatsOptions o;
  o.top_k = 2;
  o.block_size = 2;
  const TensorStats s = compute_stats(x.data(), 2, 4, o);
  REQUIRE(s.numel == 8);
  REQUIRE(s.nan_count == 1);
  REQUIRE(s.inf_count == 1);
  REQUIRE(s.finite_count == 6);
  REQUIRE(s.zero_count == 1);
  REQUIRE_THAT(s.zero_frac, WithinRel(1.0 / 6, 1e-15));
  REQUIRE_THAT(s.mean, WithinRel(2.5 / 6, 1e-15));
  REQUIRE_THAT(s.rms, WithinRel(std::sqrt(22.25 / 6), 1e-15));
  // deviations from 5/12: sum of squares = 22.25 - 6 (5/12)^2
  const double m2 = 22.25 - 6 * (2.5 / 6) * (2.5 / 6);
  REQUIRE_THAT(s.std, WithinRel(std::sqrt(m2 / 6), 1e-15));
  REQUIRE(s.absmax == 4);
  REQUIRE(s.min_nonzero_abs == 0.5);
  REQUIRE_THAT(s.crest_factor, WithinRel(4 / std::sqrt(22.25 / 6), 1e-15));
  REQUIRE(s.dynamic_range_log2 == 3);  // log2(4 / 0.5)
  // blocks of 2: [1,-2] -> 2/1 = 1 bit; [0,4] -> 0; [0.5,NaN] -> 0; [Inf,-1] -> 0
  REQUIRE(s.max_blockwise_dynamic_range == 1);
  // row absmax [4, 1]; column absmax [1, 2, 0 (0 and Inf), 4]
  REQUIRE(s.row_absmax_max == 4);
  REQUIRE(s.row_absmax_median == 2.5);
  REQUIRE(s.row_absmax_spread == 1.6);
  REQUIRE(s.col_absmax_median == 1.5);
  REQUIRE_THAT(s.col_absmax_spread, WithinRel(4 / 1.5, 1e-15));
  REQUIRE(s.top_tokens.size() == 2);
  REQUIRE(s.top_tokens[0].index == 0);
  REQUIRE(s.top_tokens[1].index == 1);
  REQUIRE(s.top_channels[0].index == 3);
  REQUIRE(s.top_channels[0].absmax == 4);
  REQUIRE(s.top_channels[1].index == 1);
  REQUIRE(s.top_channels[1].absmax == 2);

  o.block_size = 4;  // whole rows: [1,-2,0,4] -> 4/1 = 2 bits; [0.5,..,-1] -> 1 bit
  REQUIRE(compute_stats(x.data(), 2, 4, o).max_blockwise_dynamic_range == 2);
  o.block_size = 3;  // a tail block of 1 per row: [1,-2,0] 1 bit, [4] 0, [0.5,NaN,Inf] 0, [-1] 0
  REQUIRE(compute_stats(x.data(), 2, 4, o).max_blockwise_dynamic_range == 1);
}

TEST_CASE("kurtosis of a two-point and a uniform set are the closed forms", "[stats]") {
  // +-a with equal weight: kurtosis exactly 1, mean 0, std a.
  std::vector<float> x(1000);
  for (size_t i = 0; i < x.size(); ++i) x[i] = (i % 2) ? 3.0f : -3.0f;
  TensorStats s = compute_stats(x.data(), 10, 100);
  REQUIRE_THAT(s.kurtosis, WithinRel(1.0, 1e-14));
  REQUIRE_THAT(s.std, WithinRel(3.0, 1e-14));
  REQUIRE(s.mean == 0);
  // 0..n-1: the discrete uniform has Pearson kurtosis (3/5)(3n^2 - 7)/(n^2 - 1).
  std::vector<float> u(4096);
  for (size_t i = 0; i < u.size(); ++i) u[i] = float(i);
  s = compute_stats(u.data(), 64, 64);
  const double n = 4096;
  REQUIRE_THAT(s.kurtosis, WithinRel(3.0 / 5.0 * (3 * n * n - 7) / (n * n - 1), 1e-13));
  REQUIRE_THAT(s.mean, WithinRel((n - 1) / 2, 1e-15));
}

TEST_CASE("FP8 underflow and flush fractions count exact boundaries", "[stats]") {
  const float n6 = std::ldexp(1.0f, -6), n9 = std::ldexp(1.0f, -9);
  const float n14 = std::ldexp(1.0f, -14), n16 = std::ldexp(1.0f, -16);
  SECTION("E4M3 with absmax 448: the scaled value is the value") {
    // 2^-6 itself is normal; anything below is underflow; below 2^-9 is flushed.
    const std::vector<float> x = {448, 1, n6, below(n6), n9, below(n9), n14, n16, below(n16), 0};
    const TensorStats s = compute_stats(x.data(), 1, int64_t(x.size()));
    REQUIRE(s.zero_count == 1);
    REQUIRE(s.e4m3_underflow_frac == 6.0 / 9.0);
    REQUIRE(s.e4m3_flush_frac == 4.0 / 9.0);
    // E5M2 scales by 57344/448 = 128: only values below 2^-21 underflow; none here.
    REQUIRE(s.e5m2_underflow_frac == 0);
  }
  SECTION("E5M2 with absmax 57344") {
    const std::vector<float> x = {57344, 1, n14, below(n14), n16, below(n16)};
    const TensorStats s = compute_stats(x.data(), 2, 3);
    REQUIRE(s.e5m2_underflow_frac == 3.0 / 6.0);
    REQUIRE(s.e5m2_flush_frac == 1.0 / 6.0);
    // E4M3: |x| * 448/57344 = |x|/128 < 2^-6 <=> |x| < 2: all but 57344.
    REQUIRE(s.e4m3_underflow_frac == 5.0 / 6.0);
  }
  SECTION("a non-power-of-two absmax") {
    // threshold |x| < 3 * 2^-6 / 448 = 1.0463e-4
    const std::vector<float> x = {3.0f, -1.0e-4f, 1.1e-4f, 2.0f};
    const TensorStats s = compute_stats(x.data(), 2, 2);
    REQUIRE(s.e4m3_underflow_frac == 0.25);
  }
  SECTION("an all-zero tensor: fractions of an empty set are 0, kurtosis undefined") {
    const std::vector<float> x(16, 0.0f);
    const TensorStats s = compute_stats(x.data(), 4, 4);
    REQUIRE(s.zero_frac == 1);
    REQUIRE(s.e4m3_underflow_frac == 0);
    REQUIRE(s.absmax == 0);
    REQUIRE(s.dynamic_range_log2 == 0);
    REQUIRE(s.max_blockwise_dynamic_range == 0);
    REQUIRE(std::isnan(s.kurtosis));
    REQUIRE(std::isnan(s.crest_factor));
    REQUIRE(std::isnan(s.row_absmax_spread));
  }
}

TEST_CASE("stats match NumPy/SciPy on a deterministic 37x300 tensor", "[stats]") {
  // Same construction as the NumPy oracle: multiples of 1/256, channel 17 scaled by 64.
  // Oracle: np.mean/np.std/scipy.stats.kurtosis(fisher=False) in float64 (values below).
  const int64_t R = 37, C = 300;
  std::vector<float> x(size_t(R * C));
  for (int64_t r = 0; r < R; ++r)
    for (int64_t c = 0; c < C; ++c) {
      double v = double((r * 7919 + c * 104729) % 2001 - 1000) / 256.0;
      if (c == 17) v *= 64;
      x[size_t(r * C + c)] = float(v);
    }
  StatsOptions o;
  o.top_k = 3;
  const TensorStats s = compute_stats(x.data(), R, C, o);
  REQUIRE(s.zero_count == 5);
  REQUIRE_THAT(s.mean, WithinRel(0.0045175253378378381, 1e-12));
  REQUIRE_THAT(s.std, WithinRel(7.5853825890635411, 1e-13));
  REQUIRE_THAT(s.rms, WithinRel(7.5853839342846383, 1e-13));
  REQUIRE(s.absmax == 243.75);
  REQUIRE_THAT(s.kurtosis, WithinRel(530.5994195728847, 1e-12));
  REQUIRE_THAT(s.dynamic_range_log2, WithinRel(15.929258408636972, 1e-14));
  REQUIRE_THAT(s.max_blockwise_dynamic_range, WithinRel(15.741466986401146, 1e-14));
  REQUIRE(s.e4m3_underflow_frac == 21.0 / 11095.0);
  REQUIRE(s.e4m3_flush_frac == 0);
  REQUIRE(s.row_absmax_median == 96.25);
  REQUIRE(s.col_absmax_median == 3.85546875);
  REQUIRE(s.top_tokens[0].index == 18);
  REQUIRE(s.top_tokens[1].index == 17);
  REQUIRE(s.top_tokens[2].index == 19);
  REQUIRE(s.top_channels[0].index == 17);
  REQUIRE(s.top_channels[1].index == 0);  // tie at 1000/256: lower index first
  REQUIRE(s.top_channels[2].index == 11);
}

TEST_CASE("moments stay accurate with a large mean (merge of row partials)", "[stats]") {
  // 1e4 + small pattern: raw power sums would cancel catastrophically.
  std::vector<float> x(64 * 100);
  for (size_t i = 0; i < x.size(); ++i) x[i] = 10000.0f + float(int(i * 37 % 101) - 50) / 64.0f;
  const Direct d = direct(x);
  const TensorStats s = compute_stats(x.data(), 64, 100);
  REQUIRE_THAT(s.mean, WithinRel(double(d.mean), 1e-15));
  REQUIRE_THAT(s.std * s.std, WithinRel(double(d.var), 1e-10));
  REQUIRE_THAT(s.kurtosis, WithinRel(double(d.kurt), 1e-9));
}

TEST_CASE("stats do not depend on the thread count", "[stats]") {
  const int64_t R = 333, C = 257;
  std::vector<float> x(size_t(R * C));
  uint32_t h = 12345;
  for (auto& v : x) {
    h = h * 1664525u + 1013904223u;
    v = float(int32_t(h) >> 8) * 1e-6f * ((h & 0xff) == 7 ? 300.0f : 1.0f);
  }
  x[1000] = 0;
  StatsOptions o;
  o.threads = 1;
  const TensorStats a = compute_stats(x.data(), R, C, o);
  for (int t : {2, 3, 7}) {
    o.threads = t;
    const TensorStats b = compute_stats(x.data(), R, C, o);
    CAPTURE(t);
    REQUIRE(same_bits(a.mean, b.mean));
    REQUIRE(same_bits(a.std, b.std));
    REQUIRE(same_bits(a.rms, b.rms));
    REQUIRE(same_bits(a.kurtosis, b.kurtosis));
    REQUIRE(same_bits(a.col_absmax_median, b.col_absmax_median));
    REQUIRE(a.e4m3_underflow_frac == b.e4m3_underflow_frac);
    REQUIRE(to_json(a).dump() == to_json(b).dump());
  }
  const Direct d = direct(x);
  REQUIRE_THAT(a.kurtosis, WithinRel(double(d.kurt), 1e-12));
}

TEST_CASE("stats of degenerate shapes and bad options", "[stats]") {
  const TensorStats e = compute_stats(nullptr, 0, 128);
  REQUIRE(e.numel == 0);
  REQUIRE(std::isnan(e.mean));
  REQUIRE(e.zero_frac == 0);
  REQUIRE(e.top_tokens.empty());
  const float one = -2.5f;
  const TensorStats s = compute_stats(&one, 1, 1);
  REQUIRE(s.rms == 2.5);
  REQUIRE(s.std == 0);
  REQUIRE(std::isnan(s.kurtosis));
  REQUIRE(s.crest_factor == 1);
  StatsOptions bad;
  bad.block_size = 0;
  REQUIRE_THROWS_AS(compute_stats(&one, 1, 1, bad), InputError);
  Tensor t;
  t.shape = {2, 3};
  t.values = {1, 2, 3};
  REQUIRE_THROWS_AS(compute_stats(t), InputError);
  // The JSON form writes undefined values as null.
  const auto j = to_json(s);
  REQUIRE(j["kurtosis"].is_null());
  REQUIRE(j["rms"].get<double>() == 2.5);
}
