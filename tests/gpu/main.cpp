// taco_gpu_tests: its own main so that a machine without a usable GPU reports "skipped" (exit
// code 77, ctest SKIP_RETURN_CODE) instead of failing. Works with Catch2 2.13 and 3.x.
#if __has_include(<catch2/catch_session.hpp>)
#include <catch2/catch_session.hpp>
#else
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>
#endif

#include <cuda_runtime_api.h>

#include <cstdio>

int main(int argc, char** argv) {
  int n = 0;
  const cudaError_t err = cudaGetDeviceCount(&n);
  if (err != cudaSuccess || n == 0) {
    std::printf("taco_gpu_tests: no usable CUDA device (%s); skipping\n",
                err != cudaSuccess ? cudaGetErrorString(err) : "0 devices");
    return 77;
  }
  cudaDeviceProp prop{};
  if (cudaGetDeviceProperties(&prop, 0) == cudaSuccess)
    std::printf("taco_gpu_tests: device 0 is %s (sm_%d%d, %d SMs)\n", prop.name, prop.major,
                prop.minor, prop.multiProcessorCount);
  return Catch::Session().run(argc, argv);
}
