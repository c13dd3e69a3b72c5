// Structured codecs (subspace, lowrank, tt, topk, randk) and their linear algebra, against exact
// cases: tensors built with a known rank or TT rank, tensors inside span(U), Eckart-Young errors
// from an independent spectrum, hand-checked TopK selections, and the documented wire sizes.
#include "catch.hpp"
#include "codecs/codec.hpp"
#include "codecs/structured/linalg.hpp"
#include "codecs/structured/rng.hpp"
#include "codecs/structured/structured.hpp"
#include "codecs/structured/tt.hpp"
#include "core/dtype.hpp"
#include "core/error.hpp"

#include <omp.h>

#include <cmath>
#include <cstring>
#include <random>
#include <set>

using namespace taco;
using namespace taco::structured;

namespace {

std::vector<float> gaussian(size_t n, uint32_t seed, float sigma = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, sigma);
  std::vector<float> x(n);
  for (float& v : x) v = d(rng);
  return x;
}

double rel_err(const std::vector<float>& x, const std::vector<float>& y) {
  double e = 0, n = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    e += (double(x[i]) - y[i]) * (double(x[i]) - y[i]);
    n += double(x[i]) * x[i];
  }
  return std::sqrt(e / n);
}

std::unique_ptr<Codec> codec(const std::string& v) {
  auto c = make_structured_codec(v);
  REQUIRE(c != nullptr);
  return c;
}

std::vector<float> roundtrip(const Codec& c, const std::vector<float>& x, int64_t rows,
                             int64_t cols, size_t* nbytes = nullptr, EncodeStats* st = nullptr) {
  const std::vector<uint8_t> w = c.encode(x.data(), rows, cols, st);
  if (nbytes) *nbytes = w.size();
  std::vector<float> y(x.size(), -12345.0f);
  c.decode(w.data(), w.size(), rows, cols, y.data());
  return y;
}

// X = U diag(s) V^T with orthonormal U (m x r), V (n x r) from QR of Gaussians.
std::vector<float> with_spectrum(int64_t m, int64_t n, const std::vector<double>& s,
                                 uint32_t seed) {
  const int64_t r = int64_t(s.size());
  std::mt19937 rng(seed);
  std::normal_distribution<double> d;
  MatrixD gu(m, r), gv(n, r);
  for (int64_t j = 0; j < r; ++j) {
    for (int64_t i = 0; i < m; ++i) gu(i, j) = d(rng);
    for (int64_t i = 0; i < n; ++i) gv(i, j) = d(rng);
  }
  const MatrixD u = householder_q(gu), v = householder_q(gv);
  std::vector<float> x(size_t(m * n));
  for (int64_t i = 0; i < m; ++i)
    for (int64_t k = 0; k < n; ++k) {
      double acc = 0;
      for (int64_t j = 0; j < r; ++j) acc += u(i, j) * s[size_t(j)] * v(k, j);
      x[size_t(i * n + k)] = float(acc);
    }
  return x;
}

uint32_t header_u32(const std::vector<uint8_t>& w) {
  return uint32_t(w[4]) | (uint32_t(w[5]) << 8) | (uint32_t(w[6]) << 16) | (uint32_t(w[7]) << 24);
}

}  // namespace

// ---------------------------------------------------------------- grammar and names

TEST_CASE("structured variants: canonical names rebuild the same codec", "[structured]") {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"subspace:k=64", "subspace:k=64"},
      {"SUBSPACE:coef=fp8:seed=3:k=16", "subspace:k=16:seed=3:coef=e4m3"},
      {"subspace:frac=0.25:coef=bf16", "subspace:frac=0.25"},
      {"lowrank:rank=8", "lowrank:rank=8"},
      {"lowrank:factors=e4m3:energy=0.9", "lowrank:energy=0.9:factors=e4m3"},
      {"lowrank:bpe=0.5:rsvd:power=2:seed=0", "lowrank:bpe=0.5:rsvd"},
      {"lowrank:bpe=0.5:seed=7:rsvd:power=1", "lowrank:bpe=0.5:rsvd:power=1:seed=7"},
      {"tt:order=3", "tt:order=3"},
      {"tt:eps=0.1:order=4", "tt:order=4"},
      {"tt:order=3:eps=0.05:cores=f32", "tt:order=3:eps=0.05:cores=f32"},
      {"tt:rank=16:order=3", "tt:order=3:rank=16"},
      {"topk:frac=0.1", "topk10"},
      {"topk:index=bitmap:frac=0.25", "topk:frac=0.25:index=bitmap"},
      {"randk:frac=0.1:unbiased", "randk10"},
      {"randk:seed=5:frac=0.5", "randk:frac=0.5:seed=5"},
      {"lowrank:rsvd:bpe=1", "lowrank-b1"},
  };
  for (const auto& [spec, canon] : cases) {
    CAPTURE(spec);
    REQUIRE(is_structured_variant(spec));
    const auto c = codec(spec);
    REQUIRE(c->name() == canon);
    const auto again = codec(c->name());
    REQUIRE(again->name() == canon);
    REQUIRE(again->params() == c->params());
    // The definition (never a preset name) builds the same codec too.
    const auto def = codec(c->params().at("definition").get<std::string>());
    REQUIRE(def->name() == canon);
    REQUIRE(def->params() == c->params());
  }
}

