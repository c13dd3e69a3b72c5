#include "codecs/quant_codec.hpp"

#include "codecs/hadamard.hpp"
#include "core/error.hpp"
#include "formats/e8m0.hpp"
#include "formats/fp8.hpp"
#include "formats/intq.hpp"
#include "formats/minifloat.hpp"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <limits>

// The hot loops are compiled twice, for the baseline ISA and for AVX2, from one source: the
// kernels below are always-inline templates, and thin wrappers with a target attribute give the
// compiler an AVX2 + FMA context to inline them into. The CPU picks the wrapper at run time. Both
// give the same bytes: integer ops and IEEE float add/mul/div/fma are exact or correctly rounded
// on either ISA (std::fma is a library call on the baseline) and nothing is contracted into FMA
// implicitly (-ffp-contract=off).
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define TACO_HAVE_AVX2_PATH 1
#define TACO_TARGET_AVX2 __attribute__((target("avx2,fma")))
#else
#define TACO_HAVE_AVX2_PATH 0
#define TACO_TARGET_AVX2
#endif
#define TACO_KERNEL inline __attribute__((always_inline))

namespace taco {

namespace {

constexpr float kTacoClamp = 448.0f;       // the authors' hard-coded +-448, E5M2 included
constexpr int64_t kParallelMin = 1 << 15;  // elements below which OpenMP is not worth starting

// CUDA fminf/fmaxf semantics (IEEE minNum/maxNum: a NaN operand is ignored), as the authors'
// clampf, so clampf(NaN, lo, hi) == hi.
inline float clampf(float x, float lo, float hi) {
  return std::fmax(std::fmin(x, hi), lo);
}
inline float safe_div(float a, float b) {
  return std::fabs(b) < 1e-12f ? 0.0f : a / b;
}
// Non-finite -> 0, branch-free (vectorizes).
inline float finite_or_zero(float x) {
  return (float_bits(x) & 0x7f800000u) == 0x7f800000u ? 0.0f : x;
}
inline int64_t is_nonfinite(float x) {
  return (float_bits(x) & 0x7f800000u) == 0x7f800000u;
}
// |x| as integer bits, with non-finite values as 0 (the bits order like the magnitudes).
inline int32_t abs_bits_finite(float x) {
  const int32_t a = int32_t(float_bits(x) & 0x7fffffffu);
  return a < 0x7f800000 ? a : 0;
}

// min(max(t, -448), 448) for a t that is never NaN (a finite value over s_q >= 1e-12), done on
// the bit pattern: float compares in a select keep GCC from vectorizing (-ftrapping-math).
inline float clamp_pm448(float t) {
  constexpr uint32_t k448 = 0x43e00000u;  // bits of 448.0f
  const uint32_t u = float_bits(t);
  const uint32_t over = 0u - uint32_t(int32_t(u & 0x7fffffffu) > int32_t(k448));
  return bits_float((u & ~over) | (((u & 0x80000000u) | k448) & over));
}

inline void put_le(uint8_t* p, uint32_t v, int nbytes) {
  for (int i = 0; i < nbytes; ++i) p[i] = uint8_t(v >> (8 * i));
}
inline uint32_t get_le(const uint8_t* p, int nbytes) {
  uint32_t v = 0;
  for (int i = 0; i < nbytes; ++i) v |= uint32_t(p[i]) << (8 * i);
  return v;
}
inline void put_f32(uint8_t* p, float f) {
  put_le(p, float_bits(f), 4);
}
inline float get_f32(const uint8_t* p) {
  return bits_float(get_le(p, 4));
}

// Element encoders: code of t (already divided by the scale); z is the zero point (asym only).
struct EncE4M3 {
  bool sat;
  uint32_t operator()(float t, int32_t) const { return encode_minifloat<E4M3Traits>(t, sat); }
};
struct EncE5M2 {
  bool sat;
  uint32_t operator()(float t, int32_t) const { return encode_minifloat<E5M2Traits>(t, sat); }
};
struct EncE2M1 {
  uint32_t operator()(float t, int32_t) const { return encode_minifloat<E2M1Traits>(t, true); }
};
struct EncIntSym {
  float qmax;
  uint32_t mask;
  uint32_t operator()(float t, int32_t) const { return uint32_t(quantize_int_sym(t, qmax)) & mask; }
};
struct EncIntAsym {
  int32_t qmax;
  uint32_t operator()(float t, int32_t z) const { return uint32_t(quantize_int_asym(t, z, qmax)); }
};

// Code i of the packed stream (quant_codec.hpp): bits [b i, b i + b), least significant first. A
// 3-bit code may straddle two bytes; a 4- or 2-bit one never does.
inline uint32_t code_at(const uint8_t* codes, int64_t i, int bits) {
  if (bits == 8) return codes[i];
  const int64_t p = i * bits;
  uint32_t w = codes[p >> 3];
  if ((p & 7) + bits > 8) w |= uint32_t(codes[(p >> 3) + 1]) << 8;
  return (w >> (p & 7)) & ((1u << bits) - 1);
}

}  // namespace

struct QuantCodec::Counters {
  int64_t saturated = 0, nonfinite = 0;
  bool want = false;  // count only when the caller asked for stats
};

namespace {

struct Counts {
  int64_t saturated = 0, nonfinite = 0;
};

bool cpu_has_avx2() {
#if TACO_HAVE_AVX2_PATH
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#else
  return false;
#endif
}

// Runs fn(b0, b1) over [0, n) in ranges of `per_task` (in parallel when `par`), summing counts.
// Each block is independent, so the result does not depend on the split or the thread count.
template <class Fn>
Counts run_ranges(int64_t n, int64_t per_task, bool par, Fn&& fn) {
  const int64_t tasks = (n + per_task - 1) / per_task;
  int64_t sat = 0, nonfin = 0;
#pragma omp parallel for schedule(static) reduction(+ : sat, nonfin) if (par && tasks > 1)
  for (int64_t t = 0; t < tasks; ++t) {
    const Counts c = fn(t * per_task, std::min(n, (t + 1) * per_task));
    sat += c.saturated;
    nonfin += c.nonfinite;
  }
  return {sat, nonfin};
}

}  // namespace

// The scale a block uses: stored code, the effective float scale, the zero point.
struct QuantCodec::BlockScale {
  uint32_t code;
  float s;
  int32_t z;
};

// The flat-block view shared by g<G> and row: block b covers [b * len, min((b+1) * len, numel)).
struct QuantCodec::Flat {
  int64_t numel, len, blocks;
  bool transformed;  // g<G> with had/rht: every block carries G codes
};

QuantCodec::QuantCodec(const QuantSpec& spec, std::string name, bool allow_simd)
    : s_(spec), name_(std::move(name)), simd_(allow_simd && cpu_has_avx2()) {
  variant_.family = VariantSpec::Family::Quant;
  variant_.quant = s_;
  validate(s_, "codec " + name_);
  TACO_ASSERT(s_.target > 0, "QuantSpec target must be resolved before building a codec");
  bits_ = elem_bits(s_.elem);
  two_level_ = s_.scale == ScaleFormat::UE4M3;
  sbytes_ = scale_format_bytes(s_.scale);
  if (s_.transform != Transform::None) hconst_ = hadamard_scale(s_.block);
  if (s_.transform == Transform::RandHadamard) signs_ = rht_sign_masks(s_.block, s_.seed);

  const int ncodes = 1 << bits_;
  for (int c = 0; c < ncodes; ++c) {
    const uint8_t u = uint8_t(c);
    float v = 0;
    bool sat = false;
    switch (s_.elem) {
      case ElemFormat::E4M3:
        v = fp8_e4m3_to_float(u);
        sat = s_.taco ? (c & 0x7f) == int(float_to_fp8_e4m3(kTacoClamp)) : (c & 0x7f) >= 0x7e;
        break;
      case ElemFormat::E5M2:
        v = fp8_e5m2_to_float(u);
        sat = s_.taco ? (c & 0x7f) == int(float_to_fp8_e5m2(kTacoClamp)) : (c & 0x7f) >= 0x7b;
        break;
      case ElemFormat::E2M1:
        v = fp4_e2m1_to_float(u);
        sat = (c & 0x7) == 0x7;
        break;
      case ElemFormat::INT8:
      case ElemFormat::INT4:
      case ElemFormat::INT3:
      case ElemFormat::INT2: {
        const float qmax = elem_max(s_.elem, s_.asym);
        v = s_.asym ? float(c) : float(int_from_code(uint32_t(c), bits_));
        sat = s_.asym ? (c == 0 || v == qmax) : (v == qmax || v == -qmax);
        break;
      }
      default:
        throw_error("unknown element format {}", int(s_.elem));
    }
    lut_[size_t(c)] = v;
    is_sat_[size_t(c)] = sat ? 1 : 0;
  }
}

nlohmann::json QuantCodec::params() const {
  nlohmann::json j;
  j["variant"] = name_;
  j["definition"] = grammar_string(VariantSpec{VariantSpec::Family::Quant, s_, TahSpec{}});
  j["family"] = "quant";
  j["elem_format"] = elem_format_name(s_.elem);
  j["elem_bits"] = bits_;
  j["asym"] = s_.asym;
  j["granularity"] = granularity_name(s_.gran);
  if (s_.gran == Granularity::Group || s_.gran == Granularity::Tile)
    j["group_size"] = s_.block;
  else
    j["group_size"] = nullptr;
  j["scale_format"] = scale_format_name(s_.scale);
  j["scale_round"] = scale_round_name(s_.sround);
  j["two_level_scale"] = two_level_;
  j["transform"] = transform_name(s_.transform);
  if (s_.transform == Transform::RandHadamard) {
    j["seed"] = s_.seed;
    j["sign_generator"] = "splitmix64, bit i%64 of word i/64";
  }
  j["taco_rules"] = s_.taco;
  j["dual_scale"] = s_.dual;
  j["target_range"] = s_.target;
  if (s_.dual) {
    j["lambda"] = s_.lambda;
    j["fp8_max_F"] = elem_max(s_.elem, false);
  }
  if (s_.taco) j["pre_clamp"] = kTacoClamp;
  j["saturate"] = s_.saturate;
  j["tail_policy"] = s_.transform != Transform::None
                         ? "store all G codes of a zero-padded tail group"
                         : "store the tail's valid codes";
  if (s_.sround == ScaleRound::OcpFloor)
    j["mx_scale_rule"] = "OCP MX v1.0: 2^(floor(log2 amax) - emax)";
  j["nonfinite_policy"] =
      s_.taco ? "NaN/Inf -> 0 after the transform (TACO)" : "NaN/Inf inputs -> 0";
  return j;
}

QuantLayout quant_layout(const QuantSpec& spec, int64_t rows, int64_t cols,
                         const std::string& name) {
  TACO_REQUIRE_INPUT(rows > 0 && cols > 0, "codec {}: empty shape [{}, {}]", name, rows, cols);
  TACO_REQUIRE_INPUT(rows <= (int64_t(1) << 40) / cols, "codec {}: shape [{}, {}] is too large",
                     name, rows, cols);
  QuantLayout L;
  L.numel = rows * cols;
  const int64_t B = spec.block;
  switch (spec.gran) {
    case Granularity::Tensor:
      L.blocks = 1;
      break;
    case Granularity::Row:
      L.blocks = rows;
      break;
    case Granularity::Col:
      L.blocks = cols;
      break;
    case Granularity::Group:
      L.blocks = (L.numel + B - 1) / B;
      break;
    case Granularity::Tile:
      TACO_REQUIRE_INPUT(rows % B == 0 && cols % B == 0,
                         "codec {}: shape [{}, {}] is not a multiple of the {}x{} tile", name, rows,
                         cols, B, B);
      L.blocks = (rows / B) * (cols / B);
      break;
    default:
      throw_error("unknown granularity {}", int(spec.gran));
  }
  switch (spec.gran) {
    case Granularity::Group:
      L.block_len = B;
      break;
    case Granularity::Tile:
      L.block_len = B * B;
      break;
    case Granularity::Row:
      L.block_len = cols;
      break;
    case Granularity::Col:
      L.block_len = rows;
      break;
    default:
      L.block_len = L.numel;
      break;
  }
  const bool padded = spec.gran == Granularity::Group && spec.transform != Transform::None;
  L.ncodes = padded ? L.blocks * B : L.numel;
  L.code_bytes = (L.ncodes * elem_bits(spec.elem) + 7) / 8;
  L.scale_off = L.code_bytes;
  L.scale_bytes = L.blocks * scale_format_bytes(spec.scale);
  L.aux_off = L.scale_off + L.scale_bytes;
  L.aux_bytes = spec.asym ? L.blocks : (spec.dual ? 4 * L.blocks : 0);
  L.tensor_off = L.aux_off + L.aux_bytes;
  L.tensor_bytes = spec.scale == ScaleFormat::UE4M3 ? 4 : 0;
  L.total = L.tensor_off + L.tensor_bytes;
  return L;
}

QuantLayout QuantCodec::layout(int64_t rows, int64_t cols) const {
  return quant_layout(s_, rows, cols, name_);
}

// ---- scales ---------------------------------------------------------------------------------

// The unrounded scale of a block from its statistics (a = amax, or lo and b = hi when asym).
float QuantCodec::block_ideal(float a, float b) const {
  float ideal = s_.asym ? (b - a) / s_.target : a / s_.target;
  ideal = ideal < FLT_MIN ? FLT_MIN : (ideal > FLT_MAX ? FLT_MAX : ideal);
  return ideal;
}

QuantCodec::BlockScale QuantCodec::block_scale(float a, float b, float tensor_scale) const {
  BlockScale bs{0, 1.0f, 0};
  if (s_.sround == ScaleRound::OcpFloor) {
    bs.code = a > 0 ? e8m0_from_exp(floor_log2(a) - elem_emax(s_.elem)) : 0u;
    bs.s = e8m0_to_float(uint8_t(bs.code));
  } else if (two_level_) {
    const ScaleCode sc = encode_scale(block_ideal(a, b) / tensor_scale, s_.scale, s_.sround);
    bs.code = sc.code;
    bs.s = sc.value * tensor_scale;
  } else {
    const ScaleCode sc = encode_scale(block_ideal(a, b), s_.scale, s_.sround);
    bs.code = sc.code;
    bs.s = sc.value;
  }
  if (s_.asym) {
    const int32_t qmax = int32_t(elem_max(s_.elem, true));
    bs.z = int32_t(rne_small(clamp_nan0(-a / bs.s, 0.0f, float(qmax))));
  }
  return bs;
}

// ---- kernels --------------------------------------------------------------------------------
// Everything that touches elements, written once; `_avx2` / `_base` wrappers instantiate it for
// each ISA (see the top of the file). A kernel handles a range of blocks (or rows) [b0, b1).

struct QuantKernels {
  using Flat = QuantCodec::Flat;

