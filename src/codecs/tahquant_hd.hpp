#pragma once
// TAH-Quant's arithmetic (codecs/tahquant.hpp), written once for the host and the device
// (TACO_HD): the reference (codecs/tahquant.cpp) and the kernels (cuda/codecs/gpu_tahquant.cu)
// call these functions, so the two agree bit for bit by construction. Every floating-point step
// is one correctly rounded operation: fp64 ones spelled with the _rn intrinsics on the device
// (nothing for --fmad to contract) and plain operators on the host (built with
// -ffp-contract=off).
//
// The token entropy is the one place where a library function would differ: std::log and CUDA's
// log are both within an ulp of ln, but not always the same ulp, and a different last bit can
// reorder two tokens of nearly equal entropy. log_pos() is therefore built from frexp-style bit
// extraction and an odd series in correctly rounded operations. The sums over a token are fixed
// too: lane l of kLanes adds columns l, l + kLanes, ... left to right, and the lane partials are
// combined as a warp's shuffle-down tree (strides 16, 8, 4, 2, 1), which the host replays.
#include <cstdint>

#include "core/dtype.hpp"
#include "formats/hd_formats.hpp"  // TACO_HD, add_rn, mul_rn, div_rn, abs_f, hd_bits

#if defined(__CUDACC__)
#include <cuda_fp16.h>
#endif