TEST_CASE("structured presets resolve to their definitions", "[structured]") {
  std::set<std::string> names;
  for (const StructuredPreset& p : structured_presets()) {
    CAPTURE(p.name);
    REQUIRE(names.insert(p.name).second);
    REQUIRE(std::string(p.description).size() > 10);
    const auto c = make_codec(p.name);  // through the global factory
    REQUIRE(c->name() == p.name);
    REQUIRE(c->params().at("definition") == p.definition);
    REQUIRE(make_codec(p.definition)->name() == p.name);
  }
  REQUIRE(names.count("ef-int4-g32"));
}

TEST_CASE("structured variants: bad tokens are InputErrors naming the token", "[structured]") {
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"subspace", "needs parameters"},
      {"subspace:seed=1", "exactly one of k=K, frac=F"},
      {"subspace:k=4:frac=0.5", "exactly one of"},
      {"subspace:k=0", "k=0"},
      {"subspace:k=8:coef=int4", "unknown number format 'int4'"},
      {"subspace:k=8:k=9", "given twice"},
      {"subspace:k=8:bogus=1", "unknown token 'bogus'"},
      {"lowrank:rsvd", "exactly one of rank=R, energy=E, bpe=B"},
      {"lowrank:rank=4:energy=0.5", "exactly one of"},
      {"lowrank:energy=1.5", "energy=1.5"},
      {"lowrank:rank=4:power=2", "power= needs rsvd"},
      {"lowrank:rank=4:rsvd=1", "takes no value"},
      {"tt:rank=4", "needs order=D"},
      {"tt:order=1", "order=1"},
      {"tt:order=3:rank=4:eps=0.1", "not both"},
      {"tt:order=3:cores=e4m3", "f32 or bf16"},
      {"topk:frac=0", "frac=0"},
      {"topk:frac=0.1:index=u16", "index=u16"},
      {"randk", "needs parameters"},
      {"randk:frac=abc", "frac=abc"},
      {"ef:", "needs an inner variant"},
      {"ef:ef:int4-g32", "do not nest"},
      {"aqsgd:ef:topk:frac=0.1", "do not nest"},
  };
  for (const auto& [spec, msg] : bad) {
    CAPTURE(spec);
    try {
      make_codec(spec);
      FAIL("no InputError for " << spec);
    } catch (const InputError& e) {
      REQUIRE_THAT(e.what(), Catch::Matchers::Contains(msg));
    }
  }
  // Not structured at all: the structured factory declines, the global one decides.
  REQUIRE_FALSE(is_structured_variant("fp8-g128"));
  REQUIRE(make_structured_codec("fp8-g128") == nullptr);
}

// ---------------------------------------------------------------- random numbers, QR

TEST_CASE("the structured RNG is deterministic and its Gaussians have unit moments",
          "[structured]") {
  Rng a(42, RngStream::SubspaceBasis), b(42, RngStream::SubspaceBasis),
      c(42, RngStream::RsvdSketch);
  int differ = 0;
  for (int i = 0; i < 1000; ++i) {
    const uint64_t x = a.next();
    REQUIRE(x == b.next());
    differ += x != c.next();
  }
  REQUIRE(differ == 1000);
  Rng g(7, RngStream::RandK);
  const int n = 200000;
  double s1 = 0, s2 = 0, s4 = 0;
  for (int i = 0; i < n; ++i) {
    const double v = g.gaussian();
    s1 += v;
    s2 += v * v;
    s4 += v * v * v * v;
  }
  // Standard errors: mean 1/sqrt(n) = 0.0022, variance sqrt(2/n) = 0.0032, kurtosis ~ 0.011.
  REQUIRE(std::fabs(s1 / n) < 0.011);
  REQUIRE(std::fabs(s2 / n - 1) < 0.016);
  REQUIRE(std::fabs(s4 / n - 3) < 0.06);
}

