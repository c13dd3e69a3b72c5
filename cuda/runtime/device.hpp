#pragma once
// RAII owners for device memory, streams and events, and a description of the current device.
// No global state: every owner is a plain object passed where it is needed.
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <utility>

namespace taco::gpu {

// Device memory of a fixed size. Allocation failure throws DeviceOutOfMemory naming `what`.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(size_t bytes, const char* what);
  // Adopts `bytes` at `ptr` allocated elsewhere (NCCL windows); `release` frees it, never throwing.
  DeviceBuffer(void* ptr, size_t bytes, std::function<void(void*)> release)
      : ptr_(ptr), bytes_(bytes), release_(std::move(release)) {}
  ~DeviceBuffer() { reset(); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  DeviceBuffer(DeviceBuffer&& o) noexcept
      : ptr_(std::exchange(o.ptr_, nullptr)),
        bytes_(std::exchange(o.bytes_, 0)),
        release_(std::exchange(o.release_, nullptr)) {}
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept;

  void* get() const { return ptr_; }
  template <typename T>
  T* as() const {
    return static_cast<T*>(ptr_);
  }
  size_t bytes() const { return bytes_; }

 private:
  void reset() noexcept;
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
  std::function<void(void*)> release_;  // empty: cudaFree
};

// Stream-ordered scratch: allocated and freed on the caller's stream (cudaMallocAsync /
// cudaFreeAsync), so a call that needs temporary memory neither synchronises nor shares a buffer
// with calls on other streams.
class StreamScratch {
 public:
  StreamScratch(size_t bytes, cudaStream_t stream);
  ~StreamScratch();
  StreamScratch(const StreamScratch&) = delete;
  StreamScratch& operator=(const StreamScratch&) = delete;
  void* get() const { return p_; }
  float* f32() const { return static_cast<float*>(p_); }

 private:
  void* p_ = nullptr;
  cudaStream_t s_ = nullptr;
};

class CudaStream {
 public:
  CudaStream();  // non-blocking stream
  ~CudaStream();
  CudaStream(const CudaStream&) = delete;
  CudaStream& operator=(const CudaStream&) = delete;
  cudaStream_t get() const { return s_; }
  void synchronize() const;

 private:
  cudaStream_t s_ = nullptr;
};

class CudaEvent {
 public:
  CudaEvent();  // timing event
  ~CudaEvent();
  CudaEvent(const CudaEvent&) = delete;
  CudaEvent& operator=(const CudaEvent&) = delete;
  cudaEvent_t get() const { return e_; }
  void record(cudaStream_t s) const;
  // Milliseconds from `start` to this event (both recorded and complete).
  float elapsed_ms_since(const CudaEvent& start) const;

 private:
  cudaEvent_t e_ = nullptr;
};

struct DeviceInfo {
  int device = 0;
  std::string name;
  int sm_major = 0, sm_minor = 0;
  int sm_count = 0;
  int l2_bytes = 0;
  size_t global_mem_bytes = 0;
  int mem_bus_width_bits = 0;
  int mem_clock_khz = 0;       // 0 where the runtime no longer reports it
  int runtime_version = 0;     // cudaRuntimeGetVersion, e.g. 13000
  int driver_api_version = 0;  // cudaDriverGetVersion (the CUDA version the driver supports)
  std::string driver_version;  // NVIDIA driver, e.g. "580.159.04" (nvidia-smi), "" if unknown
};

// Number of visible CUDA devices; 0 when there is none or the driver is missing (never throws).
int device_count_noexcept();
DeviceInfo query_device(int device);
// "13.0" from 13000.
std::string cuda_version_string(int v);

}  // namespace taco::gpu
