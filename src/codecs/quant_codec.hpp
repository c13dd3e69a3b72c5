#pragma once
// The generic block-scaled quantization codec: every FP8 / FP4 / INT variant, MX, NVFP4 and
// TACO, one implementation with the variant (QuantSpec) as data.
//
// Blocks (one scale each):
//   tensor   one block
//   row      one block per row (token)
//   col      one block per column (channel)
//   g<G>     flat groups of G consecutive elements in row-major order over the whole chunk,
//            exactly as TACO forms them (methods.md 1.4). When cols % G == 0 these are 1 x G
//            groups along the hidden dimension; otherwise groups straddle rows. The last group
//            is partial when numel % G != 0 (the "tail", m < G valid elements).
//   tile<T>  T x T tiles; rows and cols must be multiples of T (InputError otherwise).
// Transforms (g<G> and tile<T> only) act on each group / each 1 x T row piece of a tile, before
// the scale is computed: had = H_G / sqrt(G), rht = H_G diag(signs) / sqrt(G) (hadamard.hpp).
//
// Tail policy (g<G> with a transform): the tail group is zero-padded to G, transformed, and all
// G codes are stored, so the decoder can invert the transform exactly; the chunk then carries
// g * G code bytes instead of numel. (The authors' TACO kernels store only the m valid codes,
// which corrupts the tail's reconstruction, methods.md 1.4.) Without a transform the tail stores
// its m codes. With numel % G == 0 both give the authors' layout.
//
// Wire layout of one encode() call (one chunk; no header; shapes implicit):
//   [codes][scales: blocks x scale bytes][aux][tensor scale]
//   codes   b-bit codes (8: FP8, INT8; 4: E2M1, INT4; 3: INT3; 2: INT2) in element order, tiles
//           too, as one little-endian bit stream: code i in bits [b i, b i + b) (bit 0 = least
//           significant bit of byte 0). So 8-bit codes are bytes, 4-bit ones nibbles (element 2i
//           low), 8 INT3 codes fill 3 bytes (the 24-bit little-endian word sum c_k << 3k, code 2
//           straddling bytes 0 and 1, code 5 bytes 1 and 2) and 4 INT2 codes one byte (code k at
//           bit 2k); ceil(b n / 8) bytes, the unused high bits of the last byte 0
//   scales  fp32 (4 B), bf16/fp16 (2 B), e8m0/ue4m3 (1 B), little-endian, in block order
//           (tiles: tile-row-major)
//   aux     asym: blocks x 1 B zero point; dual (TACO): blocks x fp32 s_a; else empty
//   tensor  ue4m3 scales only: the fp32 per-tensor scale S_t (NVFP4's second level)
// TACO (dual) is therefore [codes | g x fp32 s_q | g x fp32 s_a], methods.md 1.4.
//
// Scale rule (non-TACO): amax = max |v| over the block's finite values (non-finite inputs count
// as 0 and encode as 0); ideal = amax / T, clamped to [FLT_MIN, FLT_MAX]; then rounded into the
// scale format (formats/scale.hpp); code = enc(v / s), decode = dec(code) * s. Asymmetric ints:
// lo = min(min v, 0), hi = max(max v, 0), ideal = (hi - lo) / T, zero point
// z = clamp(rne(-lo / s), 0, qmax), code = clamp(rne(v / s) + z, 0, qmax), decode = (code - z) * s.
// Two-level (ue4m3): S_t = max over blocks of ideal / 448; block code = ue4m3(ideal / S_t),
// s = ue4m3_value * S_t (one fp32 multiply, the same on both sides).
// OCP MX (sround=ocp): s = 2^(floor(log2 amax) - emax_elem), emax 8 / 15 / 2 for E4M3 / E5M2 /
// E2M1 (OCP MX v1.0 section 6.3), clamped to E8M0's range; amax = 0 -> 2^-127; elements that land
// above the element max saturate. This is the pinned definition (TE and NKI differ).
//
// TACO rules (taco / dual), per group, in float32, mirrored step by step by the GPU kernels.
// The steps are methods.md 1.4's algorithm with the per-group scalars gathered into one factor
// (H is linear and rounding is monotonic, so this is the same map up to float rounding): s_a and
// 1/sqrt(G) multiply the transform's output once, through the quantization factor r, instead of
// every input and every output, and the division by s_q is a multiply by r = k / s_q. That is
// 1 multiply per element where the literal order takes 2 and a division; the codes differ from
// the literal order's only where a quotient lies within a float rounding of an FP8 rounding
// boundary (records 2026-12-01-h200-v37).
//   1. v[i] = x[i] for i < m, 0 for m <= i < G
//   2. (dual) S = lane_tree_sum_squares(v) (FMA per element); var = S / float(m); var += lambda;
//      var = (var < 1e-12f) ? 1e-12f : var;            (a NaN var passes through)
//      s_a = clampf(F / sqrtf(var), 1e-3f, 1e3f);       F = 448 (E4M3) or 57344 (E5M2)
//      (without dual s_a = 1 and is not stored)
//   3. (rht) v[i] = -v[i] where the sign mask is set
//   4. (had/rht) butterflies only; k = s_a * float(1/sqrt(G)) (taco-noh: k = s_a)
//   5. A = fmaxf over |v[i]|, i < G (NaN ignored; NaN only if every v[i] is NaN); M = A * k
//      mv = (M < 1e-12f) ? 1e-12f : M;  s_q = clampf(safe_div(mv, T), 1e-12f, 1e6f)
//   6. r = k / s_q; t = (finite(v[i]) ? v[i] : 0) * r; t = min(max(t, -448), 448);
//      code = fp8_rne(t, saturate)  (the +-448 clamp also for E5M2, as in the authors' code).
//      No product overflows: |t| is about T or less unless s_q was clamped to 1e6, and then
//      r <= 1e-3.
//   clampf(x, lo, hi) = fmaxf(fminf(x, hi), lo) with IEEE/CUDA NaN-ignoring fminf/fmaxf (so a
//   NaN maps to hi); safe_div(a, b) = |b| < 1e-12f ? 0 : a / b; sqrtf and / correctly rounded
//   (the authors' kernel uses rsqrtf; the bytes here are the correctly rounded reference).
//   Decode: f = s_q; (had/rht) f = f * float(1/sqrt(G)); (dual) f = f / max(s_a, 1e-12f);
//   y[i] = dec(code[i]); (had/rht) butterflies, then the signs; out[i] = finite(y[i] * f) ?
//   y[i] * f : 0 (one NaN or infinite code makes the whole transformed group 0).
#include "codecs/codec.hpp"
#include "codecs/variant.hpp"

