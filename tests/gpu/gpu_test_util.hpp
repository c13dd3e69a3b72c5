#pragma once
// Host-to-device fills and copies for the GPU tests. cudaMemset and a cudaMemcpy from pageable
// memory run on the legacy default stream and may return before they land, while the codecs and
// the collective executors run on non-blocking streams, which do not wait for that stream: a
// kernel could read the old contents (seen on a busy GPU: counters zeroed after the kernel had
// counted). So each of these waits for the device.
#include <cuda_runtime_api.h>

#include <cstddef>

#include "cuda/runtime/cuda_check.hpp"

namespace taco::test {

inline void fill_device(void* dst, int byte, size_t bytes) {
  TACO_CUDA_CHECK(cudaMemset(dst, byte, bytes));
  TACO_CUDA_CHECK(cudaDeviceSynchronize());
}

inline void copy_to_device(void* dst, const void* src, size_t bytes) {
  TACO_CUDA_CHECK(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice));
  TACO_CUDA_CHECK(cudaDeviceSynchronize());
}

}  // namespace taco::test
