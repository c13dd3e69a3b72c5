#include "study/metrics.hpp"

#include "core/simd.hpp"

#include <omp.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <limits>
#include <vector>

namespace taco::study {
namespace {

int64_t block_count(int64_t n) {
  return (n + kMetricBlock - 1) / kMetricBlock;
}

// Four lanes: element i of a block feeds lane i % 4 and the lanes are combined in lane order.
// The vector path (no NaN/Inf in x) and the checked scalar path use the same lanes, so they
// agree bit for bit on finite data.
struct Lanes {
  double x2[4] = {}, y2[4] = {}, xy[4] = {}, e2[4] = {}, mae[4] = {}, rn[4] = {},
         rd[4] = {1, 1, 1, 1};
  int64_t nz[4] = {}, uf[4] = {}, rc[4] = {};

  ErrorSums combine(int64_t count) const {
    ErrorSums s;
    for (int l = 0; l < 4; ++l) {
      ErrorSums p;
      p.nonzero = nz[l];
      p.underflow = uf[l];
      p.rel_count = rc[l];
      p.sum_x2 = x2[l];
      p.sum_y2 = y2[l];
      p.sum_xy = xy[l];
      p.sum_e2 = e2[l];
      p.max_abs_err = mae[l];
      p.rel_num = rn[l];
      p.rel_den = rd[l];
      s.combine(p);
    }
    s.count = count;
    return s;
  }
};

ErrorSums block_sums_checked(const float* x, const float* y, int64_t n, double tau) {
  Lanes L;
  int64_t count = 0;
  for (int64_t i = 0; i < n; ++i) {
    if (!std::isfinite(x[i])) continue;
    const int l = int(i % 4);
    const double xv = x[i], yv = y[i], d = xv - yv, ad = std::fabs(d), ax = std::fabs(xv);
    ++count;
    L.x2[l] += xv * xv;
    L.y2[l] += yv * yv;
    L.xy[l] += xv * yv;
    L.e2[l] += d * d;
    L.mae[l] = ad > L.mae[l] ? ad : L.mae[l];
    L.nz[l] += x[i] != 0.0f;
    L.uf[l] += x[i] != 0.0f && y[i] == 0.0f;
    if (ax > tau) {
      ++L.rc[l];
      if (ad * L.rd[l] > L.rn[l] * ax) {
        L.rn[l] = ad;
        L.rd[l] = ax;
      }
    }
  }
  return L.combine(count);
}

TACO_SIMD_CLONES
ErrorSums block_sums(const float* x, const float* y, int64_t n, double tau) {
  using namespace simd;
  // Lanes 0-1 in the *_lo vectors, lanes 2-3 in *_hi.
  d2 x2[2] = {}, y2[2] = {}, xy[2] = {}, e2[2] = {}, mae[2] = {}, rn[2] = {};
  d2 rd[2] = {splat(1.0), splat(1.0)};
  l2 rc[2] = {};
  i4 nz = {}, uf = {};
  const d2 vtau = splat(tau);
  const f4 zero = {};
  auto half = [&](int h, d2 xd, d2 yd) {
    const d2 d = xd - yd;
    x2[h] += xd * xd;
    y2[h] += yd * yd;
    xy[h] += xd * yd;
    e2[h] += d * d;
    const d2 ad = abs(d), ax = abs(xd);
    mae[h] = select(ad > mae[h], ad, mae[h]);  // a NaN error compares false: not a maximum
    const l2 in = ax > vtau;
    rc[h] -= in;
    // ad/ax > rn/rd without dividing (both denominators are positive).
    const l2 better = in & (ad * rd[h] > rn[h] * ax);
    rn[h] = select(better, ad, rn[h]);
    rd[h] = select(better, ax, rd[h]);
  };
  auto step = [&](f4 xf, f4 yf) {
    half(0, widen_lo(xf), widen_lo(yf));
    half(1, widen_hi(xf), widen_hi(yf));
    const i4 nonzero = xf != zero;
    nz -= nonzero;
    uf -= nonzero & (yf == zero);
  };
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) step(load<f4>(x + i), load<f4>(y + i));
  // The tail is zero-padded: zeros add nothing to any sum or count.
  if (i < n) step(load_partial(x + i, n - i), load_partial(y + i, n - i));

  Lanes L;
  for (int l = 0; l < 4; ++l) {
    const int h = l / 2, k = l % 2;
    L.x2[l] = x2[h][k];
    L.y2[l] = y2[h][k];
    L.xy[l] = xy[h][k];
    L.e2[l] = e2[h][k];
    L.mae[l] = mae[h][k];
    L.rn[l] = rn[h][k];
    L.rd[l] = rd[h][k];
    L.rc[l] = rc[h][k];
    L.nz[l] = nz[l];
    L.uf[l] = uf[l];
  }
  return L.combine(n);
}

}  // namespace

