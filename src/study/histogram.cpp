#include "study/histogram.hpp"

#include "core/error.hpp"
#include "core/simd.hpp"

#include <omp.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>

namespace taco::study {
namespace {

// Smallest 52-bit mantissa M with (1 + M 2^-52) >= 2^(k/4), k = 1, 2, 3: the quarter-octave
// edges inside [1, 2). Found with exact integer arithmetic ((2^52 + M)^4 >= 2^(208 + k));
// the unit test checks them against long double.
constexpr uint64_t kQuarterEdge[3] = {0x306fe0a31b716ull, 0x6a09e667f3bcdull, 0xae89f995ad3aeull};
// The same edges for a float's 23-bit mantissa: ceil(M / 2^29), so that for any float f,
// its mantissa compares with these exactly as the widened double's does with the 52-bit ones.
constexpr int32_t kQuarterEdgeF[3] = {int32_t((kQuarterEdge[0] + (1u << 29) - 1) >> 29),
                                      int32_t((kQuarterEdge[1] + (1u << 29) - 1) >> 29),
                                      int32_t((kQuarterEdge[2] + (1u << 29) - 1) >> 29)};
constexpr int32_t kBinsM1 = Log2Histogram::kBins - 1;
constexpr int64_t kBinOffset = -4 * int64_t(Log2Histogram::kMinLog2);
constexpr int64_t kGroup = 128;
constexpr double kE4M3Max = 448.0;
// Below this many elements a parallel region costs more than it saves.
constexpr int64_t kParallelMinElements = 32768;

}  // namespace

const char* hist_scope_name(HistScope s) {
  switch (s) {
    case HistScope::Raw:
      return "raw";
    case HistScope::Tensor:
      return "tensor";
    case HistScope::Group128:
      return "group128";
  }
  throw_error("hist_scope_name: unknown scope {}", int(s));
}

int64_t log2_quarter_bin(double v) {
  uint64_t b;
  std::memcpy(&b, &v, 8);
  const int64_t e = int64_t((b >> 52) & 0x7ff) - 1023;
  const uint64_t m = b & ((uint64_t(1) << 52) - 1);
  const int64_t q =
      int64_t(m >= kQuarterEdge[0]) + int64_t(m >= kQuarterEdge[1]) + int64_t(m >= kQuarterEdge[2]);
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

namespace {

// Counting works on float codes: code(v) = 4 e + q for a non-negative float v with biased
// exponent e and quarter q (0..3, from the mantissa edges). For normal floats the bin index
// is code + kCodeToBin; code 0 is zero; codes >= 1020 are Inf/NaN. Codes need no clamping or
// selects, so four values take a handful of integer vector operations. Subnormal floats (and
// products that round to subnormals) have no code; the few groups holding one are binned one
// value at a time (bin_slow).
constexpr int32_t kCodes = 1024;
constexpr int64_t kCodeToBin = kBinOffset - 4 * 127;
static_assert(4 * 1 + kCodeToBin >= 0 && 4 * 254 + 3 + kCodeToBin < Log2Histogram::kBins,
              "every normal float has a bin");

inline simd::i4 code4(simd::f4 v) {
  using namespace simd;
  const i4 b = (i4)v;            // v >= 0: no sign bit
  const i4 e4 = (b >> 21) & ~3;  // 4 e
  const i4 m = b & 0x7fffff;
  // Comparisons give -1 per true lane: subtracting them adds the quarter.
  return e4 - (m > kQuarterEdgeF[0] - 1) - (m > kQuarterEdgeF[1] - 1) - (m > kQuarterEdgeF[2] - 1);
}

// Per-thread counters. codes[scope][lane][code] (one set per lane of four, so that runs of
// equal codes, common since data sits in a few bins, do not serialize on one counter);
// bins/zeros for the slow path.
struct Counters {
  std::vector<int64_t> codes = std::vector<int64_t>(size_t(kHistScopes) * 4 * kCodes, 0);
  std::vector<int64_t> bins = std::vector<int64_t>(size_t(kHistScopes) * Log2Histogram::kBins, 0);
  int64_t zeros[kHistScopes] = {};
};

// One value of the slow path; v in double (exact for a float, or a product taken in double).
inline void bin_slow(Counters& c, int scope, double v) {
  if (v == 0) {
    ++c.zeros[scope];
  } else if (std::isfinite(v)) {
    const int64_t k = std::clamp<int64_t>(log2_quarter_bin(v) + kBinOffset, 0, kBinsM1);
    ++c.bins[size_t(scope) * Log2Histogram::kBins + size_t(k)];
  }
}

// An fp32 product as an FP8 quantizer computes it; in double if the fp32 scale overflowed
// (a tensor whose absmax is below 448 / FLT_MAX).
inline double scaled(float a, float s, double s_exact) {
  return std::isfinite(s) ? double(a * s) : double(a) * s_exact;
}

// Counts groups [g0, g1) of x.
TACO_SIMD_CLONES
void count_groups(const float* x, int64_t n, int64_t g0, int64_t g1, float ts, double ts_exact,
                  Counters& c) {
  using namespace simd;
  const f4 fmax = splat(FLT_MAX);
  int64_t* codes = c.codes.data();
  for (int64_t g = g0; g < g1; ++g) {
    const int64_t lo = g * kGroup, hi = std::min(n, lo + kGroup);
    // Group max and smallest nonzero magnitude (finite values only).
    f4 vmax = {}, vmin = fmax;
    int64_t i = lo;
    for (; i + 4 <= hi; i += 4) {
      const f4 a = abs(load<f4>(x + i));
      vmax = select((a <= fmax) & (a > vmax), a, vmax);
      vmin = select((a > 0.0f) & (a < vmin), a, vmin);
    }
    if (i < hi) {
      const f4 a = abs(load_partial(x + i, hi - i));
      vmax = select((a <= fmax) & (a > vmax), a, vmax);
      vmin = select((a > 0.0f) & (a < vmin), a, vmin);
    }
    const float gmax = std::max(std::max(vmax[0], vmax[1]), std::max(vmax[2], vmax[3]));
    const float gmin = std::min(std::min(vmin[0], vmin[1]), std::min(vmin[2], vmin[3]));
    const double gs_exact = gmax > 0 ? kE4M3Max / double(gmax) : 0.0;
    const float gs = float(gs_exact);  // gs >= ts: gmax <= absmax
    // The fast path needs every value and product normal (or zero, or non-finite) and finite
    // scales. Products are monotonic in a, so the smallest nonzero value decides.
    const bool fast = std::isfinite(ts) && std::isfinite(gs) &&
                      (gmin == FLT_MAX || (gmin >= FLT_MIN && gmin * ts >= FLT_MIN));
    if (!fast) {
      for (int64_t j = lo; j < hi; ++j) {
        const float a = std::fabs(x[j]);
        bin_slow(c, 0, a);
        bin_slow(c, 1, scaled(a, ts, ts_exact));
        bin_slow(c, 2, scaled(a, gs, gs_exact));
      }
      continue;
    }
    const f4 vts = splat(ts), vgs = splat(gs);
    for (i = lo; i + 4 <= hi; i += 4) {
      const f4 a = abs(load<f4>(x + i));
      const i4 k0 = code4(a), k1 = code4(a * vts), k2 = code4(a * vgs);
      for (int l = 0; l < 4; ++l) {
        ++codes[(0 * 4 + l) * kCodes + k0[l]];
        ++codes[(1 * 4 + l) * kCodes + k1[l]];
        ++codes[(2 * 4 + l) * kCodes + k2[l]];
      }
    }
    for (; i < hi; ++i) {
      const float a = std::fabs(x[i]);
      bin_slow(c, 0, a);
      bin_slow(c, 1, double(a * ts));
      bin_slow(c, 2, double(a * gs));
    }
  }
}

}  // namespace

void Log2Histogram::add_tensor(const float* x, int64_t n, double absmax, int threads) {
  const int64_t ngroups = (n + kGroup - 1) / kGroup;
  const double ts_exact = absmax > 0 ? kE4M3Max / absmax : 0.0;
  const float ts = float(ts_exact);
  // Groups are independent; per-thread counters are merged by integer addition, so the result
  // does not depend on the thread count.
#pragma omp parallel num_threads(std::max(1, threads)) if (threads > 1 && n > kParallelMinElements)
  {
    Counters c;
    const int nt = omp_get_num_threads(), t = omp_get_thread_num();
    count_groups(x, n, ngroups * t / nt, ngroups * (t + 1) / nt, ts, ts_exact, c);
    Log2Histogram local;
    for (int sc = 0; sc < kHistScopes; ++sc) {
      auto& bins = local.counts_[size_t(sc)];
      for (int32_t b = 0; b < kBins; ++b) bins[size_t(b)] = c.bins[size_t(sc) * kBins + size_t(b)];
      local.zeros_[size_t(sc)] = c.zeros[sc];
      for (int l = 0; l < 4; ++l) {
        const int64_t* k = c.codes.data() + (sc * 4 + l) * kCodes;
        local.zeros_[size_t(sc)] += k[0];
        for (int32_t code = 4; code < 4 * 255; ++code) bins[size_t(code + kCodeToBin)] += k[code];
      }
    }
#pragma omp critical(taco_histogram_merge)
    merge(local);
  }
}

}  // namespace taco::study
