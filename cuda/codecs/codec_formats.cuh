#pragma once
// Device versions of the CPU reference's number formats and scale rules, statement for
// statement (src/formats/minifloat.hpp, e8m0.hpp, intq.hpp, scale.hpp and the helpers of
// src/codecs/quant_codec.cpp). Divisions and square roots are the correctly rounded
// intrinsics whatever the compiler flags; additions and products are explicit _rn intrinsics
// wherever the CPU code could be read as a fused multiply-add.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <cstdint>

#include "cuda/codecs/codec_params.hpp"
#include "formats/hd_formats.hpp"
#include "formats/scale_division.hpp"

namespace taco::gpu::detail {

__device__ __forceinline__ uint32_t fbits(float x) {
  return __float_as_uint(x);
}
__device__ __forceinline__ float bitsf(uint32_t u) {
  return __uint_as_float(u);
}

__device__ __forceinline__ bool nonfinite(float x) {
  return (fbits(x) & 0x7f800000u) == 0x7f800000u;
}
__device__ __forceinline__ float finite_or_zero(float x) {
  return nonfinite(x) ? 0.0f : x;
}
// |x| as bits, non-finite values as 0 (bits order like magnitudes).
__device__ __forceinline__ uint32_t abs_bits_finite(float x) {
  const uint32_t a = fbits(x) & 0x7fffffffu;
  return a < 0x7f800000u ? a : 0u;
}
// IEEE minNum / maxNum (NaN ignored), as CUDA's fminf/fmaxf and the CPU's std::fmin/fmax.
__device__ __forceinline__ float clampf(float x, float lo, float hi) {
  return fmaxf(fminf(x, hi), lo);
}
__device__ __forceinline__ float safe_div(float a, float b) {
  return fabsf(b) < 1e-12f ? 0.0f : __fdiv_rn(a, b);
}

// ---- division by a per-group scale (formats/scale_division.hpp) ------------------------------
using taco::gpu::code_divisor_ok;
using taco::gpu::div_by_scale;
using taco::gpu::scale_divisor;
using taco::gpu::ScaleDivisor;

// ---- bf16 (core/dtype.hpp) -------------------------------------------------------------------
__device__ __forceinline__ float bf16_bits_to_float(uint32_t h) {
  return bitsf(h << 16);
}
// Two floats to bf16 with the hardware conversion: the same bits as float_to_bf16_bits for every
// value but NaN (the hardware writes the canonical 0x7fff; NaN payloads are outside the
// bit-exactness contract, src/codecs/codec.hpp). Low half = a.
__device__ __forceinline__ uint32_t bf16x2_bits_hw(float a, float b) {
  const __nv_bfloat162 h = __floats2bfloat162_rn(a, b);
  return *reinterpret_cast<const uint32_t*>(&h);
}
// f rounded to the nearest bf16 (ties to even), as a float.
__device__ __forceinline__ float round_to_bf16(float f) {
  return __bfloat162float(__float2bfloat16_rn(f));
}
__device__ __forceinline__ uint32_t float_to_bf16_bits(float f) {
  uint32_t u = fbits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (u >> 16) | 0x0040u;
  u += 0x7fffu + ((u >> 16) & 1u);
  return u >> 16;
}

// ---- FP8 elements (formats/minifloat.hpp) ----------------------------------------------------
// The CPU encoder, line for line; used for non-saturating encodes. Saturating encodes use the
// hardware conversion, which the tests check against this for every code path.
template <int Mbits, int Bias, uint32_t MaxCode, uint32_t OvfCode, uint32_t NanCode>
__device__ __forceinline__ uint32_t encode_minifloat_sw(float x, bool saturate) {
  constexpr int kShift = 23 - Mbits;
  constexpr uint32_t kRebias = uint32_t(127 - Bias) << 23;
  constexpr uint32_t kMinNormal = uint32_t(127 + 1 - Bias) << 23;
  constexpr uint32_t kSubMagic = uint32_t(127 + 1 - Bias - Mbits + 23) << 23;
  constexpr uint32_t kHalfMinus1 = (1u << (kShift - 1)) - 1u;
  const uint32_t u = fbits(x);
  const uint32_t a = u & 0x7fffffffu;
  const uint32_t sign = (u >> 31) * 0x80u;
  const uint32_t normal = (a - kRebias + kHalfMinus1 + ((a >> kShift) & 1u)) >> kShift;
  const uint32_t sub = fbits(__fadd_rn(bitsf(a), bitsf(kSubMagic))) - kSubMagic;
  uint32_t mag = a < kMinNormal ? sub : normal;
  const uint32_t ovf = saturate ? MaxCode : OvfCode;
  mag = mag > MaxCode ? ovf : mag;
  return a > 0x7f800000u ? NanCode : (mag | sign);
}
__device__ __forceinline__ uint32_t e4m3_sw(float x, bool sat) {
  return encode_minifloat_sw<3, 7, 0x7e, 0x7f, 0x7f>(x, sat);
}
__device__ __forceinline__ uint32_t e5m2_sw(float x, bool sat) {
  return encode_minifloat_sw<2, 15, 0x7b, 0x7c, 0x7f>(x, sat);
}

// Two saturating conversions in one instruction; low byte = a, high byte = b.
__device__ __forceinline__ uint32_t fp8x2_sat(float a, float b, ElemFormat e) {
  const __nv_fp8_interpretation_t k = e == ElemFormat::E4M3 ? __NV_E4M3 : __NV_E5M2;
  return uint32_t(__nv_cvt_float2_to_fp8x2(make_float2(a, b), __NV_SATFINITE, k));
}

// Exact FP8 -> float (through f16, which holds every FP8 value exactly).
__device__ __forceinline__ float fp8_to_float(uint32_t code, ElemFormat e) {
  const __nv_fp8_interpretation_t k = e == ElemFormat::E4M3 ? __NV_E4M3 : __NV_E5M2;
  const __half_raw h = __nv_cvt_fp8_to_halfraw(__nv_fp8_storage_t(code), k);
  return __half2float(__half(h));
}

// ---- integers (formats/intq.hpp) --------------------------------------------------------------
__device__ __forceinline__ float rne_small(float v) {
  constexpr float kMagic = 12582912.0f;  // 1.5 * 2^23
  return __fsub_rn(__fadd_rn(v, kMagic), kMagic);
}
__device__ __forceinline__ float clamp_nan0(float v, float lo, float hi) {
  const float c = v > hi ? hi : (v < lo ? lo : v);
  return isnan(v) ? 0.0f : c;
}
__device__ __forceinline__ uint32_t int_sym_code(float t, float qmax) {
  return uint32_t(int32_t(rne_small(clamp_nan0(t, -qmax, qmax)))) & 0xffu;
}

// Four int_sym_code codes as one word (|qmax| < 2^22). Adding 1.5 * 2^23 rounds to an integer
// (ties to even, as rne_small) and leaves its two's complement in the low byte of the sum's bits,
// so neither the subtraction nor a conversion is needed.
__device__ __forceinline__ uint32_t int8x4_sym(float a, float b, float c, float d, float qmax) {
  constexpr float kMagic = 12582912.0f;  // 1.5 * 2^23
  auto word = [qmax](float t) { return fbits(__fadd_rn(clamp_nan0(t, -qmax, qmax), kMagic)); };
  const uint32_t lo = __byte_perm(word(a), word(b), 0x0040);  // a's low byte, then b's
  const uint32_t hi = __byte_perm(word(c), word(d), 0x0040);
  return __byte_perm(lo, hi, 0x5410);
}

// One element code for the non-TACO rules: t is already v / s.
__device__ __forceinline__ uint32_t element_code(float t, const QuantRules& q) {
  switch (q.elem) {
    case ElemFormat::E4M3:
      return q.saturate ? (fp8x2_sat(t, 0.0f, q.elem) & 0xffu) : e4m3_sw(t, false);
    case ElemFormat::E5M2:
      return q.saturate ? (fp8x2_sat(t, 0.0f, q.elem) & 0xffu) : e5m2_sw(t, false);
    case ElemFormat::INT8:
      return int_sym_code(t, q.qmax);
  }
  return 0;
}
__device__ __forceinline__ float code_value(uint32_t code, ElemFormat e) {
  return e == ElemFormat::INT8 ? float(int32_t(int8_t(uint8_t(code)))) : fp8_to_float(code, e);
}

// ---- E8M0 (formats/e8m0.hpp) ------------------------------------------------------------------
__device__ __forceinline__ int floor_log2(float x) {
  const uint32_t a = fbits(x) & 0x7fffffffu;
  const int e = int(a >> 23);
  if (e != 0) return e - 127;
  return -149 + (31 - __clz(int(a)));
}
__device__ __forceinline__ bool is_pow2(float x) {
  const uint32_t a = fbits(x) & 0x7fffffffu;
  return (a >> 23) != 0 ? (a & 0x7fffffu) == 0 : (a & (a - 1u)) == 0;
}
__device__ __forceinline__ uint32_t e8m0_from_exp(int k) {
  k = k < -127 ? -127 : (k > 127 ? 127 : k);
  return uint32_t(k + 127);
}
__device__ __forceinline__ float e8m0_to_float(uint32_t c) {
  if (c == 0xffu) return bitsf(0x7fc00000u);  // the CPU's quiet_NaN
  if (c == 0) return bitsf(0x00400000u);
  return bitsf(c << 23);
}
__device__ __forceinline__ uint32_t e8m0_ceil(float x) {
  return x > 0 ? e8m0_from_exp(floor_log2(x) + (is_pow2(x) ? 0 : 1)) : 0u;
}
__device__ __forceinline__ uint32_t float_to_e8m0_sat(float x) {
  if (x != x) return 0xffu;
  if (!(x > 0)) return 0u;
  if (x == __int_as_float(0x7f800000)) return 0xfeu;
  const uint32_t a = fbits(x);
  int k = floor_log2(x);
  const int lead = (a >> 23) != 0 ? 23 : 31 - __clz(int(a));
  if (lead > 0 && ((a >> (lead - 1)) & 1u)) ++k;
  if (k > 127) return 0xfeu;
  return e8m0_from_exp(k);
}

// ---- scales (formats/scale.hpp, QuantCodec::block_ideal / block_scale) -------------------------
struct ScaleOut {
  uint32_t code;  // bytes as stored (little-endian, scale_bytes wide)
  float s;        // the scale values are divided by / decoded codes multiplied with
};

__device__ __forceinline__ ScaleOut encode_scale(float ideal, const QuantRules& q) {
  const bool up = q.sround == ScaleRound::Up;
  switch (q.scale) {
    case ScaleFormat::F32:
      return {fbits(ideal), ideal};
    case ScaleFormat::BF16: {
      uint32_t b = float_to_bf16_bits(ideal);
      if (up && bf16_bits_to_float(b) < ideal) ++b;
      b = b >= 0x7f80u ? 0x7f7fu : (b == 0 ? 1u : b);
      return {b, bf16_bits_to_float(b)};
    }
    case ScaleFormat::F16: {
      uint32_t h = __half_as_ushort(__float2half_rn(ideal));
      if (up && h < 0x7c00u && __half2float(__ushort_as_half((unsigned short)h)) < ideal) ++h;
      h = h >= 0x7c00u ? 0x7bffu : (h == 0 ? 1u : h);
      return {h, __half2float(__ushort_as_half((unsigned short)h))};
    }
    case ScaleFormat::E8M0: {
      const uint32_t c = up ? e8m0_ceil(ideal) : float_to_e8m0_sat(ideal);
      return {c, e8m0_to_float(c)};
    }
  }
  return {0, 1.0f};
}

__device__ __forceinline__ float device_scale_value(uint32_t code, ScaleFormat f) {
  switch (f) {
    case ScaleFormat::F32:
      return bitsf(code);
    case ScaleFormat::BF16:
      return bf16_bits_to_float(code & 0xffffu);
    case ScaleFormat::F16:
      return __half2float(__ushort_as_half((unsigned short)(code & 0xffffu)));
    case ScaleFormat::E8M0:
      return e8m0_to_float(code & 0xffu);
  }
  return 1.0f;
}

// The scale of a (symmetric) block from its finite amax.
__device__ __forceinline__ ScaleOut block_scale(float amax, const QuantRules& q) {
  if (q.sround == ScaleRound::OcpFloor) {
    const uint32_t c = amax > 0 ? e8m0_from_exp(floor_log2(amax) - q.emax) : 0u;
    return {c, e8m0_to_float(c)};
  }
  constexpr float kFltMin = 1.17549435e-38f, kFltMax = 3.40282347e+38f;
  float ideal = __fdiv_rn(amax, q.target);
  ideal = ideal < kFltMin ? kFltMin : (ideal > kFltMax ? kFltMax : ideal);
  return encode_scale(ideal, q);
}

__device__ __forceinline__ bool is_sat_code(uint32_t c, const QuantRules& q) {
  return (q.sat_code[(c >> 5) & 7u] >> (c & 31u)) & 1u;
}

// ---- codes narrower than a byte: 4-bit (E2M1, INT4), INT3, INT2 (formats/hd_formats.hpp,
// intq.hpp) A lane's b-bit codes travel as one little-endian bit stream over words in register
// order: register r at bits [b r, b r + b) (formats/intq.hpp's wire order, so a run of consecutive
// elements is the wire's bytes). 4-bit codes: word i holds the codes of registers 8i (low nibble)
// .. 8i + 7; an INT3 code may straddle two words. The element-format branch is taken once per
// group, not per element.
template <int Bits>
__device__ __forceinline__ constexpr uint32_t code_mask() {
  return (1u << Bits) - 1u;
}
// Code r of the stream w (compile-time r after unrolling: the shifts are constants).
template <int Bits, int W>
__device__ __forceinline__ uint32_t stream_code(const uint32_t (&w)[W], int r) {
  const int bit = Bits * r, k = bit / 32, s = bit % 32;
  if (s + Bits > 32) return __funnelshift_r(w[k], w[k + 1], s) & code_mask<Bits>();
  return (w[k] >> s) & code_mask<Bits>();
}
// 32-bit words of the stream of N codes of Bits bits (the last one partly used: 16 INT3 codes).
template <int N, int Bits>
inline constexpr int kStreamWords = (N * Bits + 31) / 32;
// ORs code c (< 2^Bits) into the stream w at register r.
template <int Bits, int W>
__device__ __forceinline__ void put_stream_code(uint32_t (&w)[W], int r, uint32_t c) {
  const int bit = Bits * r, k = bit / 32, s = bit % 32;
  w[k] |= c << s;
  if (s + Bits > 32) w[k + 1] |= c >> (32 - s);
}

// Symmetric b-bit integer codes of t (already v / s, none NaN), b < 8: clamp to [-qmax, qmax],
// then 1.5 * 2^23 added rounds to an integer (ties to even, as rne_small) and leaves its two's
// complement in the low bits of the sum's bits (as int4_word does for b = 4).
template <int Bits>
__device__ __forceinline__ uint32_t int_code_small(float t) {
  constexpr float qmax = float((1 << (Bits - 1)) - 1);
  return fbits(__fadd_rn(fminf(fmaxf(t, -qmax), qmax), 12582912.0f)) & code_mask<Bits>();
}
// Value of a b-bit two's complement code: 2^23 + (c ^ sign) as float bits, minus 2^23 + sign
// (exact; int4_value for b = 4).
template <int Bits>
__device__ __forceinline__ float int_value_small(uint32_t c) {
  constexpr uint32_t sign = 1u << (Bits - 1);
  return __fadd_rn(bitsf(0x4b000000u | (c ^ sign)), -(8388608.0f + float(sign)));
}

// The codes of N quotients t (none NaN) as the stream of Bits-bit codes: for E2M1 scaled by
// kE2M1Shift (hd_formats.hpp e2m1_word_scaled), for the integers not.
template <int N, int Bits>
__device__ __forceinline__ void encode_packed(const float (&t)[N],
                                              uint32_t (&w)[kStreamWords<N, Bits>],
                                              ElemFormat kind) {
  static_assert(N % 8 == 0, "whole bytes of codes");
  if constexpr (Bits == 4) {
    if (kind == ElemFormat::E2M1) {
#pragma unroll
      for (int i = 0; i < N / 8; ++i)
        w[i] = e2m1_word_scaled({t[8 * i], t[8 * i + 1], t[8 * i + 2], t[8 * i + 3], t[8 * i + 4],
                                 t[8 * i + 5], t[8 * i + 6], t[8 * i + 7]});
    } else {
#pragma unroll
      for (int i = 0; i < N / 8; ++i)
        w[i] = int4_word({t[8 * i], t[8 * i + 1], t[8 * i + 2], t[8 * i + 3], t[8 * i + 4],
                          t[8 * i + 5], t[8 * i + 6], t[8 * i + 7]});
    }
  } else {  // INT3, INT2 (variant.cpp: no other element format has fewer than 4 bits)
#pragma unroll
    for (int i = 0; i < kStreamWords<N, Bits>; ++i) w[i] = 0;
#pragma unroll
    for (int r = 0; r < N; ++r) put_stream_code<Bits>(w, r, int_code_small<Bits>(t[r]));
  }
}

// Code values times s (kScaled = false: the code values alone).
template <int N, int Bits, bool kScaled = true>
__device__ __forceinline__ void decode_packed(const uint32_t (&w)[kStreamWords<N, Bits>], float s,
                                              ElemFormat kind, float (&v)[N]) {
  if constexpr (Bits == 4) {
    if (kind == ElemFormat::E2M1) {
#pragma unroll
      for (int r = 0; r < N; ++r) {
        const float c = e2m1_value(w[r / 8] >> (4 * (r % 8)));
        v[r] = kScaled ? __fmul_rn(c, s) : c;
      }
    } else {
#pragma unroll
      for (int r = 0; r < N; ++r) {
        const float c = int4_value(w[r / 8] >> (4 * (r % 8)));
        v[r] = kScaled ? __fmul_rn(c, s) : c;
      }
    }
  } else {  // INT3, INT2
#pragma unroll
    for (int r = 0; r < N; ++r) {
      const float c = int_value_small<Bits>(stream_code<Bits>(w, r));
      v[r] = kScaled ? __fmul_rn(c, s) : c;
    }
  }
}

// The scale of a block of a 4-bit codec: block_scale, or NVFP4's two-level rule (UE4M3 code of
// the block's ideal scale over the chunk's tensor scale S_t).
__device__ __forceinline__ ScaleOut nibble_block_scale(float amax, const QuantRules& q,
                                                       float tensor_scale) {
  if (q.scale == ScaleFormat::UE4M3) {
    const HdScale h =
        two_level_block_scale(amax, q.target, tensor_scale, q.sround == ScaleRound::Up);
    return {h.code, h.s};
  }
  return block_scale(amax, q);
}
// The scale a stored code means (UE4M3: times the chunk's S_t).
__device__ __forceinline__ float nibble_decode_scale(uint32_t code, const QuantRules& q,
                                                     float tensor_scale) {
  if (q.scale == ScaleFormat::UE4M3) return __fmul_rn(ue4m3_value(code), tensor_scale);
  return device_scale_value(code, q.scale);
}

// ---- unaligned little-endian scalars in the wire ----------------------------------------------
__device__ __forceinline__ void put_le(uint8_t* p, uint32_t v, int nbytes) {
  for (int i = 0; i < nbytes; ++i) p[i] = uint8_t(v >> (8 * i));
}
__device__ __forceinline__ uint32_t get_le(const uint8_t* p, int nbytes) {
  uint32_t v = 0;
  for (int i = 0; i < nbytes; ++i) v |= uint32_t(p[i]) << (8 * i);
  return v;
}

}  // namespace taco::gpu::detail
