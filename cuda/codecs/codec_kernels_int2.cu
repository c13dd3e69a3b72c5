// The group kernels of INT2 codes (4 codes per byte), block-scaled rules only, with their
// error-feedback encodes (group_kernels.cuh, packed_group_kernels).
#include "cuda/codecs/group_kernels.cuh"

namespace taco::gpu::detail {

template GroupKernels packed_group_kernels<2>(int lg, bool transform);

}  // namespace taco::gpu::detail