  // Group of a flat codec with a transform: copy, zero non-finite values and the padding, signs,
  // Hadamard, zero any non-finite result (overflow near FLT_MAX).
  static TACO_KERNEL void prepare_group(const QuantCodec& c, const float* x, int64_t m,
                                        float* buf) {
    const int G = c.s_.block;
    for (int64_t i = 0; i < m; ++i) buf[i] = finite_or_zero(x[i]);
    for (int64_t i = m; i < G; ++i) buf[i] = 0.0f;
    if (!c.signs_.empty())
      for (int i = 0; i < G; ++i) buf[i] = bits_float(float_bits(buf[i]) ^ c.signs_[size_t(i)]);
    fwht(buf, G);
    for (int i = 0; i < G; ++i) buf[i] = finite_or_zero(buf[i]);
  }

  // Inverse of the transform on G decoded values: butterflies, 1/sqrt(G), then the signs.
  static TACO_KERNEL void inverse_transform(const QuantCodec& c, float* v) {
    const int G = c.s_.block;
    fwht(v, G);
    if (!c.signs_.empty())
      for (int i = 0; i < G; ++i) v[i] = bits_float(float_bits(v[i]) ^ c.signs_[size_t(i)]);
  }

  // Statistic of v[0, n) over finite values: amax (sym) or lo = min(min v, 0), hi = max(max v, 0).
  static TACO_KERNEL void block_stat(const QuantCodec& c, const float* v, int64_t n, float& a,
                                     float& b) {
    if (c.s_.asym) {
      float lo = 0.0f, hi = 0.0f;
      for (int64_t i = 0; i < n; ++i) {
        const float t = finite_or_zero(v[i]);
        lo = t < lo ? t : lo;
        hi = t > hi ? t : hi;
      }
      a = lo;
      b = hi;
    } else {
      int32_t m = 0;  // magnitudes as int32 bits: integer max vectorizes, and is order-free
      for (int64_t i = 0; i < n; ++i) {
        const int32_t t = abs_bits_finite(v[i]);
        m = t > m ? t : m;
      }
      a = bits_float(uint32_t(m));
      b = 0;
    }
  }

