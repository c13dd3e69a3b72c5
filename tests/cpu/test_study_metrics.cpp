// Study metrics against hand-computed values, thread-count invariance, the log2 histogram's
// exact binning, SHA-256 test vectors and the percentile definition.
#include "catch.hpp"
#include "core/sha256.hpp"
#include "study/histogram.hpp"
#include "study/metrics.hpp"
#include "study/study.hpp"

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

using namespace taco;
using namespace taco::study;

TEST_CASE("metrics match hand-computed values", "[study][metrics]") {
  // e = x - x̂ = {0, 0, 0.5, -0.5, 0.25}: Σe² = 0.5625, Σx² = 14.0625, so rel_l2 = 0.2 exactly.
  const std::vector<float> x = {1, -2, 3, 0, 0.25f};
  const std::vector<float> y = {1, -2, 2.5f, 0.5f, 0};
  const InputScan scan = scan_input(x.data(), 5, 1);
  REQUIRE(scan.absmax == 3.0);
  REQUIRE(scan.all_finite());
  const ErrorSums s = error_sums(x.data(), y.data(), 5, 1e-3 * scan.absmax, false, 1);
  REQUIRE(s.count == 5);
  REQUIRE(s.nonzero == 4);
  REQUIRE(s.underflow == 1);  // 0.25 -> 0
  REQUIRE(s.sum_x2 == 14.0625);
  REQUIRE(s.sum_y2 == 11.5);
  REQUIRE(s.sum_xy == 12.5);
  REQUIRE(s.sum_e2 == 0.5625);
  const ErrorMetrics m = finish_metrics(s);
  REQUIRE(*m.rel_l2 == 0.2);
  REQUIRE(*m.mse == 0.1125);
  REQUIRE(*m.snr_db == Approx(10 * std::log10(25.0)).epsilon(1e-15));
  REQUIRE(*m.cosine == Approx(12.5 / std::sqrt(14.0625 * 11.5)).epsilon(1e-15));
  REQUIRE(*m.calc_diff == Approx(1 - 25.0 / 25.5625).epsilon(1e-15));
  REQUIRE(*m.max_abs_err == 0.5);
  REQUIRE(*m.max_rel_err == 1.0);  // 0.25 -> 0 is 100% off; 3 -> 2.5 only 1/6
  REQUIRE(*m.underflow_frac == 0.25);

  // A larger tau leaves only |x| > 2.5: the element 3 (rel. error 1/6).
  const ErrorMetrics m2 = finish_metrics(error_sums(x.data(), y.data(), 5, 2.5, false, 1));
  REQUIRE(*m2.max_rel_err == Approx(1.0 / 6).epsilon(1e-15));
  // No element above tau: not applicable.
  REQUIRE_FALSE(finish_metrics(error_sums(x.data(), y.data(), 5, 3.0, false, 1)).max_rel_err);
}

TEST_CASE("metrics of exact and degenerate reconstructions", "[study][metrics]") {
  const std::vector<float> x = {0.5f, -1, 2};
  const ErrorMetrics exact = finish_metrics(error_sums(x.data(), x.data(), 3, 0, false, 1));
  REQUIRE(*exact.rel_l2 == 0);
  REQUIRE(std::isinf(*exact.snr_db));
  REQUIRE(*exact.cosine == 1);
  REQUIRE(*exact.calc_diff == 0);
  REQUIRE(*exact.underflow_frac == 0);

  const std::vector<float> zeros(3, 0.0f);
  const ErrorMetrics lost = finish_metrics(error_sums(x.data(), zeros.data(), 3, 0, false, 1));
  REQUIRE(*lost.rel_l2 == 1);
  REQUIRE(*lost.snr_db == 0);
  REQUIRE(*lost.cosine == 0);
  REQUIRE(*lost.calc_diff == 1);
  REQUIRE(*lost.underflow_frac == 1);

  const ErrorMetrics both0 = finish_metrics(error_sums(zeros.data(), zeros.data(), 3, 0, false, 1));
  REQUIRE(*both0.rel_l2 == 0);
  REQUIRE(*both0.cosine == 1);
  REQUIRE_FALSE(both0.underflow_frac);  // no nonzero input
  REQUIRE_FALSE(both0.max_rel_err);
}

