// TAH-Quant (methods.md section 3): token bit widths by entropy, the pivot rule, the wire size
// formula, exact reconstruction where the arithmetic allows it, and the error it reaches.
#include "catch.hpp"
#include "codecs/codec.hpp"
#include "codecs/hadamard.hpp"
#include "codecs/tahquant.hpp"
#include "codecs/tahquant_hd.hpp"
#include "core/dtype.hpp"

#include <cmath>
#include <cstring>
#include <limits>
#include <random>

using namespace taco;

namespace {

std::vector<float> decode(const Codec& c, const std::vector<uint8_t>& w, int64_t rows,
                          int64_t cols) {
  std::vector<float> y(static_cast<size_t>(rows * cols));
  c.decode(w.data(), w.size(), rows, cols, y.data());
  return y;
}

bool bit(const std::vector<uint8_t>& w, int64_t byte0, int64_t i) {
  return (w[size_t(byte0 + i / 8)] >> (i % 8)) & 1;
}

}  // namespace

TEST_CASE("TAH-Quant gives the lowest-entropy 20% of tokens the low bit width", "[tahquant]") {
  // 10 tokens x 128 channels: tokens 2 and 7 are nearly one-hot (low entropy), the rest dense.
  const int64_t rows = 10, cols = 128;
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> u(0.5f, 1.0f);
  std::vector<float> x(static_cast<size_t>(rows * cols));
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c)
      x[size_t(r * cols + c)] =
          (r == 2 || r == 7) ? (c == 5 ? 10.0f : 1e-3f * u(rng)) : u(rng) * (c % 2 ? 1.0f : -1.0f);
  const auto codec = make_codec("tahquant");
  const auto* tah = dynamic_cast<const TahQuantCodec*>(codec.get());
  REQUIRE(tah != nullptr);
  REQUIRE(tah->low_tokens(rows) == 2);
  REQUIRE(tah->low_tokens(5) == 1);  // exact integer rule (the reference code's float rule gives 0)
  const std::vector<uint8_t> w = codec->encode(x.data(), rows, cols);
  for (int64_t r = 0; r < rows; ++r) REQUIRE(bit(w, 0, r) == (r == 2 || r == 7));
  // Those one-hot tiles (first >= 2 * second) are flagged for pivot swap + Hadamard; the dense
  // token tiles are not (their two largest magnitudes are within 2x).
  const int64_t tiles_per_row = cols / 64;
  int64_t flagged = 0;
  for (int64_t t = 0; t < rows * tiles_per_row; ++t) flagged += bit(w, 2, t);
  // Sent order: tokens 2, 7, then 0, 1, 3, ...: tile 0 of tokens 2 and 7 hold the spike; tile 1
  // of each is uniform in [0.5e-3, 1e-3] (max < 2 * second), so not flagged.
  REQUIRE(bit(w, 2, 0));
  REQUIRE(bit(w, 2, 2));
  REQUIRE(flagged == 2);
  REQUIRE(int64_t(w.size()) == tah->wire_bytes(rows, cols, flagged));
  // Wire size formula: maps, codes (2 tokens x 128 x 3 bits + 8 x 128 x 4 bits), fp16 z and s,
  // 6-bit pivots.
  REQUIRE(w.size() == size_t(2 + 3 + (2 * 128 * 3 + 8 * 128 * 4) / 8 + 4 * 20 + 2));
  const std::vector<float> y = decode(*codec, w, rows, cols);
  REQUIRE(y[size_t(2 * cols + 5)] == Approx(10.0f).epsilon(0.01));
}

TEST_CASE("TAH-Quant reconstructs exactly when values sit on its fp16 grid", "[tahquant]") {
  // Tokens of integers 0..15 (pattern shifted per token): entropy is equal-ish, min 0, span 15,
  // so 4-bit tokens have s = 1, z = 0 and decode exactly; no tile has a dominant value.
  const int64_t rows = 5, cols = 64;
  std::vector<float> x(static_cast<size_t>(rows * cols));
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) x[size_t(r * cols + c)] = float((c + r) % 16);
  const auto codec = make_codec("tahquant");
  const std::vector<uint8_t> w = codec->encode(x.data(), rows, cols);
  const std::vector<float> y = decode(*codec, w, rows, cols);
  int64_t exact_tokens = 0;
  for (int64_t r = 0; r < rows; ++r) {
    if (bit(w, 0, r)) continue;  // the one 3-bit token is lossy
    bool exact = true;
    for (int64_t c = 0; c < cols; ++c)
      exact = exact && y[size_t(r * cols + c)] == x[size_t(r * cols + c)];
    exact_tokens += exact;
  }
  REQUIRE(exact_tokens == 4);
}

