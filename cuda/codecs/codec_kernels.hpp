#pragma once
// Host-side entry points of the quantization kernels (codec_kernels*.cu). The one run-time ->
// compile-time dispatch of the group codecs lives in select_group_kernels(); it throws
// InputError for a group size or code width it has no instantiation for. The row / column /
// tensor codecs take the kernels of strided_kernels().
#include <cuda_runtime_api.h>

#include "cuda/codecs/codec_params.hpp"
#include "cuda/codecs/kernel_tuning.hpp"

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

__host__ __device__ constexpr int round_up16(int n) {
  return (n + 15) / 16 * 16;
}

__host__ __device__ constexpr StreamTileLayout stream_tile_layout(int tile_groups, int stages,
                                                                  int out_stages, int group_size,
                                                                  int scale_bytes, bool dual,
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
  GroupKernel encode_bf16, encode_f32;          // [chunks] groups of the input dtype -> wire_out
  GroupKernel encode_ref_bf16, encode_ref_f32;  // the same for TACO's reference rules and no
                                                // counters (fn null: none; GpuQuant says when)
  GroupKernel decode;                           // one wire (nsrc == 1) decoded -> out
  GroupKernel decode_reduce;                    // sum over nsrc (>= 1) decoded wires -> out
  GroupKernel decode_reduce_small;              // the same, for at most kSmallDecodeElems outputs
  GroupKernel decode_reduce_encode;             // the same sum, re-encoded -> wire_out
  GroupKernel decode_add_encode;  // encode(decode(src[0]) + in): a ring all-reduce hop
  GroupKernel decode_stream;      // `decode` through bulk copies (fn null: none); it takes
                                  // one wire of one chunk of whole groups (GpuQuant checks)
  GroupKernel encode_feedback_bf16,
      encode_feedback_f32;  // encode with error feedback: input and
                            // residual in, codes and the new residual out
  GroupKernel chunk_amax;   // the statistics pass of two-level (UE4M3) scales, before
                            // any encode of theirs (fn null: 8-bit codes, none)
};

// TACO's reference rules, the ones the encode_ref_* kernels compile in (codec_group.cuh,
// rule_dual and its siblings): dual scale, no RHT, saturating E4M3, a target in range.
constexpr bool taco_reference_rules(const QuantRules& q) {
  return q.taco && q.dual && !q.rht && q.elem == ElemFormat::E4M3 && q.saturate &&
         q.target_in_range;
}

// The kernels for groups of group_size, with or without the transform, for the TACO rules or
// the block-scaled ones (QuantRules::taco), with 8-, 4-, 3- or 2-bit codes (below 8: block-scaled
// only).
GroupKernels select_group_kernels(int group_size, bool transform, bool taco, int code_bits);

namespace detail {
// Parts of select_group_kernels instantiated in translation units of their own, which build in
// parallel: the kernels of codes narrower than a byte, one unit per width (Bits = 4:
// codec_kernels_nibble.cu, 3: codec_kernels_int3.cu, 2: codec_kernels_int2.cu; the template is
// group_kernels.cuh's), and the error-feedback encodes of 8-bit codes (codec_kernels_feedback.cu).
// lg = log2 of the group size, already validated.
template <int Bits>
GroupKernels packed_group_kernels(int lg, bool transform);
extern template GroupKernels packed_group_kernels<4>(int, bool);
extern template GroupKernels packed_group_kernels<3>(int, bool);
extern template GroupKernels packed_group_kernels<2>(int, bool);
void add_byte_feedback_kernels(int lg, bool transform, bool taco, GroupKernels& k);
}  // namespace detail

// Groups per group-kernel launch (chunks x blocks per chunk): the kernels index them in 32 bits.
// GpuQuant splits a call with more into launches over consecutive chunks.
inline constexpr int64_t kMaxLaunchGroups = int64_t(1) << 30;

// ---- row / column / tensor codecs (codec_kernels_strided.cu) ---------------------------------
// Rows: one pass; kRowShapes[k] threads per row (one, two or four warps, the block), each holding
// kRowThreadElems elements of a slab of the row in registers (rows longer than a slab read the
// rest a second time, from L2). Tensor and column scales need a statistic of the whole chunk
// first: an amax pass (chunk_amax for tensor, block_amax per column), a scales pass (columns),
// then an element-wise quantization pass. Decodes are element-wise. Elements: E4M3, E5M2, INT8.
// (Shapes and thresholds: kernel_tuning.hpp.)
// The row kernel for rows of `cols`: the fewest threads per row whose slab holds the row (a
// shape with more threads leaves the ones past the row idle).
inline int row_shape(int64_t cols) {
  for (int k = 0; k < kNumRowShapes - 1; ++k)
    if (cols <= int64_t(kRowShapes[k]) * kRowThreadElems) return k;
  return kNumRowShapes - 1;
}

struct StridedKernels {
  // [row_shape][in type: 0 bf16, 1 f32][error feedback: 0, 1]
  KernelFn row_encode[kNumRowShapes][2][2];
  KernelFn tensor_amax[2][2];   // [in type][feedback] -> chunk_amax (zeroed first)
  KernelFn col_amax[2][2];      // -> block_amax, [chunks][cols] (zeroed first)
  KernelFn col_scales;          // block_amax -> the wire's scales and block_scale
  KernelFn tensor_quant[2][2];  // codes from chunk_amax's scale
  KernelFn col_quant[2][2];     // codes from block_scale
  KernelFn tensor_decode, row_decode, col_decode;  // decode + reduce over nsrc wires -> out
};
const StridedKernels& strided_kernels();

}  // namespace taco::gpu