TEST_CASE("non-finite inputs are counted and left out of the sums", "[study][metrics]") {
  const float nan = std::numeric_limits<float>::quiet_NaN(),
              inf = std::numeric_limits<float>::infinity();
  const std::vector<float> x = {nan, inf, -inf, 2, 4};
  const std::vector<float> y = {0, 0, 0, 2, 3};
  const InputScan scan = scan_input(x.data(), 5, 1);
  REQUIRE(scan.nan_count == 1);
  REQUIRE(scan.inf_count == 2);
  REQUIRE(scan.absmax == 4);
  const ErrorSums s = error_sums(x.data(), y.data(), 5, 0.0, true, 1);
  REQUIRE(s.count == 2);
  REQUIRE(s.sum_x2 == 20);
  REQUIRE(s.sum_e2 == 1);
  REQUIRE(*finish_metrics(s).mse == 0.5);
}

TEST_CASE("metrics do not depend on the thread count", "[study][metrics]") {
  // Several blocks plus a ragged tail, values spanning many magnitudes.
  const int64_t n = 5 * kMetricBlock + 12345;
  std::mt19937 rng(7);
  std::normal_distribution<float> nd(0, 1);
  std::vector<float> x(static_cast<size_t>(n)), y(static_cast<size_t>(n));
  long double ex2 = 0, ee2 = 0;
  for (int64_t i = 0; i < n; ++i) {
    x[size_t(i)] = nd(rng) * std::exp2(float(i % 40) - 20);
    y[size_t(i)] = x[size_t(i)] * (1 + 0.01f * nd(rng));
    ex2 += (long double)x[size_t(i)] * x[size_t(i)];
    const long double d = (long double)x[size_t(i)] - y[size_t(i)];
    ee2 += d * d;
  }
  const ErrorSums s1 = error_sums(x.data(), y.data(), n, 1e-3, false, 1);
  for (int t : {2, 3, 8}) {
    const ErrorSums st = error_sums(x.data(), y.data(), n, 1e-3, false, t);
    CAPTURE(t);
    REQUIRE(std::memcmp(&st.sum_x2, &s1.sum_x2, 8) == 0);
    REQUIRE(std::memcmp(&st.sum_e2, &s1.sum_e2, 8) == 0);
    REQUIRE(std::memcmp(&st.sum_xy, &s1.sum_xy, 8) == 0);
    REQUIRE(st.rel_num == s1.rel_num);
    REQUIRE(st.rel_den == s1.rel_den);
    REQUIRE(st.max_abs_err == s1.max_abs_err);
  }
  // And the double sums are accurate (against long double).
  REQUIRE(s1.sum_x2 == Approx(double(ex2)).epsilon(1e-12));
  REQUIRE(s1.sum_e2 == Approx(double(ee2)).epsilon(1e-12));
  // The fast path (no finiteness checks) and the checked path agree on finite data.
  const ErrorSums sc = error_sums(x.data(), y.data(), n, 1e-3, true, 2);
  REQUIRE(sc.sum_e2 == s1.sum_e2);
  REQUIRE(sc.count == n);
}

TEST_CASE("quarter-octave histogram bins are exact", "[study][histogram]") {
  // The mantissa edges: 1 + M 2^-52 is the first double >= 2^(k/4).
  for (int k = 1; k <= 3; ++k) {
    const long double edge = std::pow(2.0L, k / 4.0L);
    const double lo = std::nextafter(std::pow(2.0, k / 4.0), 0.0);
    // The bin index steps exactly between the last double below the edge and the first above.
    double first_in = lo;
    while ((long double)first_in < edge) first_in = std::nextafter(first_in, 2.0);
    const double last_out = std::nextafter(first_in, 0.0);
    CAPTURE(k);
    REQUIRE((long double)last_out < edge);
    REQUIRE(log2_quarter_bin(first_in) == k);
    REQUIRE(log2_quarter_bin(last_out) == k - 1);
  }
  REQUIRE(log2_quarter_bin(1.0) == 0);
  REQUIRE(log2_quarter_bin(1.5) == 2);     // 4 log2 1.5 = 2.34
  REQUIRE(log2_quarter_bin(0.75) == -2);   // 4 log2 0.75 = -1.66
  REQUIRE(log2_quarter_bin(448.0) == 35);  // 4 log2 448 = 35.2
  REQUIRE(log2_quarter_bin(std::ldexp(1.0, -149)) == -596);
  std::mt19937_64 rng(3);
  std::uniform_real_distribution<double> u(-60, 60);
  for (int i = 0; i < 20000; ++i) {
    const double v = std::exp2(u(rng));
    const long double q = 4 * std::log2((long double)v);
    if (std::fabs(q - std::round(q)) < 1e-9L) continue;  // too close to an edge for log2l
    REQUIRE(log2_quarter_bin(v) == int64_t(std::floor(q)));
  }
}

