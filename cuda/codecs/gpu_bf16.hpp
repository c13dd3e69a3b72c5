#pragma once
// The bf16 passthrough codec on device buffers (the CPU's Bf16Codec, codecs/make_codec.cpp): the
// wire is the values rounded to bf16, decodes sum bf16 values in fp32 in source order. Built from
// the elementwise kernels; the error-feedback and ring-hop temporaries are stream-ordered scratch.
#include <string>
#include <vector>

#include "cuda/codecs/device_codec.hpp"

namespace taco::gpu {

class GpuBf16 final : public DeviceCodec {
 public:
  const std::string& name() const override { return name_; }
  int64_t chunk_bytes(int64_t rows, int64_t cols) const override;
  void encode(const void* in, DType in_type, int64_t chunks, int64_t rows, int64_t cols,
              uint8_t* wire, cudaStream_t stream,
              unsigned long long* stats = nullptr) const override;
  void encode_ef(const void* in, DType in_type, float* residual, int64_t chunks, int64_t rows,
                 int64_t cols, uint8_t* wire, cudaStream_t stream,
                 unsigned long long* stats = nullptr) const override;
  void decode_reduce(const std::vector<const uint8_t*>& srcs, int64_t chunks, int64_t rows,
                     int64_t cols, void* out, DType out_type, cudaStream_t stream) const override;
  void decode_reduce_encode(const std::vector<const uint8_t*>& srcs, int64_t chunks, int64_t rows,
                            int64_t cols, uint8_t* wire_out, bool round_bf16, cudaStream_t stream,
                            unsigned long long* stats = nullptr) const override;
  void decode_add_encode(const uint8_t* wire_in, const void* own, DType own_type, int64_t rows,
                         int64_t cols, uint8_t* wire_out, float* scratch,
                         cudaStream_t stream) const override;
  bool hop_needs_scratch() const override { return true; }
  int encode_launches() const override { return 1; }
  int decode_launches() const override { return 1; }
  int decode_reduce_encode_launches() const override { return 1; }

 private:
  std::string name_ = "bf16";
};

}  // namespace taco::gpu
