// Error reporting for cuda_check.hpp (host code only, so fmt never meets nvcc's front end).
#include "cuda/runtime/cuda_check.hpp"

#include <fmt/format.h>

namespace taco::gpu {

void throw_cuda_error(cudaError_t err, const char* what, const char* file, int line) {
  if (err == cudaErrorMemoryAllocation) throw_out_of_memory(0, what, file, line);
  throw taco::Error(fmt::format("CUDA error in {} at {}:{}: {} ({})", what, file, line,
                                cudaGetErrorString(err), cudaGetErrorName(err)));
}

void throw_out_of_memory(size_t bytes, const char* what, const char* file, int line) {
  (void)cudaGetLastError();  // allocation failures are not sticky: clear it
  size_t free_b = 0, total_b = 0;
  std::string mem;
  if (cudaMemGetInfo(&free_b, &total_b) == cudaSuccess)
    mem = fmt::format("; device has {:.2f} GiB free of {:.2f} GiB", double(free_b) / (1u << 30),
                      double(total_b) / (1u << 30));
  std::string size =
      bytes ? fmt::format(" of {} bytes ({:.2f} GiB)", bytes, double(bytes) / (1u << 30))
            : std::string();
  throw DeviceOutOfMemory(
      fmt::format("GPU out of memory: {}{} failed at {}:{}{}", what, size, file, line, mem));
}

void check_launch(const char* kernel, cudaStream_t stream, const char* file, int line) {
  const cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess)
    throw taco::Error(fmt::format("CUDA error launching {} at {}:{}: {} ({})", kernel, file, line,
                                  cudaGetErrorString(err), cudaGetErrorName(err)));
#if defined(TACO_CUDA_SYNC_CHECK) && TACO_CUDA_SYNC_CHECK
  const cudaError_t serr = cudaStreamSynchronize(stream);
  if (serr != cudaSuccess)
    throw taco::Error(fmt::format("CUDA error running {} (launched at {}:{}): {} ({})", kernel,
                                  file, line, cudaGetErrorString(serr), cudaGetErrorName(serr)));
#else
  (void)stream;
#endif
}

}  // namespace taco::gpu
