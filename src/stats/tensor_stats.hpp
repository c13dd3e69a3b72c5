#pragma once
// Per-tensor statistics that predict how a tensor fares under FP8: moments, outliers, how
// much of it falls below the FP8 normal range under per-tensor scaling, and dynamic range
// (TE LogTensorStats names where TE has one). All sums are in double; rows are processed in
// parallel but partial results are combined in row order, so the numbers do not depend on
// the thread count. The tensor is viewed as [rows, cols]: rows are tokens, cols (the last
// dimension) are hidden channels. NaN and Inf are counted and excluded from everything else.
#include "core/tensor.hpp"

#include <cstdint>
#include <nlohmann/json.hpp>
#include <vector>

namespace taco {

struct StatsOptions {
  int top_k = 8;             // outlier tokens/channels to list
  int64_t block_size = 128;  // block length along the hidden dim for max_blockwise_dynamic_range
  int threads = 0;           // OpenMP threads; 0 = the OpenMP default. Results do not depend on it.
};

// One outlier row or column: its index and its absmax.
struct IndexedAbsmax {
  int64_t index = 0;
  double absmax = 0;
};

// Undefined values (e.g. kurtosis of a constant tensor) are NaN; JSON writes them as null.
// Fractions over an empty set are 0.
struct TensorStats {
  int64_t numel = 0, rows = 0, cols = 0;
  int64_t nan_count = 0, inf_count = 0;
  int64_t finite_count = 0;  // numel - nan_count - inf_count: the population of the rest
  int64_t zero_count = 0;
  double zero_frac = 0;  // zero_count / finite_count

  double mean = 0, std = 0;    // std is the population std (ddof = 0)
  double rms = 0;              // sqrt(sum x^2 / finite_count)
  double absmax = 0;           // max |x|
  double min_nonzero_abs = 0;  // min |x| over nonzero x (0 if none)
  double crest_factor = 0;     // absmax / rms
  double kurtosis = 0;         // Pearson: m4 / m2^2 (normal = 3)

  // Per-tensor scaling to the format's max (|x| * fmt_max / absmax): fraction of nonzero
  // finite values that land below the smallest normal ("underflow") and below the smallest
  // subnormal ("flush"). E4M3: 448, 2^-6, 2^-9. E5M2: 57344, 2^-14, 2^-16.
  double e4m3_underflow_frac = 0, e4m3_flush_frac = 0;
  double e5m2_underflow_frac = 0, e5m2_flush_frac = 0;

  double dynamic_range_log2 = 0;  // log2(absmax / min_nonzero_abs); 0 if no nonzero
  int64_t block_size = 128;
  double max_blockwise_dynamic_range = 0;  // max over blocks (block_size along a row) of the same

  // Outlier structure: absmax of each row (token) and each column (channel).
  double row_absmax_max = 0, row_absmax_median = 0, row_absmax_spread = 0;  // spread = max/median
  double col_absmax_max = 0, col_absmax_median = 0, col_absmax_spread = 0;
  std::vector<IndexedAbsmax> top_tokens, top_channels;  // largest absmax first, ties by index
};

// x holds rows * cols row-major values.
TensorStats compute_stats(const float* x, int64_t rows, int64_t cols,
                          const StatsOptions& opts = {});
TensorStats compute_stats(const Tensor& t, const StatsOptions& opts = {});

nlohmann::json to_json(const TensorStats& s);

}  // namespace taco
