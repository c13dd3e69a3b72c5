#pragma once
// The fused warp-group kernels of the quantization codecs as templates (encode, decode + reduce,
// decode + reduce + re-encode, decode + add + re-encode, the streaming decode, the encode with
// error feedback, the statistics pass of two-level scales) and group_kernels(), the table of one
// (group size, transform, rule family, code width: 8, 4, 3 or 2 bits). The translation units
// codec_kernels*.cu instantiate them, split so that they build in parallel. Bit-exactness rules:
// src/codecs/codec.hpp; the per-group steps are in codec_group.cuh.
#include <type_traits>

#include "core/error.hpp"
#include "cuda/codecs/codec_group.cuh"
#include "cuda/codecs/codec_kernels.hpp"
#include "cuda/runtime/bulk_copy.cuh"

namespace taco::gpu::detail {

// Shared floats per block for the configuration's group scratch areas (group_scratch); a token
// 4 when it needs none.
template <class Cfg>
constexpr int kScratchBlockFloats =
    Cfg::kScratchFloats ? kGroupThreads / 32 * Cfg::GPW* Cfg::kScratchFloats : 4;

// Blocks per multiprocessor the encode kernel asks of ptxas (kernel_tuning.hpp says why).
template <class Cfg, typename InT>
constexpr int kEncodeMinBlocks = tuning::encode_min_blocks(Cfg::kRef, Cfg::kHad, Cfg::kTaco,
                                                           Cfg::LG, int(sizeof(InT)));

// One item of an encode: load, (TACO) L2 prefetch of the next, unpack, count non-finite inputs,
// encode_group. kWhole: the item is from the whole-group walk of group_encode_kernel.
template <class Cfg, typename InT, bool kWhole>
__device__ __forceinline__ void encode_item(const KernelParams& p, const Item& it, int lane,
                                            uint32_t step, unsigned long long& sat,
                                            unsigned long long& nonfin) {
  RawInput<Cfg, InT> raw;
  load_raw<Cfg, InT, kWhole>(p, it, lane, raw);
  if constexpr (tuning::encode_prefetches(Cfg::kTaco, Cfg::kHad))
    prefetch_input_l2<Cfg, InT>(p, it, lane, step);
  float v[Cfg::EPL];
  unpack_raw<Cfg, InT>(raw, v);
  // The TACO encodes keep the unpacked input in registers (an empty asm makes each value opaque):
  // left to itself, ptxas unpacked the bf16 words a second time for the transform, 32
  // instructions per lane and group. The block-scaled encodes (72 registers) lose occupancy with
  // it.
  if constexpr (Cfg::kTaco) {
#pragma unroll
    for (int r = 0; r < Cfg::EPL; ++r) asm volatile("" : "+f"(v[r]));
  }
  if (counts<Cfg>(p)) {
    // a whole-walk item past the end holds a real group's values (its clamped index), not zeros
#pragma unroll
    for (int r = 0; r < Cfg::EPL; ++r) nonfin += (it.valid && nonfinite(v[r])) ? 1u : 0u;
  }
  encode_group<Cfg, kWhole>(p, it, lane, v, sat);
}

// Whether a launch is one chunk of whole groups whose every access may be a vector (`taco bench`
// and any single aligned tensor whose size is a multiple of G): then the encodes that prefetch
// (tuning::encode_prefetches) walk groups by index alone, with no chunk bookkeeping and none of
// the general case's tests per item.
template <class Cfg>
__device__ __forceinline__ bool whole_single_chunk(const KernelParams& p) {
  return p.chunks == 1 && p.geo.numel == p.geo.nblocks * Cfg::G && p.in_vec16 && p.code_vec &&
         p.scale_vec4;
}

// Encode: each warp iteration takes GPW groups (one per lane subgroup). The next iteration's
// groups are not loaded ahead (as the decode kernel does): the registers that takes cost a block
// per multiprocessor, which is slower here.
template <class Cfg, typename InT>
__global__ void __launch_bounds__(kGroupThreads, kEncodeMinBlocks<Cfg, InT>)
    group_encode_kernel(const __grid_constant__ KernelParams p) {
  const int lane = int(threadIdx.x & 31);
  const uint32_t warp = blockIdx.x * (kGroupThreads / 32) + threadIdx.x / 32;
  const uint32_t nwarps = gridDim.x * (kGroupThreads / 32);
  const uint32_t total = launch_groups(p);
  const int gsub = lane >> Cfg::LB;
  unsigned long long sat = 0, nonfin = 0;
  const uint32_t step = nwarps * Cfg::GPW;
  bool walked = false;
  if constexpr (tuning::encode_prefetches(Cfg::kTaco, Cfg::kHad)) {
    if (whole_single_chunk<Cfg>(p)) {
      // A lane past the end takes the last group (in bounds, stores nothing: encode_group and
      // the counters test `valid`), so loads and the loop branch stay warp-uniform.
      for (uint32_t base = warp * Cfg::GPW; base < total; base += step) {
        Item it;
        it.valid = base + gsub < total;
        it.b = min(base + gsub, total - 1);
        it.m = Cfg::G;
        encode_item<Cfg, InT, true>(p, it, lane, step, sat, nonfin);
      }
      walked = true;
    }
  }
  if (!walked) {
    Item it = make_item<Cfg>(p, warp * Cfg::GPW + gsub);
    for (uint32_t base = warp * Cfg::GPW; base < total;
         base += step, next_item<Cfg>(p, it, base + gsub, step))
      encode_item<Cfg, InT, false>(p, it, lane, step, sat, nonfin);
  }
  if (counts<Cfg>(p)) flush_stats(p.stats, sat, nonfin);
}

// acc = decode(src[0]) + decode(src[1]) + ... (fixed order, fp32), in layout Cfg::Out; `first`
// holds the codes of src[0], already loaded. The first decode writes acc directly, so a plain
// decode (one source) carries no loop state.
// With 16 per lane the second source's codes load before the first decode, so a short launch
// waits for one memory round trip, not two.
// acc += decode(raw), in fp32.
template <class Cfg>
__device__ __forceinline__ void add_decoded(const KernelParams& p, const RawCodes<Cfg>& raw,
                                            int lane, float (&acc)[Cfg::EPL], float* scratch) {
  float d[Cfg::EPL];
  decode_codes<Cfg>(p, raw, lane, d, scratch);
#pragma unroll
  for (int r = 0; r < Cfg::EPL; ++r) acc[r] = __fadd_rn(acc[r], d[r]);
}

template <class Cfg>
__device__ __forceinline__ void decode_sum(const KernelParams& p, const Item& it, int lane,
                                           const RawCodes<Cfg>& first, float (&acc)[Cfg::EPL],
                                           float* scratch) {
  int s = 1;
  if constexpr (Cfg::EPL <= 16) {
    if (p.nsrc > 1) {
      RawCodes<Cfg> second;
      load_codes<Cfg>(p, p.src[1] + chunk_at(it, p.wire_in_stride), it, lane, second);
      decode_codes<Cfg>(p, first, lane, acc, scratch);
      add_decoded<Cfg>(p, second, lane, acc, scratch);
      s = 2;
    } else {
      decode_codes<Cfg>(p, first, lane, acc, scratch);
    }
  } else {
    decode_codes<Cfg>(p, first, lane, acc, scratch);
  }
  for (; s < p.nsrc; ++s) {
    RawCodes<Cfg> raw;
    load_codes<Cfg>(p, p.src[s] + chunk_at(it, p.wire_in_stride), it, lane, raw);
    add_decoded<Cfg>(p, raw, lane, acc, scratch);
  }
}

template <class Cfg>
__device__ __forceinline__ void decode_sum(const KernelParams& p, const Item& it, int lane,
                                           float (&acc)[Cfg::EPL], float* scratch) {
  RawCodes<Cfg> first;
  load_codes<Cfg>(p, p.src[0] + chunk_at(it, p.wire_in_stride), it, lane, first);
  decode_sum<Cfg>(p, it, lane, first, acc, scratch);
}

// The encode half of a re-encoding kernel that decodes with Cfg: one layout, Cfg::Out, where the
// decoded values already are (a regrouping decode hands them over in SectorLayout).
template <class Cfg>
using ReencodeCfg =
    GroupCfg<Cfg::LG, Cfg::R, Cfg::kHad,
             std::is_same_v<typename Cfg::Out, typename Cfg::SectorL> ? Lay::Sector : Lay::Lane,
             Cfg::kTaco, false, Cfg::kBits>;

// Decode (+ reduce): the first source's codes of the next iteration load while this one decodes,
// which hides part of the load latency.
// kOneSource: a plain decode (nsrc == 1) compiled without the reduction, whose second buffer of
// decoded values sets the registers of the general kernel (the taco decode: 95 registers and 5
// blocks per multiprocessor instead of 126 and 4; group_kernels() says where it is used).
template <class Cfg, bool kOneSource = false>
__global__ void __launch_bounds__(kGroupThreads)
    group_decode_reduce_kernel(const __grid_constant__ KernelParams p) {
  const int lane = int(threadIdx.x & 31);
  const uint32_t warp = blockIdx.x * (kGroupThreads / 32) + threadIdx.x / 32;
  const uint32_t nwarps = gridDim.x * (kGroupThreads / 32);
  const uint32_t total = launch_groups(p);
  const uint32_t step = nwarps * Cfg::GPW;
  const int gsub = lane >> Cfg::LB;
  __shared__ __align__(16) float scratch_mem[kScratchBlockFloats<Cfg>];
  float* scratch = group_scratch<Cfg>(scratch_mem, gsub);
  Item next = make_item<Cfg>(p, warp * Cfg::GPW + gsub);
  RawCodes<Cfg> next_first;
  load_codes<Cfg>(p, p.src[0] + chunk_at(next, p.wire_in_stride), next, lane, next_first);
  for (uint32_t base = warp * Cfg::GPW; base < total; base += step) {
    const Item it = next;
    const RawCodes<Cfg> first = next_first;
    next_item<Cfg>(p, next, base + step + gsub, step);
    load_codes<Cfg>(p, p.src[0] + chunk_at(next, p.wire_in_stride), next, lane, next_first);
    float acc[Cfg::EPL];
    if constexpr (kOneSource)
      decode_codes<Cfg>(p, first, lane, acc, scratch);
    else
      decode_sum<Cfg>(p, it, lane, first, acc, scratch);
    if (it.valid)
      store_values<typename Cfg::Out>(p, group_at<Cfg>(it, p.out_stride), acc, lane, it.m);
  }
}

// Streaming decode of one wire: one chunk of whole groups, every buffer aligned for bulk copies
// (GpuQuant checks; the tail of fewer than a tile's groups goes the ordinary way). Each warp
// walks tiles of kTileIters x GPW consecutive groups (grid-stride); its lane 0 keeps kStages
// tiles of codes and scales on their way with bulk (TMA) loads into the warp's ring of stages,
// and sends each decoded tile out of one of kOutStages output stages with one bulk store. The loads
// in flight hold no registers, and the stores leave as whole lines, which moves the decode's
// traffic faster than 16-byte stores do (taco_stream_shapes measures both).
template <class Cfg, int kStages, int kTileIters, int kOutStages>
__global__ void __launch_bounds__(kGroupThreads)
    group_decode_stream_kernel(const __grid_constant__ KernelParams p) {
  constexpr int kTileGroups = kTileIters * Cfg::GPW;
  constexpr int kWarps = kGroupThreads / 32;
  extern __shared__ __align__(128) uint8_t stream_mem[];
  __shared__ __align__(8) uint64_t full[kWarps][kStages];  // stage s of warp w: its tile has landed
  __shared__ __align__(16) float scratch_mem[kScratchBlockFloats<Cfg>];
  const int lane = int(threadIdx.x & 31), wib = int(threadIdx.x / 32);
  const uint32_t warp = blockIdx.x * kWarps + wib;
  const uint32_t nwarps = gridDim.x * kWarps;
  const int gsub = lane >> Cfg::LB;
  float* scratch = group_scratch<Cfg>(scratch_mem, gsub);
  const QuantRules& q = p.rules;
  const bool dual = Cfg::kTaco && q.dual;
  const int out_elem = p.out_type == DType::BF16 ? 2 : 4;
  const StreamTileLayout tl =
      stream_tile_layout(kTileGroups, kStages, kOutStages, Cfg::G, q.scale_bytes, dual, out_elem);
  uint8_t* mine = stream_mem + wib * tl.warp_bytes;
  uint64_t* bar = full[wib];
  const uint8_t* wire = p.src[0];
  const uint32_t total = launch_groups(p);
  const uint32_t ntiles = total / kTileGroups;
  const auto fetch = [&](int s, uint32_t t) {  // lane 0: tile t into stage s
    uint8_t* st = mine + s * tl.stage_bytes;
    const int64_t g0 = int64_t(t) * kTileGroups;
    mbar_arrive_expect(&bar[s], uint32_t(tl.code_bytes + tl.scale_bytes + tl.aux_bytes));
    bulk_load(st, wire + g0 * Cfg::G, tl.code_bytes, &bar[s]);
    bulk_load(st + tl.scale_at, wire + p.geo.scale_off + g0 * q.scale_bytes, tl.scale_bytes,
              &bar[s]);
    if (dual) bulk_load(st + tl.aux_at, wire + p.geo.aux_off + g0 * 4, tl.aux_bytes, &bar[s]);
  };
  if (lane == 0) {
#pragma unroll
    for (int s = 0; s < kStages; ++s) mbar_init(&bar[s]);
    mbar_init_fence();
#pragma unroll
    for (int s = 0; s < kStages; ++s)
      if (warp + s * nwarps < ntiles) fetch(s, warp + s * nwarps);
  }
  __syncwarp();
  uint32_t k = 0;
  for (uint32_t t = warp; t < ntiles; t += nwarps, ++k) {
    const int s = int(k % kStages);
    mbar_wait(&bar[s], (k / kStages) & 1u);
    const uint8_t* st = mine + s * tl.stage_bytes;
    RawCodes<Cfg> raw[kTileIters];
#pragma unroll
    for (int i = 0; i < kTileIters; ++i) {
      const int g = i * Cfg::GPW + gsub;  // the lane's group in the tile
      load_code_runs<Cfg, true>(st + g * Cfg::G, lane, raw[i].w);
      raw[i].valid = true;
      const uint8_t* sp = st + tl.scale_at + g * q.scale_bytes;  // shared memory: no __ldg
      raw[i].s_bits =
          fp32_scales<Cfg>(q) ? *reinterpret_cast<const uint32_t*>(sp) : get_le(sp, q.scale_bytes);
      raw[i].s_a_bits = dual ? *reinterpret_cast<const uint32_t*>(st + tl.aux_at + 4 * g) : 0u;
    }
    __syncwarp();  // the warp is done with stage s: refill it
    if (lane == 0) {
      if (t + kStages * nwarps < ntiles) fetch(s, t + kStages * nwarps);
      bulk_wait_read<kOutStages -
                     1>();  // the bulk store that last used the output stage has read it
    }
    __syncwarp();
    uint8_t* o = mine + tl.out_at + (k % kOutStages) * tl.out_bytes;
#pragma unroll
    for (int i = 0; i < kTileIters; ++i) {
      float v[Cfg::EPL];
      decode_codes<Cfg>(p, raw[i], lane, v, scratch);
      store_value_runs<typename Cfg::Out, true>(o + (i * Cfg::GPW + gsub) * Cfg::G * out_elem,
                                                p.out_type, v, lane);
    }
    fence_shared_for_bulk();
    __syncwarp();
    if (lane == 0)
      bulk_store(static_cast<uint8_t*>(p.out) + int64_t(t) * tl.out_bytes, o,
                 uint32_t(tl.out_bytes));
  }
  // The last total % kTileGroups groups, from global memory.
  for (uint32_t base = ntiles * kTileGroups + warp * Cfg::GPW; base < total;
       base += nwarps * Cfg::GPW) {
    const Item it = make_item<Cfg>(p, base + gsub);
    RawCodes<Cfg> raw;
    load_codes<Cfg>(p, wire, it, lane, raw);
    float v[Cfg::EPL];
    decode_codes<Cfg>(p, raw, lane, v, scratch);
    if (it.valid)
      store_values<typename Cfg::Out>(p, group_at<Cfg>(it, p.out_stride), v, lane, it.m);
  }
  if (lane == 0) bulk_wait_all();
}

template <class Cfg>
__global__ void __launch_bounds__(kGroupThreads)
    group_decode_reduce_encode_kernel(const __grid_constant__ KernelParams p) {
  using Enc = ReencodeCfg<Cfg>;
  using L = typename Enc::In;  // == Cfg::Out
  const int lane = int(threadIdx.x & 31);
  const uint32_t warp = blockIdx.x * (kGroupThreads / 32) + threadIdx.x / 32;
  const uint32_t nwarps = gridDim.x * (kGroupThreads / 32);
  const uint32_t total = launch_groups(p);
  const int gsub = lane >> Cfg::LB;
  __shared__ __align__(16) float scratch_mem[kScratchBlockFloats<Cfg>];
  float* scratch = group_scratch<Cfg>(scratch_mem, gsub);
  unsigned long long sat = 0, nonfin = 0;
  const uint32_t step = nwarps * Cfg::GPW;
  Item it = make_item<Cfg>(p, warp * Cfg::GPW + gsub);
  for (uint32_t base = warp * Cfg::GPW; base < total;
       base += step, next_item<Cfg>(p, it, base + gsub, step)) {
    float acc[Cfg::EPL];
    decode_sum<Cfg>(p, it, lane, acc, scratch);
    // The encoder sees exactly the m valid sums, zero-padded (as a CPU encode of the sums).
#pragma unroll
    for (int r = 0; r < Cfg::EPL; ++r) {
      float x = p.round_sum_bf16 ? round_to_bf16(acc[r]) : acc[r];
      x = (it.valid && elem_index<L>(r, lane) < it.m) ? x : 0.0f;
      if (p.stats) nonfin += (it.valid && nonfinite(x)) ? 1u : 0u;
      acc[r] = x;
    }
    encode_group<Enc>(p, it, lane, acc, sat);
  }
  if (p.stats) flush_stats(p.stats, sat, nonfin);
}

// The ring hop of compressed collectives: as group_decode_reduce_encode_kernel with one source,
// plus the rank's own raw chunk (p.in, in_type) before the re-encode: acc = decode(src) + own.
template <class Cfg>
__global__ void __launch_bounds__(kGroupThreads)
    group_decode_add_encode_kernel(const __grid_constant__ KernelParams p) {
  using Enc = ReencodeCfg<Cfg>;
  using L = typename Enc::In;  // == Cfg::Out
  const int lane = int(threadIdx.x & 31);
  const uint32_t warp = blockIdx.x * (kGroupThreads / 32) + threadIdx.x / 32;
  const uint32_t nwarps = gridDim.x * (kGroupThreads / 32);
  const uint32_t total = launch_groups(p);
  const int gsub = lane >> Cfg::LB;
  __shared__ __align__(16) float scratch_mem[kScratchBlockFloats<Cfg>];
  float* scratch = group_scratch<Cfg>(scratch_mem, gsub);
  unsigned long long sat = 0;
  const uint32_t step = nwarps * Cfg::GPW;
  Item it = make_item<Cfg>(p, warp * Cfg::GPW + gsub);
  for (uint32_t base = warp * Cfg::GPW; base < total;
       base += step, next_item<Cfg>(p, it, base + gsub, step)) {
    RawCodes<Cfg> raw;
    load_codes<Cfg>(p, p.src[0] + chunk_at(it, p.wire_in_stride), it, lane, raw);
    float acc[Cfg::EPL];
    decode_codes<Cfg>(p, raw, lane, acc, scratch);
    float own[Cfg::EPL];  // the rank's own values in layout L, zero past m (load_raw)
    if (p.in_type == DType::BF16) {
      RawInput<Enc, uint16_t> in;
      load_raw<Enc, uint16_t>(p, it, lane, in);
      unpack_raw<Enc, uint16_t>(in, own);
    } else {
      RawInput<Enc, float> in;
      load_raw<Enc, float>(p, it, lane, in);
      unpack_raw<Enc, float>(in, own);
    }
    // The encoder sees exactly the m valid sums, zero-padded (as a CPU encode of the sums).
#pragma unroll
    for (int r = 0; r < Cfg::EPL; ++r)
      acc[r] = (it.valid && elem_index<L>(r, lane) < it.m) ? __fadd_rn(acc[r], own[r]) : 0.0f;
    encode_group<Enc>(p, it, lane, acc, sat);
  }
}

// ---- error feedback --------------------------------------------------------------------------
// The caller's fp32 residual of a group in layout Cfg::In (zero past m, and for invalid items),
// as coherent streaming loads: the kernel rewrites the same buffer (load_raw's __ldg is for data
// that no thread writes).
template <class Cfg>
__device__ __forceinline__ void load_residual(const KernelParams& p, const Item& it, int lane,
                                              float (&e)[Cfg::EPL]) {
  using L = typename Cfg::In;
  constexpr int K = 1 << L::run_log2();
  static_assert(K >= 4, "runs of whole float4s");
  const int lo = L::lane_offset(lane);
  const float* src = p.residual + group_at<Cfg>(it, p.in_stride);
  if (it.valid && it.m == Cfg::G && p.residual_vec16) {
#pragma unroll
    for (int j = 0; j < Cfg::EPL / K; ++j) {
      const float4* s4 = reinterpret_cast<const float4*>(src + lo + L::reg_offset(j * K));
#pragma unroll
      for (int t = 0; t < K / 4; ++t) {
        const float4 f = __ldcs(s4 + t);
        e[j * K + 4 * t] = f.x;
        e[j * K + 4 * t + 1] = f.y;
        e[j * K + 4 * t + 2] = f.z;
        e[j * K + 4 * t + 3] = f.w;
      }
    }
  } else {
#pragma unroll
    for (int r = 0; r < Cfg::EPL; ++r) {
      const int i = L::reg_offset(r) | lo;
      e[r] = (it.valid && i < it.m) ? src[i] : 0.0f;
    }
  }
}

template <class Cfg>
__device__ __forceinline__ void store_residual(const KernelParams& p, const Item& it, int lane,
                                               const float (&e)[Cfg::EPL]) {
  using L = typename Cfg::In;
  float* dst = p.residual + group_at<Cfg>(it, p.in_stride);
  if (it.m == Cfg::G && p.residual_vec16) {
    store_value_runs<L>(dst, DType::F32, e, lane);
    return;
  }
  const int lo = L::lane_offset(lane);
#pragma unroll
  for (int r = 0; r < Cfg::EPL; ++r) {
    const int i = L::reg_offset(r) | lo;
    if (i < it.m) dst[i] = e[r];
  }
}

// The values an encode with error feedback quantizes, in layout Cfg::In: v = x + e in fp32 with
// x's NaN and Inf as 0 (study/error_feedback.cpp, FeedbackState::step), zero past m. Counts
// non-finite v (what an encode of v counts).
template <class Cfg, typename InT>
__device__ __forceinline__ void feedback_values(const KernelParams& p, const Item& it, int lane,
                                                float (&v)[Cfg::EPL], unsigned long long& nonfin) {
  RawInput<Cfg, InT> raw;
  load_raw<Cfg, InT>(p, it, lane, raw);
  unpack_raw<Cfg, InT>(raw, v);
  float e[Cfg::EPL];
  load_residual<Cfg>(p, it, lane, e);
#pragma unroll
  for (int r = 0; r < Cfg::EPL; ++r) {
    v[r] = __fadd_rn(finite_or_zero(v[r]), e[r]);
    if (p.stats) nonfin += (it.valid && nonfinite(v[r])) ? 1u : 0u;
  }
}

// Encode with error feedback (GpuQuant::encode_ef): each group's v = x + e (feedback_values) is
// encoded as encode_group encodes any input, its codes and scales are decoded in registers as
// decode_codes decodes the wire, and e' = v - (finite(dec) ? dec : 0) replaces e. CPU equivalent:
// v = x + e; wire = encode(v); e' = v - decode(wire), bit for bit (FeedbackState::step).
template <class Cfg, typename InT>
__global__ void __launch_bounds__(kGroupThreads)
    group_encode_feedback_kernel(const __grid_constant__ KernelParams p) {
  static_assert(std::is_same_v<typename Cfg::In, typename Cfg::Out>,
                "the decode hands back the encode's layout");
  const int lane = int(threadIdx.x & 31);
  const uint32_t warp = blockIdx.x * (kGroupThreads / 32) + threadIdx.x / 32;
  const uint32_t nwarps = gridDim.x * (kGroupThreads / 32);
  const uint32_t total = launch_groups(p);
  const int gsub = lane >> Cfg::LB;
  unsigned long long sat = 0, nonfin = 0;
  const uint32_t step = nwarps * Cfg::GPW;
  Item it = make_item<Cfg>(p, warp * Cfg::GPW + gsub);
  for (uint32_t base = warp * Cfg::GPW; base < total;
       base += step, next_item<Cfg>(p, it, base + gsub, step)) {
    float v[Cfg::EPL];
    feedback_values<Cfg, InT>(p, it, lane, v, nonfin);
    float e[Cfg::EPL];  // v, kept: encode_group transforms its argument in place
#pragma unroll
    for (int r = 0; r < Cfg::EPL; ++r) e[r] = v[r];
    RawCodes<Cfg> codes;
    encode_group<Cfg, false, true>(p, it, lane, v, sat, &codes);
    float d[Cfg::EPL];
    decode_codes<Cfg>(p, codes, lane, d, nullptr);
#pragma unroll
    for (int r = 0; r < Cfg::EPL; ++r) e[r] = __fsub_rn(e[r], finite_or_zero(d[r]));
    if (it.valid) store_residual<Cfg>(p, it, lane, e);
  }
  if (p.stats) flush_stats(p.stats, sat, nonfin);
}

// ---- two-level scales: the statistics pass ----------------------------------------------------
// UE4M3 scales are relative to a tensor scale S_t from the largest block scale of the chunk, so
// an encode first needs the chunk's largest finite |value| as its encode will see it: the same
// source (p.value_source: the input, the input plus the residual, decoded sums, a decode plus
// the input), rounded and zero-padded as the re-encoding kernels do, through the same transform.
// Each chunk's maximum goes to p.chunk_amax (atomicMax on the float bits, which order like the
// magnitudes); a lane flushes when its walk leaves a chunk, and a warp's lanes combine their
// last maxima before one atomic per chunk. Cfg: the decode configuration of the re-encoding
// kernels (their values come in Cfg::Out, the layout the input loads into here too).
template <class Cfg>
__global__ void __launch_bounds__(kGroupThreads)
    group_chunk_amax_kernel(const __grid_constant__ KernelParams p) {
  using Enc = ReencodeCfg<Cfg>;
  using L = typename Enc::In;  // == Cfg::Out
  const int lane = int(threadIdx.x & 31);
  const uint32_t warp = blockIdx.x * (kGroupThreads / 32) + threadIdx.x / 32;
  const uint32_t nwarps = gridDim.x * (kGroupThreads / 32);
  const uint32_t total = launch_groups(p);
  const int gsub = lane >> Cfg::LB;
  const bool leader = (lane & (Cfg::LPG - 1)) == 0;
  __shared__ __align__(16) float scratch_mem[kScratchBlockFloats<Cfg>];
  float* scratch = group_scratch<Cfg>(scratch_mem, gsub);
  const QuantRules& q = p.rules;
  uint32_t run_c = 0xffffffffu, run_max = 0;  // the chunk this lane is in, its max so far
  unsigned long long unused = 0;
  const uint32_t step = nwarps * Cfg::GPW;
  Item it = make_item<Cfg>(p, warp * Cfg::GPW + gsub);
  for (uint32_t base = warp * Cfg::GPW; base < total;
       base += step, next_item<Cfg>(p, it, base + gsub, step)) {
    float v[Cfg::EPL];
    if (p.value_source == ValueSource::DecodeSum || p.value_source == ValueSource::DecodeAdd) {
      if (p.value_source == ValueSource::DecodeSum) {
        decode_sum<Cfg>(p, it, lane, v, scratch);
      } else {
        RawCodes<Cfg> raw;
        load_codes<Cfg>(p, p.src[0] + chunk_at(it, p.wire_in_stride), it, lane, raw);
        decode_codes<Cfg>(p, raw, lane, v, scratch);
        float own[Cfg::EPL];
        if (p.in_type == DType::BF16) {
          RawInput<Enc, uint16_t> in;
          load_raw<Enc, uint16_t>(p, it, lane, in);
          unpack_raw<Enc, uint16_t>(in, own);
        } else {
          RawInput<Enc, float> in;
          load_raw<Enc, float>(p, it, lane, in);
          unpack_raw<Enc, float>(in, own);
        }
#pragma unroll
        for (int r = 0; r < Cfg::EPL; ++r) v[r] = __fadd_rn(v[r], own[r]);
      }
      // as group_decode_reduce_encode_kernel / group_decode_add_encode_kernel hand them over
#pragma unroll
      for (int r = 0; r < Cfg::EPL; ++r) {
        const float x = p.round_sum_bf16 ? round_to_bf16(v[r]) : v[r];
        v[r] = (it.valid && elem_index<L>(r, lane) < it.m) ? x : 0.0f;
      }
    } else if (p.value_source == ValueSource::InputFeedback) {
      if (p.in_type == DType::BF16)
        feedback_values<Enc, uint16_t>(p, it, lane, v, unused);
      else
        feedback_values<Enc, float>(p, it, lane, v, unused);
    } else if (p.in_type == DType::BF16) {
      RawInput<Enc, uint16_t> in;
      load_raw<Enc, uint16_t>(p, it, lane, in);
      unpack_raw<Enc, uint16_t>(in, v);
    } else {
      RawInput<Enc, float> in;
      load_raw<Enc, float>(p, it, lane, in);
      unpack_raw<Enc, float>(in, v);
    }
    if constexpr (Cfg::kHad) {  // encode_group's transform
#pragma unroll
      for (int r = 0; r < Cfg::EPL; ++r) v[r] = finite_or_zero(v[r]);
      if (q.rht) apply_rht_signs<L>(v, lane, q);
      fwht<L>(v, lane);
#pragma unroll
      for (int r = 0; r < Cfg::EPL; ++r) v[r] = finite_or_zero(__fmul_rn(v[r], q.hconst));
    }
    const uint32_t amax = group_amax_bits_finite<L>(v);
    if (it.valid) {
      if (it.c != run_c) {
        if (leader && run_max) atomicMax(p.chunk_amax + run_c, run_max);
        run_c = it.c;
        run_max = 0;
      }
      run_max = max(run_max, amax);
    }
  }
  const unsigned peers = __match_any_sync(kFullMask, run_c);
  const uint32_t m = __reduce_max_sync(peers, leader ? run_max : 0u);
  if (lane == __ffs(int(peers)) - 1 && run_c != 0xffffffffu && m)
    atomicMax(p.chunk_amax + run_c, m);
}

template <class Cfg>
GroupKernel group_kernel(KernelFn fn) {
  return {fn, Cfg::GPW, Cfg::EPL, 0, 0, 0, 0};
}

template <class Cfg, int kStages, int kTileIters, int kOutStages>
GroupKernel stream_decode_kernel(int64_t min_elems) {
  return {group_decode_stream_kernel<Cfg, kStages, kTileIters, kOutStages>,
          Cfg::GPW,
          Cfg::EPL,
          kTileIters * Cfg::GPW,
          kStages,
          kOutStages,
          min_elems};
}

// The kernel shapes of one configuration, from kernel_tuning.hpp (elements per lane, layouts).
// The re-encoding kernels decode as Dec does and encode in the layout the decode leaves. Codes
// narrower than a byte take the same shapes: a lane's run of 8, 16 or 32 codes is 4, 8 or 16 bytes
// of 4-bit codes (one vector access), 3, 6 or 12 of INT3 codes (bytes, 16-bit or 32-bit words:
// store_packed), 2, 4 or 8 of INT2 codes.
template <int LG, bool Had, bool Taco, int Bits>
struct GroupShapes {
  static constexpr int kEncodeR = tuning::encode_lane_log2(LG);
  static constexpr int kDecodeR = tuning::decode_lane_log2(LG, Had);
  static constexpr Lay kPlain = tuning::sector_layout(Had) ? Lay::Sector : Lay::Lane;
  using Enc = GroupCfg<LG, kEncodeR, Had, kPlain, Taco, false, Bits>;
  using Dec =
      GroupCfg<LG, kDecodeR, Had, tuning::regroup_decode(Had, LG) ? Lay::LaneToSector : kPlain,
               Taco, false, Bits>;
  using Reenc = std::conditional_t<Dec::kRegroup, Dec,
                                   GroupCfg<LG, kDecodeR, Had, Lay::Lane, Taco, false, Bits>>;
  // Dec itself when untransformed
  using Small = GroupCfg<LG, tuning::small_decode_lane_log2(LG), Had, kPlain, Taco, false, Bits>;
};

template <int LG, bool Had, bool Taco, int Bits = 8>
GroupKernels group_kernels() {
  using S = GroupShapes<LG, Had, Taco, Bits>;
  constexpr int kEncodeR = S::kEncodeR;
  constexpr Lay kPlain = S::kPlain;
  using Enc = typename S::Enc;
  using Dec = typename S::Dec;
  using Reenc = typename S::Reenc;
  using Small = typename S::Small;
  GroupKernels k;
  k.encode_bf16 = group_kernel<Enc>(group_encode_kernel<Enc, uint16_t>);
  k.encode_f32 = group_kernel<Enc>(group_encode_kernel<Enc, float>);
  // The encode with the reference rules as constants (GroupCfg::kRef), where they pay.
  if constexpr (tuning::has_reference_encode(Taco, Had, LG)) {
    using EncRef = GroupCfg<LG, kEncodeR, Had, kPlain, Taco, true>;
    k.encode_ref_bf16 = group_kernel<EncRef>(group_encode_kernel<EncRef, uint16_t>);
    k.encode_ref_f32 = group_kernel<EncRef>(group_encode_kernel<EncRef, float>);
  }
  k.decode_reduce = group_kernel<Dec>(group_decode_reduce_kernel<Dec>);
  // The one-source decode where it is faster than the decode-reduce kernel.
  if constexpr (tuning::has_one_source_decode(Taco, Had, LG))
    k.decode = group_kernel<Dec>(group_decode_reduce_kernel<Dec, true>);
  else
    k.decode = k.decode_reduce;
  k.decode_reduce_small = group_kernel<Small>(group_decode_reduce_kernel<Small>);
  k.decode_reduce_encode = group_kernel<Reenc>(group_decode_reduce_encode_kernel<Reenc>);
  k.decode_add_encode = group_kernel<Reenc>(group_decode_add_encode_kernel<Reenc>);
  // The streaming decode, from tuning::stream_min_elems outputs on.
  if constexpr (tuning::has_one_source_decode(Taco, Had, LG))
    k.decode_stream = stream_decode_kernel<Dec, tuning::kStreamStages, tuning::kStreamTileIters,
                                           tuning::kStreamOutStages>(tuning::stream_min_elems(LG));
  // The statistics pass of two-level (UE4M3) scales, whose element formats are 4-bit ones.
  if constexpr (Bits == 4) k.chunk_amax = group_kernel<Reenc>(group_chunk_amax_kernel<Reenc>);
  return k;
}

// The error-feedback encodes of one configuration, in the encode's shape.
template <int LG, bool Had, bool Taco, int Bits = 8>
void add_feedback_kernels(GroupKernels& k) {
  using Enc = typename GroupShapes<LG, Had, Taco, Bits>::Enc;
  k.encode_feedback_bf16 = group_kernel<Enc>(group_encode_feedback_kernel<Enc, uint16_t>);
  k.encode_feedback_f32 = group_kernel<Enc>(group_encode_feedback_kernel<Enc, float>);
}

// The kernels of codes narrower than a byte (block-scaled rules only) for groups of 2^lg, with
// their error-feedback encodes: the body of packed_group_kernels (codec_kernels.hpp), which
// codec_kernels_nibble.cu (4 bits), codec_kernels_int3.cu and codec_kernels_int2.cu instantiate.
template <int LG, int Bits>
GroupKernels packed_kernels_of(bool transform) {
  GroupKernels k =
      transform ? group_kernels<LG, true, false, Bits>() : group_kernels<LG, false, false, Bits>();
  if (transform)
    add_feedback_kernels<LG, true, false, Bits>(k);
  else
    add_feedback_kernels<LG, false, false, Bits>(k);
  return k;
}

template <int Bits>
GroupKernels packed_group_kernels(int lg, bool transform) {
  switch (lg) {
    case 4:
      return packed_kernels_of<4, Bits>(transform);
    case 5:
      return packed_kernels_of<5, Bits>(transform);
    case 6:
      return packed_kernels_of<6, Bits>(transform);
    case 7:
      return packed_kernels_of<7, Bits>(transform);
    case 8:
      return packed_kernels_of<8, Bits>(transform);
    case 9:
      return packed_kernels_of<9, Bits>(transform);
    case 10:
      return packed_kernels_of<10, Bits>(transform);
    default:
      throw_error("packed_group_kernels<{}>: log2 group size {}", Bits, lg);
  }
}

}  // namespace taco::gpu::detail
