#pragma once
// The fused warp-group pipelines of the block-scaled codecs with flat groups of G (TACO,
// fp8-g128, mxfp8, int8-g128, with or without a Hadamard transform). One templated family: the
// group size and the transform are compile-time (they shape the register layout), and so is the
// rule family (TACO's adaptive and dual scales, or one block scale): a kernel's occupancy is set
// by its heaviest path, and the TACO path's registers kept the block-scaled encodes from more
// blocks per multiprocessor (fp8-g128: 94 registers with both paths; alone it fits 7 blocks, 72
// registers, without spills: kEncodeMinBlocks). Everything else (element format, scale format
// and rounding, dual scale, RHT signs, saturation, dtypes) is run-time data in KernelParams and
// costs one uniform branch.
//
// Work decomposition: a warp owns 32 / 2^LB groups at a time (2^LB lanes per group, 2^R
// consecutive elements per lane, so a lane's input is one or more 16-byte loads); a grid-stride
// loop walks all (chunk, group) pairs of the launch, so any grid size is correct.
//
// Codes narrower than a byte (GroupCfg::kBits: 4 for E2M1 and INT4, 3 for INT3, 2 for INT2) are a
// compile-time layout too: a lane's codes are b / 8 as many bytes, one little-endian bit stream
// (store_packed). They take the block-scaled rules only (variant.cpp), 4-bit codes with NVFP4's
// two-level UE4M3 scale among them.
#include <type_traits>

#include "cuda/codecs/codec_formats.cuh"
#include "cuda/codecs/codec_params.hpp"
#include "cuda/codecs/group_layout.cuh"

namespace taco::gpu::detail {

// Per-warp counter sums, one atomic per warp.
__device__ __forceinline__ void flush_stats(unsigned long long* stats, unsigned long long sat,
                                            unsigned long long nonfin) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    sat += __shfl_xor_sync(kFullMask, sat, o);
    nonfin += __shfl_xor_sync(kFullMask, nonfin, o);
  }
  if ((threadIdx.x & 31) == 0) {
    if (sat) atomicAdd(stats, sat);
    if (nonfin) atomicAdd(stats + 1, nonfin);
  }
}

// How a kernel holds its groups (group_kernels() picks per kernel):
//  Lane, Sector: one layout throughout, LaneLayout (each lane's elements consecutive) or
//    SectorLayout (runs of 8 elements, lanes next);
//  LaneToSector (transformed decodes of 128 at 32 per lane, regroup's padding): codes load in
//    LaneLayout, whose register bits are the transform's first stages, and the transform
//    regroups the values into SectorLayout for the stores (fwht_to).
enum class Lay { Lane, Sector, LaneToSector };

template <int LG_, int R_, bool Had_, Lay K_, bool Taco_, bool Ref_ = false, int Bits_ = 8>
struct GroupCfg {
  static constexpr int LG = LG_, R = R_, LB = LG_ - R_;
  static constexpr int G = 1 << LG_;    // group size
  static constexpr int EPL = 1 << R_;   // elements per lane
  static constexpr int LPG = 1 << LB;   // lanes per group
  static constexpr int GPW = 32 / LPG;  // groups per warp
  static constexpr bool kHad = Had_;
  static constexpr bool kTaco = Taco_;  // TACO rules (QuantRules::taco; the dispatch matches them)
  // An encode under TACO's reference rules with no counters (GpuQuant::reference_encode says
  // when): the rule flags the encode reads (dual scale, no RHT, saturating E4M3, a target in
  // range) and p.stats == nullptr are compile-time facts instead of run-time branches.
  static constexpr bool kRef = Ref_;
  static_assert(!Ref_ || Taco_, "reference rules are TACO rules");
  static constexpr int kBits = Bits_;  // bits per code: 8, or 4, 3, 2 (a bit stream)
  static_assert(Bits_ == 8 || ((Bits_ == 4 || Bits_ == 3 || Bits_ == 2) && !Taco_),
                "codes narrower than a byte take the block-scaled rules");
  static constexpr int kCodeWords = kStreamWords<1 << R_, Bits_>;  // 32-bit words of a lane's codes
  static_assert(LB >= 0 && LB <= 5, "a group spans at most one warp");
  static_assert(EPL >= 8, "16-byte bf16 loads need 8 elements per lane");
  static constexpr bool kRegroup = K_ == Lay::LaneToSector;
  static_assert(!kRegroup || (Had_ && LG_ == 7 && R_ == 5),
                "regrouping: transformed groups of 128, 32 per lane");
  using LaneL = LaneLayout<R_, LB>;
  using SectorL = SectorLayout<R_, LB>;
  // Where loads land (raw input of an encode, codes of a decode), an encode's sum of squares
  // and signs run, and a decode's codes are decoded.
  using In = std::conditional_t<K_ == Lay::Sector, SectorL, LaneL>;
  // Where the group is from the transform on, and is stored from.
  using Out = std::conditional_t<K_ == Lay::Lane, LaneL, SectorL>;
  // Shared-memory floats per group for the regrouping (0: none).
  static constexpr int kScratchFloats = kRegroup ? kRegroupFloats : 0;
};

// max(a, b) that propagates NaN (PTX max.NaN): the max of |v| over a group is then finite
// exactly when every value is.
__device__ __forceinline__ float fmax_nan(float a, float b) {
  float d;
  asm("max.NaN.f32 %0, %1, %2;" : "=f"(d) : "f"(a), "f"(b));
  return d;
}
template <int N>
__device__ __forceinline__ float lane_absmax_nan(const float (&v)[N]) {
  float m[N / 2];  // a pairwise tree, as lane_absmax
#pragma unroll
  for (int i = 0; i < N / 2; ++i) m[i] = fmax_nan(fabsf(v[2 * i]), fabsf(v[2 * i + 1]));
  tree_detail::fold<N / 4>(m, [](float a, float b) { return fmax_nan(a, b); });
  return m[0];
}

// The calling lane's group scratch area in the kernel's shared array `mem` (nullptr when the
// configuration needs none). Warps own consecutive areas, one per group.
template <class Cfg>
__device__ __forceinline__ float* group_scratch(float* mem, int gsub) {
  if constexpr (Cfg::kScratchFloats == 0)
    return nullptr;
  else
    return mem + (int(threadIdx.x / 32) * Cfg::GPW + gsub) * Cfg::kScratchFloats;
}

// One lane's view of the group it works on. Indices are 32-bit: the host splits launches so that
// a launch has at most kMaxLaunchGroups groups (GpuQuant::launch_group).
struct Item {
  uint32_t c = 0;  // chunk
  uint32_t b = 0;  // group inside the chunk
  int m = 0;       // valid elements (G, or fewer for the tail group)
  bool valid = false;
};

