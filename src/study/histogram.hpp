#pragma once
// log2-magnitude histograms (results-schema.md, histograms.csv) with fixed bins a quarter of an
// octave wide: bin k holds values v with k/4 <= log2 v < (k+1)/4. Bins are found from the bits
// of v (exponent and mantissa thresholds), so binning is exact (no log2 call) and identical on
// every machine.
//   raw      : v = |x| of nonzero finite x
//   tensor   : v = |x| * s, s = fp32(448 / absmax(tensor))   (fp32 multiply: what an FP8 E4M3
//              quantizer with per-tensor scaling computes)
//   group128 : v = |x| * s, s = fp32(448 / absmax(group))    (groups: 128 consecutive elements
//              of the flat row-major tensor; the last group may be shorter)
// Zeros are counted apart per scope (in the scaled scopes this includes values whose fp32
// product underflows to 0); NaN/Inf are left out (the study reports them as nan/inf counts).
#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace taco::study {

enum class HistScope : int { Raw = 0, Tensor = 1, Group128 = 2 };
inline constexpr int kHistScopes = 3;
const char* hist_scope_name(HistScope s);

// Bin index k = floor(4 log2 v) for a positive normal double v (every float is one).
int64_t log2_quarter_bin(double v);

class Log2Histogram {
 public:
  // Quarter-octave bins covering log2 v in [kMinLog2, kMaxLog2), which holds every positive
  // float and every float rescaled into the FP8 range.
  static constexpr int kMinLog2 = -320, kMaxLog2 = 160;
  static constexpr int kBins = 4 * (kMaxLog2 - kMinLog2);

  Log2Histogram();
  void add_tensor(const float* x, int64_t n, double absmax, int threads);  // all three scopes
  void merge(const Log2Histogram& o);

  int64_t zeros(HistScope s) const { return zeros_[int(s)]; }
  int64_t count(HistScope s, int bin) const {
    return counts_[static_cast<std::size_t>(s)][static_cast<std::size_t>(bin)];
  }
  // Lower edge (log2) of a bin index 0..kBins-1.
  static double bin_lo(int bin) { return kMinLog2 + bin / 4.0; }
  static double bin_hi(int bin) { return kMinLog2 + (bin + 1) / 4.0; }

 private:
  std::array<std::vector<int64_t>, kHistScopes> counts_;
  std::array<int64_t, kHistScopes> zeros_{};
};

}  // namespace taco::study