TEST_CASE("householder_q gives an orthonormal basis of the columns with diag(R) >= 0",
          "[structured]") {
  std::mt19937 rng(3);
  std::normal_distribution<double> d;
  MatrixD a(50, 12);
  for (Eigen::Index j = 0; j < a.cols(); ++j)
    for (Eigen::Index i = 0; i < a.rows(); ++i) a(i, j) = d(rng);
  a.col(5) = 2 * a.col(1) - a.col(3);  // a dependent column
  const MatrixD q = householder_q(a);
  REQUIRE((q.transpose() * q - MatrixD::Identity(12, 12)).cwiseAbs().maxCoeff() < 1e-13);
  const MatrixD r = q.transpose() * a;  // R, upper triangular
  for (Eigen::Index j = 0; j < r.cols(); ++j) {
    for (Eigen::Index i = j + 1; i < r.rows(); ++i) REQUIRE(std::fabs(r(i, j)) < 1e-12);
    REQUIRE(r(j, j) >= -1e-12);
  }
  REQUIRE(std::fabs(r(5, 5)) < 1e-12);  // the dependent column adds no new direction
  REQUIRE((q * r - a).cwiseAbs().maxCoeff() < 1e-12);
}

TEST_CASE("effective rank and energy rank on exact spectra", "[structured]") {
  VectorD flat = VectorD::Constant(7, 3.0);
  REQUIRE(effective_rank(flat) == Approx(7.0).epsilon(1e-12));
  VectorD one = VectorD::Zero(5);
  one[0] = 2;
  REQUIRE(effective_rank(one) == Approx(1.0).epsilon(1e-12));
  REQUIRE(effective_rank(VectorD::Zero(3)) == 0.0);
  // p = (1/2, 1/4, 1/4): H = 1.5 ln 2, erank = 2^1.5.
  VectorD s(3);
  s << 2, 1, 1;
  REQUIRE(effective_rank(s) == Approx(std::pow(2.0, 1.5)).epsilon(1e-12));
  VectorD e(4);
  e << 100, 25, 4, 1;
  REQUIRE(rank_for_energy(e, 130, 0.5) == 1);
  REQUIRE(rank_for_energy(e, 130, 125.0 / 130) == 2);
  REQUIRE(rank_for_energy(e, 130, 0.99) == 3);
  REQUIRE(rank_for_energy(e, 130, 1.0) == 4);
}

// ---------------------------------------------------------------- low rank

TEST_CASE("lowrank reconstructs a rank-r tensor at rank r (exact and randomized SVD)",
          "[structured]") {
  const int64_t m = 96, n = 80;
  const std::vector<float> x = with_spectrum(m, n, {10, 5, 2, 1, 0.5}, 11);
  for (const char* v :
       {"lowrank:rank=5:factors=f32", "lowrank:rank=5:rsvd:factors=f32",
        "lowrank:rank=5:rsvd:power=0:factors=f32", "lowrank:energy=1:factors=f32"}) {
    CAPTURE(v);
    size_t nb = 0;
    const std::vector<float> y = roundtrip(*codec(v), x, m, n, &nb);
    REQUIRE(rel_err(x, y) < 2e-6);
  }
  // Exactly the documented size: header + (m + n) r f32 values.
  const auto w = codec("lowrank:rank=5:factors=f32")->encode(x.data(), m, n);
  REQUIRE(int64_t(w.size()) == lowrank_wire_bytes(m, n, 5, NumFormat::F32));
  REQUIRE(int64_t(w.size()) == 8 + (96 + 80) * 5 * 4);
  REQUIRE(header_u32(w) == 5);
}

TEST_CASE("lowrank picks the rank by energy and by byte budget, with the Eckart-Young error",
          "[structured]") {
  const int64_t m = 64, n = 48;
  const std::vector<double> s = {10, 5, 2, 1, 0.5};  // energies 100, 25, 4, 1, 0.25 of 130.25
  const std::vector<float> x = with_spectrum(m, n, s, 5);
  // energy=0.99 needs 128.95: the top three (129) suffice.
  {
    const auto c = codec("lowrank:energy=0.99:factors=f32");
    const auto w = c->encode(x.data(), m, n);
    REQUIRE(header_u32(w) == 3);
    std::vector<float> y(x.size());
    c->decode(w.data(), w.size(), m, n, y.data());
    REQUIRE(rel_err(x, y) == Approx(std::sqrt(1.25 / 130.25)).epsilon(1e-5));
  }
  // bpe: the largest r whose wire fits. Rank r takes 8 + (64 + 48) r 2 bytes = 8 + 224 r;
  // e.g. 0.5 * 3072 = 1536 bytes -> r = 6 (beyond the numerical rank 5: the budget decides).
  for (double bpe : {0.1, 0.2, 0.5}) {
    CAPTURE(bpe);
    const auto w = codec(fmt::format("lowrank:bpe={}", bpe))->encode(x.data(), m, n);
    const int64_t r = header_u32(w);
    REQUIRE(double(w.size()) <= bpe * m * n);
    REQUIRE(double(lowrank_wire_bytes(m, n, r + 1, NumFormat::BF16)) > bpe * m * n);
    REQUIRE(int64_t(w.size()) == 8 + 224 * r);
  }
  try {
    codec("lowrank:bpe=0.01")->encode(x.data(), m, n);
    FAIL("rank 0 accepted");
  } catch (const InputError& e) {
    REQUIRE_THAT(e.what(), Catch::Matchers::Contains("cannot hold rank 1"));
  }
}