namespace taco::tah {

constexpr int kLanes = 32;
constexpr float kFp16Max = 65504.0f;
constexpr double kEps = 1e-30;  // keeps p / sum and log(p) finite on zero tokens and values

using gpu::abs_f;
using gpu::add_rn;  // float and double: one correctly rounded operation on either side
using gpu::div_rn;
using gpu::hd_bits;
using gpu::hd_bits64;
using gpu::hd_double;
using gpu::mul_rn;

// ln(x) for a positive normal double x, within 1e-15 relative (a few ulp): x = m * 2^e with m in
// [sqrt(1/2), sqrt(2)), ln m = 2 atanh(f) = 2 (f + f^3/3 + ... + f^25/25) with f = (m-1)/(m+1)
// (|f| <= 0.172, so the next term is below 2^-70 of the sum), plus e ln 2. log_pos(1) = +0.
TACO_HD double log_pos(double x) {
  const uint64_t u = hd_bits64(x);
  int e = int((u >> 52) & 0x7ff) - 1022;  // x = m 2^e, m in [0.5, 1)
  double m = hd_double((u & 0x000fffffffffffffull) | 0x3fe0000000000000ull);  // exact
  if (m < 0.70710678118654752440) {
    m = mul_rn(m, 2.0);  // exact
    e -= 1;
  }
  const double f = div_rn(add_rn(m, -1.0), add_rn(m, 1.0));
  const double f2 = mul_rn(f, f);
  double p = div_rn(1.0, 25.0);
  for (int k = 11; k >= 0; --k) p = add_rn(mul_rn(p, f2), div_rn(1.0, double(2 * k + 1)));
  return add_rn(mul_rn(double(e), 0.69314718055994530942), mul_rn(mul_rn(2.0, f), p));
}

TACO_HD float finite_or_zero(float x) {
  return (hd_bits(x) & 0x7f800000u) == 0x7f800000u ? 0.0f : x;
}

// Lane l's partial sum of |x| over columns l, l + kLanes, ... (non-finite x read as 0).
TACO_HD double lane_abs_sum(const float* xr, int64_t cols, int lane) {
  double s = 0;
  for (int64_t c = lane; c < cols; c += kLanes) s = add_rn(s, double(abs_f(finite_or_zero(xr[c]))));
  return s;
}
// Lane l's partial of -sum p log(p + eps), p = |x| / denom, over the same columns. Every term is
// <= 0 (p <= 1, so p + eps rounds to at most 1), so the partial is +0 or positive, never -0.
TACO_HD double lane_neg_plogp(const float* xr, int64_t cols, int lane, double denom) {
  double h = 0;
  for (int64_t c = lane; c < cols; c += kLanes) {
    const double p = div_rn(double(abs_f(finite_or_zero(xr[c]))), denom);
    h = add_rn(h, -mul_rn(p, log_pos(add_rn(p, kEps))));
  }
  return h;
}
// The host's replay of the warp tree: after strides 16, 8, 4, 2, 1, lane 0 holds the total.
inline double combine_lanes(double* p) {
  for (int s = kLanes / 2; s >= 1; s >>= 1)
    for (int l = 0; l < s; ++l) p[l] = add_rn(p[l], p[l + s]);
  return p[0];
}

// ---- fp16 zero and scale ---------------------------------------------------------------------
TACO_HD float fp16_value(uint16_t h) {
#if defined(__CUDA_ARCH__)
  return __half2float(__ushort_as_half((unsigned short)h));
#else
  return fp16_to_float(h);
#endif
}
TACO_HD uint16_t fp16_rne(float v) {
#if defined(__CUDA_ARCH__)
  return uint16_t(__half_as_ushort(__float2half_rn(v)));
#else
  return float_to_fp16(v);
#endif
}
// Largest fp16 <= v (v finite), clamped to [-65504, 65504].
TACO_HD uint16_t fp16_round_down(float v) {
  v = v > kFp16Max ? kFp16Max : (v < -kFp16Max ? -kFp16Max : v);
  uint16_t h = fp16_rne(v);
  if (fp16_value(h) > v) {
    // One step toward -inf: magnitude up for negatives, down for positives (+0 -> -2^-24).
    if (h == 0)
      h = 0x8001;
    else if (h & 0x8000)
      ++h;
    else
      --h;
  }
  return h;
}
// Smallest fp16 >= v for v >= 0, at least 2^-24 and at most 65504.
TACO_HD uint16_t fp16_round_up_pos(float v) {
  uint16_t h = fp16_rne(v > kFp16Max ? kFp16Max : v);
  if (fp16_value(h) < v && h < 0x7bff) ++h;
  return h == 0 ? uint16_t(1) : h;
}

// formats/intq.hpp quantize_int_asym with z = 0: clamp(rne(v), 0, qmax), NaN -> 0.
TACO_HD int32_t quantize_asym(float v, int32_t qmax) {
  const float c =
      v != v ? 0.0f : (v > 4194304.0f ? 4194304.0f : (v < -4194304.0f ? -4194304.0f : v));
  const int32_t r = int32_t(add_rn(add_rn(c, 12582912.0f), -12582912.0f));
  return r < 0 ? 0 : (r > qmax ? qmax : r);
}

// Where the parts of one [rows, cols] block's wire lie (codecs/tahquant.hpp), from
// TahQuantCodec::layout(): the byte offsets, and the bits of the token sent p-th.
struct Layout {
  int64_t rows = 0, cols = 0, tiles_per_row = 0, tiles = 0, n_lo = 0;
  int tile = 0, lo_bits = 0, hi_bits = 0, pivot_bits = 0;
  float hscale = 0;  // hadamard_scale(tile)
  int64_t token_map = 0, tile_map = 0, codes = 0, zeros = 0, scales = 0, pivots = 0;
  int64_t bound = 0;  // bytes(tiles): every tile flagged