// Offset of the item's group in a [chunks][stride] buffer of groups of G (elements or bytes),
// and of its chunk.
template <class Cfg>
__device__ __forceinline__ int64_t group_at(const Item& it, int64_t stride) {
  return int64_t(it.c) * stride + int64_t(it.b) * Cfg::G;
}
__device__ __forceinline__ int64_t chunk_at(const Item& it, int64_t stride) {
  return int64_t(it.c) * stride;
}

// Groups of the launch (chunks x nblocks, below 2^31).
__device__ __forceinline__ uint32_t launch_groups(const KernelParams& p) {
  return uint32_t(p.chunks * p.geo.nblocks);
}

// Valid elements of group b (the last group of a chunk may be short).
template <class Cfg>
__device__ __forceinline__ int group_elems(const KernelParams& p, uint32_t b) {
  return b == uint32_t(p.geo.nblocks - 1) ? int(p.geo.numel - (p.geo.nblocks - 1) * Cfg::G)
                                          : Cfg::G;
}

// The item of flat group index gg (chunk-major); past the end: invalid, at group 0 so that no
// address leaves the buffers. The chunk is gg / nblocks without a division (Granlund-Montgomery:
// (umulhi(g, nb_magic) + g) >> nb_shift).
template <class Cfg>
__device__ __forceinline__ Item make_item(const KernelParams& p, uint32_t gg) {
  Item it;
  it.valid = gg < launch_groups(p);
  const uint32_t g = it.valid ? gg : 0u;
  it.c = uint32_t((uint64_t(__umulhi(g, p.nb_magic)) + g) >> p.nb_shift);
  it.b = g - it.c * uint32_t(p.geo.nblocks);
  it.m = group_elems<Cfg>(p, it.b);
  return it;
}

// The lane's next item of a grid-stride walk, `step` groups on (flat index gg): inside the chunk
// one addition; leaving it (or from an invalid item) through make_item. Re-deriving every item
// in 64-bit arithmetic costs many instructions per warp iteration; re-deriving it in 32 bits
// (make_item alone, no state across iterations) frees registers but is slower.
template <class Cfg>
__device__ __forceinline__ void next_item(const KernelParams& p, Item& it, uint32_t gg,
                                          uint32_t step) {
  const uint32_t b = it.b + step;
  if (it.valid && b < uint32_t(p.geo.nblocks)) {
    it.b = b;
    it.m = group_elems<Cfg>(p, b);
  } else {
    it = make_item<Cfg>(p, gg);
  }
}

template <class L>
__device__ __forceinline__ int elem_index(int r, int lane) {
  return L::reg_offset(r) | L::lane_offset(lane);
}

// ---- input ---------------------------------------------------------------------------------
// A group's input for one lane, as raw words (bf16 pairs or f32 bits) in the order of the
// lane's registers (layout Cfg::In); elements past the valid m (and whole invalid items) are
// 0. Loading is split from unpacking so that a warp can issue the loads of several items before
// it computes on the first.
template <class Cfg, typename InT>
struct RawInput {
  static constexpr int kWords = Cfg::EPL * int(sizeof(InT)) / 4;
  uint32_t w[kWords];
};

// kWhole: the item is a whole group of a single-chunk launch whose accesses may all be vectors
// (group_encode_kernel's whole-group walk), so the general case's tests drop out at compile time.
template <class Cfg, typename InT, bool kWhole = false>
__device__ __forceinline__ void load_raw(const KernelParams& p, const Item& it, int lane,
                                         RawInput<Cfg, InT>& raw) {
  using L = typename Cfg::In;
  constexpr int kWords = RawInput<Cfg, InT>::kWords;
  constexpr int K = 1 << L::run_log2();                // consecutive elements per run
  constexpr int kRunWords = K * int(sizeof(InT)) / 4;  // a run is whole 16-byte vectors
  static_assert(kRunWords % 4 == 0, "runs of at least 16 bytes");
  const int lo = L::lane_offset(lane);
  const InT* src = static_cast<const InT*>(p.in) + group_at<Cfg>(it, p.in_stride);
  if (kWhole || (it.valid && it.m == Cfg::G && p.in_vec16)) {
#pragma unroll
    for (int j = 0; j < Cfg::EPL / K; ++j) {
      // + rather than |: the bits are disjoint, and a constant added to one lane pointer is an
      // immediate offset of the load (with |, a 64-bit address per load).
      const uint4* s = reinterpret_cast<const uint4*>(src + lo + L::reg_offset(j * K));
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
        if constexpr (sizeof(InT) == 2)
          raw.w[r / 2] |= uint32_t(src[i]) << (16 * (r % 2));
        else
          raw.w[r] = fbits(src[i]);
      }
    }
  }
}

// Asks L2 for the input of the group this lane loads `step` groups on, when that group is whole
// and in the same chunk (the chunk's last group, which may be short, is left out, so every
// address stays inside the input): a hint without registers or a result, so the next
// iteration's loads find their lines in L2 instead of waiting on DRAM. The lanes of a group
// touch lines G / LPG elements apart. The address is this group's (load_raw's, shared by the
// compiler) plus loop-invariant offsets: deriving it from the item again cost 17 instructions
// per lane and iteration.
template <class Cfg, typename InT>
__device__ __forceinline__ void prefetch_input_l2(const KernelParams& p, const Item& it, int lane,
                                                  uint32_t step) {
  if (!it.valid || it.b + step + 1 >= uint32_t(p.geo.nblocks)) return;
  const InT* src = static_cast<const InT*>(p.in) + group_at<Cfg>(it, p.in_stride) +
                   int64_t(step) * Cfg::G + (lane & (Cfg::LPG - 1)) * (Cfg::G / Cfg::LPG);
  asm volatile("prefetch.global.L2 [%0];" ::"l"(src));
}

template <class Cfg, typename InT>
__device__ __forceinline__ void unpack_raw(const RawInput<Cfg, InT>& raw, float (&v)[Cfg::EPL]) {
#pragma unroll
  for (int r = 0; r < Cfg::EPL; ++r) {
    if constexpr (sizeof(InT) == 2)
      v[r] = bitsf(r % 2 ? (raw.w[r / 2] & 0xffff0000u) : (raw.w[r / 2] << 16));
    else
      v[r] = bitsf(raw.w[r]);
  }
}

// Sign flips of the randomized Hadamard for a group held in layout L.
template <class L>
__device__ __forceinline__ void apply_rht_signs(float (&v)[L::kRegs], int lane,
                                                const QuantRules& q) {
#pragma unroll
  for (int r = 0; r < L::kRegs; ++r) {
    const int i = elem_index<L>(r, lane);
    const uint32_t neg = (q.rht_neg[i >> 5] >> (i & 31)) & 1u;
    v[r] = bitsf(fbits(v[r]) ^ (neg << 31));
  }
}