TEST_CASE("lowrank error on a random tensor equals the spectrum's tail (Eckart-Young)",
          "[structured]") {
  const int64_t m = 70, n = 50;
  const std::vector<float> x = gaussian(size_t(m * n), 8);
  const VectorD s = singular_values(x.data(), m, n);
  double total = 0;
  for (Eigen::Index i = 0; i < s.size(); ++i) total += s[i] * s[i];
  for (int r : {1, 7, 25, 49}) {
    CAPTURE(r);
    double tail = 0;
    for (Eigen::Index i = r; i < s.size(); ++i) tail += s[i] * s[i];
    const std::vector<float> y =
        roundtrip(*codec(fmt::format("lowrank:rank={}:factors=f32", r)), x, m, n);
    const double opt = std::sqrt(tail / total);
    REQUIRE(rel_err(x, y) == Approx(opt).epsilon(1e-4).margin(1e-6));
    // The randomized SVD is never better than the optimum, and close to it with 2 power steps.
    const std::vector<float> yr =
        roundtrip(*codec(fmt::format("lowrank:rank={}:rsvd:factors=f32", r)), x, m, n);
    REQUIRE(rel_err(x, yr) >= opt - 1e-6);
    REQUIRE(rel_err(x, yr) <= opt * 1.1 + 1e-6);
  }
}

TEST_CASE("lowrank with e4m3 factors: size formula and bounded error", "[structured]") {
  const int64_t m = 64, n = 96;
  const std::vector<float> x = with_spectrum(m, n, {8, 4, 2, 1}, 2);
  size_t nb = 0;
  EncodeStats st;
  const std::vector<float> y = roundtrip(*codec("lowrank:rank=4:factors=e4m3"), x, m, n, &nb, &st);
  REQUIRE(int64_t(nb) == 8 + (64 + 96) * 4 + 8 * 4);
  REQUIRE(st.saturated >= 8);  // each column's max maps to 448
  REQUIRE(rel_err(x, y) < 0.06);
  REQUIRE(rel_err(x, y) > 1e-4);
}

// ---------------------------------------------------------------- tensor train

TEST_CASE("balanced factors and the tt codec's modes", "[structured]") {
  REQUIRE(balanced_factors(4096, 3) == std::vector<int64_t>{16, 16, 16});
  REQUIRE(balanced_factors(2048, 2) == std::vector<int64_t>{64, 32});
  REQUIRE(balanced_factors(12, 2) == std::vector<int64_t>{4, 3});
  REQUIRE(balanced_factors(7, 3) == std::vector<int64_t>{7, 1, 1});
  REQUIRE(balanced_factors(1, 2) == std::vector<int64_t>{1, 1});
  REQUIRE(balanced_factors(3072, 2) == std::vector<int64_t>{64, 48});
  REQUIRE(tt_codec_modes(2048, 1024, 3) == std::vector<int64_t>{64, 32, 1024});
  REQUIRE(tt_codec_modes(2048, 1024, 4) == std::vector<int64_t>{64, 32, 32, 32});
  REQUIRE(tt_codec_modes(12, 20, 3) == std::vector<int64_t>{12, 5, 4});
  REQUIRE(tt_codec_modes(1, 64, 2) == std::vector<int64_t>{1, 64});
  for (int64_t rows : {1, 3, 96, 1000})
    for (int64_t cols : {2, 17, 512})
      for (int d : {2, 3, 5}) {
        const auto m = tt_codec_modes(rows, cols, d);
        REQUIRE(int64_t(m.size()) == d);
        int64_t p = 1;
        for (int64_t v : m) p *= v;
        REQUIRE(p == rows * cols);
      }
}