  TACO_HD int bits_of(int64_t p) const { return p < n_lo ? lo_bits : hi_bits; }
  // First code byte of the token sent p-th (cols * bits is a multiple of 8: tile >= 8).
  TACO_HD int64_t code_byte(int64_t p) const {
    return (p < n_lo ? p * cols * lo_bits : n_lo * cols * lo_bits + (p - n_lo) * cols * hi_bits) /
           8;
  }
  // Wire bytes with `flagged` transformed tiles.
  TACO_HD int64_t bytes(int64_t flagged) const { return pivots + (flagged * pivot_bits + 7) / 8; }
};

// ---- one tile ----------------------------------------------------------------------------------
// Orthonormal FWHT in hadamard.hpp's order (butterfly stages of strides 1, 2, ..., n/4, then the
// last stage with the multiply by `scale` = hadamard_scale(n)): the same bits as taco::fwht.
TACO_HD void fwht_tile(float* v, int n, float scale) {
  const int h = n / 2;
  for (int s = 1; s < h; s <<= 1)
    for (int i = 0; i < n; i += 2 * s)
      for (int j = i; j < i + s; ++j) {
        const float a = v[j], b = v[j + s];
        v[j] = add_rn(a, b);
        v[j + s] = add_rn(a, -b);
      }
  for (int j = 0; j < h; ++j) {
    const float a = v[j], b = v[j + h];
    v[j] = mul_rn(add_rn(a, b), scale);
    v[j + h] = mul_rn(add_rn(a, -b), scale);
  }
}

struct TileCode {
  uint16_t zero = 0, scale = 0;  // fp16 bits
  int pivot = 0;                 // index of the largest magnitude (flagged tiles)
  bool flagged = false;
  int saturated = 0;  // codes at 0 or qmax
};

// Encodes the tile v[0, tile) (finite values; rewritten: swapped and transformed when flagged)
// into tile * bits / 8 code bytes, element i at bits [i * bits, (i + 1) * bits), LSB first.
TACO_HD TileCode encode_tile(float* v, int tile, int bits, float hscale, uint8_t* codes) {
  TileCode t;
  float first = 0, second = 0;
  int piv = 0;
  for (int i = 0; i < tile; ++i) {
    const float a = abs_f(v[i]);
    if (a > first) {
      second = first;
      first = a;
      piv = i;
    } else if (a > second) {
      second = a;
    }
  }
  if (first >= 2.0f * second) {
    t.flagged = true;
    t.pivot = piv;
    const float tmp = v[0];
    v[0] = v[piv];
    v[piv] = tmp;
    fwht_tile(v, tile, hscale);
  }
  float mn = v[0];
  for (int i = 1; i < tile; ++i) mn = v[i] < mn ? v[i] : mn;
  t.zero = fp16_round_down(mn);
  const float z = fp16_value(t.zero);
  float span = 0;
  for (int i = 0; i < tile; ++i) {
    const float d = add_rn(v[i], -z);
    span = d > span ? d : span;
  }
  const int32_t qmax = (1 << bits) - 1;
  t.scale = fp16_round_up_pos(div_rn(span, float(qmax)));
  const float s = fp16_value(t.scale);
  uint32_t acc = 0;
  int nb = 0;
  for (int i = 0; i < tile; ++i) {
    const int32_t q = quantize_asym(div_rn(add_rn(v[i], -z), s), qmax);
    t.saturated += q == 0 || q == qmax;
    acc |= uint32_t(q) << nb;
    nb += bits;
    for (; nb >= 8; nb -= 8, acc >>= 8) *codes++ = uint8_t(acc);
  }
  return t;
}

// The tile's values from its codes: v = q * s + z, then the inverse transform and swap.
TACO_HD void decode_tile(const uint8_t* codes, int tile, int bits, uint16_t zero, uint16_t scale,
                         bool flagged, int pivot, float hscale, float* v) {
  const float z = fp16_value(zero), s = fp16_value(scale);
  const uint32_t mask = (1u << bits) - 1u;
  uint32_t acc = 0;
  int nb = 0;
  for (int i = 0; i < tile; ++i) {
    for (; nb < bits; nb += 8) acc |= uint32_t(*codes++) << nb;
    v[i] = add_rn(mul_rn(float(acc & mask), s), z);
    acc >>= bits;
    nb -= bits;
  }
  if (flagged) {
    fwht_tile(v, tile, hscale);
    const float tmp = v[0];
    v[0] = v[pivot];
    v[pivot] = tmp;
  }
}

// Bits [bit, bit + n) of an LSB-first stream (n <= 24).
TACO_HD uint32_t get_bits(const uint8_t* p, int64_t bit, int n) {
  uint32_t v = 0;
  for (int i = 0; i < n; ++i, ++bit) v |= uint32_t((p[bit >> 3] >> (bit & 7)) & 1u) << i;
  return v;
}

}  // namespace taco::tah