void ErrorSums::combine(const ErrorSums& o) {
  count += o.count;
  nonzero += o.nonzero;
  underflow += o.underflow;
  rel_count += o.rel_count;
  sum_x2 += o.sum_x2;
  sum_y2 += o.sum_y2;
  sum_xy += o.sum_xy;
  sum_e2 += o.sum_e2;
  max_abs_err = std::max(max_abs_err, o.max_abs_err);
  if (o.rel_num * rel_den > rel_num * o.rel_den) {
    rel_num = o.rel_num;
    rel_den = o.rel_den;
  }
}

InputScan scan_input(const float* x, int64_t n, int threads) {
  const int64_t nb = block_count(n);
  std::vector<InputScan> part(static_cast<size_t>(nb));
#pragma omp parallel for schedule(static) \
    num_threads(std::max(1, threads)) if (threads > 1 && nb > 1)
  for (int64_t b = 0; b < nb; ++b) {
    const int64_t lo = b * kMetricBlock, hi = std::min(n, lo + kMetricBlock);
    InputScan p;
    using namespace simd;
    const f4 fmax = splat(FLT_MAX), inf = splat(INFINITY);
    f4 vm = {};
    i4 nans = {}, infs = {};
    auto step = [&](f4 v) {
      const f4 a = abs(v);
      nans -= v != v;
      infs -= a == inf;
      vm = select((a <= fmax) & (a > vm), a, vm);
    };
    int64_t i = lo;
    for (; i + 4 <= hi; i += 4) step(load<f4>(x + i));
    if (i < hi) step(load_partial(x + i, hi - i));
    float m = 0;
    for (int l = 0; l < 4; ++l) {
      p.nan_count += nans[l];
      p.inf_count += infs[l];
      m = std::max(m, vm[l]);
    }
    p.absmax = m;
    part[size_t(b)] = p;
  }
  InputScan s;
  s.numel = n;
  for (const InputScan& p : part) {
    s.nan_count += p.nan_count;
    s.inf_count += p.inf_count;
    s.absmax = std::max(s.absmax, p.absmax);
  }
  return s;
}

ErrorSums error_sums(const float* x, const float* xhat, int64_t n, double tau, bool skip_nonfinite,
                     int threads) {
  const int64_t nb = block_count(n);
  std::vector<ErrorSums> part(static_cast<size_t>(nb));
#pragma omp parallel for schedule(static) \
    num_threads(std::max(1, threads)) if (threads > 1 && nb > 1)
  for (int64_t b = 0; b < nb; ++b) {
    const int64_t lo = b * kMetricBlock, len = std::min(n, lo + kMetricBlock) - lo;
    part[size_t(b)] = skip_nonfinite ? block_sums_checked(x + lo, xhat + lo, len, tau)
                                     : block_sums(x + lo, xhat + lo, len, tau);
  }
  ErrorSums s;
  for (const ErrorSums& p : part) s.combine(p);
  return s;
}

ErrorMetrics finish_metrics(const ErrorSums& s) {
  ErrorMetrics m;
  const double inf = std::numeric_limits<double>::infinity();
  if (s.count == 0) return m;
  m.mse = s.sum_e2 / double(s.count);
  m.max_abs_err = s.max_abs_err;
  if (s.sum_x2 > 0) {
    m.rel_l2 = std::sqrt(s.sum_e2 / s.sum_x2);
    m.snr_db = s.sum_e2 > 0 ? 10.0 * std::log10(s.sum_x2 / s.sum_e2) : inf;
  } else if (s.sum_e2 == 0) {
    m.rel_l2 = 0.0;  // x = x̂ = 0: nothing was lost
  }
  if (s.sum_x2 > 0 && s.sum_y2 > 0) {
    m.cosine = s.sum_xy / std::sqrt(s.sum_x2 * s.sum_y2);
  } else {
    m.cosine = (s.sum_x2 == 0 && s.sum_y2 == 0) ? 1.0 : 0.0;
  }
  const double denom = s.sum_x2 + s.sum_y2;
  m.calc_diff = denom > 0 ? 1.0 - 2.0 * s.sum_xy / denom : 0.0;
  if (s.nonzero > 0) m.underflow_frac = double(s.underflow) / double(s.nonzero);
  if (s.rel_count > 0) m.max_rel_err = s.rel_num / s.rel_den;
  return m;
}

}  // namespace taco::study