TEST_CASE("TT-SVD recovers a tensor of known TT ranks exactly", "[structured]") {
  // Random cores with ranks (1, 2, 3, 1) on modes (12, 5, 4): the codec's layout for [12, 20].
  TensorTrain t;
  t.modes = {12, 5, 4};
  t.ranks = {1, 2, 3, 1};
  std::mt19937 rng(4);
  std::normal_distribution<double> d;
  for (size_t k = 0; k < 3; ++k) {
    t.cores.emplace_back(size_t(t.ranks[k] * t.modes[k] * t.ranks[k + 1]));
    for (double& v : t.cores.back()) v = d(rng);
  }
  const std::vector<double> full = tt_full(t);
  const std::vector<float> x(full.begin(), full.end());
  // The library finds exactly ranks (2, 3) and reconstructs to float rounding.
  TtOptions o;
  o.eps = 1e-6;
  const TensorTrain got = tt_svd(x.data(), t.modes, o);
  REQUIRE(got.ranks == std::vector<int64_t>{1, 2, 3, 1});
  REQUIRE(unfolding_ranks(x.data(), t.modes, 1e-5) == std::vector<int64_t>{2, 3});
  const std::vector<double> back = tt_full(got);
  std::vector<float> y(back.begin(), back.end());
  REQUIRE(rel_err(x, y) < 1e-6);
  // The codec with f32 cores: exact, and exactly the documented size. eps finds ranks (2, 3);
  // a cap of 3 keeps 3 everywhere (a cap alone does not drop the rounding-level directions).
  size_t nb = 0;
  const std::vector<float> ye = roundtrip(*codec("tt:order=3:eps=1e-6:cores=f32"), x, 12, 20, &nb);
  REQUIRE(rel_err(x, ye) < 1e-6);
  REQUIRE(int64_t(nb) == tt_wire_bytes({12, 5, 4}, {1, 2, 3, 1}, NumFormat::F32));
  REQUIRE(nb == 8 + 3 * 4 + 2 * 4 + (1 * 12 * 2 + 2 * 5 * 3 + 3 * 4 * 1) * 4);
  const std::vector<float> yc = roundtrip(*codec("tt:order=3:rank=3:cores=f32"), x, 12, 20, &nb);
  REQUIRE(rel_err(x, yc) < 1e-6);
  REQUIRE(nb == 8 + 3 * 4 + 2 * 4 + (1 * 12 * 3 + 3 * 5 * 3 + 3 * 4 * 1) * 4);
}

TEST_CASE("TT-SVD meets its error bound eps ||A|| on random tensors", "[structured]") {
  for (uint32_t seed : {1u, 2u}) {
    const std::vector<float> x = gaussian(24 * 60, seed);
    for (const std::vector<int64_t>& modes :
         {std::vector<int64_t>{24, 60}, std::vector<int64_t>{6, 4, 60},
          std::vector<int64_t>{6, 4, 6, 10}}) {
      for (double eps : {0.01, 0.1, 0.3, 0.6}) {
        CAPTURE(seed, modes.size(), eps);
        TtOptions o;
        o.eps = eps;
        const TensorTrain tt = tt_svd(x.data(), modes, o);
        const std::vector<double> y = tt_full(tt);
        double e2 = 0, n2 = 0;
        for (size_t i = 0; i < x.size(); ++i) {
          e2 += (x[i] - y[i]) * (x[i] - y[i]);
          n2 += double(x[i]) * x[i];
        }
        REQUIRE(std::sqrt(e2) <= eps * std::sqrt(n2) * (1 + 1e-9));
        // The tails the SVDs dropped account for the error (equality for TT-SVD: the discarded
        // parts are orthogonal to what is kept).
        REQUIRE(e2 == Approx(tt.discarded2).epsilon(1e-6).margin(1e-9 * n2));
      }
    }
  }
}

TEST_CASE("tt codec: eps variant meets the bound with f32 cores, bf16 close to it",
          "[structured]") {
  const int64_t rows = 64, cols = 96;
  const std::vector<float> x = gaussian(size_t(rows * cols), 21);
  for (double eps : {0.1, 0.3}) {
    CAPTURE(eps);
    const std::vector<float> y =
        roundtrip(*codec(fmt::format("tt:order=3:eps={}:cores=f32", eps)), x, rows, cols);
    REQUIRE(rel_err(x, y) <= eps * (1 + 1e-5));
    const std::vector<float> yb =
        roundtrip(*codec(fmt::format("tt:order=3:eps={}", eps)), x, rows, cols);
    REQUIRE(rel_err(x, yb) <= eps + 0.01);
  }
}

TEST_CASE("MPO permutation is a bijection and its inverse restores W", "[structured]") {
  const int64_t o = 12, in = 18;
  std::vector<float> w(size_t(o * in));
  for (size_t i = 0; i < w.size(); ++i) w[i] = float(i);
  std::vector<int64_t> modes;
  const std::vector<float> t = mpo_permute(w.data(), o, in, 2, &modes);
  REQUIRE(modes == std::vector<int64_t>{4 * 6, 3 * 3});
  std::set<float> seen(t.begin(), t.end());
  REQUIRE(seen.size() == w.size());
  // W[r, c] with r = (r1, r2) on (4, 3), c = (c1, c2) on (6, 3) lands at ((r1 c1), (r2 c2)).
  const int64_t r = 7, c = 10;  // r1 = 2, r2 = 1, c1 = 3, c2 = 1
  REQUIRE(t[size_t((2 * 6 + 3) * 9 + (1 * 3 + 1))] == w[size_t(r * in + c)]);
  const std::vector<double> td(t.begin(), t.end());
  REQUIRE(mpo_unpermute(td.data(), o, in, 2) == w);
}

