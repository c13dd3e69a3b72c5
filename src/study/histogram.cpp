#include "study/histogram.hpp"

#include "core/error.hpp"
#include "study/simd.hpp"

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

namespace {

// Counter slots: kBins bins, then zeros, then non-finite values (dropped).
constexpr int32_t kZeroSlot = Log2Histogram::kBins, kJunkSlot = Log2Histogram::kBins + 1;
constexpr int32_t kSlots = Log2Histogram::kBins + 2;

// The slot of a non-negative float: exact, including subnormals.
inline int32_t slot(float v) {
  if (v == 0) return kZeroSlot;
  if (!std::isfinite(v)) return kJunkSlot;
  return int32_t(std::clamp<int64_t>(log2_quarter_bin(double(v)) + kBinOffset, 0, kBinsM1));
}

// slot() for four non-negative floats at once, from their bits. Subnormal lanes (rare) are
// marked in *subnormal and must be redone with slot().
inline simd::i4 slot4(simd::f4 v, simd::i4* subnormal) {
  using namespace simd;
  const i4 b = (i4)v;
  const i4 e = b >> 23;  // v >= 0: no sign bit
  const i4 m = b & 0x7fffff;
  const i4 q = -((m >= kQuarterEdgeF[0]) + (m >= kQuarterEdgeF[1]) + (m >= kQuarterEdgeF[2]));
  i4 k = 4 * e + q + int32_t(kBinOffset - 4 * 127);
  k = k & ~(k < 0);                                      // clamp below at 0
  k = (k & ~(k > kBinsM1)) | (kBinsM1 & (k > kBinsM1));  // and above at kBins - 1
  const i4 e0 = e == 0, e255 = e == 255;
  *subnormal |= e0 & (m != 0);
  k = (k & ~e0) | (kZeroSlot & e0);
  return (k & ~e255) | (kJunkSlot & e255);
}

}  // namespace

void Log2Histogram::add_tensor(const float* x, int64_t n, double absmax, int threads) {
  const int64_t ngroups = (n + kGroup - 1) / kGroup;
  // What an FP8 quantizer computes: an fp32 scale and fp32 products.
  const float tensor_scale = absmax > 0 ? float(kE4M3Max / absmax) : 0.0f;
  // Groups are independent; per-thread counters are merged by integer addition, so the result
  // does not depend on the thread count.
#pragma omp parallel num_threads(std::max(1, threads)) if (threads > 1 && n > kParallelMinElements)
  {
    using namespace simd;
    // [scope][lane][slot]: one counter set per lane, so that runs of equal bins (common: data
    // sits in a few bins) do not serialize on one memory location.
    std::vector<int64_t> cnt(static_cast<size_t>(kHistScopes * 4 * kSlots), 0);
    int64_t* c0 = cnt.data();
    const f4 ts = splat(tensor_scale), fmax = splat(FLT_MAX);
#pragma omp for schedule(static)
    for (int64_t g = 0; g < ngroups; ++g) {
      const int64_t lo = g * kGroup, hi = std::min(n, lo + kGroup);
      f4 vm = {};
      int64_t i = lo;
      for (; i + 4 <= hi; i += 4) {
        const f4 a = abs(load<f4>(x + i));
        vm = select((a <= fmax) & (a > vm), a, vm);
      }
      if (i < hi) {
        const f4 a = abs(load_partial(x + i, hi - i));
        vm = select((a <= fmax) & (a > vm), a, vm);
      }
      const float gmax = std::max(std::max(vm[0], vm[1]), std::max(vm[2], vm[3]));
      const float gscale = gmax > 0 ? float(kE4M3Max / double(gmax)) : 0.0f;
      const f4 gs = splat(gscale);
      for (i = lo; i + 4 <= hi; i += 4) {
        const f4 a = abs(load<f4>(x + i)), at = a * ts, ag = a * gs;
        i4 sub = {};
        i4 s0 = slot4(a, &sub), s1 = slot4(at, &sub), s2 = slot4(ag, &sub);
        if (sub[0] | sub[1] | sub[2] | sub[3]) {
          for (int l = 0; l < 4; ++l) {
            s0[l] = slot(a[l]);
            s1[l] = slot(at[l]);
            s2[l] = slot(ag[l]);
          }
        }
        for (int l = 0; l < 4; ++l) {
          ++c0[(0 * 4 + l) * kSlots + s0[l]];
          ++c0[(1 * 4 + l) * kSlots + s1[l]];
          ++c0[(2 * 4 + l) * kSlots + s2[l]];
        }
      }
      for (; i < hi; ++i) {
        const float a = std::fabs(x[i]);
        ++c0[0 * 4 * kSlots + slot(a)];
        ++c0[1 * 4 * kSlots + slot(a * tensor_scale)];
        ++c0[2 * 4 * kSlots + slot(a * gscale)];
      }
    }
    Log2Histogram local;
    for (int sc = 0; sc < kHistScopes; ++sc) {
      for (int l = 0; l < 4; ++l) {
        const int64_t* c = c0 + (sc * 4 + l) * kSlots;
        for (int32_t b = 0; b < kBins; ++b) local.counts_[size_t(sc)][size_t(b)] += c[b];
        local.zeros_[size_t(sc)] += c[kZeroSlot];
      }
    }
#pragma omp critical(taco_histogram_merge)
    merge(local);
  }
}

}  // namespace taco::study
