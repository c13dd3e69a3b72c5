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

namespace taco {

namespace {

constexpr float kTacoClamp = 448.0f;    // the authors' hard-coded +-448, E5M2 included
constexpr float kTwoLevelMax = 448.0f;  // UE4M3 max: the per-tensor scale maps block scales here
constexpr int64_t kParallelMin = 1 << 15;  // elements below which OpenMP is not worth starting

// CUDA fminf/fmaxf semantics (IEEE minNum/maxNum: a NaN operand is ignored), as the authors'
// clampf, so clampf(NaN, lo, hi) == hi.
inline float clampf(float x, float lo, float hi) { return std::fmax(std::fmin(x, hi), lo); }
inline float safe_div(float a, float b) { return std::fabs(b) < 1e-12f ? 0.0f : a / b; }
// Non-finite -> 0, branch-free (vectorizes).
inline float finite_or_zero(float x) {
  return (float_bits(x) & 0x7f800000u) == 0x7f800000u ? 0.0f : x;
}
inline int64_t is_nonfinite(float x) { return (float_bits(x) & 0x7f800000u) == 0x7f800000u; }
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
inline void put_f32(uint8_t* p, float f) { put_le(p, float_bits(f), 4); }
inline float get_f32(const uint8_t* p) { return bits_float(get_le(p, 4)); }

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

inline uint32_t code_at(const uint8_t* codes, int64_t i, int bits) {
  return bits == 8 ? codes[i] : (codes[i >> 1] >> ((i & 1) * 4)) & 0xfu;
}

}  // namespace

struct QuantCodec::Counters {
  int64_t saturated = 0, nonfinite = 0;
  bool want = false;  // count only when the caller asked for stats
};

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

QuantCodec::QuantCodec(const QuantSpec& spec, std::string name)
    : s_(spec), name_(std::move(name)) {
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
        v = s_.asym ? float(c) : float(int8_t(u));
        sat = s_.asym ? (c == 0 || c == 255) : (v == 127.0f || v == -127.0f);
        break;
      case ElemFormat::INT4:
        v = s_.asym ? float(c) : float(int4_from_nibble(uint32_t(c)));
        sat = s_.asym ? (c == 0 || c == 15) : (v == 7.0f || v == -7.0f);
        break;
      default: throw_error("unknown element format {}", int(s_.elem));
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
  if (s_.gran == Granularity::Group || s_.gran == Granularity::Tile) j["group_size"] = s_.block;
  else j["group_size"] = nullptr;
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
  j["tail_policy"] = s_.transform != Transform::None ? "store all G codes of a zero-padded tail group"
                                                     : "store the tail's valid codes";
  if (s_.sround == ScaleRound::OcpFloor) j["mx_scale_rule"] = "OCP MX v1.0: 2^(floor(log2 amax) - emax)";
  j["nonfinite_policy"] = s_.taco ? "NaN/Inf -> 0 after the transform (TACO)" : "NaN/Inf inputs -> 0";
  return j;
}

QuantLayout QuantCodec::layout(int64_t rows, int64_t cols) const {
  TACO_REQUIRE_INPUT(rows > 0 && cols > 0, "codec {}: empty shape [{}, {}]", name_, rows, cols);
  TACO_REQUIRE_INPUT(rows <= (int64_t(1) << 40) / cols, "codec {}: shape [{}, {}] is too large", name_, rows, cols);
  QuantLayout L;
  L.numel = rows * cols;
  const int64_t B = s_.block;
  switch (s_.gran) {
    case Granularity::Tensor: L.blocks = 1; break;
    case Granularity::Row: L.blocks = rows; break;
    case Granularity::Col: L.blocks = cols; break;
    case Granularity::Group: L.blocks = (L.numel + B - 1) / B; break;
    case Granularity::Tile:
      TACO_REQUIRE_INPUT(rows % B == 0 && cols % B == 0,
                         "codec {}: shape [{}, {}] is not a multiple of the {}x{} tile", name_, rows, cols, B, B);
      L.blocks = (rows / B) * (cols / B);
      break;
    default: throw_error("unknown granularity {}", int(s_.gran));
  }
  const bool padded = s_.gran == Granularity::Group && s_.transform != Transform::None;
  L.ncodes = padded ? L.blocks * B : L.numel;
  L.code_bytes = bits_ == 8 ? L.ncodes : (L.ncodes + 1) / 2;
  L.scale_off = L.code_bytes;
  L.scale_bytes = L.blocks * sbytes_;
  L.aux_off = L.scale_off + L.scale_bytes;
  L.aux_bytes = s_.asym ? L.blocks : (s_.dual ? 4 * L.blocks : 0);
  L.tensor_off = L.aux_off + L.aux_bytes;
  L.tensor_bytes = two_level_ ? 4 : 0;
  L.total = L.tensor_off + L.tensor_bytes;
  return L;
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

// ---- transforms -----------------------------------------------------------------------------

// Group of a flat codec with a transform: copy, zero non-finite values and the padding, signs,
// Hadamard, zero any non-finite result (overflow near FLT_MAX).
void QuantCodec::prepare_group(const float* x, int64_t m, float* buf) const {
  const int G = s_.block;
  for (int64_t i = 0; i < m; ++i) buf[i] = finite_or_zero(x[i]);
  for (int64_t i = m; i < G; ++i) buf[i] = 0.0f;
  if (!signs_.empty())
    for (int i = 0; i < G; ++i) buf[i] = bits_float(float_bits(buf[i]) ^ signs_[size_t(i)]);
  fwht(buf, G);
  for (int i = 0; i < G; ++i) buf[i] = finite_or_zero(buf[i]);
}

// Inverse of the transform on G decoded values: butterflies, 1/sqrt(G), then the signs.
void QuantCodec::inverse_transform(float* v) const {
  const int G = s_.block;
  fwht(v, G);
  if (!signs_.empty())
    for (int i = 0; i < G; ++i) v[i] = bits_float(float_bits(v[i]) ^ signs_[size_t(i)]);
}

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
    if (s_.elem == ElemFormat::E4M3) encode_taco<E4M3Traits>(x, L, wire.data(), c);
    else encode_taco<E5M2Traits>(x, L, wire.data(), c);
  } else {
    switch (s_.elem) {
      case ElemFormat::E4M3: encode_dispatch(EncE4M3{s_.saturate}, x, rows, cols, L, wire.data(), c); break;
      case ElemFormat::E5M2: encode_dispatch(EncE5M2{s_.saturate}, x, rows, cols, L, wire.data(), c); break;
      case ElemFormat::E2M1: encode_dispatch(EncE2M1{}, x, rows, cols, L, wire.data(), c); break;
      case ElemFormat::INT8:
      case ElemFormat::INT4: {
        const uint32_t mask = bits_ == 8 ? 0xffu : 0xfu;
        if (s_.asym) encode_dispatch(EncIntAsym{int32_t(elem_max(s_.elem, true))}, x, rows, cols, L, wire.data(), c);
        else encode_dispatch(EncIntSym{elem_max(s_.elem, false), mask}, x, rows, cols, L, wire.data(), c);
        break;
      }
      default: throw_error("unknown element format {}", int(s_.elem));
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
  // 4-bit codes are produced one per byte, then packed (keeps the parallel loops race-free).
  std::vector<uint8_t> tmp;
  uint8_t* codes = wire;
  if (bits_ == 4) {
    tmp.assign(size_t(L.ncodes), 0);
    codes = tmp.data();
  }
  if (s_.gran == Granularity::Group || s_.gran == Granularity::Row) {
    const int64_t len = s_.gran == Granularity::Group ? s_.block : cols;
    encode_flat(q, x, Flat{L.numel, len, L.blocks, s_.transform != Transform::None}, L, codes, wire, c);
  } else {
    encode_strided(q, x, rows, cols, L, codes, wire, c);
  }
  if (bits_ == 4) {
    const int64_t nb = L.code_bytes;
#pragma omp parallel for schedule(static) if (nb >= kParallelMin)
    for (int64_t i = 0; i < nb; ++i) {
      const uint32_t lo = codes[2 * i], hi = 2 * i + 1 < L.ncodes ? codes[2 * i + 1] : 0u;
      wire[i] = uint8_t(lo | (hi << 4));
    }
  }
}

template <class Q>
void QuantCodec::encode_flat(const Q& q, const float* x, const Flat& f, const QuantLayout& L,
                             uint8_t* codes, uint8_t* wire, Counters& c) const {
  const int G = s_.block;
  const bool want = c.want;
  const int64_t nb = f.blocks;
  const bool par = f.numel >= kParallelMin;

  // Statistic of a block's values v[0, n): amax (sym) or min and max (asym), finite values only.
  auto block_stat = [&](const float* v, int64_t n, float& a, float& b) {
    if (s_.asym) {
      float lo = 0.0f, hi = 0.0f;  // the range always includes 0
      for (int64_t i = 0; i < n; ++i) {
        const float t = finite_or_zero(v[i]);
        lo = t < lo ? t : lo;
        hi = t > hi ? t : hi;
      }
      a = lo;
      b = hi;
    } else {
      int32_t m = 0;
      for (int64_t i = 0; i < n; ++i) {
        const int32_t t = abs_bits_finite(v[i]);
        m = t > m ? t : m;
      }
      a = bits_float(uint32_t(m));
      b = 0;
    }
  };

  // Two-level scales need the tensor scale first: one pass of block statistics.
  float tensor_scale = 1.0f;
  if (two_level_) {
    uint32_t max_ideal = 0;
#pragma omp parallel for schedule(static) reduction(max : max_ideal) if (par)
    for (int64_t b = 0; b < nb; ++b) {
      alignas(64) float buf[kMaxGroup];
      const int64_t off = b * f.len, m = std::min(f.len, f.numel - off);
      const float* v = x + off;
      int64_t n = m;
      if (f.transformed) {
        prepare_group(x + off, m, buf);
        v = buf;
        n = G;
      }
      float a, bb;
      block_stat(v, n, a, bb);
      max_ideal = std::max(max_ideal, float_bits(block_ideal(a, bb)));
    }
    tensor_scale = bits_float(max_ideal) / kTwoLevelMax;
    tensor_scale = tensor_scale < FLT_MIN ? FLT_MIN : tensor_scale;
    put_f32(wire + L.tensor_off, tensor_scale);
  }

  int64_t sat = 0, nonfin = 0;
#pragma omp parallel for schedule(static) reduction(+ : sat, nonfin) if (par)
  for (int64_t b = 0; b < nb; ++b) {
    alignas(64) float buf[kMaxGroup];
    const int64_t off = b * f.len, m = std::min(f.len, f.numel - off);
    if (want)
      for (int64_t i = 0; i < m; ++i) nonfin += is_nonfinite(x[off + i]);
    const float* v = x + off;
    int64_t n = m;
    uint8_t* out = codes + off;
    if (f.transformed) {
      prepare_group(x + off, m, buf);
      v = buf;
      n = G;
      out = codes + b * G;
    }
    float a, bb;
    block_stat(v, n, a, bb);
    const BlockScale bs = block_scale(a, bb, tensor_scale);
    put_le(wire + L.scale_off + b * sbytes_, bs.code, sbytes_);
    if (s_.asym) wire[L.aux_off + b] = uint8_t(bs.z);
    const float s = bs.s;
    const int32_t z = bs.z;
    for (int64_t i = 0; i < n; ++i) out[i] = uint8_t(q(finite_or_zero(v[i]) / s, z));
    if (want)
      for (int64_t i = 0; i < n; ++i) sat += is_sat_[out[i]];
  }
  c.saturated += sat;
  c.nonfinite += nonfin;
}

template <class Q>
void QuantCodec::encode_strided(const Q& q, const float* x, int64_t rows, int64_t cols,
                                const QuantLayout& L, uint8_t* codes, uint8_t* wire, Counters& c) const {
  const int64_t n = L.numel, nb = L.blocks, T = s_.block;
  const bool par = n >= kParallelMin;
  const int64_t tiles_per_row = s_.gran == Granularity::Tile ? cols / T : 0;

  // Tiles with a transform: transform every 1 x T row piece first (cols % T == 0).
  std::vector<float> y;
  const float* src = x;
  if (s_.transform != Transform::None) {
    y.resize(size_t(n));
    const int64_t segs = n / T;
#pragma omp parallel for schedule(static) if (par)
    for (int64_t g = 0; g < segs; ++g) prepare_group(x + g * T, T, y.data() + g * T);
    src = y.data();
  }
  if (c.want) {
    int64_t nonfin = 0;
#pragma omp parallel for schedule(static) reduction(+ : nonfin) if (par)
    for (int64_t i = 0; i < n; ++i) nonfin += is_nonfinite(x[i]);
    c.nonfinite += nonfin;
  }

  // Per-block statistics as bit patterns: amax bits (sym), or min and max (asym) kept as floats.
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
    // two threads touch the same block, and max/min are order-free.
    const bool by_cols = s_.gran == Granularity::Col;
    const int64_t units = by_cols ? cols : rows / T;
#pragma omp parallel for schedule(static) if (par)
    for (int64_t u = 0; u < units; ++u) {
      const int64_t r0 = by_cols ? 0 : u * T, r1 = by_cols ? rows : (u + 1) * T;
      const int64_t c0 = by_cols ? u : 0, c1 = by_cols ? u + 1 : cols;
      for (int64_t r = r0; r < r1; ++r) {
        for (int64_t col = c0; col < c1; ++col) {
          const int64_t b = by_cols ? col : (r / T) * tiles_per_row + col / T;
          const float t = finite_or_zero(src[r * cols + col]);
          if (s_.asym) {
            sa[size_t(b)] = t < sa[size_t(b)] ? t : sa[size_t(b)];
            sb[size_t(b)] = t > sb[size_t(b)] ? t : sb[size_t(b)];
          } else {
            const float at = std::fabs(t);
            sa[size_t(b)] = at > sa[size_t(b)] ? at : sa[size_t(b)];
          }
        }
      }
    }
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

  int64_t sat = 0;
  const bool want = c.want;
#pragma omp parallel for schedule(static) reduction(+ : sat) if (par)
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = src + r * cols;
    uint8_t* cr = codes + r * cols;
    if (s_.gran == Granularity::Tensor) {
      const float s = scale[0];
      const int32_t z = zero[0];
      for (int64_t col = 0; col < cols; ++col) cr[col] = uint8_t(q(finite_or_zero(xr[col]) / s, z));
    } else if (s_.gran == Granularity::Col) {
      for (int64_t col = 0; col < cols; ++col)
        cr[col] = uint8_t(q(finite_or_zero(xr[col]) / scale[size_t(col)], zero[size_t(col)]));
    } else {
      const int64_t b0 = (r / T) * tiles_per_row;
      for (int64_t col = 0; col < cols; ++col) {
        const size_t b = size_t(b0 + col / T);
        cr[col] = uint8_t(q(finite_or_zero(xr[col]) / scale[b], zero[b]));
      }
    }
    if (want)
      for (int64_t col = 0; col < cols; ++col) sat += is_sat_[cr[col]];
  }
  c.saturated += sat;
}

template <class F>
void QuantCodec::encode_taco(const float* x, const QuantLayout& L, uint8_t* wire, Counters& c) const {
  const int G = s_.block;
  const int64_t nb = L.blocks, numel = L.numel;
  const bool transformed = s_.transform != Transform::None;
  const float T = s_.target, lambda = s_.lambda, Fmax = elem_max(s_.elem, false);
  const bool sat_mode = s_.saturate, want = c.want, dual = s_.dual;
  int64_t sat = 0, nonfin = 0;
#pragma omp parallel for schedule(static) reduction(+ : sat, nonfin) if (numel >= kParallelMin)
  for (int64_t b = 0; b < nb; ++b) {
    alignas(64) float v[kMaxGroup];
    alignas(64) float sq[kMaxGroup];
    const int64_t off = b * G, m = std::min<int64_t>(G, numel - off);
    // 1. load, zero padding
    for (int64_t i = 0; i < m; ++i) v[i] = x[off + i];
    for (int64_t i = m; i < G; ++i) v[i] = 0.0f;
    if (want)
      for (int64_t i = 0; i < m; ++i) nonfin += is_nonfinite(v[i]);
    // 2. adaptive scale from the mean square of the m valid elements
    float s_a = 1.0f;
    if (dual) {
      for (int i = 0; i < G; ++i) sq[i] = v[i] * v[i];
      const float S = lane_tree_sum(sq, G);
      float var = S / float(m);
      var = var + lambda;
      var = var < 1e-12f ? 1e-12f : var;
      s_a = clampf(Fmax / std::sqrt(var), 1e-3f, 1e3f);
      for (int i = 0; i < G; ++i) v[i] = v[i] * s_a;
      put_f32(wire + L.aux_off + 4 * b, s_a);
    }
    // 3-4. signs, Hadamard
    if (!signs_.empty())
      for (int i = 0; i < G; ++i) v[i] = bits_float(float_bits(v[i]) ^ signs_[size_t(i)]);
    if (transformed) fwht(v, G);
    // 5. quantization scale from the max magnitude (NaN-ignoring)
    int32_t mb = 0;  // magnitudes as int32 bits (< 2^31): integer max vectorizes, order-free
    for (int i = 0; i < G; ++i) {
      const int32_t a = int32_t(float_bits(v[i]) & 0x7fffffffu);
      const int32_t t = a > 0x7f800000 ? 0 : a;
      mb = t > mb ? t : mb;
    }
    float M = bits_float(uint32_t(mb));
    if (mb == 0) {  // fmaxf over an all-NaN group is NaN
      bool all_nan = true;
      for (int i = 0; i < G; ++i) all_nan = all_nan && std::isnan(v[i]);
      if (all_nan) M = std::numeric_limits<float>::quiet_NaN();
    }
    const float mv = M < 1e-12f ? 1e-12f : M;
    const float s_q = clampf(safe_div(mv, T), 1e-12f, 1e6f);
    put_f32(wire + L.scale_off + 4 * b, s_q);
    // 6. codes
    const int64_t n = transformed ? G : m;
    uint8_t* out = wire + (transformed ? b * G : off);
    // safe_div: s_q >= 1e-12f after its clamp, so this always divides; kept for fidelity (and
    // hoisted, so the loop has no branch around the division and vectorizes).
    if (!(std::fabs(s_q) < 1e-12f)) {
      for (int64_t i = 0; i < n; ++i) {
        const float t = clamp_pm448(finite_or_zero(v[i]) / s_q);
        out[i] = uint8_t(encode_minifloat<F>(t, sat_mode));
      }
    } else {
      for (int64_t i = 0; i < n; ++i) out[i] = uint8_t(encode_minifloat<F>(0.0f, sat_mode));
    }
    if (want)
      for (int64_t i = 0; i < n; ++i) sat += is_sat_[out[i]];
  }
  c.saturated += sat;
  c.nonfinite += nonfin;
}

// ---- decode ---------------------------------------------------------------------------------

void QuantCodec::decode(const uint8_t* wire, size_t nbytes, int64_t rows, int64_t cols, float* out) const {
  const QuantLayout L = layout(rows, cols);
  TACO_REQUIRE_INPUT(int64_t(nbytes) == L.total,
                     "codec {}: wire buffer has {} bytes, but [{}, {}] encodes to {}", name_, nbytes,
                     rows, cols, L.total);
  if (s_.taco) return decode_taco(wire, L, out);
  if (s_.gran == Granularity::Group || s_.gran == Granularity::Row) {
    const int64_t len = s_.gran == Granularity::Group ? s_.block : cols;
    return decode_flat(wire, Flat{L.numel, len, L.blocks, s_.transform != Transform::None}, L, out);
  }
  decode_strided(wire, rows, cols, L, out);
}

void QuantCodec::decode_flat(const uint8_t* wire, const Flat& f, const QuantLayout& L, float* out) const {
  const int G = s_.block;
  const int bits = bits_;
  const float tensor_scale = two_level_ ? get_f32(wire + L.tensor_off) : 1.0f;
#pragma omp parallel for schedule(static) if (f.numel >= kParallelMin)
  for (int64_t b = 0; b < f.blocks; ++b) {
    const int64_t off = b * f.len, m = std::min(f.len, f.numel - off);
    const uint32_t code = get_le(wire + L.scale_off + b * sbytes_, sbytes_);
    const float s = two_level_ ? decode_scale(code, s_.scale) * tensor_scale : decode_scale(code, s_.scale);
    const float z = s_.asym ? float(wire[L.aux_off + b]) : 0.0f;
    if (f.transformed) {
      alignas(64) float v[kMaxGroup];
      const int64_t c0 = b * G;
      for (int i = 0; i < G; ++i) v[i] = (lut_[code_at(wire, c0 + i, bits)] - z) * s;
      inverse_transform(v);
      for (int64_t i = 0; i < m; ++i) out[off + i] = v[i];
    } else if (bits == 8) {
      const uint8_t* cw = wire + off;
      for (int64_t i = 0; i < m; ++i) out[off + i] = (lut_[cw[i]] - z) * s;
    } else {
      for (int64_t i = 0; i < m; ++i) out[off + i] = (lut_[code_at(wire, off + i, bits)] - z) * s;
    }
  }
}

void QuantCodec::decode_strided(const uint8_t* wire, int64_t rows, int64_t cols, const QuantLayout& L,
                                float* out) const {
  const int64_t nb = L.blocks, T = s_.block, n = L.numel;
  const bool par = n >= kParallelMin;
  const int bits = bits_;
  const float tensor_scale = two_level_ ? get_f32(wire + L.tensor_off) : 1.0f;
  std::vector<float> scale(static_cast<size_t>(nb)), zero(size_t(nb), 0.0f);
  for (int64_t b = 0; b < nb; ++b) {
    const uint32_t code = get_le(wire + L.scale_off + b * sbytes_, sbytes_);
    scale[size_t(b)] = two_level_ ? decode_scale(code, s_.scale) * tensor_scale : decode_scale(code, s_.scale);
    if (s_.asym) zero[size_t(b)] = float(wire[L.aux_off + b]);
  }
  const int64_t tiles_per_row = s_.gran == Granularity::Tile ? cols / T : 0;
#pragma omp parallel for schedule(static) if (par)
  for (int64_t r = 0; r < rows; ++r) {
    float* o = out + r * cols;
    for (int64_t col = 0; col < cols; ++col) {
      const size_t b = s_.gran == Granularity::Tensor ? 0
                       : s_.gran == Granularity::Col  ? size_t(col)
                                                      : size_t((r / T) * tiles_per_row + col / T);
      o[col] = (lut_[code_at(wire, r * cols + col, bits)] - zero[b]) * scale[b];
    }
  }
  if (s_.transform != Transform::None) {
    const int64_t segs = n / T;
#pragma omp parallel for schedule(static) if (par)
    for (int64_t g = 0; g < segs; ++g) inverse_transform(out + g * T);
  }
}

void QuantCodec::decode_taco(const uint8_t* wire, const QuantLayout& L, float* out) const {
  const int G = s_.block;
  const int64_t nb = L.blocks, numel = L.numel;
  const bool transformed = s_.transform != Transform::None, dual = s_.dual;
#pragma omp parallel for schedule(static) if (numel >= kParallelMin)
  for (int64_t b = 0; b < nb; ++b) {
    alignas(64) float v[kMaxGroup];
    const int64_t off = b * G, m = std::min<int64_t>(G, numel - off);
    const float s_q = get_f32(wire + L.scale_off + 4 * b);
    const int64_t n = transformed ? G : m;
    const uint8_t* cw = wire + (transformed ? b * G : off);
    for (int64_t i = 0; i < n; ++i) v[i] = lut_[cw[i]] * s_q;
    if (transformed) inverse_transform(v);
    if (dual) {
      float a = get_f32(wire + L.aux_off + 4 * b);
      a = a < 1e-12f ? 1e-12f : a;
      for (int64_t i = 0; i < m; ++i) out[off + i] = finite_or_zero(v[i]) / a;
    } else {
      for (int64_t i = 0; i < m; ++i) out[off + i] = finite_or_zero(v[i]);
    }
  }
}

}  // namespace taco