  // Two-level scales: the largest ideal block scale over [b0, b1), as float bits.
  template <class Unused>
  static TACO_KERNEL Counts flat_max_ideal(const QuantCodec& c, const float* x, const Flat& f,
                                           uint32_t* result, int64_t b0, int64_t b1) {
    uint32_t mx = 0;
    for (int64_t b = b0; b < b1; ++b) {
      alignas(64) float buf[kMaxGroup];
      const int64_t off = b * f.len, m = std::min(f.len, f.numel - off);
      const float* v = x + off;
      int64_t n = m;
      if (f.transformed) {
        prepare_group(c, x + off, m, buf);
        v = buf;
        n = c.s_.block;
      }
      float a, bb;
      block_stat(c, v, n, a, bb);
      mx = std::max(mx, float_bits(c.block_ideal(a, bb)));
    }
    *result = mx;
    return {};
  }

  // g<G> and row blocks: statistics, scale, codes (one byte per code; 4-bit ones packed later).
  template <class Q>
  static TACO_KERNEL Counts flat_encode(const QuantCodec& c, const Q& q, const float* x,
                                        const Flat& f, const QuantLayout& L, uint8_t* codes,
                                        uint8_t* wire, float tensor_scale, bool want, int64_t b0,
                                        int64_t b1) {
    const int G = c.s_.block, sbytes = c.sbytes_;
    Counts n_out;
    for (int64_t b = b0; b < b1; ++b) {
      alignas(64) float buf[kMaxGroup];
      const int64_t off = b * f.len, m = std::min(f.len, f.numel - off);
      if (want)
        for (int64_t i = 0; i < m; ++i) n_out.nonfinite += is_nonfinite(x[off + i]);
      const float* v = x + off;
      int64_t n = m;
      uint8_t* out = codes + off;
      if (f.transformed) {
        prepare_group(c, x + off, m, buf);
        v = buf;
        n = G;
        out = codes + b * G;
      }
      float a, bb;
      block_stat(c, v, n, a, bb);
      const QuantCodec::BlockScale bs = c.block_scale(a, bb, tensor_scale);
      put_le(wire + L.scale_off + b * sbytes, bs.code, sbytes);
      if (c.s_.asym) wire[L.aux_off + b] = uint8_t(bs.z);
      const float s = bs.s;
      const int32_t z = bs.z;
      for (int64_t i = 0; i < n; ++i) out[i] = uint8_t(q(finite_or_zero(v[i]) / s, z));
      if (want)
        for (int64_t i = 0; i < n; ++i) n_out.saturated += c.is_sat_[out[i]];
    }
    return n_out;
  }

