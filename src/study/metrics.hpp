#pragma once
// Error metrics of a reconstruction x̂ against the original x (methods.md §12), computed in
// double in one fused pass. The pass splits the input into fixed blocks of kMetricBlock
// elements and combines the block partials in block order, so the result does not depend on
// the number of threads.
//
// Non-finite inputs (NaN, ±Inf) are counted (nan_count, inf_count) and left out of every sum:
// codecs map them to 0 (the TACO policy), and one NaN would otherwise hide every other number.
#include <cstdint>
#include <optional>

namespace taco::study {

inline constexpr int64_t kMetricBlock = int64_t(1) << 15;

// What a cheap first pass over x finds (before any codec runs).
struct InputScan {
  int64_t numel = 0;
  int64_t nan_count = 0;
  int64_t inf_count = 0;
  double absmax = 0;  // over finite elements
  bool all_finite() const { return nan_count == 0 && inf_count == 0; }
};

InputScan scan_input(const float* x, int64_t n, int threads);

// Raw sums over the finite elements of x. Combinable (combine() in a fixed order).
struct ErrorSums {
  int64_t count = 0;      // finite x
  int64_t nonzero = 0;    // finite x != 0
  int64_t underflow = 0;  // finite x != 0 and x̂ == 0
  int64_t rel_count = 0;  // |x| > tau
  double sum_x2 = 0, sum_y2 = 0, sum_xy = 0, sum_e2 = 0;
  double max_abs_err = 0;
  // max |x - x̂| / |x| over |x| > tau, kept as a fraction (num / den) so the pass needs no division.
  double rel_num = 0, rel_den = 1;

  void combine(const ErrorSums& o);
};

// One fused pass. tau: threshold for max_rel_err (elements with |x| > tau). skip_nonfinite
// must be true when x may hold NaN/Inf (scan_input tells); false takes the faster path.
ErrorSums error_sums(const float* x, const float* xhat, int64_t n, double tau, bool skip_nonfinite,
                     int threads);

// The reported metrics. std::nullopt = not applicable (an empty CSV cell, JSON null).
struct ErrorMetrics {
  std::optional<double> rel_l2, mse, snr_db, cosine, max_abs_err, max_rel_err, underflow_frac,
      calc_diff;
};

// rel_l2 = ‖x−x̂‖/‖x‖ (0 when both are 0, n/a when only x is 0); snr_db = 10 log10(‖x‖²/‖x−x̂‖²)
// (+inf for an exact reconstruction); cosine = <x,x̂>/(‖x‖‖x̂‖) (1 when both are 0, 0 when one
// is); calc_diff = 1 − 2<x,x̂>/(‖x‖²+‖x̂‖²) (DeepGEMM; 0 when both are 0);
// underflow_frac = #{x≠0, x̂=0}/#{x≠0}; mse over the finite elements.
ErrorMetrics finish_metrics(const ErrorSums& s);

}  // namespace taco::study