// ---- code stores ---------------------------------------------------------------------------
// Codes travel as words of four: quad[i] holds the codes of registers 4i (low byte) .. 4i + 3.
template <class L>
__device__ __forceinline__ uint32_t code_at(const uint32_t (&quad)[L::kRegs / 4], int r) {
  return (quad[r / 4] >> (8 * (r % 4))) & 0xffu;
}

// Writes the first n of the group's codes at `dst` (the group's first code byte). Runs of
// consecutive elements go out as one vector store when `vec` (alignment checked on the host)
// and the whole group is stored.
template <class L>
__device__ __forceinline__ void store_codes(uint8_t* dst, const uint32_t (&quad)[L::kRegs / 4],
                                            int lane, int n, bool vec) {
  constexpr int K = 1 << L::run_log2();
  static_assert(K >= 4, "code runs of at least 4 bytes");
  constexpr int kRuns = L::kRegs / K;
  const int lo = L::lane_offset(lane);
  if (vec && n == (1 << L::LG)) {
#pragma unroll
    for (int j = 0; j < kRuns; ++j) {
      const uint32_t* w = quad + j * K / 4;
      uint8_t* d = dst + lo + L::reg_offset(j * K);
      if constexpr (K == 4) {
        *reinterpret_cast<uint32_t*>(d) = w[0];
      } else if constexpr (K == 8) {
        *reinterpret_cast<uint2*>(d) = make_uint2(w[0], w[1]);
      } else {
#pragma unroll
        for (int t = 0; t < K / 16; ++t)
          reinterpret_cast<uint4*>(d)[t] =
              make_uint4(w[4 * t], w[4 * t + 1], w[4 * t + 2], w[4 * t + 3]);
      }
    }
  } else {
#pragma unroll
    for (int r = 0; r < L::kRegs; ++r) {
      const int i = L::reg_offset(r) | lo;
      if (i < n) dst[i] = uint8_t(code_at<L>(quad, r));
    }
  }
}

// Codes narrower than a byte travel as a bit stream per lane (codec_formats.cuh encode_packed):
// register r at bits [b r, b r + b) of w. The group's codes hold 2^LG b / 8 bytes from dst (its
// first code byte), the wire's bit stream. A lane's run j of K >= 8 consecutive elements (first
// element e) is K b / 8 whole bytes, at stream byte j K b / 8 in w and at byte e b / 8 from dst,
// so runs are copied byte for byte, in units of the largest power of two that divides K b / 8
// (at most 16; every run and group starts at a multiple of it): a word per run of 8 nibbles, three
// bytes per run of 8 INT3 codes, three words per run of 32, 16 bits per run of 8 INT2 codes.
template <int K, int Bits>
constexpr int packed_unit_bytes() {
  constexpr int n = K * Bits / 8;
  return n % 16 == 0 ? 16 : n % 8 == 0 ? 8 : n % 4 == 0 ? 4 : n % 2 == 0 ? 2 : 1;
}
// Stream bytes [x, x + A) of w to / from d (A | 16, x a multiple of A; compile-time x).
template <int A, int W>
__device__ __forceinline__ void store_stream_unit(uint8_t* d, const uint32_t (&w)[W], int x) {
  if constexpr (A == 16)
    *reinterpret_cast<uint4*>(d) = make_uint4(w[x / 4], w[x / 4 + 1], w[x / 4 + 2], w[x / 4 + 3]);
  else if constexpr (A == 8)
    *reinterpret_cast<uint2*>(d) = make_uint2(w[x / 4], w[x / 4 + 1]);
  else if constexpr (A == 4)
    *reinterpret_cast<uint32_t*>(d) = w[x / 4];
  else if constexpr (A == 2)
    *reinterpret_cast<uint16_t*>(d) = uint16_t(w[x / 4] >> (8 * (x % 4)));
  else
    *d = uint8_t(w[x / 4] >> (8 * (x % 4)));
}
// Streaming loads; w's words of units below 4 bytes start at 0.
template <int A, int W>
__device__ __forceinline__ void load_stream_unit(const uint8_t* s, uint32_t (&w)[W], int x) {
  if constexpr (A == 16) {
    const uint4 q4 = __ldcs(reinterpret_cast<const uint4*>(s));
    w[x / 4] = q4.x;
    w[x / 4 + 1] = q4.y;
    w[x / 4 + 2] = q4.z;
    w[x / 4 + 3] = q4.w;
  } else if constexpr (A == 8) {
    const uint2 q2 = __ldcs(reinterpret_cast<const uint2*>(s));
    w[x / 4] = q2.x;
    w[x / 4 + 1] = q2.y;
  } else if constexpr (A == 4) {
    w[x / 4] = __ldcs(reinterpret_cast<const unsigned int*>(s));
  } else if constexpr (A == 2) {
    w[x / 4] |= uint32_t(__ldcs(reinterpret_cast<const unsigned short*>(s))) << (8 * (x % 4));
  } else {
    w[x / 4] |= uint32_t(__ldcs(s)) << (8 * (x % 4));
  }
}

// Writes the codes of the group's first n elements at dst. A tail writes each byte that holds one
// of its codes whole, with the codes of the zeros past it (0) on top, as the reference packs it.
template <class L, int Bits>
__device__ __forceinline__ void store_packed(uint8_t* dst,
                                             const uint32_t (&w)[kStreamWords<L::kRegs, Bits>],
                                             int lane, int n, bool vec) {
  constexpr int K = 1 << L::run_log2();
  static_assert(K >= 8, "runs of whole bytes of codes");
  constexpr int kRunBytes = K * Bits / 8;
  constexpr int A = packed_unit_bytes<K, Bits>();
  const int lo = L::lane_offset(lane);
  if (vec && n == (1 << L::LG)) {
#pragma unroll
    for (int j = 0; j < L::kRegs / K; ++j) {
      uint8_t* d = dst + (lo + L::reg_offset(j * K)) * Bits / 8;
#pragma unroll
      for (int t = 0; t < kRunBytes / A; ++t)
        store_stream_unit<A>(d + t * A, w, j * kRunBytes + t * A);
    }
  } else {
#pragma unroll
    for (int j = 0; j < L::kRegs / K; ++j) {
      const int e = lo + L::reg_offset(j * K);  // the run's first element
#pragma unroll
      for (int x = 0; x < kRunBytes; ++x)  // byte x of the run starts with element e + 8x / b
        if (e + 8 * x / Bits < n)
          store_stream_unit<1>(dst + e * Bits / 8 + x, w, j * kRunBytes + x);
    }
  }
}

// Code of register r, 8-bit or narrower.
template <class Cfg>
__device__ __forceinline__ uint32_t group_code(const uint32_t (&w)[Cfg::kCodeWords], int r) {
  if constexpr (Cfg::kBits < 8)
    return stream_code<Cfg::kBits>(w, r);
  else
    return code_at<typename Cfg::In>(w, r);
}

