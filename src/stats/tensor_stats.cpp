#include "stats/tensor_stats.hpp"

#include "core/error.hpp"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <limits>

namespace taco {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

// Per-tensor scaling maps absmax to fmt_max, so |x| lands below `limit` iff
// |x| * fmt_max / limit < absmax. fmt_max / limit is a power of two times 7, so the product
// with a float |x| is exact in double and the comparison has no rounding at all.
constexpr double kE4M3BelowNormal = 448.0 * 64.0;          // 448 / 2^-6
constexpr double kE4M3BelowSubnormal = 448.0 * 512.0;      // 448 / 2^-9
constexpr double kE5M2BelowNormal = 57344.0 * 16384.0;     // 57344 / 2^-14
constexpr double kE5M2BelowSubnormal = 57344.0 * 65536.0;  // 57344 / 2^-16

// Central moments of a set of values (count, mean, and sums of powers of deviations).
struct Moments {
  int64_t n = 0;
  double mean = 0, m2 = 0, m3 = 0, m4 = 0;
};

// Pebay (2008) pairwise update: exact in real arithmetic, stable in floating point.
void merge(Moments& a, const Moments& b) {
  if (b.n == 0) return;
  if (a.n == 0) {
    a = b;
    return;
  }
  const double na = double(a.n), nb = double(b.n), n = na + nb;
  const double d = b.mean - a.mean, dn = d / n;
  const double m2 = a.m2 + b.m2 + d * dn * na * nb;
  const double m3 =
      a.m3 + b.m3 + d * dn * dn * na * nb * (na - nb) + 3.0 * dn * (na * b.m2 - nb * a.m2);
  const double m4 = a.m4 + b.m4 + d * dn * dn * dn * na * nb * (na * na - na * nb + nb * nb) +
                    6.0 * dn * dn * (na * na * b.m2 + nb * nb * a.m2) +
                    4.0 * dn * (na * b.m3 - nb * a.m3);
  a.n += b.n;
  a.mean += dn * nb;
  a.m2 = m2;
  a.m3 = m3;
  a.m4 = m4;
}

struct RowPartial {
  Moments mom;
  int64_t zeros = 0, nans = 0, infs = 0;
  double sumsq = 0;
  float absmax = 0;
  float min_nonzero = std::numeric_limits<float>::infinity();
  double block_ratio = 0;  // max over blocks with a nonzero of absmax / min nonzero; 0: none
};

// Everything about one row that needs only that row.
RowPartial scan_row(const float* x, int64_t cols, int64_t block) {
  RowPartial r;
  double sum = 0;
  for (int64_t b0 = 0; b0 < cols; b0 += block) {
    const int64_t b1 = std::min(cols, b0 + block);
    float bmax = 0, bmin = std::numeric_limits<float>::infinity();
    for (int64_t c = b0; c < b1; ++c) {
      const float v = x[c];
      if (std::isnan(v)) {
        ++r.nans;
        continue;
      }
      if (std::isinf(v)) {
        ++r.infs;
        continue;
      }
      const float a = std::fabs(v);
      ++r.mom.n;
      sum += double(v);
      r.sumsq += double(v) * double(v);
      if (a == 0) {
        ++r.zeros;
        continue;
      }
      bmax = std::max(bmax, a);
      bmin = std::min(bmin, a);
    }
    if (bmax > 0) {
      r.block_ratio = std::max(r.block_ratio, double(bmax) / double(bmin));
      r.absmax = std::max(r.absmax, bmax);
      r.min_nonzero = std::min(r.min_nonzero, bmin);
    }
  }
  if (r.mom.n == 0) return r;
  // Second sweep over the (cached) row: deviations from the row mean, no cancellation.
  r.mom.mean = sum / double(r.mom.n);
  for (int64_t c = 0; c < cols; ++c) {
    if (!std::isfinite(x[c])) continue;
    const double d = double(x[c]) - r.mom.mean, d2 = d * d;
    r.mom.m2 += d2;
    r.mom.m3 += d2 * d;
    r.mom.m4 += d2 * d2;
  }
  return r;
}

// Rows are combined in fixed blocks of this many (in row order within a block, then blocks in
// order): the same rounding for any thread count, and memory for one partial per block, not
// per row (a [n, 1] tensor would otherwise need 80 bytes per element).
constexpr int64_t kRowBlock = 256;

// Tensors below this many elements are scanned on one thread (compute_stats).
constexpr int64_t kParallelMinElements = int64_t(1) << 16;

void combine(RowPartial& into, const RowPartial& p) {
  merge(into.mom, p.mom);
  into.sumsq += p.sumsq;
  into.zeros += p.zeros;
  into.nans += p.nans;
  into.infs += p.infs;
  into.absmax = std::max(into.absmax, p.absmax);
  into.min_nonzero = std::min(into.min_nonzero, p.min_nonzero);
  into.block_ratio = std::max(into.block_ratio, p.block_ratio);
}

// Per-column absmax of finite values (max is order-free). Threads split the columns, so the
// only memory is the result: per-thread copies of it would cost threads x cols floats, which
// for a 1-D tensor is threads times the tensor.
std::vector<float> column_absmax(const float* x, int64_t rows, int64_t cols, int nt) {
  std::vector<float> colmax(size_t(cols), 0.0f);
  constexpr int64_t kColBlock = 4096;
  const int64_t nblocks = (cols + kColBlock - 1) / kColBlock;
#pragma omp parallel for schedule(static) num_threads(nt)
  for (int64_t b = 0; b < nblocks; ++b) {
    const int64_t c0 = b * kColBlock, c1 = std::min(cols, c0 + kColBlock);
    float* m = colmax.data();
    for (int64_t r = 0; r < rows; ++r) {
      const float* row = x + r * cols;
      for (int64_t c = c0; c < c1; ++c) {
        const float a = std::fabs(row[c]);
        if (a > m[c] && a != std::numeric_limits<float>::infinity())
          m[c] = a;  // NaN compares false
      }
    }
  }
  return colmax;
}

// Median of v, reordering v (nth_element); mean of the two middle values for an even count.
double median_in_place(std::vector<float>& v) {
  if (v.empty()) return kNaN;
  const size_t mid = v.size() / 2;
  std::nth_element(v.begin(), v.begin() + long(mid), v.end());
  const double hi = v[mid];
  if (v.size() % 2 == 1) return hi;
  const double lo = *std::max_element(v.begin(), v.begin() + long(mid));
  return 0.5 * (lo + hi);
}

double spread_of(double mx, double med) {
  if (med > 0) return mx / med;
  return mx > 0 ? kInf : kNaN;
}

// The k largest values, larger first, ties by lower index; memory O(k), not O(n).
std::vector<IndexedAbsmax> top_k_of(const std::vector<float>& v, int k) {
  const size_t kk = std::min(v.size(), size_t(std::max(k, 0)));
  // "a ranks before b": larger value, then lower index.
  const auto before = [](const IndexedAbsmax& a, const IndexedAbsmax& b) {
    return a.absmax != b.absmax ? a.absmax > b.absmax : a.index < b.index;
  };
  std::vector<IndexedAbsmax> heap;  // a heap whose top is the worst of the best kk so far
  heap.reserve(kk);
  for (size_t i = 0; i < v.size() && kk > 0; ++i) {
    const IndexedAbsmax e{int64_t(i), double(v[i])};
    if (heap.size() < kk) {
      heap.push_back(e);
      std::push_heap(heap.begin(), heap.end(), before);
    } else if (before(e, heap.front())) {
      std::pop_heap(heap.begin(), heap.end(), before);
      heap.back() = e;
      std::push_heap(heap.begin(), heap.end(), before);
    }
  }
  std::sort(heap.begin(), heap.end(), before);
  return heap;
}

double frac(int64_t num, int64_t den) {
  return den > 0 ? double(num) / double(den) : 0.0;
}

}  // namespace

