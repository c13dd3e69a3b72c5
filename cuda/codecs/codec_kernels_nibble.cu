// The group kernels of 4-bit codes (E2M1, INT4: two codes per byte), block-scaled rules only,
// NVFP4's two-level scales among them, with their error-feedback encodes and the statistics pass
// of two-level scales (group_kernels.cuh).
#include "core/error.hpp"
#include "cuda/codecs/group_kernels.cuh"

namespace taco::gpu::detail {

namespace {
template <int LG>
GroupKernels nibble_kernels(bool transform) {
  GroupKernels k =
      transform ? group_kernels<LG, true, false, 4>() : group_kernels<LG, false, false, 4>();
  if (transform)
    add_feedback_kernels<LG, true, false, 4>(k);
  else
    add_feedback_kernels<LG, false, false, 4>(k);
  return k;
}
}  // namespace

GroupKernels nibble_group_kernels(int lg, bool transform) {
  switch (lg) {
    case 4:
      return nibble_kernels<4>(transform);
    case 5:
      return nibble_kernels<5>(transform);
    case 6:
      return nibble_kernels<6>(transform);
    case 7:
      return nibble_kernels<7>(transform);
    case 8:
      return nibble_kernels<8>(transform);
    case 9:
      return nibble_kernels<9>(transform);
    case 10:
      return nibble_kernels<10>(transform);
    default:
      throw_error("nibble_group_kernels: log2 group size {}", lg);
  }
}

}  // namespace taco::gpu::detail
