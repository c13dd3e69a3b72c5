#pragma once
// Checked CUDA calls. Every runtime call goes through TACO_CUDA_CHECK, every kernel launch is
// followed by TACO_CUDA_CHECK_LAUNCH. Failures throw (never exit): the CLI's main() prints one
// line and exits.
//   * out of device memory        -> taco::gpu::DeviceOutOfMemory (a taco::Error: exit code 1),
//                                    message names the call, the size asked for and free/total;
//   * any other CUDA error        -> taco::Error (exit code 1), message names the failing call,
//                                    file:line and cudaGetErrorString.
// Build with -DTACO_CUDA_SYNC_CHECK=1 to also synchronise after every launch, so that an
// asynchronous fault is reported at the kernel that caused it (debugging only: it is slow).
#include <cuda_runtime_api.h>

#include <cstddef>

#include "core/error.hpp"

namespace taco::gpu {

class DeviceOutOfMemory : public taco::Error {
 public:
  using taco::Error::Error;
};

[[noreturn]] void throw_cuda_error(cudaError_t err, const char* what, const char* file, int line);
// Called when an allocation of `bytes` failed; clears the (non-sticky) error first.
[[noreturn]] void throw_out_of_memory(size_t bytes, const char* what, const char* file, int line);
// After a launch: cudaGetLastError(), and with TACO_CUDA_SYNC_CHECK a stream synchronise.
void check_launch(const char* kernel, cudaStream_t stream, const char* file, int line);

}  // namespace taco::gpu

#define TACO_CUDA_CHECK(call)                                                      \
  do {                                                                             \
    const cudaError_t taco_cuda_status_ = (call);                                  \
    if (taco_cuda_status_ != cudaSuccess)                                          \
      ::taco::gpu::throw_cuda_error(taco_cuda_status_, #call, __FILE__, __LINE__); \
  } while (0)

#define TACO_CUDA_CHECK_LAUNCH(kernel_name, stream) \
  ::taco::gpu::check_launch(kernel_name, stream, __FILE__, __LINE__)
