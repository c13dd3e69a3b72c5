// Test kernels that expose the device number-format functions of cuda/codecs/codec_formats.cuh, so
// the tests can compare them with the CPU reference over whole ranges of float bit patterns.
#include "gpu/format_kernels.hpp"

#include "cuda/codecs/codec_formats.cuh"
#include "cuda/runtime/cuda_check.hpp"

namespace taco::gpu::test {

namespace {

__global__ void fp8_encode_range(uint32_t first, uint32_t n, int format, int hw, uint8_t* out) {
  for (uint32_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
    const float x = __uint_as_float(first + i);
    uint32_t c;
    const ElemFormat k = format == 0 ? ElemFormat::E4M3 : ElemFormat::E5M2;
    if (hw)
      c = detail::fp8x2_sat(x, 0.0f, k) & 0xffu;
    else
      c = format == 0 ? detail::e4m3_sw(x, false) : detail::e5m2_sw(x, false);
    out[i] = uint8_t(c);
  }
}

__global__ void fp8_pair_order(float a, float b, int format, uint32_t* out) {
  *out = detail::fp8x2_sat(a, b, format == 0 ? ElemFormat::E4M3 : ElemFormat::E5M2);
}

__global__ void fp8_decode_all(int format, float* out) {
  const uint32_t c = threadIdx.x;
  out[c] = detail::fp8_to_float(c, format == 0 ? ElemFormat::E4M3 : ElemFormat::E5M2);
}

// Codes of the floats first + i: E2M1 through the kernels' eight-wide encode of t * 2^-14 (the
// value in every position of the word, each position checked), INT4 through int4_word, UE4M3.
__global__ void nibble_range(uint32_t first, uint32_t n, uint8_t* e2m1_out, uint8_t* int4_out,
                             uint8_t* ue4m3_out) {
  for (uint32_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
    const float t = __uint_as_float(first + i);
    const float x = __fmul_rn(t, kE2M1Shift);
    const uint32_t we = e2m1_word_scaled({x, x, x, x, x, x, x, x});
    const uint32_t wi = int4_word({t, t, t, t, t, t, t, t});
    // every nibble of a word holds the same code, else 0xff flags a position-dependent result
    e2m1_out[i] = we == (we & 0xfu) * 0x11111111u ? uint8_t(we & 0xfu) : uint8_t(0xff);
    int4_out[i] = wi == (wi & 0xfu) * 0x11111111u ? uint8_t(wi & 0xfu) : uint8_t(0xff);
    ue4m3_out[i] = uint8_t(ue4m3_code(t));
  }
}

__global__ void e8m0_range(uint32_t first, uint32_t n, uint8_t* ceil_out, uint8_t* near_out) {
  for (uint32_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
    const float x = __uint_as_float(first + i);
    ceil_out[i] = uint8_t(detail::e8m0_ceil(x));
    near_out[i] = uint8_t(detail::float_to_e8m0_sat(x));
  }
}

}  // namespace

void fp8_encode_range_gpu(uint32_t first, uint32_t n, int format, bool hardware, uint8_t* d_out) {
  fp8_encode_range<<<1024, 256>>>(first, n, format, hardware ? 1 : 0, d_out);
  TACO_CUDA_CHECK_LAUNCH("fp8_encode_range", nullptr);
}

uint32_t fp8_pair_gpu(float a, float b, int format, uint32_t* d_word) {
  fp8_pair_order<<<1, 1>>>(a, b, format, d_word);
  TACO_CUDA_CHECK_LAUNCH("fp8_pair_order", nullptr);
  uint32_t w = 0;
  TACO_CUDA_CHECK(cudaMemcpy(&w, d_word, 4, cudaMemcpyDeviceToHost));
  return w;
}

void fp8_decode_all_gpu(int format, float* d_out) {
  fp8_decode_all<<<1, 256>>>(format, d_out);
  TACO_CUDA_CHECK_LAUNCH("fp8_decode_all", nullptr);
}

void nibble_range_gpu(uint32_t first, uint32_t n, uint8_t* d_e2m1, uint8_t* d_int4,
                      uint8_t* d_ue4m3) {
  nibble_range<<<1024, 256>>>(first, n, d_e2m1, d_int4, d_ue4m3);
  TACO_CUDA_CHECK_LAUNCH("nibble_range", nullptr);
}

void e8m0_range_gpu(uint32_t first, uint32_t n, uint8_t* d_ceil, uint8_t* d_near) {
  e8m0_range<<<1024, 256>>>(first, n, d_ceil, d_near);
  TACO_CUDA_CHECK_LAUNCH("e8m0_range", nullptr);
}

}  // namespace taco::gpu::test