TEST_CASE("log2 histograms count every finite element once per scope", "[study][histogram]") {
  // Two groups of 128: group 0 all 0.5 except one 2.0; group 1 zeros and one NaN.
  std::vector<float> x(256, 0.5f);
  x[3] = 2.0f;
  for (int i = 128; i < 256; ++i) x[size_t(i)] = 0;
  x[200] = std::numeric_limits<float>::quiet_NaN();
  Log2Histogram h;
  h.add_tensor(x.data(), 256, 2.0, 2);
  for (auto s : {HistScope::Raw, HistScope::Tensor, HistScope::Group128}) {
    REQUIRE(h.zeros(s) == 127);
    int64_t total = 0;
    for (int b = 0; b < Log2Histogram::kBins; ++b) total += h.count(s, b);
    REQUIRE(total == 128);
  }
  auto bin_of = [](double v) { return int(log2_quarter_bin(v) - 4 * Log2Histogram::kMinLog2); };
  REQUIRE(h.count(HistScope::Raw, bin_of(0.5)) == 127);
  REQUIRE(h.count(HistScope::Raw, bin_of(2.0)) == 1);
  REQUIRE(Log2Histogram::bin_lo(bin_of(2.0)) == 1.0);
  REQUIRE(Log2Histogram::bin_hi(bin_of(2.0)) == 1.25);
  // Per-tensor and per-group scaling both map 2.0 to 448 and 0.5 to 112.
  REQUIRE(h.count(HistScope::Tensor, bin_of(448)) == 1);
  REQUIRE(h.count(HistScope::Group128, bin_of(112)) == 127);
  // Thread count does not matter.
  Log2Histogram h1;
  h1.add_tensor(x.data(), 256, 2.0, 1);
  for (int b = 0; b < Log2Histogram::kBins; ++b)
    REQUIRE(h1.count(HistScope::Group128, b) == h.count(HistScope::Group128, b));
}

namespace {

// The histogram definition spelled out element by element (histogram.hpp): quarter-octave bin
// of |x|, of |x| * fp32(448 / absmax) and of |x| * fp32(448 / groupmax), fp32 products.
struct RefHist {
  std::vector<std::vector<int64_t>> bins =
      std::vector<std::vector<int64_t>>(3, std::vector<int64_t>(Log2Histogram::kBins, 0));
  int64_t zeros[3] = {0, 0, 0};
  void add(int scope, double v) {
    if (v == 0) {
      ++zeros[scope];
    } else if (std::isfinite(v)) {
      ++bins[size_t(scope)][size_t(log2_quarter_bin(v) - 4 * Log2Histogram::kMinLog2)];
    }
  }
};

RefHist reference_histogram(const std::vector<float>& x) {
  RefHist h;
  float absmax = 0;
  for (float v : x)
    if (std::isfinite(v)) absmax = std::max(absmax, std::fabs(v));
  const double ts_exact = absmax > 0 ? 448.0 / absmax : 0.0;
  const float ts = float(ts_exact);
  for (size_t g = 0; g < x.size(); g += 128) {
    const size_t end = std::min(x.size(), g + 128);
    float gmax = 0;
    for (size_t i = g; i < end; ++i)
      if (std::isfinite(x[i])) gmax = std::max(gmax, std::fabs(x[i]));
    const double gs_exact = gmax > 0 ? 448.0 / gmax : 0.0;
    const float gs = float(gs_exact);
    for (size_t i = g; i < end; ++i) {
      const float a = std::fabs(x[i]);
      h.add(0, a);
      h.add(1, std::isfinite(ts) ? double(a * ts) : a * ts_exact);
      h.add(2, std::isfinite(gs) ? double(a * gs) : a * gs_exact);
    }
  }
  return h;
}

void require_same(const Log2Histogram& h, const RefHist& ref) {
  for (int s = 0; s < kHistScopes; ++s) {
    CAPTURE(s);
    REQUIRE(h.zeros(HistScope(s)) == ref.zeros[s]);
    for (int b = 0; b < Log2Histogram::kBins; ++b) {
      CAPTURE(b);
      REQUIRE(h.count(HistScope(s), b) == ref.bins[size_t(s)][size_t(b)]);
    }
  }
}

}  // namespace