  // TACO rules, one group at a time (the step list is in quant_codec.hpp).
  template <class F>
  static TACO_KERNEL Counts taco_encode(const QuantCodec& c, const float* x, const QuantLayout& L,
                                        uint8_t* wire, bool want, int64_t b0, int64_t b1) {
    const int G = c.s_.block;
    const int64_t numel = L.numel;
    const bool transformed = c.s_.transform != Transform::None, dual = c.s_.dual,
               sat_mode = c.s_.saturate;
    const float T = c.s_.target, lambda = c.s_.lambda, Fmax = elem_max(c.s_.elem, false);
    Counts n_out;
    for (int64_t b = b0; b < b1; ++b) {
      alignas(64) float v[kMaxGroup];
      const int64_t off = b * G, m = std::min<int64_t>(G, numel - off);
      // 1. load, zero padding
      for (int64_t i = 0; i < m; ++i) v[i] = x[off + i];
      for (int64_t i = m; i < G; ++i) v[i] = 0.0f;
      if (want)
        for (int64_t i = 0; i < m; ++i) n_out.nonfinite += is_nonfinite(v[i]);
      // 2. adaptive scale from the mean square of the m valid elements
      float s_a = 1.0f;
      if (dual) {
        const float S = lane_tree_sum_squares(v, G);
        float var = S / float(m);
        var = var + lambda;
        var = var < 1e-12f ? 1e-12f : var;
        s_a = clampf(Fmax / std::sqrt(var), kTacoAdaptiveMin, kTacoAdaptiveMax);
        put_f32(wire + L.aux_off + 4 * b, s_a);
      }
      // 3-4. signs, Hadamard butterflies; s_a and 1/sqrt(G) act later, as one factor k
      if (!c.signs_.empty())
        for (int i = 0; i < G; ++i) v[i] = bits_float(float_bits(v[i]) ^ c.signs_[size_t(i)]);
      if (transformed) fwht_butterflies(v, G);
      const float k = transformed ? s_a * c.hconst_ : s_a;  // s_a = 1 without dual: k = hconst_
      // 5. quantization scale from the max magnitude (NaN-ignoring), scaled by k
      int32_t mb = 0;
      for (int i = 0; i < G; ++i) {
        const int32_t a = int32_t(float_bits(v[i]) & 0x7fffffffu);
        const int32_t t = a > 0x7f800000 ? 0 : a;
        mb = t > mb ? t : mb;
      }
      float A = bits_float(uint32_t(mb));
      if (mb == 0) {  // fmaxf over an all-NaN group is NaN
        bool all_nan = true;
        for (int i = 0; i < G; ++i) all_nan = all_nan && std::isnan(v[i]);
        if (all_nan) A = std::numeric_limits<float>::quiet_NaN();
      }
      const float M = A * k;
      const float mv = M < 1e-12f ? 1e-12f : M;
      const float s_q = clampf(safe_div(mv, T), kTacoScaleMin, kTacoScaleMax);
      put_f32(wire + L.scale_off + 4 * b, s_q);
      // 6. codes: one multiply by r = k / s_q (s_q >= 1e-12f after its clamp). No product
      // overflows (quant_codec.hpp), so only non-finite transform outputs need zeroing.
      const float r = k / s_q;
      const int64_t n = transformed ? G : m;
      uint8_t* out = wire + (transformed ? b * G : off);
      for (int64_t i = 0; i < n; ++i) {
        const float t = clamp_pm448(finite_or_zero(v[i]) * r);
        out[i] = uint8_t(encode_minifloat<F>(t, sat_mode));
      }
      if (want)
        for (int64_t i = 0; i < n; ++i) n_out.saturated += c.is_sat_[out[i]];
    }
    return n_out;
  }