// One lane's share of a coded group as loaded: its EPL codes (load layout) and the group's
// scale bytes. load_codes only issues loads (no arithmetic on their results), so a kernel can
// load the next group while it decodes this one; decode_codes interprets them. An encode that
// keeps what it wrote (error feedback) hands it over in the same form.
template <class Cfg>
struct RawCodes {
  uint32_t w[Cfg::kCodeWords];
  uint32_t s_bits;    // the scale as stored (scale_bytes, little-endian)
  uint32_t s_a_bits;  // TACO's s_a; UE4M3 scales: the chunk's S_t
  bool valid;
};

// The byte-wise paths of unaligned scales are calls: inlined, ptxas predicates them next to the
// aligned access, and all their byte loads or stores then issue in every group (profile of the
// taco decode: 8 byte loads per lane and group).
static __device__ __noinline__ void put_le4_unaligned(uint8_t* dst, uint32_t v) {
  put_le(dst, v, 4);
}
static __device__ __noinline__ uint32_t get_le4_unaligned(const uint8_t* src) {
  return get_le(src, 4);
}
__device__ __forceinline__ void store_f32_scalar(uint8_t* dst, float x, bool aligned) {
  if (aligned)
    *reinterpret_cast<float*>(dst) = x;
  else
    put_le4_unaligned(dst, fbits(x));
}
__device__ __forceinline__ float load_f32_scalar(const uint8_t* src, bool aligned) {
  return aligned ? __ldg(reinterpret_cast<const float*>(src)) : bitsf(get_le4_unaligned(src));
}

// ---- encode --------------------------------------------------------------------------------
// Whether an encode counts saturated codes and non-finite inputs (p.stats): never under the
// reference rules (Cfg::kRef), whose kernels run only without counters.
template <class Cfg>
__device__ __forceinline__ bool counts(const KernelParams& p) {
  return !Cfg::kRef && p.stats != nullptr;
}
// The rule flags a TACO encode reads: constants under the reference rules (taco_reference_rules
// in codec_kernels.hpp is the host's test of the same set; constants save 7% of the taco
// encode's instructions), read where they are used otherwise (as locals, they changed
// the other kernels' code).
template <class Cfg>
__device__ __forceinline__ bool rule_dual(const QuantRules& q) {
  return Cfg::kRef || q.dual;
}
template <class Cfg>
__device__ __forceinline__ bool rule_rht(const QuantRules& q) {
  return !Cfg::kRef && q.rht;
}
template <class Cfg>
__device__ __forceinline__ bool rule_sat_e4m3(const QuantRules& q) {
  return Cfg::kRef || (q.elem == ElemFormat::E4M3 && q.saturate);
}
template <class Cfg>
__device__ __forceinline__ bool rule_target_in_range(const QuantRules& q) {
  return Cfg::kRef || q.target_in_range;
}