TEST_CASE("histograms match the element-by-element definition, subnormals included",
          "[study][histogram]") {
  std::mt19937 rng(11);
  std::normal_distribution<float> nd(0, 1);
  std::vector<float> x(128 * 40 + 77);
  for (size_t i = 0; i < x.size(); ++i) x[i] = nd(rng) * std::exp2(float(int(i % 61) - 30));
  x[3] = 0;
  x[200] = std::numeric_limits<float>::denorm_min() * 5;  // a subnormal input
  x[700] = 1e-39f;                                        // another one
  x[1000] = 3e37f;  // huge: other groups' products go subnormal
  x[1300] = std::numeric_limits<float>::quiet_NaN();
  x[1400] = -std::numeric_limits<float>::infinity();
  for (int i = 2000; i < 2128; ++i) x[size_t(i)] = 0;  // an all-zero group
  float absmax = 0;
  for (float v : x)
    if (std::isfinite(v)) absmax = std::max(absmax, std::fabs(v));
  for (int threads : {1, 3}) {
    Log2Histogram h;
    h.add_tensor(x.data(), int64_t(x.size()), absmax, threads);
    require_same(h, reference_histogram(x));
  }
  // A tensor so small that fp32(448 / absmax) overflows: the products are taken in double.
  std::vector<float> tiny = {1e-38f, 3e-39f, 0, -2e-38f, 1e-45f};
  Log2Histogram ht;
  ht.add_tensor(tiny.data(), 5, double(2e-38f), 1);
  require_same(ht, reference_histogram(tiny));
  REQUIRE(ht.count(HistScope::Tensor, int(log2_quarter_bin(448.0) - 4 * Log2Histogram::kMinLog2)) ==
          1);
}

TEST_CASE("SHA-256 matches the FIPS 180-4 examples", "[study][sha256]") {
  // Both the CPU-extension path (SHA-NI, where present) and the portable one.
  for (bool ext : {true, false}) {
    CAPTURE(ext);
    auto hex = [&](const std::string& m) {
      Sha256 h(ext);
      h.update(m.data(), m.size());
      return h.hex_digest();
    };
    REQUIRE(hex("") == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    REQUIRE(hex("abc") == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    REQUIRE(hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq") ==
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
    // One million 'a', fed in uneven pieces.
    const std::string a(1000000, 'a');
    Sha256 h(ext);
    size_t off = 0, piece = 1;
    while (off < a.size()) {
      const size_t take = std::min(piece, a.size() - off);
      h.update(a.data() + off, take);
      off += take;
      piece = piece * 3 + 1;
    }
    REQUIRE(h.hex_digest() == "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
  }
  REQUIRE(sha256_hex("abc", 3) ==
          "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

TEST_CASE("percentile interpolates like NumPy", "[study]") {
  REQUIRE(percentile({4, 1, 3, 2}, 0.5) == 2.5);
  std::vector<double> v;
  for (int i = 1; i <= 100; ++i) v.push_back(i);
  REQUIRE(percentile(v, 0.99) == Approx(99.01).epsilon(1e-12));
  REQUIRE(percentile({7}, 0.99) == 7);
  const double inf = std::numeric_limits<double>::infinity();
  REQUIRE(percentile({1, inf, inf}, 0.99) == inf);
}