  // tensor / col / tile: codes of rows [r0, r1) with the per-block scales already known.
  template <class Q>
  static TACO_KERNEL Counts strided_encode(const QuantCodec& c, const Q& q, const float* src,
                                           int64_t cols, const float* scale, const int32_t* zero,
                                           uint8_t* codes, bool want, int64_t r0, int64_t r1) {
    const int64_t T = c.s_.block;
    const int64_t tiles_per_row = c.s_.gran == Granularity::Tile ? cols / T : 0;
    Counts n_out;
    for (int64_t r = r0; r < r1; ++r) {
      const float* xr = src + r * cols;
      uint8_t* cr = codes + r * cols;
      if (c.s_.gran == Granularity::Tensor) {
        const float s = scale[0];
        const int32_t z = zero[0];
        for (int64_t col = 0; col < cols; ++col)
          cr[col] = uint8_t(q(finite_or_zero(xr[col]) / s, z));
      } else if (c.s_.gran == Granularity::Col) {
        for (int64_t col = 0; col < cols; ++col)
          cr[col] = uint8_t(q(finite_or_zero(xr[col]) / scale[col], zero[col]));
      } else {
        for (int64_t j = 0; j < tiles_per_row; ++j) {
          const int64_t b = (r / T) * tiles_per_row + j;
          const float s = scale[b];
          const int32_t z = zero[b];
          for (int64_t col = j * T; col < (j + 1) * T; ++col)
            cr[col] = uint8_t(q(finite_or_zero(xr[col]) / s, z));
        }
      }
      if (want)
        for (int64_t col = 0; col < cols; ++col) n_out.saturated += c.is_sat_[cr[col]];
    }
    return n_out;
  }

  template <class Unused>
  static TACO_KERNEL Counts flat_decode(const QuantCodec& c, const uint8_t* wire, const Flat& f,
                                        const QuantLayout& L, float tensor_scale, float* out,
                                        int64_t b0, int64_t b1) {
    const int G = c.s_.block, bits = c.bits_, sbytes = c.sbytes_;
    for (int64_t b = b0; b < b1; ++b) {
      const int64_t off = b * f.len, m = std::min(f.len, f.numel - off);
      const uint32_t code = get_le(wire + L.scale_off + b * sbytes, sbytes);
      const float s = c.two_level_ ? decode_scale(code, c.s_.scale) * tensor_scale
                                   : decode_scale(code, c.s_.scale);
      const float z = c.s_.asym ? float(wire[L.aux_off + b]) : 0.0f;
      if (f.transformed) {
        alignas(64) float v[kMaxGroup];
        const int64_t c0 = b * G;
        for (int i = 0; i < G; ++i) v[i] = (c.lut_[code_at(wire, c0 + i, bits)] - z) * s;
        inverse_transform(c, v);
        for (int64_t i = 0; i < m; ++i) out[off + i] = v[i];
      } else if (bits == 8) {
        const uint8_t* cw = wire + off;
        for (int64_t i = 0; i < m; ++i) out[off + i] = (c.lut_[cw[i]] - z) * s;
      } else {
        for (int64_t i = 0; i < m; ++i)
          out[off + i] = (c.lut_[code_at(wire, off + i, bits)] - z) * s;
      }
    }
    return {};
  }

  template <class Unused>
  static TACO_KERNEL Counts taco_decode(const QuantCodec& c, const uint8_t* wire,
                                        const QuantLayout& L, float* out, int64_t b0, int64_t b1) {
    const int G = c.s_.block;
    const bool transformed = c.s_.transform != Transform::None, dual = c.s_.dual;
    for (int64_t b = b0; b < b1; ++b) {
      alignas(64) float v[kMaxGroup];
      const int64_t off = b * G, m = std::min<int64_t>(G, L.numel - off);
      // one factor per group: s_q, times 1/sqrt(G) (transform), over max(s_a, 1e-12f) (dual)
      float f = get_f32(wire + L.scale_off + 4 * b);
      if (transformed) f = f * c.hconst_;
      if (dual) {
        const float a = get_f32(wire + L.aux_off + 4 * b);
        f = f / (a < 1e-12f ? 1e-12f : a);
      }
      const int64_t n = transformed ? G : m;
      const uint8_t* cw = wire + (transformed ? b * G : off);
      for (int64_t i = 0; i < n; ++i) v[i] = c.lut_[cw[i]];
      if (transformed) {
        fwht_butterflies(v, G);
        if (!c.signs_.empty())
          for (int i = 0; i < G; ++i) v[i] = bits_float(float_bits(v[i]) ^ c.signs_[size_t(i)]);
      }
      for (int64_t i = 0; i < m; ++i) out[off + i] = finite_or_zero(v[i] * f);
    }
    return {};
  }