// Correctly rounded x / y and sqrt(x) as the fast paths of __fdiv_rn and __fsqrt_rn (the same
// instructions, so the same bits), without their range tests and called slow paths: valid for
// normal operands whose quotient is normal (division) and for x in [2^-100, FLT_MAX] (root).
// Outside those ranges the results are wrong; the callers only pass values inside them.
__device__ __forceinline__ float div_rn_in_range(float x, float y) {
  float r0;
  asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(r0) : "f"(y));
  const float r = __fmaf_rn(r0, __fmaf_rn(-y, r0, 1.0f), r0);
  const float q0 = __fmaf_rn(x, r, 0.0f);
  return __fmaf_rn(r, __fmaf_rn(-y, q0, x), q0);
}
__device__ __forceinline__ float sqrt_rn_in_range(float x) {
  float y, s, h;
  asm("rsqrt.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  asm("mul.ftz.f32 %0, %1, %2;" : "=f"(s) : "f"(x), "f"(y));
  asm("mul.ftz.f32 %0, %1, 0f3F000000;" : "=f"(h) : "f"(y));
  return __fmaf_rn(__fmaf_rn(-s, s, x), h, s);
}

// Four saturating FP8 codes (a in the low byte) as two pair conversions whose 16-bit results
// form the two halves of one 32-bit register. The same conversion as fp8x2_sat; written in PTX so
// that no mask of the 16-bit results comes between them (the intrinsic's 16-bit return type
// cost a LOP3 per pair).
template <__nv_fp8_interpretation_t kKind>
__device__ __forceinline__ uint32_t fp8x4_sat(float a, float b, float c, float d) {
  uint32_t w;
  if constexpr (kKind == __NV_E4M3)
    asm("{\n .reg .b16 lo, hi;\n cvt.rn.satfinite.e4m3x2.f32 lo, %2, %1;\n"
        " cvt.rn.satfinite.e4m3x2.f32 hi, %4, %3;\n mov.b32 %0, {lo, hi};\n}"
        : "=r"(w)
        : "f"(a), "f"(b), "f"(c), "f"(d));
  else
    asm("{\n .reg .b16 lo, hi;\n cvt.rn.satfinite.e5m2x2.f32 lo, %2, %1;\n"
        " cvt.rn.satfinite.e5m2x2.f32 hi, %4, %3;\n mov.b32 %0, {lo, hi};\n}"
        : "=r"(w)
        : "f"(a), "f"(b), "f"(c), "f"(d));
  return w;
}

// The element codes of t (already divided by the scale) as quads. The format branch is taken
// once per group, not per element: with the kind a constant, two saturating FP8 codes are one
// conversion instruction, and four int8 codes four additions and three byte permutes
// (kInt8: the caller may meet int8 elements).
template <int N, bool kInt8>
__device__ __forceinline__ void encode_quads(const float (&t)[N], uint32_t (&quad)[N / 4],
                                             const QuantRules& q) {
  if (q.saturate && q.elem == ElemFormat::E4M3) {
#pragma unroll
    for (int i = 0; i < N / 4; ++i)
      quad[i] = fp8x4_sat<__NV_E4M3>(t[4 * i], t[4 * i + 1], t[4 * i + 2], t[4 * i + 3]);
  } else if (q.saturate && q.elem == ElemFormat::E5M2) {
#pragma unroll
    for (int i = 0; i < N / 4; ++i)
      quad[i] = fp8x4_sat<__NV_E5M2>(t[4 * i], t[4 * i + 1], t[4 * i + 2], t[4 * i + 3]);
  } else if (kInt8 && q.elem == ElemFormat::INT8) {
#pragma unroll
    for (int i = 0; i < N / 4; ++i)
      quad[i] = int8x4_sym(t[4 * i], t[4 * i + 1], t[4 * i + 2], t[4 * i + 3], q.qmax);
  } else {
#pragma unroll
    for (int i = 0; i < N / 4; ++i)
      quad[i] = element_code(t[4 * i], q) | (element_code(t[4 * i + 1], q) << 8) |
                (element_code(t[4 * i + 2], q) << 16) | (element_code(t[4 * i + 3], q) << 24);
  }
}

// Encodes one group held in its layout (values already zero past m) into the chunk's wire
// buffer: codes, scale(s). Adds the saturated codes it stored to `sat`. kWhole: as load_raw's.
// kKeep: also hands the codes and scales it wrote to *keep, as load_codes would read them
// back (the error-feedback encode decodes them in registers).
template <class Cfg, bool kWhole = false, bool kKeep = false>
__device__ __forceinline__ void encode_group(const KernelParams& p, const Item& it, int lane,
                                             float (&v)[Cfg::EPL], unsigned long long& sat,
                                             RawCodes<Cfg>* keep = nullptr) {
  // Regrouping inside the transform made encodes slower.
  static_assert(!Cfg::kRegroup, "encodes keep one layout");
  using L = typename Cfg::In;
  constexpr int EPL = Cfg::EPL;
  const QuantRules& q = p.rules;
  const bool leader = (lane & (Cfg::LPG - 1)) == 0;
  uint8_t* wire = kWhole ? p.wire_out : p.wire_out + chunk_at(it, p.wire_out_stride);
  const int n = Cfg::kHad || kWhole ? Cfg::G : it.m;  // codes stored
  const bool whole = kWhole || it.m == Cfg::G;
  const bool code_vec = kWhole || p.code_vec, scale_vec4 = kWhole || p.scale_vec4;
  uint32_t quad[Cfg::kCodeWords];

  if constexpr (Cfg::kTaco) {
    // methods.md 1.4 / quant_codec.hpp "TACO rules", steps 2-6
    // S, var and s_a even where s_a is off (taco-nosa): under `if (q.dual)` ptxas unpacked the
    // bf16 input there and again after it for the transform (32 instructions per lane and group
    // of the reference variant), and the branch kept the s_a chain out of the transform's block.
    const float S = group_sum_squares<L>(v, lane);
    // S / G is S * 2^-LG rounded once, the same value as the division.
    float var = whole ? __fmul_rn(S, 1.0f / float(Cfg::G)) : __fdiv_rn(S, float(it.m));
    var = __fadd_rn(var, q.lambda);
    var = var < 1e-12f ? 1e-12f : var;
    if constexpr (Cfg::kHad) {
      if (rule_rht<Cfg>(q)) apply_rht_signs<L>(v, lane, q);
    }
    // s_a = fmax / sqrt(var) without branches (computed even when s_a is off), so that ptxas can
    // schedule its dependent chain between the transform's additions: var is at least 1e-12, so
    // the square root and the division (of the format's max) take the intrinsics' fast paths,
    // whose sequences these are; var = +inf (S overflowed) gives 0 as sqrt and division would.
    float s_a = div_rn_in_range(q.fmax, sqrt_rn_in_range(var));
    s_a = var == __int_as_float(0x7f800000) ? 0.0f : s_a;
    s_a = rule_dual<Cfg>(q) ? clampf(s_a, 1e-3f, 1e3f) : 1.0f;
    if constexpr (Cfg::kHad) fwht<L>(v, lane);
    // s_a and 1/sqrt(G) as one factor, applied through M and r below
    const float k = Cfg::kHad ? (rule_dual<Cfg>(q) ? __fmul_rn(s_a, q.hconst) : q.hconst) : s_a;
    // A = max |v|, and whether the group has a non-finite value: a warp with one anywhere takes
    // the general path (NaN-ignoring max, zeroing). With s_a, a finite S bounds every |x| by
    // 2^64, so every transformed value is finite and a float max (abs folded into FMNMX) is the
    // max; without, the max of |v| as integer bits (NaN > Inf > finite) doubles as the test.
    float A;
    bool nonfinite_group;
    if (rule_dual<Cfg>(q)) {
      A = lane_absmax(v);
#pragma unroll
      for (int j = 0; j < L::LB; ++j) A = fmaxf(A, __shfl_xor_sync(kFullMask, A, 1 << j));
      nonfinite_group = !(S <= 3.40282347e+38f);
    } else {
      uint32_t mb = lane_absmax_bits(v);
#pragma unroll
      for (int j = 0; j < L::LB; ++j) mb = max(mb, __shfl_xor_sync(kFullMask, mb, 1 << j));
      A = bitsf(mb);
      nonfinite_group = mb >= 0x7f800000u;
    }
    const bool general = __any_sync(kFullMask, nonfinite_group);
    if (general) A = group_absmax_nan<L>(v);
    const float M = __fmul_rn(A, k);
    const float mv = M < 1e-12f ? 1e-12f : M;
    // Both divisions without their range tests where that gives the same bits. s_q: with T in
    // [2^-39, 2^40] every quotient that survives the clamp to [1e-12, 1e6] has both operands and
    // itself normal (mv within [2^-80, 2^60]); larger ones come out >= 1e6, inf or NaN and
    // smaller ones below 1e-12, which the clamp maps as it maps the exact quotient (the safe_div
    // zero case needs T < 1e-12). rq: k within [2^-15, 2^10] and s_q within [1e-12, 1e6].
    float s_q = div_rn_in_range(mv, q.target);
    if (!rule_target_in_range<Cfg>(q)) s_q = safe_div(mv, q.target);
    s_q = clampf(s_q, 1e-12f, 1e6f);
    const float rq = div_rn_in_range(k, s_q);
    if (!general && rule_sat_e4m3<Cfg>(q)) {
      // The common case in a block of its own, so that its products go straight into the
      // conversions: merged with the general path below, ptxas moved all 32 of them between
      // registers first. E4M3 SATFINITE already maps every |t| > 448 to 448 (no clamp).
#pragma unroll
      for (int i = 0; i < EPL / 4; ++i)
        quad[i] = fp8x4_sat<__NV_E4M3>(__fmul_rn(v[4 * i], rq), __fmul_rn(v[4 * i + 1], rq),
                                       __fmul_rn(v[4 * i + 2], rq), __fmul_rn(v[4 * i + 3], rq));
    } else {
      constexpr float kClamp = 448.0f;
      float t[EPL];
#pragma unroll
      for (int r = 0; r < EPL; ++r) {
        const float x = __fmul_rn(finite_or_zero(v[r]), rq);
        t[r] = x > kClamp ? kClamp : (x < -kClamp ? -kClamp : x);
      }
      // TACO elements are FP8 (variant.cpp). Compiling the int8 branch into this path made the
      // taco encode 2-3% slower.
      encode_quads<EPL, false>(t, quad, q);
    }
    if (it.valid) {
      store_codes<L>(wire + int64_t(it.b) * Cfg::G, quad, lane, n, code_vec);
      if (leader) {
        store_f32_scalar(wire + p.geo.scale_off + 4 * int64_t(it.b), s_q, scale_vec4);
        if (rule_dual<Cfg>(q))
          store_f32_scalar(wire + p.geo.aux_off + 4 * int64_t(it.b), s_a, scale_vec4);
      }
    }
    if constexpr (kKeep) {
      keep->s_bits = fbits(s_q);
      keep->s_a_bits = fbits(s_a);
    }
  } else if constexpr (Cfg::kBits < 8) {
    // QuantCodec::encode_flat for E2M1 / INT4 / INT3 / INT2 codes, prepare_group for transformed
    // groups
    if constexpr (Cfg::kHad) {
#pragma unroll
      for (int r = 0; r < EPL; ++r) v[r] = finite_or_zero(v[r]);
      if (q.rht) apply_rht_signs<L>(v, lane, q);
      fwht<L>(v, lane);
#pragma unroll
      for (int r = 0; r < EPL; ++r) v[r] = finite_or_zero(__fmul_rn(v[r], q.hconst));
    }
    // amax as a NaN-propagating max of |v| (one instruction per element): finite exactly when
    // the group is, so the quotients below are never NaN (encode_packed needs that); a warp with
    // a NaN or an infinite value takes the general path (the finite amax, zeroed values).
    float amax = lane_absmax_nan(v);
#pragma unroll
    for (int j = 0; j < L::LB; ++j) amax = fmax_nan(amax, __shfl_xor_sync(kFullMask, amax, 1 << j));
    const bool nonfinite_warp = __any_sync(kFullMask, !(amax <= 3.40282347e+38f));
    if (nonfinite_warp) amax = bitsf(group_amax_bits_finite<L>(v));
    // UE4M3 scales: the chunk's tensor scale from its amax (the statistics pass before this one).
    const float tensor_scale =
        q.scale == ScaleFormat::UE4M3
            ? two_level_tensor_scale(bitsf(__ldg(p.chunk_amax + it.c)), q.target)
            : 1.0f;
    const ScaleOut so = nibble_block_scale(amax, q, tensor_scale);
    // E2M1 codes come from the quotients times 2^-14 (hd_formats.hpp e2m1_word_scaled), folded
    // into the division: t * 2^-14 = v / (s * 2^14), the same rounding where it matters (the
    // scaling is exact for normal floats, and quotients small enough to differ encode as +-0).
    const bool e2m1 = q.elem == ElemFormat::E2M1;
    const float shift = e2m1 ? kE2M1Shift : 1.0f;
    float t[EPL];
    if (!nonfinite_warp && q.scale == ScaleFormat::E8M0) {
      // a power of two: the division is the multiply by its exact reciprocal (2^-141 .. 2^127)
      const float rcp = __fdiv_rn(shift, so.s);
#pragma unroll
      for (int r = 0; r < EPL; ++r) t[r] = __fmul_rn(v[r], rcp);
    } else if (const float s_div = __fmul_rn(so.s, e2m1 ? 16384.0f : 1.0f);
               !nonfinite_warp && q.fast_div && code_divisor_ok(s_div)) {
      const ScaleDivisor d = scale_divisor(s_div);
#pragma unroll
      for (int r = 0; r < EPL; ++r) t[r] = div_by_scale(v[r], d);
    } else {
#pragma unroll
      for (int r = 0; r < EPL; ++r) t[r] = __fmul_rn(__fdiv_rn(finite_or_zero(v[r]), so.s), shift);
    }
    encode_packed<EPL, Cfg::kBits>(t, quad, q.elem);
    if (it.valid) {
      store_packed<L, Cfg::kBits>(wire + int64_t(it.b) * (Cfg::G * Cfg::kBits / 8), quad, lane, n,
                                  code_vec);
      if (leader) {
        uint8_t* sp = wire + p.geo.scale_off + int64_t(it.b) * q.scale_bytes;
        if (q.scale_bytes == 4)
          store_f32_scalar(sp, bitsf(so.code), scale_vec4);
        else
          put_le(sp, so.code, q.scale_bytes);
        // the chunk's S_t, after the scales (no aux bytes: codec_params.hpp)
        if (q.scale == ScaleFormat::UE4M3 && it.b == 0)
          put_le(wire + p.geo.aux_off, fbits(tensor_scale), 4);
      }
    }
    if constexpr (kKeep) {
      keep->s_bits = so.code;
      keep->s_a_bits = fbits(tensor_scale);
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
    uint32_t mb = lane_absmax_bits(v);
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
    encode_quads<EPL, true>(t, quad, q);
    if (it.valid) {
      store_codes<L>(wire + int64_t(it.b) * Cfg::G, quad, lane, n, code_vec);
      if (leader) {
        uint8_t* sp = wire + p.geo.scale_off + int64_t(it.b) * q.scale_bytes;
        if (q.scale_bytes == 4)
          store_f32_scalar(sp, bitsf(so.code), scale_vec4);
        else
          put_le(sp, so.code, q.scale_bytes);
      }
    }
    if constexpr (kKeep) {
      keep->s_bits = so.code;
      keep->s_a_bits = 0;
    }
  }
  if (counts<Cfg>(p) && it.valid) {
    const int lo = L::lane_offset(lane);
#pragma unroll
    for (int r = 0; r < EPL; ++r)
      sat += ((L::reg_offset(r) | lo) < n && is_sat_code(group_code<Cfg>(quad, r), q)) ? 1u : 0u;
  }
  if constexpr (kKeep) {
#pragma unroll
    for (int i = 0; i < Cfg::kCodeWords; ++i) keep->w[i] = quad[i];
    keep->valid = it.valid;
  }
}

// ---- decode --------------------------------------------------------------------------------
// Whether a group's scale is an fp32: always under TACO rules (variant.cpp requires it), which
// the TACO kernels then know at compile time.
template <class Cfg>
__device__ __forceinline__ bool fp32_scales(const QuantRules& q) {
  return Cfg::kTaco || q.scale_bytes == 4;
}

// The lane's EPL codes of a whole group whose first code is at cp, as vector loads: streaming
// loads from global memory, or (kShared) loads from a shared-memory stage of the same layout.
template <class Cfg, bool kShared = false>
__device__ __forceinline__ void load_code_runs(const uint8_t* cp, int lane,
                                               uint32_t (&w)[Cfg::EPL / 4]) {
  using L = typename Cfg::In;
  constexpr int K = 1 << L::run_log2();  // consecutive codes per run: 8 or a multiple of 16
  static_assert(K == 8 || K % 16 == 0, "code runs of 8 or 16k bytes");
  const int lo = L::lane_offset(lane);
#pragma unroll
  for (int j = 0; j < Cfg::EPL / K; ++j) {
    const uint8_t* s = cp + lo + L::reg_offset(j * K);
    uint32_t* wj = w + j * (K / 4);
    if constexpr (K == 8) {
      const uint2* s2 = reinterpret_cast<const uint2*>(s);
      const uint2 q2 = kShared ? *s2 : __ldcs(s2);
      wj[0] = q2.x;
      wj[1] = q2.y;
    } else {
#pragma unroll
      for (int t = 0; t < K / 16; ++t) {
        const uint4* s4 = reinterpret_cast<const uint4*>(s) + t;
        const uint4 q4 = kShared ? *s4 : __ldcs(s4);
        wj[4 * t] = q4.x;
        wj[4 * t + 1] = q4.y;
        wj[4 * t + 2] = q4.z;
        wj[4 * t + 3] = q4.w;
      }
    }
  }
}

// The lane's codes narrower than a byte of a whole group whose first code byte is at cp
// (store_packed's layout), as streaming vector loads.
template <class Cfg>
__device__ __forceinline__ void load_packed_runs(const uint8_t* cp, int lane,
                                                 uint32_t (&w)[Cfg::kCodeWords]) {
  using L = typename Cfg::In;
  constexpr int K = 1 << L::run_log2();
  static_assert(K >= 8, "runs of whole bytes of codes");
  constexpr int kRunBytes = K * Cfg::kBits / 8;
  constexpr int A = packed_unit_bytes<K, Cfg::kBits>();
  const int lo = L::lane_offset(lane);
  if constexpr (A < 4) {
#pragma unroll
    for (int k = 0; k < Cfg::kCodeWords; ++k) w[k] = 0;
  }
#pragma unroll
  for (int j = 0; j < Cfg::EPL / K; ++j) {
    const uint8_t* s = cp + (lo + L::reg_offset(j * K)) * Cfg::kBits / 8;
#pragma unroll
    for (int t = 0; t < kRunBytes / A; ++t)
      load_stream_unit<A>(s + t * A, w, j * kRunBytes + t * A);
  }
}

template <class Cfg>
__device__ __forceinline__ void load_codes(const KernelParams& p, const uint8_t* wire,
                                           const Item& it, int lane, RawCodes<Cfg>& raw) {
  using L = typename Cfg::In;
  constexpr int EPL = Cfg::EPL;
  const QuantRules& q = p.rules;
  const int lo = L::lane_offset(lane);
  const int n = Cfg::kHad ? Cfg::G : it.m;
  if constexpr (Cfg::kBits < 8) {
    constexpr int B = Cfg::kBits;
    const uint8_t* cp = wire + int64_t(it.b) * (Cfg::G * B / 8);
    if (it.valid && p.code_vec && n == Cfg::G) {
      load_packed_runs<Cfg>(cp, lane, raw.w);
    } else {
      // the bytes that hold one of the first n codes (store_packed's tail)
      constexpr int K = 1 << L::run_log2(), kRunBytes = K * B / 8;
#pragma unroll
      for (int k = 0; k < Cfg::kCodeWords; ++k) raw.w[k] = 0;
#pragma unroll
      for (int j = 0; j < EPL / K; ++j) {
        const int e = lo + L::reg_offset(j * K);
#pragma unroll
        for (int x = 0; x < kRunBytes; ++x) {
          const int y = j * kRunBytes + x;  // the lane's stream byte
          if (it.valid && e + 8 * x / B < n)
            raw.w[y / 4] |= uint32_t(cp[e * B / 8 + x]) << (8 * (y % 4));
        }
      }
    }
  } else {
    const uint8_t* cp = wire + int64_t(it.b) * Cfg::G;
    if (it.valid && p.code_vec && n == Cfg::G) {
      load_code_runs<Cfg>(cp, lane, raw.w);
    } else {
#pragma unroll
      for (int k = 0; k < EPL / 4; ++k) raw.w[k] = 0;
#pragma unroll
      for (int r = 0; r < EPL; ++r) {
        const int i = L::reg_offset(r) | lo;
        if (it.valid && i < n) raw.w[r / 4] |= uint32_t(cp[i]) << (8 * (r % 4));
      }
    }
  }
  raw.valid = it.valid;
  raw.s_bits = 0;
  raw.s_a_bits = 0;
  if (it.valid) {
    if (fp32_scales<Cfg>(q))
      raw.s_bits = fbits(load_f32_scalar(wire + p.geo.scale_off + 4 * int64_t(it.b), p.scale_vec4));
    else
      raw.s_bits = get_le(wire + p.geo.scale_off + int64_t(it.b) * q.scale_bytes, q.scale_bytes);
    if (Cfg::kTaco && q.dual)
      raw.s_a_bits = fbits(load_f32_scalar(wire + p.geo.aux_off + 4 * int64_t(it.b), p.scale_vec4));
    if constexpr (Cfg::kBits < 8) {
      if (q.scale == ScaleFormat::UE4M3)
        raw.s_a_bits = get_le(wire + p.geo.aux_off, 4);  // the chunk's S_t
    }
  }
}

// Code values times s. The format branch is taken once per group, not per pair: FP8 pairs
// convert in one instruction (to half2, exact) and two widenings. (A compile-time kind per
// branch drops the predicated second conversion but makes the decodes slower.)
// kScaled = false: the code values alone (TACO's transformed decode scales after the transform).
template <int N, bool kScaled = true>
__device__ __forceinline__ void decode_elems(const uint32_t (&w)[N / 4], float s, ElemFormat kind,
                                             float (&v)[N]) {
  if (kind == ElemFormat::INT8) {
#pragma unroll
    for (int r = 0; r < N; ++r) {
      const float c = float(int32_t(int8_t(uint8_t(w[r / 4] >> (8 * (r % 4))))));
      v[r] = kScaled ? __fmul_rn(c, s) : c;
    }
    return;
  }
  const __nv_fp8_interpretation_t k = kind == ElemFormat::E4M3 ? __NV_E4M3 : __NV_E5M2;
#pragma unroll
  for (int r = 0; r < N; r += 2) {
    const uint32_t pair = (w[r / 4] >> (8 * (r % 4))) & 0xffffu;
    const float2 f =
        __half22float2(__half2(__nv_cvt_fp8x2_to_halfraw2(__nv_fp8x2_storage_t(pair), k)));
    v[r] = kScaled ? __fmul_rn(f.x, s) : f.x;
    v[r + 1] = kScaled ? __fmul_rn(f.y, s) : f.y;
  }
}

// Decodes one lane's share of a group: codes in layout Cfg::In, values out in Cfg::Out (the
// same unless the transform regroups through `scratch`, the group's shared-memory area).
template <class Cfg>
__device__ __forceinline__ void decode_codes(const KernelParams& p, const RawCodes<Cfg>& raw,
                                             int lane, float (&v)[Cfg::EPL], float* scratch) {
  constexpr int EPL = Cfg::EPL;
  using Out = typename Cfg::Out;
  const QuantRules& q = p.rules;
  // No NaN/Inf code in the whole group (TACO codecs; a group-wide flag, since one such code
  // spreads through the transform). Untransformed groups test the code bytes here; transformed
  // ones test one value after the transform, below.
  bool finite = false;
  if constexpr (Cfg::kTaco && !Cfg::kHad) {
    // A byte is NaN/Inf when its exponent-and-mantissa bits (E4M3) or its exponent bits (E5M2)
    // are all ones: adding one at the lowest such bit then carries into bit 7 (never further).
    const bool e4 = q.elem == ElemFormat::E4M3;
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
    if constexpr (Cfg::kBits < 8)
      s = fp32_scales<Cfg>(q) ? bitsf(raw.s_bits)
                              : nibble_decode_scale(raw.s_bits, q, bitsf(raw.s_a_bits));
    else
      s = fp32_scales<Cfg>(q) ? bitsf(raw.s_bits) : device_scale_value(raw.s_bits, q.scale);
    if (Cfg::kTaco && q.dual) s_a = bitsf(raw.s_a_bits);
  }
  if constexpr (Cfg::kTaco) {
    // quant_codec.hpp "TACO rules", decode: one factor per group, applied after the transform
    float f = s;
    if constexpr (Cfg::kHad) f = __fmul_rn(f, q.hconst);
    if (q.dual) f = __fdiv_rn(f, s_a < 1e-12f ? 1e-12f : s_a);
    if constexpr (Cfg::kHad) {
      decode_elems<EPL, false>(raw.w, 1.0f, q.elem, v);
      fwht_to<typename Cfg::In, Out>(v, lane, scratch);
      // Every output of the transform is a +- sum over every input code, and no such sum of
      // finite codes overflows (|code| <= 57344, G <= 1024: below 2^26): one NaN or infinite
      // code makes every output NaN or infinite, so one value per lane is the group's flag,
      // without the byte test.
      finite = !nonfinite(v[0]);
      if (q.rht) apply_rht_signs<Out>(v, lane, q);
#pragma unroll
      for (int r = 0; r < EPL; ++r) v[r] = __fmul_rn(v[r], f);
    } else {
      decode_elems<EPL>(raw.w, f, q.elem, v);
    }
    // Finite codes (|sum| < 2^26) times |f| <= 2^100 cannot overflow: the products are finite
    // exactly when the codes are. Any other factor (only a wire not made by an encoder has one)
    // zeroes element by element, as the reference does.
    if (!(finite && fabsf(f) <= 1.26765060e+30f /* 2^100 */)) {
#pragma unroll
      for (int r = 0; r < EPL; ++r) v[r] = finite_or_zero(v[r]);
    }
    return;
  }
  if constexpr (Cfg::kBits < 8)
    decode_packed<EPL, Cfg::kBits>(raw.w, s, q.elem, v);
  else
    decode_elems<EPL>(raw.w, s, q.elem, v);
  if constexpr (Cfg::kHad) {
    fwht_to<typename Cfg::In, Out>(v, lane, scratch);
#pragma unroll
    for (int r = 0; r < EPL; ++r) v[r] = __fmul_rn(v[r], q.hconst);
    if (q.rht) apply_rht_signs<Out>(v, lane, q);
  }
}

// A whole group held in layout L, written as vectors of out_type to `out` (its first element,
// 16-byte aligned): streaming stores to global memory, or (kShared) stores to a shared-memory
// stage of the same layout.
template <class L, bool kShared = false>
__device__ __forceinline__ void store_value_runs(void* out, DType out_type,
                                                 const float (&v)[L::kRegs], int lane) {
  constexpr int K = 1 << L::run_log2();
  static_assert(K >= 4, "vector stores need runs of at least 4 elements");
  constexpr int kRuns = L::kRegs / K;
  const int lo = L::lane_offset(lane);
  if (out_type == DType::BF16) {
#pragma unroll
    for (int j = 0; j < kRuns; ++j) {
      uint32_t w[K / 2];
#pragma unroll
      for (int t = 0; t < K / 2; ++t) w[t] = bf16x2_bits_hw(v[j * K + 2 * t], v[j * K + 2 * t + 1]);
      uint16_t* d = static_cast<uint16_t*>(out) + lo + L::reg_offset(j * K);
      if constexpr (K == 4) {
        const uint2 x = make_uint2(w[0], w[1]);
        if constexpr (kShared)
          *reinterpret_cast<uint2*>(d) = x;
        else
          __stcs(reinterpret_cast<uint2*>(d), x);
      } else {
#pragma unroll
        for (int t = 0; t < K / 8; ++t) {
          const uint4 x = make_uint4(w[4 * t], w[4 * t + 1], w[4 * t + 2], w[4 * t + 3]);
          if constexpr (kShared)
            reinterpret_cast<uint4*>(d)[t] = x;
          else
            __stcs(reinterpret_cast<uint4*>(d) + t, x);
        }
      }
    }
  } else {
#pragma unroll
    for (int j = 0; j < kRuns; ++j) {
      float* d = static_cast<float*>(out) + lo + L::reg_offset(j * K);
#pragma unroll
      for (int t = 0; t < K / 4; ++t) {
        const float4 x = make_float4(v[j * K + 4 * t], v[j * K + 4 * t + 1], v[j * K + 4 * t + 2],
                                     v[j * K + 4 * t + 3]);
        if constexpr (kShared)
          reinterpret_cast<float4*>(d)[t] = x;
        else
          __stcs(reinterpret_cast<float4*>(d) + t, x);
      }
    }
  }
}

// Writes the first m values of a group held in layout L to out (element type out_type). Whole
// groups go out as streaming stores (st.global.cs), and load_codes reads codes as streaming
// loads: the decodes touch each byte once, and the hints make them faster. On the encodes they
// gave nothing, so those keep the default caching.
template <class L>
__device__ __forceinline__ void store_values(const KernelParams& p, int64_t first,
                                             const float (&v)[L::kRegs], int lane, int m) {
  const int lo = L::lane_offset(lane);
  if (m == (1 << L::LG) && p.out_vec16 && L::run_log2() >= 2) {
    if constexpr (L::run_log2() >= 2) {
      const size_t bytes = p.out_type == DType::BF16 ? 2 : 4;
      store_value_runs<L>(static_cast<uint8_t*>(p.out) + size_t(first) * bytes, p.out_type, v,
                          lane);
    }
    return;
  }
  if (p.out_type == DType::BF16) {
    uint16_t* out = static_cast<uint16_t*>(p.out) + first;
#pragma unroll
    for (int r = 0; r < L::kRegs; ++r) {
      const int i = L::reg_offset(r) | lo;
      if (i < m) out[i] = uint16_t(bf16x2_bits_hw(v[r], 0.0f));
    }
  } else {
    float* out = static_cast<float*>(p.out) + first;
#pragma unroll
    for (int r = 0; r < L::kRegs; ++r) {
      const int i = L::reg_offset(r) | lo;
      if (i < m) out[i] = v[r];
    }
  }
}

}  // namespace taco::gpu::detail
