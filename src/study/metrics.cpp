#include "study/metrics.hpp"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

namespace taco::study {
namespace {

int64_t block_count(int64_t n) { return (n + kMetricBlock - 1) / kMetricBlock; }

// Lanes: element i of a block feeds lane i % kLanes, and lanes are combined in lane order, so
// the compiler can keep each lane in a vector register without reassociating anything.
constexpr int kLanes = 8;

template <bool kCheckFinite>
ErrorSums block_sums(const float* x, const float* y, int64_t n, double tau) {
  double x2[kLanes] = {}, y2[kLanes] = {}, xy[kLanes] = {}, e2[kLanes] = {}, mae[kLanes] = {};
  double rn[kLanes] = {}, rd[kLanes] = {1, 1, 1, 1, 1, 1, 1, 1};
  int64_t cnt[kLanes] = {}, nz[kLanes] = {}, uf[kLanes] = {}, rc[kLanes] = {};
  auto step = [&](int l, float xf, float yf) {
    if constexpr (kCheckFinite) {
      if (!std::isfinite(xf)) return;
    }
    const double xv = xf, yv = yf, d = xv - yv;
    const double ax = std::fabs(xv), ad = std::fabs(d);
    x2[l] += xv * xv;
    y2[l] += yv * yv;
    xy[l] += xv * yv;
    e2[l] += d * d;
    mae[l] = ad > mae[l] ? ad : mae[l];
    cnt[l] += 1;
    nz[l] += xf != 0.0f;
    uf[l] += (xf != 0.0f) & (yf == 0.0f);
    const bool in = ax > tau;
    rc[l] += in;
    // ad/ax > rn/rd without dividing (both denominators are positive).
    const bool better = in & (ad * rd[l] > rn[l] * ax);
    rn[l] = better ? ad : rn[l];
    rd[l] = better ? ax : rd[l];
  };
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int l = 0; l < kLanes; ++l) step(l, x[i + l], y[i + l]);
  for (int l = 0; i < n; ++i, ++l) step(l, x[i], y[i]);

  ErrorSums s;
  for (int l = 0; l < kLanes; ++l) {
    ErrorSums p;
    p.count = cnt[l];
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
  return s;
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
#pragma omp parallel for schedule(static) num_threads(std::max(1, threads)) if (threads > 1 && nb > 1)
  for (int64_t b = 0; b < nb; ++b) {
    const int64_t lo = b * kMetricBlock, hi = std::min(n, lo + kMetricBlock);
    InputScan p;
    float m = 0;
    for (int64_t i = lo; i < hi; ++i) {
      const float v = x[i];
      if (std::isnan(v)) {
        ++p.nan_count;
      } else if (std::isinf(v)) {
        ++p.inf_count;
      } else {
        const float a = std::fabs(v);
        m = a > m ? a : m;
      }
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
#pragma omp parallel for schedule(static) num_threads(std::max(1, threads)) if (threads > 1 && nb > 1)
  for (int64_t b = 0; b < nb; ++b) {
    const int64_t lo = b * kMetricBlock, len = std::min(n, lo + kMetricBlock) - lo;
    part[size_t(b)] = skip_nonfinite ? block_sums<true>(x + lo, xhat + lo, len, tau)
                                     : block_sums<false>(x + lo, xhat + lo, len, tau);
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