// ---------------------------------------------------------------- subspace

TEST_CASE("subspace basis is orthonormal, seeded and shared", "[structured]") {
  const auto u = subspace_basis(128, 24, 1337);
  REQUIRE(u == subspace_basis(128, 24, 1337));
  REQUIRE(u != subspace_basis(128, 24, 1338));
  for (int a = 0; a < 24; ++a)
    for (int b = 0; b < 24; ++b) {
      double dot = 0;
      for (int t = 0; t < 128; ++t) dot += double(u[size_t(t * 24 + a)]) * u[size_t(t * 24 + b)];
      REQUIRE(std::fabs(dot - (a == b)) < 1e-6);
    }
}

TEST_CASE("subspace projection of a tensor inside span(U) is exact", "[structured]") {
  const int64_t rows = 40, d = 64, k = 16;
  const auto u = subspace_basis(d, k, 9);
  const std::vector<float> c = gaussian(size_t(rows * k), 5);
  std::vector<float> x(size_t(rows * d), 0.0f);
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t t = 0; t < d; ++t) {
      double acc = 0;
      for (int64_t j = 0; j < k; ++j) acc += double(c[size_t(i * k + j)]) * u[size_t(t * k + j)];
      x[size_t(i * d + t)] = float(acc);
    }
  size_t nb = 0;
  const std::vector<float> y = roundtrip(*codec("subspace:k=16:seed=9:coef=f32"), x, rows, d, &nb);
  REQUIRE(rel_err(x, y) < 2e-6);
  REQUIRE(int64_t(nb) == subspace_wire_bytes(rows, k, NumFormat::F32));
  REQUIRE(nb == 8 + 40 * 16 * 4);
  REQUIRE(energy_in_span(x.data(), rows, d, u, k) == Approx(1.0).epsilon(1e-6));
  // bf16 coefficients: only their rounding (relative 2^-9 per value).
  const std::vector<float> yb = roundtrip(*codec("subspace:k=16:seed=9"), x, rows, d, &nb);
  REQUIRE(rel_err(x, yb) < 3e-3);
  REQUIRE(nb == 8 + 40 * 16 * 2);
  // e4m3 with a per-row scale: its rounding, plus one fp32 scale per row on the wire.
  EncodeStats st;
  const std::vector<float> ye =
      roundtrip(*codec("subspace:k=16:seed=9:coef=e4m3"), x, rows, d, &nb, &st);
  REQUIRE(rel_err(x, ye) < 0.05);
  REQUIRE(nb == 8 + 40 * 16 + 40 * 4);
  REQUIRE(st.saturated >= rows);
  // A different seed is a different subspace: far from exact.
  REQUIRE(rel_err(x, roundtrip(*codec("subspace:k=16:seed=10:coef=f32"), x, rows, d)) > 0.5);
}

TEST_CASE("subspace keeps about k/d of a random tensor's energy; top-k SVD keeps more",
          "[structured]") {
  const int64_t rows = 256, d = 128, k = 32;
  const std::vector<float> x = gaussian(size_t(rows * d), 17);
  const auto u = subspace_basis(d, k, 0);
  const double span = energy_in_span(x.data(), rows, d, u, k);
  // Expected k/d = 0.25; the sd over 256 rows is about sqrt(2 k (d-k) / d^3 / rows) = 0.0024.
  REQUIRE(span == Approx(0.25).margin(0.02));
  const VectorD ev = gram_eigenvalues(x.data(), rows, d);
  const std::vector<double> e(ev.data(), ev.data() + ev.size());
  const double total = frobenius2(x.data(), rows * d);
  const double best = topk_energy(e, k, total);
  REQUIRE(best > span);
  REQUIRE(topk_energy(e, d, total) == Approx(1.0).epsilon(1e-9));
  // The codec's error is the energy it leaves out: rel_l2^2 = 1 - span (f32 coefficients).
  const std::vector<float> y = roundtrip(*codec("subspace:k=32:coef=f32"), x, rows, d);
  REQUIRE(rel_err(x, y) == Approx(std::sqrt(1 - span)).epsilon(1e-5));
}

// ---------------------------------------------------------------- topk / randk

