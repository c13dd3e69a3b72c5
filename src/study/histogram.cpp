#include "study/histogram.hpp"

#include "core/error.hpp"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>

namespace taco::study {
namespace {

// Smallest 52-bit mantissa M with (1 + M 2^-52) >= 2^(k/4), k = 1, 2, 3: the quarter-octave
// edges inside [1, 2). Found with exact integer arithmetic ((2^52 + M)^4 >= 2^(208 + k));
// the unit test checks them against long double.
constexpr uint64_t kQuarterEdge[3] = {0x306fe0a31b716ull, 0x6a09e667f3bcdull, 0xae89f995ad3aeull};
constexpr int64_t kBinOffset = -4 * int64_t(Log2Histogram::kMinLog2);
constexpr int64_t kGroup = 128;
constexpr double kE4M3Max = 448.0;
// Below this many elements a parallel region costs more than it saves.
constexpr int64_t kParallelMinElements = 32768;

inline int bin_index(double v) {
  const int64_t k = log2_quarter_bin(v) + kBinOffset;
  return int(std::clamp<int64_t>(k, 0, Log2Histogram::kBins - 1));
}

}  // namespace

const char* hist_scope_name(HistScope s) {
  switch (s) {
    case HistScope::Raw: return "raw";
    case HistScope::Tensor: return "tensor";
    case HistScope::Group128: return "group128";
  }
  throw_error("hist_scope_name: unknown scope {}", int(s));
}

int64_t log2_quarter_bin(double v) {
  uint64_t b;
  std::memcpy(&b, &v, 8);
  const int64_t e = int64_t((b >> 52) & 0x7ff) - 1023;
  const uint64_t m = b & ((uint64_t(1) << 52) - 1);
  const int64_t q = int64_t(m >= kQuarterEdge[0]) + int64_t(m >= kQuarterEdge[1]) +
                    int64_t(m >= kQuarterEdge[2]);
  return 4 * e + q;
}

Log2Histogram::Log2Histogram() {
  for (auto& c : counts_) c.assign(size_t(kBins), 0);
}

void Log2Histogram::merge(const Log2Histogram& o) {
  for (int s = 0; s < kHistScopes; ++s) {
    zeros_[size_t(s)] += o.zeros_[size_t(s)];
    for (size_t i = 0; i < size_t(kBins); ++i) counts_[size_t(s)][i] += o.counts_[size_t(s)][i];
  }
}

void Log2Histogram::add_tensor(const float* x, int64_t n, double absmax, int threads) {
  const int64_t ngroups = (n + kGroup - 1) / kGroup;
  // Groups are independent; per-thread histograms are merged by integer addition, so the
  // result does not depend on the thread count.
  const double tensor_scale = absmax > 0 ? kE4M3Max / absmax : 0.0;
#pragma omp parallel num_threads(std::max(1, threads)) if (threads > 1 && n > kParallelMinElements)
  {
    Log2Histogram local;
    int64_t* raw = local.counts_[0].data();
    int64_t* ten = local.counts_[1].data();
    int64_t* grp = local.counts_[2].data();
    int64_t zeros = 0;
#pragma omp for schedule(static)
    for (int64_t g = 0; g < ngroups; ++g) {
      const int64_t lo = g * kGroup, hi = std::min(n, lo + kGroup);
      float gmax = 0;
      for (int64_t i = lo; i < hi; ++i) {
        const float a = std::fabs(x[i]);
        if (std::isfinite(a)) gmax = a > gmax ? a : gmax;
      }
      const double group_scale = gmax > 0 ? kE4M3Max / double(gmax) : 0.0;
      for (int64_t i = lo; i < hi; ++i) {
        const double a = std::fabs(double(x[i]));
        if (!std::isfinite(a)) continue;
        if (a == 0) {
          ++zeros;
          continue;
        }
        ++raw[bin_index(a)];
        ++ten[bin_index(a * tensor_scale)];
        ++grp[bin_index(a * group_scale)];
      }
    }
    local.zeros_ = {zeros, zeros, zeros};
#pragma omp critical(taco_histogram_merge)
    merge(local);
  }
}

}  // namespace taco::study
