#include "cuda/runtime/device.hpp"

#include <cstdio>
#include <memory>

#include "cuda/runtime/cuda_check.hpp"

namespace taco::gpu {

DeviceBuffer::DeviceBuffer(size_t bytes, const char* what) : bytes_(bytes) {
  if (bytes == 0) return;
  const cudaError_t err = cudaMalloc(&ptr_, bytes);
  if (err == cudaErrorMemoryAllocation) {
    ptr_ = nullptr;
    throw_out_of_memory(bytes, what, __FILE__, __LINE__);
  }
  if (err != cudaSuccess) {
    ptr_ = nullptr;
    throw_cuda_error(err, what, __FILE__, __LINE__);
  }
}

void DeviceBuffer::reset() noexcept {
  // Never throws (destructors, moves); errors surface elsewhere.
  if (ptr_) {
    if (release_)
      release_(ptr_);
    else
      (void)cudaFree(ptr_);
  }
  ptr_ = nullptr;
  bytes_ = 0;
  release_ = nullptr;
}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& o) noexcept {
  if (this != &o) {
    reset();
    ptr_ = std::exchange(o.ptr_, nullptr);
    bytes_ = std::exchange(o.bytes_, 0);
    release_ = std::exchange(o.release_, nullptr);
  }
  return *this;
}

StreamScratch::StreamScratch(size_t bytes, cudaStream_t stream) : s_(stream) {
  TACO_CUDA_CHECK(cudaMallocAsync(&p_, bytes > 16 ? bytes : 16, stream));
}

StreamScratch::~StreamScratch() {
  cudaFreeAsync(p_, s_);  // never throws: a failure here surfaces at the stream's next check
}

CudaStream::CudaStream() {
  TACO_CUDA_CHECK(cudaStreamCreateWithFlags(&s_, cudaStreamNonBlocking));
}
CudaStream::~CudaStream() {
  if (s_) (void)cudaStreamDestroy(s_);
}
void CudaStream::synchronize() const {
  TACO_CUDA_CHECK(cudaStreamSynchronize(s_));
}

CudaEvent::CudaEvent() {
  TACO_CUDA_CHECK(cudaEventCreate(&e_));
}
CudaEvent::~CudaEvent() {
  if (e_) (void)cudaEventDestroy(e_);
}
void CudaEvent::record(cudaStream_t s) const {
  TACO_CUDA_CHECK(cudaEventRecord(e_, s));
}
float CudaEvent::elapsed_ms_since(const CudaEvent& start) const {
  float ms = 0;
  TACO_CUDA_CHECK(cudaEventElapsedTime(&ms, start.e_, e_));
  return ms;
}

int device_count_noexcept() {
  int n = 0;
  const cudaError_t err = cudaGetDeviceCount(&n);
  if (err != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  return n;
}

namespace {
// The driver's version string from nvidia-smi; "" when it is not installed or fails.
std::string nvidia_smi_driver_version(int device) {
  const std::string cmd = "nvidia-smi --query-gpu=driver_version --format=csv,noheader -i " +
                          std::to_string(device) + " 2>/dev/null";
  std::unique_ptr<FILE, int (*)(FILE*)> p(popen(cmd.c_str(), "r"), pclose);
  if (!p) return "";
  char buf[128] = {0};
  if (!std::fgets(buf, sizeof buf, p.get())) return "";
  std::string s(buf);
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r' || s.back() == ' ')) s.pop_back();
  return s;
}
}  // namespace

DeviceInfo query_device(int device) {
  DeviceInfo d;
  d.device = device;
  cudaDeviceProp p{};
  TACO_CUDA_CHECK(cudaGetDeviceProperties(&p, device));
  d.name = p.name;
  d.sm_major = p.major;
  d.sm_minor = p.minor;
  d.sm_count = p.multiProcessorCount;
  d.l2_bytes = p.l2CacheSize;
  d.global_mem_bytes = p.totalGlobalMem;
  d.mem_bus_width_bits = p.memoryBusWidth;
  int clk = 0;
  if (cudaDeviceGetAttribute(&clk, cudaDevAttrMemoryClockRate, device) == cudaSuccess)
    d.mem_clock_khz = clk;
  else
    (void)cudaGetLastError();
  TACO_CUDA_CHECK(cudaRuntimeGetVersion(&d.runtime_version));
  TACO_CUDA_CHECK(cudaDriverGetVersion(&d.driver_api_version));
  d.driver_version = nvidia_smi_driver_version(device);
  return d;
}

std::string cuda_version_string(int v) {
  return std::to_string(v / 1000) + "." + std::to_string((v % 1000) / 10);
}

}  // namespace taco::gpu
