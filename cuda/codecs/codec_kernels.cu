// The quantization kernels' one dispatch point, select_group_kernels(), and the 8-bit group
// kernels it returns (group_kernels.cuh has the templates). The kernels of 4-, 3- and 2-bit codes,
// the error-feedback encodes of 8-bit codes and the row / column / tensor kernels are instantiated
// in their own translation units (codec_kernels_nibble.cu, codec_kernels_int3.cu,
// codec_kernels_int2.cu, codec_kernels_feedback.cu, codec_kernels_strided.cu).
#include "cuda/codecs/codec_kernels.hpp"

#include "core/error.hpp"
#include "cuda/codecs/group_kernels.cuh"

namespace taco::gpu {

namespace {
template <int LG>
GroupKernels byte_group_kernels(bool transform, bool taco) {
  if (transform)
    return taco ? detail::group_kernels<LG, true, true>()
                : detail::group_kernels<LG, true, false>();
  return taco ? detail::group_kernels<LG, false, true>()
              : detail::group_kernels<LG, false, false>();
}

GroupKernels byte_group_kernels(int lg, bool transform, bool taco) {
  switch (lg) {
    case 4:
      return byte_group_kernels<4>(transform, taco);
    case 5:
      return byte_group_kernels<5>(transform, taco);
    case 6:
      return byte_group_kernels<6>(transform, taco);
    case 7:
      return byte_group_kernels<7>(transform, taco);
    case 8:
      return byte_group_kernels<8>(transform, taco);
    case 9:
      return byte_group_kernels<9>(transform, taco);
    case 10:
      return byte_group_kernels<10>(transform, taco);
    default:
      throw_error("byte_group_kernels: log2 group size {}", lg);
  }
}
}  // namespace

GroupKernels select_group_kernels(int group_size, bool transform, bool taco, int code_bits) {
  int lg = -1;
  for (int l = 4; l <= 10; ++l)
    if (group_size == 1 << l) lg = l;
  if (lg < 0)
    throw_input_error(
        "GPU codecs: no kernel for group size {} (supported: 16, 32, 64, 128, 256, "
        "512, 1024)",
        group_size);
  if (code_bits < 8)
    TACO_REQUIRE_INPUT(!taco, "GPU codecs: TACO rules take 8-bit codes, not {}-bit ones",
                       code_bits);
  switch (code_bits) {
    case 4:
      return detail::packed_group_kernels<4>(lg, transform);
    case 3:
      return detail::packed_group_kernels<3>(lg, transform);
    case 2:
      return detail::packed_group_kernels<2>(lg, transform);
    case 8:
      break;
    default:
      throw_input_error("GPU codecs: no kernel for {}-bit codes (supported: 8, 4, 3, 2)",
                        code_bits);
  }
  GroupKernels k = byte_group_kernels(lg, transform, taco);
  detail::add_byte_feedback_kernels(lg, transform, taco, k);
  return k;
}

}  // namespace taco::gpu
