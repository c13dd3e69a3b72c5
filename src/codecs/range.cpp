#include "codecs/range.hpp"

#include "codecs/quant_codec.hpp"
#include "core/dtype.hpp"
#include "core/error.hpp"
#include "formats/e8m0.hpp"
#include "formats/elem.hpp"
#include "formats/fp8.hpp"
#include "formats/minifloat.hpp"
#include "formats/scale.hpp"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <vector>

namespace taco {
namespace {

constexpr double kFloatMax = double(FLT_MAX);

// TACO's clamps and the two-level scale's top come from quant_codec.hpp (kTaco*, kTwoLevelMax),
// the values the codec uses; the bounds tests (test_codec_range.cpp) encode at them.

// Smallest normal magnitude of a float element format (2^-6, 2^-14, 1): codes below it keep
// fewer significant bits.
double min_normal(ElemFormat f) {
  switch (f) {
    case ElemFormat::E4M3:
      return fp8_e4m3_to_float(0x08);  // exponent field 1, mantissa 0
    case ElemFormat::E5M2:
      return fp8_e5m2_to_float(0x04);
    case ElemFormat::E2M1:
      return fp4_e2m1_to_float(0x2);
    default:
      throw_error("min_normal: element format {} is not a float format", int(f));
  }
}

// A transform over n values: its outputs' largest magnitude is within sqrt(n) of the input's
// either way, and its butterflies sum n values (overflow past FLT_MAX / n, zeroed as
// non-finite).
CodecRange through_transform(CodecRange r, int n) {
  const double root = std::sqrt(double(n));
  r.lo *= root;
  r.hi = std::min(r.hi / root, kFloatMax / n);
  return r;
}

// How far above the ideal one a scale format may round a scale ("up" rounding, or nearest):
// a block whose decoded codes reach T * s must not pass FLT_MAX.
double scale_rounding(ScaleFormat f) {
  switch (f) {
    case ScaleFormat::F32:
      return 1.0;
    case ScaleFormat::BF16:
      return 1.0 + 0x1p-7;
    case ScaleFormat::F16:
      return 1.0 + 0x1p-10;
    case ScaleFormat::E8M0:
      return 2.0;
    case ScaleFormat::UE4M3:
      return 1.0 + 0x1p-3;
  }
  throw_error("scale_rounding: unknown scale format {}", int(f));
}

// In the units of the codes: a block maps its largest magnitude a to a / s, s being its
// effective scale, clamped to [smin, smax]. Above T * smax the codes clip. Below, s stops
// following the block: an int's codes shrink at once (lo = T * smin), a float's largest code
// keeps full precision down to the format's smallest normal (lo = smin * min normal).
CodecRange from_scale_limits(const QuantSpec& s, double smin, double smax) {
  const double T = s.target;
  CodecRange r;
  r.lo = elem_is_float(s.elem) ? smin * double(min_normal(s.elem)) : T * smin;
  r.hi = T * smax;
  return r;
}

CodecRange quant_range(const QuantSpec& s) {
  CodecRange r;
  if (s.taco) {
    // Codes are v * s_a / s_q (on the orthonormal transform): s_q in [kTacoScaleMin,
    // kTacoScaleMax], s_a (dual) in [kTacoAdaptiveMin, kTacoAdaptiveMax] (quant_codec.cpp,
    // steps 2 and 5). While s_a follows the group, s_q stays within [1, sqrt(G)] of 1: only
    // s_a's clamps bring s_q to its own.
    const double amin = s.dual ? kTacoAdaptiveMin : 1.0, amax = s.dual ? kTacoAdaptiveMax : 1.0;
    r = from_scale_limits(s, kTacoScaleMin / amax, kTacoScaleMax / amin);
  } else if (s.sround == ScaleRound::OcpFloor) {
    // s = 2^(floor(log2 amax) - emax), at least E8M0's smallest value; no finite amax reaches
    // its largest, but s may be up to 2x an ideal scale.
    r = from_scale_limits(s, e8m0_to_float(0), kFloatMax);
    r.hi = kFloatMax / 2;
  } else if (s.scale == ScaleFormat::UE4M3) {
    // s = UE4M3 code * S_t, S_t = (the largest block's ideal) / kTwoLevelMax, ideals at least
    // FLT_MIN: a block far below the largest one gets UE4M3's smallest code, S_t * 2^-9.
    r = from_scale_limits(s, FLT_MIN, kFloatMax);
    r.hi = kFloatMax / scale_rounding(s.scale);
    r.rel_lo =
        double(ue4m3_to_float(1)) * double(min_normal(s.elem)) / (double(s.target) * kTwoLevelMax);
  } else {
    // ideal = span / T in [FLT_MIN, FLT_MAX], rounded into the scale format: its smallest and
    // largest results are the format's bounds. The span is amax, or up to 2 * amax (asym).
    const double smin = encode_scale(FLT_MIN, s.scale, s.sround).value;
    const double smax = encode_scale(FLT_MAX, s.scale, s.sround).value;
    r = from_scale_limits(s, smin, smax);
    r.hi = std::min(r.hi, kFloatMax / scale_rounding(s.scale)) / (s.asym ? 2.0 : 1.0);
  }
  r.hi = std::min(r.hi, kFloatMax);
  if (s.transform != Transform::None) r = through_transform(r, s.block);
  return r;
}

// The largest finite magnitude of each block of x: `len` consecutive values per block.
void flat_absmax(const float* x, int64_t n, int64_t len, std::vector<float>& out) {
  for (int64_t off = 0; off < n; off += len) {
    float m = 0.0f;
    for (int64_t i = off; i < std::min(n, off + len); ++i)
      if (std::isfinite(x[i])) m = std::max(m, std::fabs(x[i]));
    out.push_back(m);
  }
}

// The blocks' largest finite magnitudes, in any order.
std::vector<float> block_absmax(const VariantSpec& spec, const float* x, int64_t rows,
                                int64_t cols) {
  const int64_t n = rows * cols;
  std::vector<float> out;
  if (spec.family == VariantSpec::Family::TahQuant) {
    const int64_t tile = spec.tah.tile;
    TACO_REQUIRE_INPUT(cols % tile == 0, "tahquant: {} columns are not a multiple of the tile {}",
                       cols, tile);
    flat_absmax(x, n, tile, out);
    return out;
  }
  const QuantSpec& s = spec.quant;
  const int64_t T = s.block;
  switch (s.gran) {
    case Granularity::Group:
      flat_absmax(x, n, T, out);
      return out;
    case Granularity::Row:
      flat_absmax(x, n, cols, out);
      return out;
    case Granularity::Tensor:
      flat_absmax(x, n, n, out);
      return out;
    case Granularity::Col:
    case Granularity::Tile: {
      const bool col = s.gran == Granularity::Col;
      TACO_REQUIRE_INPUT(col || (rows % T == 0 && cols % T == 0),
                         "{}: shape [{}, {}] is not a multiple of the tile {}",
                         canonical_variant(spec), rows, cols, T);
      const int64_t per_row = col ? cols : cols / T;
      out.assign(size_t(col ? cols : (rows / T) * per_row), 0.0f);
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t c = 0; c < cols; ++c) {
          const float v = x[r * cols + c];
          float& m = out[size_t(col ? c : (r / T) * per_row + c / T)];
          if (std::isfinite(v)) m = std::max(m, std::fabs(v));
        }
      return out;
    }
  }
  throw_error("out_of_range_blocks: unknown granularity {}", int(s.gran));
}

}  // namespace