  // tensor / col / tile: values of rows [r0, r1) (the inverse transform runs afterwards).
  template <class Unused>
  static TACO_KERNEL Counts strided_decode(const QuantCodec& c, const uint8_t* wire, int64_t cols,
                                           const float* scale, const float* zero, float* out,
                                           int64_t r0, int64_t r1) {
    const int64_t T = c.s_.block;
    const int64_t tiles_per_row = c.s_.gran == Granularity::Tile ? cols / T : 0;
    const int bits = c.bits_;
    for (int64_t r = r0; r < r1; ++r) {
      float* o = out + r * cols;
      const int64_t i0 = r * cols;
      if (c.s_.gran == Granularity::Col) {
        for (int64_t col = 0; col < cols; ++col)
          o[col] = (c.lut_[code_at(wire, i0 + col, bits)] - zero[col]) * scale[col];
        continue;
      }
      // tensor: one block; tile: runs of T columns share a block
      const int64_t width = c.s_.gran == Granularity::Tensor ? cols : T;
      for (int64_t j = 0; j < cols / width; ++j) {
        const int64_t b = c.s_.gran == Granularity::Tensor ? 0 : (r / T) * tiles_per_row + j;
        const float s = scale[b], z = zero[b];
        for (int64_t col = j * width; col < (j + 1) * width; ++col)
          o[col] = (c.lut_[code_at(wire, i0 + col, bits)] - z) * s;
      }
    }
    return {};
  }

  // Transform (encode side) or inverse transform (decode side) of 1 x T pieces [g0, g1).
  template <class Unused>
  static TACO_KERNEL Counts transform_pieces(const QuantCodec& c, const float* x, float* y,
                                             bool inverse, int64_t g0, int64_t g1) {
    const int64_t T = c.s_.block;
    for (int64_t g = g0; g < g1; ++g) {
      if (inverse)
        inverse_transform(c, y + g * T);
      else
        prepare_group(c, x + g * T, T, y + g * T);
    }
    return {};
  }

#define TACO_ISA_PAIR(kernel)                              \
  template <class K, class... A>                           \
  TACO_TARGET_AVX2 static Counts kernel##_avx2(A&&... a) { \
    return kernel<K>(std::forward<A>(a)...);               \
  }                                                        \
  template <class K, class... A>                           \
  static Counts kernel##_base(A&&... a) {                  \
    return kernel<K>(std::forward<A>(a)...);               \
  }
  TACO_ISA_PAIR(flat_max_ideal)
  TACO_ISA_PAIR(flat_encode)
  TACO_ISA_PAIR(taco_encode)
  TACO_ISA_PAIR(strided_encode)
  TACO_ISA_PAIR(flat_decode)
  TACO_ISA_PAIR(taco_decode)
  TACO_ISA_PAIR(strided_decode)
  TACO_ISA_PAIR(transform_pieces)
#undef TACO_ISA_PAIR
};

// Calls the AVX2 or the baseline instance of a kernel over [0, n) in parallel ranges.
#define TACO_RUN(kernel, K, n, per_task, par, ...)                               \
  run_ranges((n), (per_task), (par), [&](int64_t lo_, int64_t hi_) {             \
    return simd_ ? QuantKernels::kernel##_avx2<K>(*this, __VA_ARGS__, lo_, hi_)  \
                 : QuantKernels::kernel##_base<K>(*this, __VA_ARGS__, lo_, hi_); \
  })

namespace {
// Blocks per parallel task: about 16K elements.
int64_t per_task(int64_t block_len) {
  return std::max<int64_t>(1, (int64_t(1) << 14) / std::max<int64_t>(1, block_len));
}
}  // namespace

// ---- encode ---------------------------------------------------------------------------------

std::vector<uint8_t> QuantCodec::encode(const float* x, int64_t rows, int64_t cols,
                                        EncodeStats* stats) const {
  std::vector<uint8_t> wire;
  encode_into(x, rows, cols, wire, stats);
  return wire;
}

// Every byte of the buffer is written below (codes, padding codes, scales, aux, tensor scale),
// so a reused buffer needs no clearing.
void QuantCodec::encode_into(const float* x, int64_t rows, int64_t cols, std::vector<uint8_t>& wire,
                             EncodeStats* stats) const {
  const QuantLayout L = layout(rows, cols);
  wire.resize(size_t(L.total));
  Counters c;
  c.want = stats != nullptr;
  if (s_.taco) {
    if (s_.elem == ElemFormat::E4M3)
      encode_taco<E4M3Traits>(x, L, wire.data(), c);
    else
      encode_taco<E5M2Traits>(x, L, wire.data(), c);
  } else {
    switch (s_.elem) {
      case ElemFormat::E4M3:
        encode_dispatch(EncE4M3{s_.saturate}, x, rows, cols, L, wire.data(), c);
        break;
      case ElemFormat::E5M2:
        encode_dispatch(EncE5M2{s_.saturate}, x, rows, cols, L, wire.data(), c);
        break;
      case ElemFormat::E2M1:
        encode_dispatch(EncE2M1{}, x, rows, cols, L, wire.data(), c);
        break;
      case ElemFormat::INT8:
      case ElemFormat::INT4:
      case ElemFormat::INT3:
      case ElemFormat::INT2: {
        if (s_.asym)
          encode_dispatch(EncIntAsym{int_asym_qmax(bits_)}, x, rows, cols, L, wire.data(), c);
        else
          encode_dispatch(EncIntSym{elem_max(s_.elem, false), (1u << bits_) - 1}, x, rows, cols, L,
                          wire.data(), c);
        break;
      }
      default:
        throw_error("unknown element format {}", int(s_.elem));
    }
  }
  if (stats) {
    stats->saturated += c.saturated;
    stats->nonfinite += c.nonfinite;
  }
}

