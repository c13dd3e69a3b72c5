#include "cuda/bench/bench_data.hpp"

#include "core/splitmix64.hpp"

#include "cuda/codecs/codec_formats.cuh"
#include "cuda/runtime/cuda_check.hpp"

namespace taco::gpu {
namespace {

__global__ void fill_kernel(void* x, int bf16, int64_t n, int64_t cols, uint64_t seed) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    const uint64_t h = splitmix64_mix(seed * 0x9E3779B97F4A7C15ull + uint64_t(i));
    // Irwin-Hall of 4 uniforms: mean 2, variance 1/3, scaled to unit variance
    float s = 0.0f;
    for (int k = 0; k < 4; ++k) s += float((h >> (16 * k)) & 0xffffu) * (1.0f / 65536.0f);
    float v = (s - 2.0f) * 1.7320508f;
    if (cols > 0) {
      const int64_t c = i % cols;
      const uint64_t hc = splitmix64_mix(seed + uint64_t(c) * 0xD1B54A32D192ED03ull);
      v *= 0.5f + 1.5f * float(hc & 0xffffu) * (1.0f / 65536.0f);
      if ((hc >> 16) % 4096 == 0) v *= 100.0f;
    }
    if (bf16)
      static_cast<uint16_t*>(x)[i] = uint16_t(detail::float_to_bf16_bits(v));
    else
      static_cast<float*>(x)[i] = v;
  }
}

}  // namespace

void fill_random(void* x, bool bf16, int64_t n, int64_t cols, uint64_t seed, cudaStream_t stream) {
  fill_kernel<<<1024, 256, 0, stream>>>(x, bf16 ? 1 : 0, n, cols, seed);
  TACO_CUDA_CHECK_LAUNCH("fill_kernel", stream);
}

}  // namespace taco::gpu
