// The group kernels of INT3 codes (8 codes in 3 bytes), block-scaled rules only, with their
// error-feedback encodes (group_kernels.cuh, packed_group_kernels).
#include "cuda/codecs/group_kernels.cuh"

namespace taco::gpu::detail {

template GroupKernels packed_group_kernels<3>(int lg, bool transform);

}  // namespace taco::gpu::detail
