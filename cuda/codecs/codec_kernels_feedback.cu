// The error-feedback encodes of the 8-bit group codecs, TACO and block-scaled
// (group_kernels.cuh, group_encode_feedback_kernel).
#include "core/error.hpp"
#include "cuda/codecs/group_kernels.cuh"

namespace taco::gpu::detail {

namespace {
template <int LG>
void byte_feedback_kernels(bool transform, bool taco, GroupKernels& k) {
  if (transform) {
    if (taco)
      add_feedback_kernels<LG, true, true>(k);
    else
      add_feedback_kernels<LG, true, false>(k);
  } else {
    if (taco)
      add_feedback_kernels<LG, false, true>(k);
    else
      add_feedback_kernels<LG, false, false>(k);
  }
}
}  // namespace

void add_byte_feedback_kernels(int lg, bool transform, bool taco, GroupKernels& k) {
  switch (lg) {
    case 4:
      return byte_feedback_kernels<4>(transform, taco, k);
    case 5:
      return byte_feedback_kernels<5>(transform, taco, k);
    case 6:
      return byte_feedback_kernels<6>(transform, taco, k);
    case 7:
      return byte_feedback_kernels<7>(transform, taco, k);
    case 8:
      return byte_feedback_kernels<8>(transform, taco, k);
    case 9:
      return byte_feedback_kernels<9>(transform, taco, k);
    case 10:
      return byte_feedback_kernels<10>(transform, taco, k);
    default:
      throw_error("add_byte_feedback_kernels: log2 group size {}", lg);
  }
}

}  // namespace taco::gpu::detail