template <class Q>
void QuantCodec::encode_dispatch(const Q& q, const float* x, int64_t rows, int64_t cols,
                                 const QuantLayout& L, uint8_t* wire, Counters& c) const {
  // Codes narrower than a byte are produced one per byte, then packed (keeps the parallel loops
  // race-free).
  std::vector<uint8_t> tmp;
  uint8_t* codes = wire;
  if (bits_ < 8) {
    tmp.assign(size_t(L.ncodes), 0);
    codes = tmp.data();
  }
  if (s_.gran == Granularity::Group || s_.gran == Granularity::Row) {
    const int64_t len = s_.gran == Granularity::Group ? s_.block : cols;
    encode_flat(q, x, Flat{L.numel, len, L.blocks, s_.transform != Transform::None}, L, codes, wire,
                c);
  } else {
    encode_strided(q, x, rows, cols, L, codes, wire, c);
  }
  if (bits_ < 8) {
    // 8 codes fill exactly bits_ bytes: code k of a unit at bit bits_ * k of a little-endian word.
    // Missing codes of the last unit are 0 bits, and only its bytes that hold codes are written.
    const int64_t units = (L.ncodes + 7) / 8;
#pragma omp parallel for schedule(static) if (units >= kParallelMin)
    for (int64_t u = 0; u < units; ++u) {
      uint32_t w = 0;
      for (int64_t k = 0; k < 8 && 8 * u + k < L.ncodes; ++k)
        w |= uint32_t(codes[8 * u + k]) << (bits_ * k);
      const int64_t nb = std::min<int64_t>(bits_, L.code_bytes - u * bits_);
      for (int64_t j = 0; j < nb; ++j) wire[u * bits_ + j] = uint8_t(w >> (8 * j));
    }
  }
}

template <class Q>
void QuantCodec::encode_flat(const Q& q, const float* x, const Flat& f, const QuantLayout& L,
                             uint8_t* codes, uint8_t* wire, Counters& c) const {
  const bool par = f.numel >= kParallelMin;
  const int64_t pt = per_task(f.len);
  // Two-level scales need the tensor scale first: one pass of block statistics.
  float tensor_scale = 1.0f;
  if (two_level_) {
    // One maximum per task (max is order-free, so the split does not matter).
    const int64_t tasks = (f.blocks + pt - 1) / pt;
    std::vector<uint32_t> task_max(static_cast<size_t>(tasks), 0);
    run_ranges(f.blocks, pt, par, [&](int64_t lo, int64_t hi) {
      uint32_t* slot = &task_max[size_t(lo / pt)];
      return simd_ ? QuantKernels::flat_max_ideal_avx2<void>(*this, x, f, slot, lo, hi)
                   : QuantKernels::flat_max_ideal_base<void>(*this, x, f, slot, lo, hi);
    });
    uint32_t mx = 0;
    for (uint32_t v : task_max) mx = std::max(mx, v);
    tensor_scale = bits_float(mx) / kTwoLevelMax;
    tensor_scale = tensor_scale < FLT_MIN ? FLT_MIN : tensor_scale;
    put_f32(wire + L.tensor_off, tensor_scale);
  }
  const Counts r =
      TACO_RUN(flat_encode, Q, f.blocks, pt, par, q, x, f, L, codes, wire, tensor_scale, c.want);
  c.saturated += r.saturated;
  c.nonfinite += r.nonfinite;
}

template <class Q>
void QuantCodec::encode_strided(const Q& q, const float* x, int64_t rows, int64_t cols,
                                const QuantLayout& L, uint8_t* codes, uint8_t* wire,
                                Counters& c) const {
  const int64_t n = L.numel, nb = L.blocks, T = s_.block;
  const bool par = n >= kParallelMin;
  const int64_t tiles_per_row = s_.gran == Granularity::Tile ? cols / T : 0;

  // Tiles with a transform: transform every 1 x T row piece first (cols % T == 0).
  std::vector<float> y;
  const float* src = x;
  if (s_.transform != Transform::None) {
    y.resize(size_t(n));
    TACO_RUN(transform_pieces, void, n / T, per_task(T), par, x, y.data(), false);
    src = y.data();
  }
  if (c.want) {
    int64_t nonfin = 0;
#pragma omp parallel for schedule(static) reduction(+ : nonfin) if (par)
    for (int64_t i = 0; i < n; ++i) nonfin += is_nonfinite(x[i]);
    c.nonfinite += nonfin;
  }

  // Per-block statistics: amax (sym), or min and max (asym).
  std::vector<float> sa(size_t(nb), 0.0f), sb(size_t(nb), 0.0f);
  if (s_.gran == Granularity::Tensor) {
    float lo = 0.0f, hi = 0.0f;
    int32_t m = 0;
    if (s_.asym) {
#pragma omp parallel for schedule(static) reduction(min : lo) reduction(max : hi) if (par)
      for (int64_t i = 0; i < n; ++i) {
        const float t = finite_or_zero(src[i]);
        lo = t < lo ? t : lo;
        hi = t > hi ? t : hi;
      }
      sa[0] = lo;
      sb[0] = hi;
    } else {
#pragma omp parallel for schedule(static) reduction(max : m) if (par)
      for (int64_t i = 0; i < n; ++i) {
        const int32_t t = abs_bits_finite(src[i]);
        m = t > m ? t : m;
      }
      sa[0] = bits_float(uint32_t(m));
    }
  } else {
    // Col: a thread owns a range of columns; Tile: a thread owns a row of tiles. Either way no
    // two threads touch the same block, and max/min are order-free. Magnitudes are compared as
    // int32 bits (vectorizes); asym keeps float min/max.
    const bool by_cols = s_.gran == Granularity::Col;
    const int64_t width = by_cols ? 1 : T;       // columns per block in a row
    const int64_t chunk = by_cols ? 256 : cols;  // columns a task owns
    const int64_t col_tasks = (cols + chunk - 1) / chunk;
    const int64_t row_tasks = by_cols ? 1 : rows / T;  // tile rows
    std::vector<int32_t> mbits(size_t(nb), 0);
#pragma omp parallel for schedule(static) if (par)
    for (int64_t u = 0; u < col_tasks * row_tasks; ++u) {
      const int64_t tr = u / col_tasks, c0 = (u % col_tasks) * chunk,
                    c1 = std::min(cols, c0 + chunk);
      const int64_t r0 = by_cols ? 0 : tr * T, r1 = by_cols ? rows : (tr + 1) * T;
      const int64_t base = by_cols ? 0 : tr * tiles_per_row;  // block of column 0 in this row band
      for (int64_t r = r0; r < r1; ++r) {
        const float* xr = src + r * cols;
        if (by_cols && !s_.asym) {  // one block per column: update the row of maxima at once
          int32_t* mb = mbits.data();
          for (int64_t col = c0; col < c1; ++col) {
            const int32_t t = abs_bits_finite(xr[col]);
            mb[col] = t > mb[col] ? t : mb[col];
          }
          continue;
        }
        for (int64_t b0 = c0; b0 < c1; b0 += width) {  // the columns of one block
          const size_t b = size_t(base + b0 / width);
          if (s_.asym) {
            float lo = sa[b], hi = sb[b];
            for (int64_t col = b0; col < b0 + width; ++col) {
              const float t = finite_or_zero(xr[col]);
              lo = t < lo ? t : lo;
              hi = t > hi ? t : hi;
            }
            sa[b] = lo;
            sb[b] = hi;
          } else {
            int32_t m = mbits[b];
            for (int64_t col = b0; col < b0 + width; ++col) {
              const int32_t t = abs_bits_finite(xr[col]);
              m = t > m ? t : m;
            }
            mbits[b] = m;
          }
        }
      }
    }
    if (!s_.asym)
      for (int64_t b = 0; b < nb; ++b) sa[size_t(b)] = bits_float(uint32_t(mbits[size_t(b)]));
  }

  float tensor_scale = 1.0f;
  if (two_level_) {
    float mx = 0.0f;
    for (int64_t b = 0; b < nb; ++b) mx = std::max(mx, block_ideal(sa[size_t(b)], sb[size_t(b)]));
    tensor_scale = mx / kTwoLevelMax;
    tensor_scale = tensor_scale < FLT_MIN ? FLT_MIN : tensor_scale;
    put_f32(wire + L.tensor_off, tensor_scale);
  }
  std::vector<float> scale(static_cast<size_t>(nb));
  std::vector<int32_t> zero(static_cast<size_t>(nb));
  for (int64_t b = 0; b < nb; ++b) {
    const BlockScale bs = block_scale(sa[size_t(b)], sb[size_t(b)], tensor_scale);
    put_le(wire + L.scale_off + b * sbytes_, bs.code, sbytes_);
    if (s_.asym) wire[L.aux_off + b] = uint8_t(bs.z);
    scale[size_t(b)] = bs.s;
    zero[size_t(b)] = bs.z;
  }
  const Counts r = TACO_RUN(strided_encode, Q, rows, per_task(cols), par, q, src, cols,
                            scale.data(), zero.data(), codes, c.want);
  c.saturated += r.saturated;
}

