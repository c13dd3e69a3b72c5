#include "codecs/structured/tt.hpp"

#include "core/error.hpp"
#include "synth/det_math.hpp"

#include <algorithm>
#include <cmath>

namespace taco::structured {

namespace {

using RowMajorD = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

std::vector<int64_t> prime_factors_desc(int64_t n) {
  std::vector<int64_t> p;
  for (int64_t d = 2; d * d <= n; ++d)
    while (n % d == 0) {
      p.push_back(d);
      n /= d;
    }
  if (n > 1) p.push_back(n);
  std::sort(p.rbegin(), p.rend());
  return p;
}

int64_t product(const std::vector<int64_t>& v, size_t from, size_t to) {
  int64_t p = 1;
  for (size_t k = from; k < to; ++k) p *= v[k];
  return p;
}

}  // namespace

std::vector<int64_t> balanced_factors(int64_t n, int p) {
  TACO_ASSERT(n >= 1 && p >= 1, "balanced_factors({}, {})", n, p);
  std::vector<int64_t> bins(size_t(p), 1);
  for (int64_t f : prime_factors_desc(n)) {
    const auto it = std::min_element(bins.begin(), bins.end());
    *it *= f;
  }
  std::sort(bins.rbegin(), bins.rend());
  return bins;
}

std::vector<int64_t> tt_codec_modes(int64_t rows, int64_t cols, int order) {
  TACO_ASSERT(order >= 2 && rows >= 1 && cols >= 1, "tt_codec_modes({}, {}, {})", rows, cols,
              order);
  const double lr = detmath::log(double(rows)), lc = detmath::log(double(cols));
  int a = 1;
  if (lr + lc > 0) a = int(std::floor(double(order) * lr / (lr + lc) + 0.5));
  a = std::clamp(a, 1, order - 1);
  std::vector<int64_t> modes = balanced_factors(rows, a);
  const std::vector<int64_t> c = balanced_factors(cols, order - a);
  modes.insert(modes.end(), c.begin(), c.end());
  return modes;
}

int64_t TensorTrain::parameters() const {
  int64_t p = 0;
  for (size_t k = 0; k < modes.size(); ++k) p += ranks[k] * modes[k] * ranks[k + 1];
  return p;
}

TensorTrain tt_svd(const float* a, const std::vector<int64_t>& modes, const TtOptions& opt) {
  const size_t d = modes.size();
  TACO_ASSERT(d >= 2, "tt_svd needs order >= 2, got {}", d);
  const int64_t numel = product(modes, 0, d);
  TensorTrain tt;
  tt.modes = modes;
  tt.ranks.assign(d + 1, 1);
  tt.cores.resize(d);
  const double norm2 = frobenius2(a, numel);
  const double delta2 = opt.eps > 0 ? opt.eps * opt.eps * norm2 / double(d - 1) : 0.0;

  SerialEigen serial;
  std::vector<double> c(a, a + numel);
  int64_t r_prev = 1;
  for (size_t k = 0; k + 1 < d; ++k) {
    const int64_t p = r_prev * modes[k];
    const int64_t q = int64_t(c.size()) / p;
    const Eigen::Map<const RowMajorD> m(c.data(), Eigen::Index(p), Eigen::Index(q));
    Eigen::BDCSVD<MatrixD> svd(MatrixD(m), Eigen::ComputeThinU | Eigen::ComputeThinV);
    const VectorD& s = svd.singularValues();
    int64_t r = int64_t(s.size());
    if (opt.eps > 0) {
      // Smallest r whose tail sum_{i >= r} s_i^2 stays within delta^2.
      double tail = 0;
      r = int64_t(s.size());
      while (r > 0 && tail + s[r - 1] * s[r - 1] <= delta2) {
        tail += s[r - 1] * s[r - 1];
        --r;
      }
    }
    if (opt.max_rank > 0) r = std::min(r, opt.max_rank);
    r = std::max<int64_t>(r, 1);
    for (int64_t i = r; i < s.size(); ++i) tt.discarded2 += s[i] * s[i];
    // G_k = U[:, :r] as (r_prev, n_k, r) row-major = the p x r matrix row-major.
    std::vector<double>& g = tt.cores[k];
    g.resize(size_t(p * r));
    const MatrixD& u = svd.matrixU();
    for (int64_t i = 0; i < p; ++i)
      for (int64_t j = 0; j < r; ++j) g[size_t(i * r + j)] = u(i, j);
    // C = diag(s[:r]) V[:, :r]^T, r x q row-major.
    const MatrixD& v = svd.matrixV();
    std::vector<double> next(size_t(r * q));
    for (int64_t i = 0; i < r; ++i)
      for (int64_t j = 0; j < q; ++j) next[size_t(i * q + j)] = s[i] * v(j, i);
    c.swap(next);
    tt.ranks[k + 1] = r;
    r_prev = r;
  }
  tt.cores[d - 1] = std::move(c);
  return tt;
}

std::vector<double> tt_full(const TensorTrain& tt) {
  const size_t d = tt.modes.size();
  TACO_ASSERT(d >= 2 && tt.cores.size() == d && tt.ranks.size() == d + 1,
              "tt_full: malformed train");
  SerialEigen serial;
  // L: (n_1 ... n_k) x r_k, row-major.
  std::vector<double> l = tt.cores[0];
  int64_t prefix = tt.modes[0];
  for (size_t k = 1; k < d; ++k) {
    const int64_t rk = tt.ranks[k], nk = tt.modes[k], rn = tt.ranks[k + 1];
    TACO_ASSERT(int64_t(tt.cores[k].size()) == rk * nk * rn, "tt_full: core {} has {} values", k,
                tt.cores[k].size());
    const Eigen::Map<const RowMajorD> lm(l.data(), Eigen::Index(prefix), Eigen::Index(rk));
    const Eigen::Map<const RowMajorD> gm(tt.cores[k].data(), Eigen::Index(rk),
                                         Eigen::Index(nk * rn));
    std::vector<double> out(size_t(prefix * nk * rn));
    Eigen::Map<RowMajorD> om(out.data(), Eigen::Index(prefix), Eigen::Index(nk * rn));
    om.noalias() = lm * gm;
    l.swap(out);
    prefix *= nk;
  }
  return l;
}

std::vector<int64_t> unfolding_ranks(const float* a, const std::vector<int64_t>& modes,
                                     double rtol) {
  const size_t d = modes.size();
  const int64_t numel = product(modes, 0, d);
  std::vector<int64_t> ranks;
  for (size_t k = 1; k < d; ++k) {
    const int64_t p = product(modes, 0, k), q = numel / p;
    const VectorD ev = gram_eigenvalues(a, p, q);
    const double smax = ev.size() ? std::sqrt(ev[0]) : 0.0;
    int64_t r = 0;
    for (Eigen::Index i = 0; i < ev.size(); ++i)
      if (std::sqrt(ev[i]) > rtol * smax) ++r;
    ranks.push_back(r);
  }
  return ranks;
}

namespace {
// Offsets of W[r, c] (row-major O x I) in the MPO layout, for every (r, c).
std::vector<int64_t> mpo_offsets(int64_t o, int64_t i, int order) {
  const std::vector<int64_t> of = balanced_factors(o, order), inf = balanced_factors(i, order);
  const size_t d = size_t(order);
  // Stride of o-digit k and i-digit k in the interleaved (o_1 i_1 ... o_D i_D) layout.
  std::vector<int64_t> so(d), si(d);
  int64_t stride = 1;
  for (size_t k = d; k-- > 0;) {
    si[k] = stride;
    stride *= inf[k];
    so[k] = stride;
    stride *= of[k];
  }
  std::vector<int64_t> row_off(static_cast<size_t>(o)), col_off(static_cast<size_t>(i));
  for (int64_t r = 0; r < o; ++r) {
    int64_t rem = r, off = 0;
    for (size_t k = d; k-- > 0;) {
      off += (rem % of[k]) * so[k];
      rem /= of[k];
    }
    row_off[size_t(r)] = off;
  }
  for (int64_t c = 0; c < i; ++c) {
    int64_t rem = c, off = 0;
    for (size_t k = d; k-- > 0;) {
      off += (rem % inf[k]) * si[k];
      rem /= inf[k];
    }
    col_off[size_t(c)] = off;
  }
  std::vector<int64_t> offs(size_t(o * i));
  for (int64_t r = 0; r < o; ++r)
    for (int64_t c = 0; c < i; ++c)
      offs[size_t(r * i + c)] = row_off[size_t(r)] + col_off[size_t(c)];
  return offs;
}
}  // namespace

std::vector<float> mpo_permute(const float* w, int64_t o, int64_t i, int order,
                               std::vector<int64_t>* modes) {
  const std::vector<int64_t> offs = mpo_offsets(o, i, order);
  std::vector<float> t(offs.size());
  for (size_t n = 0; n < offs.size(); ++n) t[size_t(offs[n])] = w[n];
  if (modes) {
    const std::vector<int64_t> of = balanced_factors(o, order), inf = balanced_factors(i, order);
    modes->clear();
    for (int k = 0; k < order; ++k) modes->push_back(of[size_t(k)] * inf[size_t(k)]);
  }
  return t;
}

std::vector<float> mpo_unpermute(const double* t, int64_t o, int64_t i, int order) {
  const std::vector<int64_t> offs = mpo_offsets(o, i, order);
  std::vector<float> w(offs.size());
  for (size_t n = 0; n < offs.size(); ++n) w[n] = float(t[offs[n]]);
  return w;
}

}  // namespace taco::structured
