#pragma once
// Host-side entry points of the quantization kernels (codec_kernels.cu). The one run-time ->
// compile-time dispatch lives in select_group_kernels(); it throws InputError for a group size
// it has no instantiation for.
#include <cuda_runtime_api.h>

#include "cuda/codec_params.hpp"

namespace taco::gpu {

using KernelFn = void (*)(KernelParams);

// One fused kernel and how it splits the work: each warp iteration takes groups_per_warp
// groups, lane_elems elements of a group per lane.
struct GroupKernel {
  KernelFn fn = nullptr;
  int groups_per_warp = 0;
  int lane_elems = 0;
  // The streaming decode only (0 for every other kernel): groups per tile, tiles in each warp's
  // ring of loads and of stores, and the fewest output elements it is launched for.
  int stream_tile_groups = 0;
  int stream_stages = 0;
  int stream_out_stages = 0;
  int64_t stream_min_elems = 0;
};

// Shared memory of the streaming decode (group_decode_stream_kernel) per warp, in bytes: a ring
// of `stages` stages, each a tile of consecutive groups' codes, scales and (dual) s_a exactly as
// the wire holds them, then `out_stages` stages of a tile's decoded output. Parts start 16-byte
// aligned (bulk copies). Computed alike by the host (launch size, eligibility) and the kernel.
struct StreamTileLayout {
  int code_bytes, scale_bytes, aux_bytes;  // of one tile, as loaded
  int scale_at, aux_at, stage_bytes;       // inside a stage
  int out_at, out_bytes, warp_bytes;       // the output stages; everything per warp
};

__host__ __device__ constexpr int round_up16(int n) { return (n + 15) / 16 * 16; }

__host__ __device__ constexpr StreamTileLayout stream_tile_layout(int tile_groups, int stages, int out_stages,
                                                                 int group_size, int scale_bytes, bool dual,
                                                                 int out_elem_bytes) {
  StreamTileLayout t{};
  t.code_bytes = tile_groups * group_size;
  t.scale_bytes = tile_groups * scale_bytes;
  t.aux_bytes = dual ? tile_groups * 4 : 0;
  t.scale_at = round_up16(t.code_bytes);
  t.aux_at = t.scale_at + round_up16(t.scale_bytes);
  t.stage_bytes = t.aux_at + round_up16(t.aux_bytes);
  t.out_at = stages * t.stage_bytes;
  t.out_bytes = tile_groups * group_size * out_elem_bytes;
  t.warp_bytes = t.out_at + out_stages * t.out_bytes;
  return t;
}

// The fused kernels of one (group size, transform) pair.
struct GroupKernels {
  GroupKernel encode_bf16, encode_f32;  // [chunks] groups of the input dtype -> wire_out
  GroupKernel encode_ref_bf16, encode_ref_f32;  // the same for TACO's reference rules and no
                                                // counters (fn null: none; GpuQuant says when)
  GroupKernel decode;                   // one wire (nsrc == 1) decoded -> out
  GroupKernel decode_reduce;            // sum over nsrc (>= 1) decoded wires -> out
  GroupKernel decode_reduce_small;      // the same, for at most kSmallDecodeElems outputs
  GroupKernel decode_reduce_encode;     // the same sum, re-encoded -> wire_out
  GroupKernel decode_add_encode;        // encode(decode(src[0]) + in): a ring all-reduce hop
  GroupKernel decode_stream;            // `decode` through bulk copies (fn null: none); it takes
                                        // one wire of one chunk of whole groups (GpuQuant checks)
};

// TACO's reference rules, the ones the encode_ref_* kernels compile in (codec_group.cuh,
// rule_dual and its siblings): dual scale, no RHT, saturating E4M3, a target in range.
constexpr bool taco_reference_rules(const QuantRules& q) {
  return q.taco && q.dual && !q.rht && q.elem == ElemKind::E4M3 && q.saturate && q.target_in_range;
}

// The kernels for groups of group_size, with or without the transform, for the TACO rules or
// the block-scaled ones (QuantRules::taco).
GroupKernels select_group_kernels(int group_size, bool transform, bool taco);

inline constexpr int kGroupThreads = 128;  // threads per block of every group kernel
// Groups per group-kernel launch (chunks x blocks per chunk): the kernels index them in 32 bits.
// GpuQuant splits a call with more into launches over consecutive chunks.
inline constexpr int64_t kMaxLaunchGroups = int64_t(1) << 30;
// Decode launches of at most this many output elements (2 MiB of bf16) take decode_reduce_small
// (records v18: from 2 M outputs on, decode and decode-reduce, the regrouped kernel is faster).
inline constexpr int64_t kSmallDecodeElems = int64_t(1) << 20;
inline constexpr int kScopedThreads = 256;
inline constexpr int kScopedRun = 16;      // elements per thread in the element-wise kernels
inline constexpr int kStatsSegment = 8192; // elements per warp in the block-statistics kernel

// Row / tensor blocks (an amax per block needs its own pass): statistics, scales, codes.
// block_amax must be zeroed before scoped_stats runs.
KernelFn scoped_stats_kernel();
KernelFn scoped_scales_kernel();
KernelFn scoped_quant_kernel();
// Element-wise decode (sum over nsrc sources) of row / tensor codecs -> out.
KernelFn scoped_decode_reduce_kernel();

}  // namespace taco::gpu
