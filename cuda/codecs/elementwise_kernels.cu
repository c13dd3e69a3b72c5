#include "cuda/codecs/elementwise_kernels.hpp"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>

#include "core/error.hpp"
#include "cuda/runtime/cuda_check.hpp"

namespace taco::gpu::ew {
namespace {

constexpr int kThreads = 256;

unsigned blocks_for(int64_t n) {
  const int64_t b = (n + kThreads - 1) / kThreads;
  return unsigned(std::min<int64_t>(std::max<int64_t>(b, 1), 65535 * 8));
}

__device__ __forceinline__ float load_as_float(const void* p, DType type, int64_t i) {
  switch (type) {
    case DType::BF16:
      return __bfloat162float(static_cast<const __nv_bfloat16*>(p)[i]);
    case DType::F16:
      return __half2float(static_cast<const __half*>(p)[i]);
    default:
      return static_cast<const float*>(p)[i];
  }
}

__device__ __forceinline__ void store_from_float(void* p, DType type, int64_t i, float v) {
  switch (type) {
    case DType::BF16: {
      // The CPU's float_to_bf16 (core/dtype.hpp), bit for bit: round to nearest even, a NaN
      // keeps its sign and top payload bits and is made quiet.
      uint32_t u = __float_as_uint(v);
      u = (u & 0x7fffffffu) > 0x7f800000u ? (u >> 16) | 0x0040u
                                          : (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
      static_cast<uint16_t*>(p)[i] = uint16_t(u);
      break;
    }
    case DType::F16:
      static_cast<__half*>(p)[i] = __float2half_rn(v);
      break;
    default:
      static_cast<float*>(p)[i] = v;
  }
}

__global__ void convert_kernel(const void* in, DType in_type, void* out, DType out_type,
                               int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x)
    store_from_float(out, out_type, i, load_as_float(in, in_type, i));
}

struct Sources {
  const uint16_t* p[16];
};

__global__ void sum_bf16_kernel(Sources s, int nsrc, int64_t n, void* out, DType out_type) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    float acc = __uint_as_float(uint32_t(s.p[0][i]) << 16);
    for (int k = 1; k < nsrc; ++k) acc = __fadd_rn(acc, __uint_as_float(uint32_t(s.p[k][i]) << 16));
    store_from_float(out, out_type, i, acc);
  }
}

__device__ __forceinline__ float finite_or_zero(float v, int zero) {
  return zero && !isfinite(v) ? 0.0f : v;
}

__global__ void add_kernel(const void* a, DType a_type, const float* b, float* out, int64_t n,
                           int zero) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x)
    out[i] = __fadd_rn(finite_or_zero(load_as_float(a, a_type, i), zero), b[i]);
}

__global__ void sub_kernel(const float* a, const float* b, float* out, int64_t n, int zero) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x)
    out[i] = __fsub_rn(a[i], finite_or_zero(b[i], zero));
}

__global__ void count_nonfinite_kernel(const void* in, DType type, int64_t n,
                                       unsigned long long* counter) {
  unsigned long long k = 0;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x)
    k += !isfinite(load_as_float(in, type, i));
  if (k) atomicAdd(counter, k);
}

}  // namespace

void count_nonfinite(const void* in, DType type, int64_t n, unsigned long long* counter,
                     cudaStream_t stream) {
  if (n <= 0) return;
  count_nonfinite_kernel<<<blocks_for(n), kThreads, 0, stream>>>(in, type, n, counter);
  TACO_CUDA_CHECK_LAUNCH("non-finite count kernel", stream);
}

void convert(const void* in, DType in_type, void* out, DType out_type, int64_t n,
             cudaStream_t stream) {
  if (n <= 0) return;
  convert_kernel<<<blocks_for(n), kThreads, 0, stream>>>(in, in_type, out, out_type, n);
  TACO_CUDA_CHECK_LAUNCH("convert kernel", stream);
}

void sum_bf16(const uint16_t* const* srcs, int nsrc, int64_t n, void* out, DType out_type,
              cudaStream_t stream) {
  TACO_ASSERT(nsrc >= 1 && nsrc <= 16, "sum_bf16: {} sources (1 to 16)", nsrc);
  if (n <= 0) return;
  Sources s{};
  for (int k = 0; k < nsrc; ++k) s.p[k] = srcs[k];
  sum_bf16_kernel<<<blocks_for(n), kThreads, 0, stream>>>(s, nsrc, n, out, out_type);
  TACO_CUDA_CHECK_LAUNCH("bf16 sum kernel", stream);
}

void add_f32(const void* a, DType a_type, const float* b, float* out, int64_t n,
             bool zero_nonfinite, cudaStream_t stream) {
  if (n <= 0) return;
  add_kernel<<<blocks_for(n), kThreads, 0, stream>>>(a, a_type, b, out, n, zero_nonfinite ? 1 : 0);
  TACO_CUDA_CHECK_LAUNCH("add kernel", stream);
}

void sub_f32(const float* a, const float* b, float* out, int64_t n, bool zero_nonfinite,
             cudaStream_t stream) {
  if (n <= 0) return;
  sub_kernel<<<blocks_for(n), kThreads, 0, stream>>>(a, b, out, n, zero_nonfinite ? 1 : 0);
  TACO_CUDA_CHECK_LAUNCH("sub kernel", stream);
}

}  // namespace taco::gpu::ew