TEST_CASE("topk keeps exactly the K largest magnitudes, ties to the lower index", "[structured]") {
  // bf16-exact values; |-3| ties with the two 3s: K = 2 takes indices 1 and 2.
  const std::vector<float> x = {1, -3, 3, 2, 3, 0.5f, -0.25f, 0, 2, -1};
  for (const char* v : {"topk:frac=0.2", "topk:frac=0.2:index=bitmap"}) {
    CAPTURE(v);
    size_t nb = 0;
    const std::vector<float> y = roundtrip(*codec(v), x, 2, 5, &nb);
    REQUIRE(y == std::vector<float>{0, -3, 3, 0, 0, 0, 0, 0, 0, 0});
  }
  // K = 5: the three 3s, then the 2s at indices 3 and 8.
  REQUIRE(roundtrip(*codec("topk:frac=0.5"), x, 2, 5) ==
          std::vector<float>{0, -3, 3, 2, 3, 0, 0, 0, 2, 0});
  REQUIRE(topk_count(10, 0.5) == 5);
  REQUIRE(topk_count(10, 0.04) == 1);  // at least one
  REQUIRE(topk_count(10, 0.25) == 3);  // floor(2.5 + 0.5)
  REQUIRE(topk_count(1000, 0.1) == 100);
}

TEST_CASE("topk on random data: kept set is the top-K, sizes match the formulas", "[structured]") {
  const int64_t rows = 33, cols = 64, n = rows * cols;
  const std::vector<float> x = gaussian(size_t(n), 31);
  for (double f : {0.01, 0.1, 0.3}) {
    const int64_t k = topk_count(n, f);
    std::vector<float> mags(x.size());
    for (size_t i = 0; i < x.size(); ++i) mags[i] = std::fabs(x[i]);
    std::sort(mags.rbegin(), mags.rend());
    for (bool bitmap : {false, true}) {
      CAPTURE(f, bitmap);
      size_t nb = 0;
      const std::vector<float> y =
          roundtrip(*codec(fmt::format("topk:frac={}{}", f, bitmap ? ":index=bitmap" : "")), x,
                    rows, cols, &nb);
      REQUIRE(int64_t(nb) == topk_wire_bytes(n, k, bitmap));
      REQUIRE(int64_t(nb) == (bitmap ? (n + 7) / 8 + 2 * k : 6 * k));
      int64_t kept = 0;
      for (size_t i = 0; i < x.size(); ++i) {
        if (y[i] == 0) continue;
        ++kept;
        REQUIRE(y[i] == bf16_to_float(float_to_bf16(x[i])));
        REQUIRE(std::fabs(x[i]) >= mags[size_t(k - 1)]);
      }
      REQUIRE(kept == k);
    }
  }
}

TEST_CASE("topk and randk decoders reject malformed buffers", "[structured]") {
  const std::vector<float> x = gaussian(64, 2);
  const auto c = codec("topk:frac=0.25");
  auto w = c->encode(x.data(), 4, 16);
  std::vector<float> y(64);
  REQUIRE_THROWS_AS(c->decode(w.data(), w.size() - 1, 4, 16, y.data()), InputError);
  std::swap(w[32], w[36]);  // first two indices out of order
  std::swap(w[33], w[37]);
  REQUIRE_THROWS_AS(c->decode(w.data(), w.size(), 4, 16, y.data()), InputError);
  const auto b = codec("topk:frac=0.25:index=bitmap");
  auto wb = b->encode(x.data(), 4, 16);
  for (int i = 0; i < 64; ++i)  // one bit too many
    if (!((wb[size_t(i / 8)] >> (i % 8)) & 1)) {
      wb[size_t(i / 8)] = uint8_t(wb[size_t(i / 8)] | (1 << (i % 8)));
      break;
    }
  REQUIRE_THROWS_AS(b->decode(wb.data(), wb.size(), 4, 16, y.data()), InputError);
  const auto r = codec("randk:frac=0.25");
  const auto wr = r->encode(x.data(), 4, 16);
  REQUIRE(int64_t(wr.size()) == randk_wire_bytes(16));
  REQUIRE_THROWS_AS(r->decode(wr.data(), wr.size() + 2, 4, 16, y.data()), InputError);
}