TEST_CASE("TAH-Quant error, non-finite inputs and configurations", "[tahquant]") {
  std::mt19937 rng(3);
  std::normal_distribution<float> g(0.0f, 1.0f);
  const int64_t rows = 256, cols = 512;
  std::vector<float> x(static_cast<size_t>(rows * cols));
  for (auto& v : x) v = g(rng);
  auto err = [&](const char* v) {
    const auto c = make_codec(v);
    const std::vector<float> y = decode(*c, c->encode(x.data(), rows, cols), rows, cols);
    double num = 0, den = 0;
    for (size_t i = 0; i < x.size(); ++i) {
      num += (double(y[i]) - x[i]) * (double(y[i]) - x[i]);
      den += double(x[i]) * x[i];
    }
    return std::sqrt(num / den);
  };
  const double e43 = err("tahquant"), e66 = err("tahquant:tile=32:hi=6:lo=6"),
               e88 = err("tahquant:hi=8:lo=8");
  REQUIRE(e43 < 0.2);
  REQUIRE(e66 < e43 / 2);
  REQUIRE(e88 < e66 / 2);
  REQUIRE(e88 > 0);
  std::vector<float> z = x;
  z[7] = std::numeric_limits<float>::quiet_NaN();
  z[700] = -std::numeric_limits<float>::infinity();
  EncodeStats st;
  const auto c = make_codec("tahquant");
  const std::vector<float> y = decode(*c, c->encode(z.data(), rows, cols, &st), rows, cols);
  REQUIRE(st.nonfinite == 2);
  for (float v : y) REQUIRE(std::isfinite(v));
  REQUIRE(std::fabs(y[7]) < 0.5f);
}

TEST_CASE("TAH-Quant's shared arithmetic: the series log, the tile FWHT, the entropy lanes",
          "[tahquant]") {
  // log_pos against the library log over the range the entropy takes (p + 1e-30, p in [0, 1])
  // and beyond: within a few ulp (1e-15 relative), exact at 1.
  CHECK(tah::log_pos(1.0) == 0.0);
  CHECK(!std::signbit(tah::log_pos(1.0)));
  std::mt19937_64 rng(11);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  double worst = 0;
  for (int i = 0; i < 200000; ++i) {
    const double x =
        i < 100000 ? u(rng) + 1e-30 : std::ldexp(0.5 + u(rng), int(u(rng) * 200) - 100);
    const double want = std::log(x), got = tah::log_pos(x);
    if (want != 0) worst = std::max(worst, std::fabs(got - want) / std::fabs(want));
  }
  INFO("worst relative error x 1e16: " << worst * 1e16);
  CHECK(worst < 1e-15);
  CHECK(std::fabs(tah::log_pos(1e-30) - std::log(1e-30)) < 1e-13);
  CHECK(std::fabs(tah::log_pos(std::nextafter(1.0, 0.0)) - std::log(std::nextafter(1.0, 0.0))) <
        1e-31);

  // The tile FWHT is codecs/hadamard.hpp's fwht, bit for bit.
  std::normal_distribution<float> g(0.0f, 3.0f);
  for (int n = 8; n <= 1024; n *= 2) {
    std::vector<float> a(static_cast<size_t>(n)), b;
    for (auto& v : a) v = g(rng);
    b = a;
    fwht(a.data(), n);
    tah::fwht_tile(b.data(), n, hadamard_scale(n));
    CAPTURE(n);
    CHECK(std::memcmp(a.data(), b.data(), a.size() * 4) == 0);
  }

  // The entropy the codec ranks tokens by: the lanes give the entropy within rounding, and a
  // nearly one-hot token ranks below a flat one.
  const int64_t cols = 96;  // three columns per lane
  std::vector<float> flat(cols, 1.0f), peaked(cols, 0.001f);
  peaked[5] = 10.0f;
  auto entropy = [&](const std::vector<float>& x) {
    double part[tah::kLanes];
    for (int l = 0; l < tah::kLanes; ++l) part[l] = tah::lane_abs_sum(x.data(), cols, l);
    const double denom = tah::add_rn(tah::combine_lanes(part), tah::kEps);
    for (int l = 0; l < tah::kLanes; ++l) part[l] = tah::lane_neg_plogp(x.data(), cols, l, denom);
    return tah::combine_lanes(part);
  };
  CHECK(std::fabs(entropy(flat) - std::log(96.0)) < 1e-14);
  CHECK(entropy(peaked) < 0.2);
  CHECK(entropy(std::vector<float>(cols, 0.0f)) == 0.0);
}

TEST_CASE("TAH-Quant's layout: the sizes the wire formula gives and the encoded length",
          "[tahquant]") {
  const auto c = make_codec("tahquant");
  const auto* t = dynamic_cast<const TahQuantCodec*>(c.get());
  REQUIRE(t != nullptr);
  std::mt19937 rng(5);
  std::normal_distribution<float> g(0.0f, 1.0f);
  for (int64_t rows : {1, 5, 37}) {
    const int64_t cols = 256;
    const tah::Layout L = t->layout(rows, cols);
    // [token bits][tile bits][codes][zeros][scales][pivots]
    CHECK(L.tile_map == (rows + 7) / 8);
    CHECK(L.zeros - L.codes == (L.n_lo * cols * 3 + (rows - L.n_lo) * cols * 4 + 7) / 8);
    CHECK(L.pivots - L.zeros == 4 * rows * cols / 64);
    CHECK(L.bound == c->wire_size(rows, cols).bytes);
    std::vector<float> x(static_cast<size_t>(rows * cols));
    for (auto& v : x) v = g(rng);
    for (int64_t i = 0; i < rows * cols; i += 64) x[size_t(i + 3)] = 40.0f;  // some flagged tiles
    auto w = c->encode(x.data(), rows, cols);
    const int64_t n = int64_t(w.size());
    w.resize(size_t(L.bound), 0);
    CHECK(t->encoded_bytes(w.data(), rows, cols) == n);
    CHECK(n > L.pivots);
  }
}