CodecRange codec_range(const VariantSpec& spec) {
  switch (spec.family) {
    case VariantSpec::Family::Quant:
      return quant_range(spec.quant);
    case VariantSpec::Family::Bf16:
      // Each value on its own: bf16's normal range (below, its subnormals keep fewer bits;
      // above its largest finite value, rounding gives Inf).
      return {double(bf16_to_float(0x0080)), double(bf16_to_float(0x7f7f)), 0.0};
    case VariantSpec::Family::TahQuant: {
      // Zero point and scale in fp16 (the largest fp16 <= min, the smallest >= span / qmax):
      // values beyond +-65504 clip. Below 2^-14 the scale is an fp16 subnormal, a multiple of
      // 2^-24: it stays within 1 / qmax of span / qmax (so the tile keeps qmax - 1 of its
      // levels) while span >= qmax^2 * 2^-24. Tiles with a dominant value are
      // Hadamard-transformed first.
      const double qmax = std::ldexp(1.0, spec.tah.hi_bits) - 1;
      CodecRange r{qmax * qmax * double(fp16_to_float(1)), double(fp16_to_float(0x7bff)), 0.0};
      const double root = std::sqrt(double(spec.tah.tile));
      r.lo *= root;
      r.hi /= root;
      return r;
    }
  }
  throw_error("codec_range: unknown family {}", int(spec.family));
}

int64_t out_of_range_blocks(const VariantSpec& spec, const float* x, int64_t rows, int64_t cols) {
  const CodecRange r = codec_range(spec);
  if (spec.family == VariantSpec::Family::Bf16) {  // blocks of one value: no list needed
    int64_t count = 0;
    for (int64_t i = 0; i < rows * cols; ++i) {
      const double a = std::fabs(double(x[i]));
      count += std::isfinite(a) && a > 0 && (a < r.lo || a > r.hi);
    }
    return count;
  }
  const std::vector<float> amax = block_absmax(spec, x, rows, cols);
  const float top = amax.empty() ? 0.0f : *std::max_element(amax.begin(), amax.end());
  const double lo = std::max(r.lo, r.rel_lo * double(top));
  int64_t count = 0;
  for (float a : amax) count += a > 0 && (double(a) < lo || double(a) > r.hi);
  return count;
}

}  // namespace taco