TensorStats compute_stats(const float* x, int64_t rows, int64_t cols, const StatsOptions& opts) {
  TACO_REQUIRE_INPUT(rows >= 0 && cols >= 0, "stats: negative shape [{}, {}]", rows, cols);
  TACO_REQUIRE_INPUT(opts.block_size > 0, "stats: block size must be positive, got {}",
                     opts.block_size);
  TACO_REQUIRE_INPUT(opts.top_k >= 0, "stats: top-k must be >= 0, got {}", opts.top_k);
  TensorStats s;
  s.rows = rows;
  s.cols = cols;
  s.numel = rows * cols;
  s.block_size = opts.block_size;
  // A parallel region costs more than a small tensor's work, and on a busy machine a team that
  // waits for a descheduled thread costs milliseconds: small tensors take one thread (the
  // results do not depend on the thread count).
  const int nt = s.numel < kParallelMinElements ? 1
                 : opts.threads > 0             ? opts.threads
                                                : omp_get_max_threads();

  // Pass 1: per-row partials combined in fixed row blocks, and per-row absmax; then the column
  // maxima.
  const int64_t nblocks = (rows + kRowBlock - 1) / kRowBlock;
  std::vector<RowPartial> blocks(static_cast<size_t>(nblocks));
  std::vector<float> row_absmax(static_cast<size_t>(rows));
#pragma omp parallel for schedule(static) num_threads(nt)
  for (int64_t b = 0; b < nblocks; ++b) {
    RowPartial acc;
    for (int64_t r = b * kRowBlock; r < std::min(rows, (b + 1) * kRowBlock); ++r) {
      const RowPartial p = scan_row(x + r * cols, cols, opts.block_size);
      row_absmax[size_t(r)] = p.absmax;
      combine(acc, p);
    }
    blocks[size_t(b)] = acc;
  }
  RowPartial all;
  for (const RowPartial& b : blocks) combine(all, b);
  const Moments& mom = all.mom;
  const double sumsq = all.sumsq, block_ratio = all.block_ratio;
  const float absmax = all.absmax, min_nonzero = all.min_nonzero;
  s.zero_count = all.zeros;
  s.nan_count = all.nans;
  s.inf_count = all.infs;
  std::vector<float> col_absmax = column_absmax(x, rows, cols, nt);

  s.finite_count = mom.n;
  s.zero_frac = frac(s.zero_count, s.finite_count);
  s.absmax = double(absmax);
  const bool any_nonzero = absmax > 0;
  s.min_nonzero_abs = any_nonzero ? double(min_nonzero) : 0.0;
  if (mom.n > 0) {
    const double n = double(mom.n);
    s.mean = mom.mean;
    s.std = std::sqrt(mom.m2 / n);
    s.rms = std::sqrt(sumsq / n);
    s.crest_factor = s.rms > 0 ? s.absmax / s.rms : kNaN;
    s.kurtosis = mom.m2 > 0 ? n * mom.m4 / (mom.m2 * mom.m2) : kNaN;
  } else {
    s.mean = s.std = s.rms = s.crest_factor = s.kurtosis = kNaN;
  }
  s.dynamic_range_log2 = any_nonzero ? std::log2(s.absmax / s.min_nonzero_abs) : 0.0;
  s.max_blockwise_dynamic_range = block_ratio > 0 ? std::log2(block_ratio) : 0.0;

  // Pass 2: FP8 range counts need the global absmax. Integer sums: order-free.
  int64_t e4u = 0, e4f = 0, e5u = 0, e5f = 0;
  if (any_nonzero) {
    const int64_t n = s.numel;
#pragma omp parallel for schedule(static) num_threads(nt) reduction(+ : e4u, e4f, e5u, e5f)
    for (int64_t i = 0; i < n; ++i) {
      const float v = x[i];
      if (!std::isfinite(v) || v == 0) continue;
      const double a = std::fabs(double(v));
      e4u += a * kE4M3BelowNormal < s.absmax;
      e4f += a * kE4M3BelowSubnormal < s.absmax;
      e5u += a * kE5M2BelowNormal < s.absmax;
      e5f += a * kE5M2BelowSubnormal < s.absmax;
    }
  }
  const int64_t nonzero = s.finite_count - s.zero_count;
  s.e4m3_underflow_frac = frac(e4u, nonzero);
  s.e4m3_flush_frac = frac(e4f, nonzero);
  s.e5m2_underflow_frac = frac(e5u, nonzero);
  s.e5m2_flush_frac = frac(e5f, nonzero);

  // Top-k and maxima first: the medians reorder the vectors.
  s.top_tokens = top_k_of(row_absmax, opts.top_k);
  s.top_channels = top_k_of(col_absmax, opts.top_k);
  if (rows > 0 && cols > 0) {
    s.row_absmax_max = *std::max_element(row_absmax.begin(), row_absmax.end());
    s.row_absmax_median = median_in_place(row_absmax);
    s.row_absmax_spread = spread_of(s.row_absmax_max, s.row_absmax_median);
    s.col_absmax_max = *std::max_element(col_absmax.begin(), col_absmax.end());
    s.col_absmax_median = median_in_place(col_absmax);
    s.col_absmax_spread = spread_of(s.col_absmax_max, s.col_absmax_median);
  } else {
    s.row_absmax_median = s.row_absmax_spread = s.col_absmax_median = s.col_absmax_spread = kNaN;
  }
  return s;
}