#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace taco {

// TACO's clamps (steps 2 and 5 above: s_a and s_q) and the UE4M3 value a two-level codec maps its
// largest block scale to; the codec and codecs/range.cpp (what a codec represents) read them here.
inline constexpr float kTacoAdaptiveMin = 1e-3f, kTacoAdaptiveMax = 1e3f;
inline constexpr float kTacoScaleMin = 1e-12f, kTacoScaleMax = 1e6f;
inline constexpr float kTwoLevelMax = 448.0f;

// Byte offsets and sizes of one chunk's wire buffer.
struct QuantLayout {
  int64_t numel = 0, blocks = 0;
  int64_t block_len = 0;  // elements per block: G, T x T, cols (row), rows (col), numel (tensor)
  int64_t ncodes = 0, code_bytes = 0;
  int64_t scale_off = 0, scale_bytes = 0;
  int64_t aux_off = 0, aux_bytes = 0;
  int64_t tensor_off = 0, tensor_bytes = 0;
  int64_t total = 0;
};

// The layout of a [rows, cols] chunk, for the CPU codec and the GPU kernels alike; InputError
// (naming the codec `name`) when the shape does not suit the spec.
QuantLayout quant_layout(const QuantSpec& spec, int64_t rows, int64_t cols,
                         const std::string& name);

class QuantCodec final : public Codec {
 public:
  // allow_simd = false forces the baseline-ISA kernels (the AVX2 ones give the same bytes; tests
  // compare the two).
  QuantCodec(const QuantSpec& spec, std::string name, bool allow_simd = true);

  const std::string& name() const override { return name_; }
  nlohmann::json params() const override;
  const VariantSpec* variant_spec() const override { return &variant_; }
  std::vector<uint8_t> encode(const float* x, int64_t rows, int64_t cols,
                              EncodeStats* stats = nullptr) const override;
  void encode_into(const float* x, int64_t rows, int64_t cols, std::vector<uint8_t>& wire,
                   EncodeStats* stats = nullptr) const override;
  void decode(const uint8_t* wire, size_t nbytes, int64_t rows, int64_t cols,
              float* out) const override;

  WireSize wire_size(int64_t rows, int64_t cols) const override {
    return {layout(rows, cols).total, true};
  }

  const QuantSpec& spec() const { return s_; }
  // Layout for a shape; InputError when the shape does not suit the codec.
  QuantLayout layout(int64_t rows, int64_t cols) const;

 private:
  struct Counters;
  struct BlockScale;
  struct Flat;
  template <class Q>
  void encode_flat(const Q& q, const float* x, const Flat& f, const QuantLayout& L, uint8_t* codes,
                   uint8_t* wire, Counters& c) const;
  template <class Q>
  void encode_strided(const Q& q, const float* x, int64_t rows, int64_t cols, const QuantLayout& L,
                      uint8_t* codes, uint8_t* wire, Counters& c) const;
  template <class F>
  void encode_taco(const float* x, const QuantLayout& L, uint8_t* wire, Counters& c) const;
  template <class Q>
  void encode_dispatch(const Q& q, const float* x, int64_t rows, int64_t cols, const QuantLayout& L,
                       uint8_t* wire, Counters& c) const;
  void decode_flat(const uint8_t* wire, const Flat& f, const QuantLayout& L, float* out) const;
  void decode_strided(const uint8_t* wire, int64_t rows, int64_t cols, const QuantLayout& L,
                      float* out) const;
  void decode_taco(const uint8_t* wire, const QuantLayout& L, float* out) const;

  BlockScale block_scale(float a, float b, float tensor_scale) const;
  float block_ideal(float a, float b) const;
  friend struct QuantKernels;  // the element loops (quant_codec.cpp)

  QuantSpec s_;
  VariantSpec variant_;  // s_ as a variant
  std::string name_;
  int bits_;
  bool two_level_;
  int sbytes_;
  float hconst_ = 1.0f;
  std::vector<uint32_t> signs_;        // RHT sign masks (empty otherwise)
  std::array<float, 256> lut_{};       // code -> element value (ints: the integer)
  std::array<uint8_t, 256> is_sat_{};  // code at the largest magnitude the codec emits
  bool simd_ = false;                  // run the AVX2 instances of the kernels
};

}  // namespace taco