template <class F>
void QuantCodec::encode_taco(const float* x, const QuantLayout& L, uint8_t* wire,
                             Counters& c) const {
  const Counts r = TACO_RUN(taco_encode, F, L.blocks, per_task(s_.block), L.numel >= kParallelMin,
                            x, L, wire, c.want);
  c.saturated += r.saturated;
  c.nonfinite += r.nonfinite;
}

// ---- decode ---------------------------------------------------------------------------------

void QuantCodec::decode(const uint8_t* wire, size_t nbytes, int64_t rows, int64_t cols,
                        float* out) const {
  const QuantLayout L = layout(rows, cols);
  TACO_REQUIRE_INPUT(int64_t(nbytes) == L.total,
                     "codec {}: wire buffer has {} bytes, but [{}, {}] encodes to {}", name_,
                     nbytes, rows, cols, L.total);
  if (s_.taco) return decode_taco(wire, L, out);
  if (s_.gran == Granularity::Group || s_.gran == Granularity::Row) {
    const int64_t len = s_.gran == Granularity::Group ? s_.block : cols;
    return decode_flat(wire, Flat{L.numel, len, L.blocks, s_.transform != Transform::None}, L, out);
  }
  decode_strided(wire, rows, cols, L, out);
}

void QuantCodec::decode_flat(const uint8_t* wire, const Flat& f, const QuantLayout& L,
                             float* out) const {
  const float tensor_scale = two_level_ ? get_f32(wire + L.tensor_off) : 1.0f;
  TACO_RUN(flat_decode, void, f.blocks, per_task(f.len), f.numel >= kParallelMin, wire, f, L,
           tensor_scale, out);
}

void QuantCodec::decode_strided(const uint8_t* wire, int64_t rows, int64_t cols,
                                const QuantLayout& L, float* out) const {
  const int64_t nb = L.blocks, T = s_.block, n = L.numel;
  const bool par = n >= kParallelMin;
  const float tensor_scale = two_level_ ? get_f32(wire + L.tensor_off) : 1.0f;
  std::vector<float> scale(static_cast<size_t>(nb)), zero(size_t(nb), 0.0f);
  for (int64_t b = 0; b < nb; ++b) {
    const uint32_t code = get_le(wire + L.scale_off + b * sbytes_, sbytes_);
    scale[size_t(b)] =
        two_level_ ? decode_scale(code, s_.scale) * tensor_scale : decode_scale(code, s_.scale);
    if (s_.asym) zero[size_t(b)] = float(wire[L.aux_off + b]);
  }
  TACO_RUN(strided_decode, void, rows, per_task(cols), par, wire, cols, scale.data(), zero.data(),
           out);
  if (s_.transform != Transform::None)
    TACO_RUN(transform_pieces, void, n / T, per_task(T), par, nullptr, out, true);
}

void QuantCodec::decode_taco(const uint8_t* wire, const QuantLayout& L, float* out) const {
  TACO_RUN(taco_decode, void, L.blocks, per_task(s_.block), L.numel >= kParallelMin, wire, L, out);
}

#undef TACO_RUN

}  // namespace taco
