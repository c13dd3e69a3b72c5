// The group kernels of 4-bit codes (E2M1, INT4: two codes per byte), block-scaled rules only,
// NVFP4's two-level scales among them, with their error-feedback encodes and the statistics pass
// of two-level scales (group_kernels.cuh, packed_group_kernels).
#include "cuda/codecs/group_kernels.cuh"

namespace taco::gpu::detail {

template GroupKernels packed_group_kernels<4>(int lg, bool transform);

}  // namespace taco::gpu::detail
