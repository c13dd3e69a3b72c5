#pragma once
// The fused warp-group pipelines of the block-scaled codecs with flat groups of G (TACO,
// fp8-g128, mxfp8, int8-g128, with or without a Hadamard transform). One templated family: the
// group size and the transform are compile-time (they shape the register layout), everything
// else (element format, scale format and rounding, TACO / dual rules, RHT signs, saturation,
// dtypes) is run-time data in KernelParams and costs one uniform branch.
//
// Work decomposition: a warp owns 32 / 2^LB groups at a time (2^LB lanes per group, 2^R
// consecutive elements per lane, so a lane's input is one or more 16-byte loads); a grid-stride
// loop walks all (chunk, group) pairs of the launch, so any grid size is correct.
#include <type_traits>

#include "cuda/codec_formats.cuh"
#include "cuda/codec_params.hpp"
#include "cuda/group_layout.cuh"

namespace taco::gpu::detail {

// Sector_: the kernel works in SectorLayout (runs of 8 elements, lanes next) rather than
// LaneLayout (each lane's elements consecutive); group_kernels() picks per kernel.
template <int LG_, int R_, bool Had_, bool Sector_>
struct GroupCfg {
  static constexpr int LG = LG_, R = R_, LB = LG_ - R_;
  static constexpr int G = 1 << LG_;     // group size
  static constexpr int EPL = 1 << R_;    // elements per lane
  static constexpr int LPG = 1 << LB;    // lanes per group
  static constexpr int GPW = 32 / LPG;   // groups per warp
  static constexpr bool kHad = Had_;
  static_assert(LB >= 0 && LB <= 5, "a group spans at most one warp");
  static_assert(EPL >= 8, "16-byte bf16 loads need 8 elements per lane");
  // The layout of the group in registers and lanes, in which the kernel loads and stores.
  using Load = std::conditional_t<Sector_, SectorLayout<R_, LB>, LaneLayout<R_, LB>>;
};

// One lane's view of the group it works on.
struct Item {
  int64_t c = 0;     // chunk
  int64_t b = 0;     // group inside the chunk
  int m = 0;         // valid elements (G, or fewer for the tail group)
  bool valid = false;
};

template <class Cfg>
__device__ __forceinline__ Item make_item(const KernelParams& p, int64_t gg) {
  Item it;
  const int64_t nb = p.geo.nblocks;
  it.valid = gg < p.chunks * nb;
  const int64_t g = it.valid ? gg : 0;
  if (p.idx32) {
    const uint32_t g32 = uint32_t(g);
    it.c = int64_t((uint64_t(__umulhi(g32, p.nb_magic)) + g32) >> p.nb_shift);
  } else {
    it.c = g / nb;
  }
  it.b = g - it.c * nb;
  const int64_t rem = p.geo.numel - it.b * Cfg::G;
  it.m = int(rem < Cfg::G ? rem : Cfg::G);
  return it;
}

template <class L>
__device__ __forceinline__ int elem_index(int r, int lane) {
  return L::reg_offset(r) | L::lane_offset(lane);
}

// ---- input ---------------------------------------------------------------------------------
// A group's input for one lane, as raw words (bf16 pairs or f32 bits) in the order of the
// lane's registers (layout Cfg::Load); elements past the valid m (and whole invalid items) are
// 0. Loading is split from unpacking so that a warp can issue the loads of several items before
// it computes on the first.
template <class Cfg, typename InT>
struct RawInput {
  static constexpr int kWords = Cfg::EPL * int(sizeof(InT)) / 4;
  uint32_t w[kWords];
};

template <class Cfg, typename InT>
__device__ __forceinline__ void load_raw(const KernelParams& p, const Item& it, int lane,
                                         RawInput<Cfg, InT>& raw) {
  using L = typename Cfg::Load;
  constexpr int kWords = RawInput<Cfg, InT>::kWords;
  constexpr int K = 1 << L::run_log2();                  // consecutive elements per run
  constexpr int kRunWords = K * int(sizeof(InT)) / 4;    // a run is whole 16-byte vectors
  static_assert(kRunWords % 4 == 0, "runs of at least 16 bytes");
  const int lo = L::lane_offset(lane);
  const InT* src = static_cast<const InT*>(p.in) + it.c * p.in_stride + it.b * Cfg::G;
  if (it.valid && it.m == Cfg::G && p.in_vec16) {
#pragma unroll
    for (int j = 0; j < Cfg::EPL / K; ++j) {
      const uint4* s = reinterpret_cast<const uint4*>(src + (L::reg_offset(j * K) | lo));
#pragma unroll
      for (int t = 0; t < kRunWords / 4; ++t) {
        const uint4 q = __ldg(s + t);
        uint32_t* w = raw.w + j * kRunWords + 4 * t;
        w[0] = q.x;
        w[1] = q.y;
        w[2] = q.z;
        w[3] = q.w;
      }
    }
  } else {
#pragma unroll
    for (int k = 0; k < kWords; ++k) raw.w[k] = 0;
#pragma unroll
    for (int r = 0; r < Cfg::EPL; ++r) {
      const int i = L::reg_offset(r) | lo;
      if (it.valid && i < it.m) {
        if constexpr (sizeof(InT) == 2) raw.w[r / 2] |= uint32_t(src[i]) << (16 * (r % 2));
        else raw.w[r] = fbits(src[i]);
      }
    }
  }
}

template <class Cfg, typename InT>
__device__ __forceinline__ void unpack_raw(const RawInput<Cfg, InT>& raw, float (&v)[Cfg::EPL]) {
#pragma unroll
  for (int r = 0; r < Cfg::EPL; ++r) {
    if constexpr (sizeof(InT) == 2) v[r] = bitsf(r % 2 ? (raw.w[r / 2] & 0xffff0000u) : (raw.w[r / 2] << 16));
    else v[r] = bitsf(raw.w[r]);
  }
}

// Sign flips of the randomized Hadamard for a group held in layout L.
template <class L>
__device__ __forceinline__ void apply_rht_signs(float (&v)[L::kRegs], int lane, const QuantRules& q) {
#pragma unroll
  for (int r = 0; r < L::kRegs; ++r) {
    const int i = elem_index<L>(r, lane);
    const uint32_t neg = (q.rht_neg[i >> 5] >> (i & 31)) & 1u;
    v[r] = bitsf(fbits(v[r]) ^ (neg << 31));
  }
}

// ---- code stores ---------------------------------------------------------------------------
// Codes travel as pairs: pair[i] holds the codes of registers 2i (low byte) and 2i + 1, as the
// FP8 conversion instruction produces them.
template <class L>
__device__ __forceinline__ uint32_t code_at(const uint32_t (&pair)[L::kRegs / 2], int r) {
  return (pair[r / 2] >> (8 * (r % 2))) & 0xffu;
}

// Writes the first n of the group's codes at `dst` (the group's first code byte). Runs of
// consecutive elements go out as one vector store when `vec` (alignment checked on the host)
// and the whole group is stored.
template <class L>
__device__ __forceinline__ void store_codes(uint8_t* dst, const uint32_t (&pair)[L::kRegs / 2],
                                            int lane, int n, bool vec) {
  constexpr int K = 1 << L::run_log2();
  static_assert(K >= 4, "code runs of at least 4 bytes");
  constexpr int kRuns = L::kRegs / K;
  const int lo = L::lane_offset(lane);
  if (vec && n == (1 << L::LG)) {
#pragma unroll
    for (int j = 0; j < kRuns; ++j) {
      uint32_t w[K / 4];
#pragma unroll
      for (int t = 0; t < K / 4; ++t)
        w[t] = __byte_perm(pair[(j * K + 4 * t) / 2], pair[(j * K + 4 * t) / 2 + 1], 0x5410);
      uint8_t* d = dst + (L::reg_offset(j * K) | lo);
      if constexpr (K == 4) {
        *reinterpret_cast<uint32_t*>(d) = w[0];
      } else if constexpr (K == 8) {
        *reinterpret_cast<uint2*>(d) = make_uint2(w[0], w[1]);
      } else {
#pragma unroll
        for (int t = 0; t < K / 16; ++t)
          reinterpret_cast<uint4*>(d)[t] = make_uint4(w[4 * t], w[4 * t + 1], w[4 * t + 2], w[4 * t + 3]);
      }
    }
  } else {
#pragma unroll
    for (int r = 0; r < L::kRegs; ++r) {
      const int i = L::reg_offset(r) | lo;
      if (i < n) dst[i] = uint8_t(code_at<L>(pair, r));
    }
  }
}

__device__ __forceinline__ void store_f32_scalar(uint8_t* dst, float x, bool aligned) {
  if (aligned) *reinterpret_cast<float*>(dst) = x;
  else put_le(dst, fbits(x), 4);
}
__device__ __forceinline__ float load_f32_scalar(const uint8_t* src, bool aligned) {
  return aligned ? __ldg(reinterpret_cast<const float*>(src)) : bitsf(get_le(src, 4));
}

// ---- encode --------------------------------------------------------------------------------
// The element codes of t (already divided by the scale) as pairs. The format branch is taken
// once per group, not per pair: with the kind a constant, a saturating FP8 pair is one
// conversion instruction.
template <int N>
__device__ __forceinline__ void encode_pairs(const float (&t)[N], uint32_t (&pair)[N / 2], const QuantRules& q) {
  if (q.saturate && q.elem == ElemKind::E4M3) {
#pragma unroll
    for (int i = 0; i < N / 2; ++i) pair[i] = fp8x2_sat(t[2 * i], t[2 * i + 1], ElemKind::E4M3);
  } else if (q.saturate && q.elem == ElemKind::E5M2) {
#pragma unroll
    for (int i = 0; i < N / 2; ++i) pair[i] = fp8x2_sat(t[2 * i], t[2 * i + 1], ElemKind::E5M2);
  } else {
#pragma unroll
    for (int i = 0; i < N / 2; ++i) pair[i] = element_code(t[2 * i], q) | (element_code(t[2 * i + 1], q) << 8);
  }
}

// Encodes one group held in layout L (values already zero past m) into the chunk's wire buffer:
// codes, scale(s). Adds the saturated codes it stored to `sat`.
template <class Cfg, class L>
__device__ __forceinline__ void encode_group(const KernelParams& p, const Item& it, int lane,
                                             float (&v)[Cfg::EPL], unsigned long long& sat) {
  constexpr int EPL = Cfg::EPL;
  const QuantRules& q = p.rules;
  const bool leader = (lane & (Cfg::LPG - 1)) == 0;
  uint8_t* wire = p.wire_out + it.c * p.wire_out_stride;
  const int n = Cfg::kHad ? Cfg::G : it.m;  // codes stored
  uint32_t pair[EPL / 2];

  if (q.taco) {
    // methods.md 1.4 / quant_codec.hpp "TACO rules", steps 2-6
    float s_a = 1.0f;
    if (q.dual) {
      const float S = group_sum_squares<L>(v, lane);
      // S / G is S * 2^-LG rounded once, the same value as the division.
      float var = it.m == Cfg::G ? __fmul_rn(S, 1.0f / float(Cfg::G)) : __fdiv_rn(S, float(it.m));
      var = __fadd_rn(var, q.lambda);
      var = var < 1e-12f ? 1e-12f : var;
      s_a = clampf(__fdiv_rn(q.fmax, __fsqrt_rn(var)), 1e-3f, 1e3f);
#pragma unroll
      for (int r = 0; r < EPL; ++r) v[r] = __fmul_rn(v[r], s_a);
    }
    if constexpr (Cfg::kHad) {
      if (q.rht) apply_rht_signs<L>(v, lane, q);
      fwht<L>(v, lane);
#pragma unroll
      for (int r = 0; r < EPL; ++r) v[r] = __fmul_rn(v[r], q.hconst);
    }
    // M: the max of |v| as integer bits (NaN > Inf > finite) doubles as the non-finite test; a
    // warp with a non-finite value anywhere takes the general path (NaN-ignoring max, zeroing).
    uint32_t mb = 0;
#pragma unroll
    for (int r = 0; r < EPL; ++r) mb = max(mb, fbits(v[r]) & 0x7fffffffu);
#pragma unroll
    for (int j = 0; j < L::LB; ++j) mb = max(mb, __shfl_xor_sync(kFullMask, mb, 1 << j));
    const bool general = __any_sync(kFullMask, mb >= 0x7f800000u) || !q.fast_div;
    const float M = general ? group_absmax_nan<L>(v) : bitsf(mb);
    const float mv = M < 1e-12f ? 1e-12f : M;
    const float s_q = clampf(safe_div(mv, q.target), 1e-12f, 1e6f);
    const bool div_ok = !(fabsf(s_q) < 1e-12f);
    constexpr float kClamp = 448.0f;
    // E4M3 SATFINITE already maps every |t| > 448 to 448: the clamp changes no code there.
    const bool clamp = !(q.elem == ElemKind::E4M3 && q.saturate);
    float t[EPL];
    if (!general) {
      const ScaleDivisor d = scale_divisor(s_q);  // s_q in [1e-12, 1e6]: always code_divisor_ok
#pragma unroll
      for (int r = 0; r < EPL; ++r) t[r] = div_by_scale(v[r], d);
    } else {
#pragma unroll
      for (int r = 0; r < EPL; ++r) t[r] = div_ok ? __fdiv_rn(finite_or_zero(v[r]), s_q) : 0.0f;
    }
    if (clamp) {
#pragma unroll
      for (int r = 0; r < EPL; ++r) t[r] = t[r] > kClamp ? kClamp : (t[r] < -kClamp ? -kClamp : t[r]);
    }
    encode_pairs<EPL>(t, pair, q);  // TACO elements are FP8 (variant.cpp)
    if (it.valid) {
      store_codes<L>(wire + it.b * Cfg::G, pair, lane, n, p.code_vec);
      if (leader) {
        store_f32_scalar(wire + p.geo.scale_off + 4 * it.b, s_q, p.scale_vec4);
        if (q.dual) store_f32_scalar(wire + p.geo.aux_off + 4 * it.b, s_a, p.scale_vec4);
      }
    }
  } else {
    // QuantCodec::encode_flat with prepare_group for transformed groups
    if constexpr (Cfg::kHad) {
#pragma unroll
      for (int r = 0; r < EPL; ++r) v[r] = finite_or_zero(v[r]);
      if (q.rht) apply_rht_signs<L>(v, lane, q);
      fwht<L>(v, lane);
#pragma unroll
      for (int r = 0; r < EPL; ++r) v[r] = finite_or_zero(__fmul_rn(v[r], q.hconst));
    }
    // The max of |v| bits doubles as the non-finite test (as in the TACO path).
    uint32_t mb = 0;
#pragma unroll
    for (int r = 0; r < EPL; ++r) mb = max(mb, fbits(v[r]) & 0x7fffffffu);
#pragma unroll
    for (int j = 0; j < L::LB; ++j) mb = max(mb, __shfl_xor_sync(kFullMask, mb, 1 << j));
    const bool nonfinite_warp = __any_sync(kFullMask, mb >= 0x7f800000u);
    const uint32_t amax_bits = nonfinite_warp ? group_amax_bits_finite<L>(v) : mb;
    const ScaleOut so = block_scale(bitsf(amax_bits), q);
    float t[EPL];
    if (!nonfinite_warp && q.fast_div && code_divisor_ok(so.s)) {
      const ScaleDivisor d = scale_divisor(so.s);
#pragma unroll
      for (int r = 0; r < EPL; ++r) t[r] = div_by_scale(v[r], d);
    } else {
#pragma unroll
      for (int r = 0; r < EPL; ++r) t[r] = __fdiv_rn(finite_or_zero(v[r]), so.s);
    }
    encode_pairs<EPL>(t, pair, q);
    if (it.valid) {
      store_codes<L>(wire + it.b * Cfg::G, pair, lane, n, p.code_vec);
      if (leader) {
        uint8_t* sp = wire + p.geo.scale_off + it.b * q.scale_bytes;
        if (q.scale_bytes == 4) store_f32_scalar(sp, bitsf(so.code), p.scale_vec4);
        else put_le(sp, so.code, q.scale_bytes);
      }
    }
  }
  if (p.stats && it.valid) {
    const int lo = L::lane_offset(lane);
#pragma unroll
    for (int r = 0; r < EPL; ++r)
      sat += ((L::reg_offset(r) | lo) < n && is_sat_code(code_at<L>(pair, r), q)) ? 1u : 0u;
  }
}

// ---- decode --------------------------------------------------------------------------------
// One lane's share of a coded group as loaded: its EPL codes (load layout) and the group's
// scale bytes. load_codes only issues loads (no arithmetic on their results), so a kernel can
// load the next group while it decodes this one; decode_codes interprets them.
template <class Cfg>
struct RawCodes {
  uint32_t w[Cfg::EPL / 4];
  uint32_t s_bits, s_a_bits;  // the scale as stored (scale_bytes, little-endian), TACO's s_a
  bool valid;
};

template <class Cfg>
__device__ __forceinline__ void load_codes(const KernelParams& p, const uint8_t* wire, const Item& it,
                                           int lane, RawCodes<Cfg>& raw) {
  using L = typename Cfg::Load;
  constexpr int EPL = Cfg::EPL;
  constexpr int K = 1 << L::run_log2();  // consecutive codes per run: 8 or a multiple of 16
  static_assert(K == 8 || K % 16 == 0, "code runs of 8 or 16k bytes");
  const QuantRules& q = p.rules;
  const int lo = L::lane_offset(lane);
  const int n = Cfg::kHad ? Cfg::G : it.m;
  const uint8_t* cp = wire + it.b * Cfg::G;
  if (it.valid && p.code_vec && n == Cfg::G) {
#pragma unroll
    for (int j = 0; j < EPL / K; ++j) {
      const uint8_t* s = cp + (L::reg_offset(j * K) | lo);
      uint32_t* w = raw.w + j * (K / 4);
      if constexpr (K == 8) {
        const uint2 q2 = __ldg(reinterpret_cast<const uint2*>(s));
        w[0] = q2.x;
        w[1] = q2.y;
      } else {
#pragma unroll
        for (int t = 0; t < K / 16; ++t) {
          const uint4 q4 = __ldg(reinterpret_cast<const uint4*>(s) + t);
          w[4 * t] = q4.x;
          w[4 * t + 1] = q4.y;
          w[4 * t + 2] = q4.z;
          w[4 * t + 3] = q4.w;
        }
      }
    }
  } else {
#pragma unroll
    for (int k = 0; k < EPL / 4; ++k) raw.w[k] = 0;
#pragma unroll
    for (int r = 0; r < EPL; ++r) {
      const int i = L::reg_offset(r) | lo;
      if (it.valid && i < n) raw.w[r / 4] |= uint32_t(cp[i]) << (8 * (r % 4));
    }
  }
  raw.valid = it.valid;
  raw.s_bits = 0;
  raw.s_a_bits = 0;
  if (it.valid) {
    if (q.scale_bytes == 4) raw.s_bits = fbits(load_f32_scalar(wire + p.geo.scale_off + 4 * it.b, p.scale_vec4));
    else raw.s_bits = get_le(wire + p.geo.scale_off + it.b * q.scale_bytes, q.scale_bytes);
    if (q.taco && q.dual) raw.s_a_bits = fbits(load_f32_scalar(wire + p.geo.aux_off + 4 * it.b, p.scale_vec4));
  }
}

// Code values times s. The format branch is taken once per group, not per pair: FP8 pairs
// convert in one instruction (to half2, exact) and two widenings.
template <int N>
__device__ __forceinline__ void decode_elems(const uint32_t (&w)[N / 4], float s, ElemKind kind, float (&v)[N]) {
  if (kind == ElemKind::INT8) {
#pragma unroll
    for (int r = 0; r < N; ++r) v[r] = __fmul_rn(float(int32_t(int8_t(uint8_t(w[r / 4] >> (8 * (r % 4)))))), s);
    return;
  }
  const __nv_fp8_interpretation_t k = kind == ElemKind::E4M3 ? __NV_E4M3 : __NV_E5M2;
#pragma unroll
  for (int r = 0; r < N; r += 2) {
    const uint32_t pair = (w[r / 4] >> (8 * (r % 4))) & 0xffffu;
    const float2 f = __half22float2(__half2(__nv_cvt_fp8x2_to_halfraw2(__nv_fp8x2_storage_t(pair), k)));
    v[r] = __fmul_rn(f.x, s);
    v[r + 1] = __fmul_rn(f.y, s);
  }
}

// Decodes one lane's share of a group (load layout).
template <class Cfg>
__device__ __forceinline__ void decode_codes(const KernelParams& p, const RawCodes<Cfg>& raw, int lane,
                                             float (&v)[Cfg::EPL]) {
  constexpr int EPL = Cfg::EPL;
  using Load = typename Cfg::Load;
  const QuantRules& q = p.rules;
  // A NaN/Inf code anywhere in the group spreads through the transform: one group-wide flag.
  bool finite = false;  // no NaN/Inf code in the whole group (only computed for TACO codecs)
  if (q.taco) {
    // A byte is NaN/Inf when its exponent-and-mantissa bits (E4M3) or its exponent bits (E5M2)
    // are all ones: adding one at the lowest such bit then carries into bit 7 (never further).
    const bool e4 = q.elem == ElemKind::E4M3;
    const uint32_t mask = e4 ? 0x7f7f7f7fu : 0x7c7c7c7cu, one = e4 ? 0x01010101u : 0x04040404u;
    uint32_t bad = 0;
#pragma unroll
    for (int k = 0; k < EPL / 4; ++k) bad |= (raw.w[k] & mask) + one;
    bad &= 0x80808080u;
#pragma unroll
    for (int j = 0; j < Cfg::LB; ++j) bad |= __shfl_xor_sync(kFullMask, bad, 1 << j);
    finite = bad == 0;
  }
  float s = 1.0f, s_a = 1.0f;
  if (raw.valid) {
    s = q.scale_bytes == 4 ? bitsf(raw.s_bits) : decode_scale(raw.s_bits, q.scale);
    if (q.taco && q.dual) s_a = bitsf(raw.s_a_bits);
  }
  decode_elems<EPL>(raw.w, s, q.elem, v);
  if constexpr (Cfg::kHad) {
    fwht<Load>(v, lane);
#pragma unroll
    for (int r = 0; r < EPL; ++r) v[r] = __fmul_rn(v[r], q.hconst);
    if (q.rht) apply_rht_signs<Load>(v, lane, q);
  }
  if (q.taco) {
    // Valid wires: finite codes and s_q in [2^-55, 2^60] make every value finite, and every
    // nonzero |value| at least s_q * 2^-41 (a multiple of the smallest code's float quantum,
    // times 1/sqrt(G)) and at most s_q * 2^24, so the fast division is exact (its conditions:
    // |a| in [2^-100, 2^100] or 0, divisor in [2^-20, 2^20]). Anything else takes the IEEE path.
    const float a = s_a < 1e-12f ? 1e-12f : s_a;
    const bool fast = finite && s >= 2.77555756e-17f /* 2^-55 */ && s <= 1.15292150e+18f /* 2^60 */ &&
                      (!q.dual || value_divisor_ok(a));
    if (fast) {
      if (q.dual) {
        const ScaleDivisor d = scale_divisor(a);
#pragma unroll
        for (int r = 0; r < EPL; ++r) v[r] = div_by_scale(v[r], d);
      }
    } else if (q.dual) {
#pragma unroll
      for (int r = 0; r < EPL; ++r) v[r] = __fdiv_rn(finite_or_zero(v[r]), a);
    } else {
#pragma unroll
      for (int r = 0; r < EPL; ++r) v[r] = finite_or_zero(v[r]);
    }
  }
}

// Writes the first m values of a group held in layout L to out (element type out_type).
template <class L>
__device__ __forceinline__ void store_values(const KernelParams& p, int64_t first, const float (&v)[L::kRegs],
                                             int lane, int m) {
  constexpr int K = 1 << L::run_log2();
  constexpr int kRuns = L::kRegs / K;
  const int lo = L::lane_offset(lane);
  const bool full = m == (1 << L::LG);
  if (p.out_type == DataType::BF16) {
    uint16_t* out = static_cast<uint16_t*>(p.out) + first;
    if (full && p.out_vec16 && K >= 4) {
#pragma unroll
      for (int j = 0; j < kRuns; ++j) {
        uint32_t w[K / 2];
#pragma unroll
        for (int t = 0; t < K / 2; ++t)
          w[t] = bf16x2_bits_hw(v[j * K + 2 * t], v[j * K + 2 * t + 1]);
        uint16_t* d = out + (L::reg_offset(j * K) | lo);
        if constexpr (K == 4) {
          *reinterpret_cast<uint2*>(d) = make_uint2(w[0], w[1]);
        } else {
#pragma unroll
          for (int t = 0; t < K / 8; ++t)
            reinterpret_cast<uint4*>(d)[t] = make_uint4(w[4 * t], w[4 * t + 1], w[4 * t + 2], w[4 * t + 3]);
        }
      }
      return;
    }
#pragma unroll
    for (int r = 0; r < L::kRegs; ++r) {
      const int i = L::reg_offset(r) | lo;
      if (i < m) out[i] = uint16_t(bf16x2_bits_hw(v[r], 0.0f));
    }
  } else {
    float* out = static_cast<float*>(p.out) + first;
    if (full && p.out_vec16 && K >= 4) {
#pragma unroll
      for (int j = 0; j < kRuns; ++j) {
        float* d = out + (L::reg_offset(j * K) | lo);
#pragma unroll
        for (int t = 0; t < K / 4; ++t)
          reinterpret_cast<float4*>(d)[t] =
              make_float4(v[j * K + 4 * t], v[j * K + 4 * t + 1], v[j * K + 4 * t + 2], v[j * K + 4 * t + 3]);
      }
      return;
    }
#pragma unroll
    for (int r = 0; r < L::kRegs; ++r) {
      const int i = L::reg_offset(r) | lo;
      if (i < m) out[i] = v[r];
    }
  }
}

}  // namespace taco::gpu::detail