TensorStats compute_stats(const Tensor& t, const StatsOptions& opts) {
  TACO_REQUIRE_INPUT(int64_t(t.values.size()) == t.numel(), "{}: {} values for shape {}", t.name,
                     t.values.size(), shape_string(t.shape));
  return compute_stats(t.values.data(), t.rows(), t.cols(), opts);
}

nlohmann::json to_json(const TensorStats& s) {
  // Undefined (NaN) and infinite values become null: JSON has no number for them.
  auto num = [](double v) {
    return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(nullptr);
  };
  auto tops = [](const std::vector<IndexedAbsmax>& v) {
    nlohmann::json a = nlohmann::json::array();
    for (const auto& e : v) a.push_back({{"index", e.index}, {"absmax", e.absmax}});
    return a;
  };
  return {{"numel", s.numel},
          {"rows", s.rows},
          {"cols", s.cols},
          {"finite_count", s.finite_count},
          {"nan_count", s.nan_count},
          {"inf_count", s.inf_count},
          {"zero_count", s.zero_count},
          {"zero_frac", num(s.zero_frac)},
          {"mean", num(s.mean)},
          {"std", num(s.std)},
          {"rms", num(s.rms)},
          {"absmax", num(s.absmax)},
          {"min_nonzero_abs", num(s.min_nonzero_abs)},
          {"crest_factor", num(s.crest_factor)},
          {"kurtosis", num(s.kurtosis)},
          {"e4m3_underflow_frac", num(s.e4m3_underflow_frac)},
          {"e4m3_flush_frac", num(s.e4m3_flush_frac)},
          {"e5m2_underflow_frac", num(s.e5m2_underflow_frac)},
          {"e5m2_flush_frac", num(s.e5m2_flush_frac)},
          {"dynamic_range_log2", num(s.dynamic_range_log2)},
          {"block_size", s.block_size},
          {"max_blockwise_dynamic_range", num(s.max_blockwise_dynamic_range)},
          {"row_absmax_max", num(s.row_absmax_max)},
          {"row_absmax_median", num(s.row_absmax_median)},
          {"row_absmax_spread", num(s.row_absmax_spread)},
          {"col_absmax_max", num(s.col_absmax_max)},
          {"col_absmax_median", num(s.col_absmax_median)},
          {"col_absmax_spread", num(s.col_absmax_spread)},
          {"top_tokens", tops(s.top_tokens)},
          {"top_channels", tops(s.top_channels)}};
}

}  // namespace taco
