#pragma once
// Host-side entry points of the quantization kernels (codec_kernels.cu). The one run-time ->
// compile-time dispatch lives in select_group_kernels(); it throws InputError for a group size
// it has no instantiation for.
#include <cuda_runtime_api.h>

#include "cuda/codec_params.hpp"

namespace taco::gpu {

using KernelFn = void (*)(KernelParams);

// The fused kernels of one (group size, transform) pair.
struct GroupKernels {
  KernelFn encode = nullptr;                // [chunks] groups (of the input dtype) -> wire_out
  KernelFn decode_reduce = nullptr;         // sum over nsrc (>= 1) decoded wires -> out
  KernelFn decode_reduce_encode = nullptr;  // the same sum, re-encoded -> wire_out
  int lanes_per_group = 0;
  int groups_per_warp = 0;
  int encode_unroll = 1;                    // items (of groups_per_warp groups) per warp iteration
  int decode_unroll = 1;
};

// Launch tuning of the fused kernels: how many items a warp loads before computing.
struct GroupTuning {
  int encode_unroll = 1;  // 1 or 2
  int decode_unroll = 1;  // 1 or 2 (1 measured faster on H200: bench/records v2)
};

GroupKernels select_group_kernels(int group_size, bool transform, DataType in, int encode_unroll,
                                  int decode_unroll);

inline constexpr int kGroupThreads = 128;  // threads per block of every group kernel
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