TEST_CASE("randk is seeded and deterministic; unbiased scaling averages to x", "[structured]") {
  const int64_t n = 1000;
  const std::vector<float> x = gaussian(size_t(n), 4);
  const auto c = codec("randk:frac=0.1");
  REQUIRE(c->encode(x.data(), 10, 100) == c->encode(x.data(), 10, 100));
  const std::vector<float> y = roundtrip(*c, x, 10, 100);
  int64_t kept = 0;
  for (int64_t i = 0; i < n; ++i)
    if (y[size_t(i)] != 0) {
      ++kept;
      REQUIRE(y[size_t(i)] == bf16_to_float(float_to_bf16(x[size_t(i)])));
    }
  REQUIRE(kept == 100);
  // Another seed, another set.
  const std::vector<float> y2 = roundtrip(*codec("randk:frac=0.1:seed=1"), x, 10, 100);
  int64_t same = 0;
  for (int64_t i = 0; i < n; ++i) same += (y[size_t(i)] != 0) && (y2[size_t(i)] != 0);
  REQUIRE(same < 40);  // ~10 expected for independent sets
  // Unbiased: each element kept with probability K/N = 0.1, scaled by 10. Over 2000 seeds the
  // per-element mean of x^ / x is 1 with sd sqrt(0.9 * 100 / 2000) = 0.21 (x = 1 everywhere).
  const std::vector<float> ones(size_t(n), 1.0f);
  std::vector<double> mean(size_t(n), 0.0);
  const int seeds = 2000;
  for (int s = 0; s < seeds; ++s) {
    const std::vector<float> ys =
        roundtrip(*codec(fmt::format("randk:frac=0.1:seed={}:unbiased", s)), ones, 10, 100);
    double total = 0;
    for (int64_t i = 0; i < n; ++i) {
      REQUIRE((ys[size_t(i)] == 0.0f || ys[size_t(i)] == 10.0f));
      mean[size_t(i)] += ys[size_t(i)] / seeds;
      total += ys[size_t(i)];
    }
    REQUIRE(total == double(n));  // exactly K values of N/K
  }
  double worst = 0;
  for (double mv : mean) worst = std::max(worst, std::fabs(mv - 1.0));
  REQUIRE(worst < 0.9);  // 4.3 sd over 1000 elements
  double avg_abs = 0;
  for (double mv : mean) avg_abs += std::fabs(mv - 1.0) / double(n);
  REQUIRE(avg_abs < 0.2);  // E|N(0, 0.21)| = 0.17
}

// ---------------------------------------------------------------- shared properties

TEST_CASE("structured codecs: non-finite inputs encode as 0 and are counted", "[structured]") {
  std::vector<float> x = gaussian(32 * 48, 6);
  x[3] = NAN;
  x[100] = INFINITY;
  x[777] = -INFINITY;
  for (const char* v : {"subspace:k=8", "lowrank:rank=4", "lowrank:rank=4:rsvd",
                        "tt:order=3:rank=4", "topk:frac=0.1", "randk:frac=0.1"}) {
    CAPTURE(v);
    EncodeStats st;
    const std::vector<float> y = roundtrip(*codec(v), x, 32, 48, nullptr, &st);
    REQUIRE(st.nonfinite == 3);
    for (float f : y) REQUIRE(std::isfinite(f));
  }
}

TEST_CASE("structured decoders validate nbytes and headers", "[structured]") {
  const std::vector<float> x = gaussian(24 * 32, 3);
  std::vector<float> y(x.size());
  for (const char* v :
       {"subspace:k=8", "subspace:k=8:coef=e4m3", "lowrank:rank=3", "lowrank:rank=3:factors=e4m3",
        "tt:order=3:rank=3", "tt:order=2:cores=f32", "topk:frac=0.1", "randk:frac=0.1"}) {
    CAPTURE(v);
    const auto c = codec(v);
    auto w = c->encode(x.data(), 24, 32);
    c->decode(w.data(), w.size(), 24, 32, y.data());
    REQUIRE_THROWS_AS(c->decode(w.data(), w.size() - 1, 24, 32, y.data()), InputError);
    w.push_back(0);
    REQUIRE_THROWS_AS(c->decode(w.data(), w.size(), 24, 32, y.data()), InputError);
    w.pop_back();
    if (std::string(v).rfind("topk", 0) != 0 && std::string(v).rfind("randk", 0) != 0) {
      w[0] = 'X';
      REQUIRE_THROWS_AS(c->decode(w.data(), w.size(), 24, 32, y.data()), InputError);
    }
  }
  // A lowrank buffer whose header claims another rank no longer matches its size.
  const auto lr = codec("lowrank:rank=3");
  auto w = lr->encode(x.data(), 24, 32);
  w[4] = 4;
  REQUIRE_THROWS_AS(lr->decode(w.data(), w.size(), 24, 32, y.data()), InputError);
  REQUIRE_THROWS_AS(codec("subspace:k=64")->encode(x.data(), 24, 32), InputError);  // k > d
}

TEST_CASE("structured encoders give the same bytes for any thread count", "[structured]") {
  const std::vector<float> x = gaussian(200 * 160, 12);
  const int saved = omp_get_max_threads();
  for (const char* v : {"lowrank:rank=12", "lowrank:energy=0.5:rsvd", "tt:order=3:eps=0.3",
                        "subspace:k=40", "topk:frac=0.05"}) {
    CAPTURE(v);
    const auto c = codec(v);
    omp_set_num_threads(1);
    const auto a = c->encode(x.data(), 200, 160);
    omp_set_num_threads(4);
    const auto b = c->encode(x.data(), 200, 160);
    omp_set_num_threads(saved);
    REQUIRE(a == b);
  }
}
