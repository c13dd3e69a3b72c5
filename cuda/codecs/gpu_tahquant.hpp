#pragma once
// TAH-Quant on device buffers (the CPU's TahQuantCodec, codecs/tahquant.hpp): the same wire, bit
// for bit, from the arithmetic both share (codecs/tahquant_hd.hpp). Per block: a warp per token
// computes its entropy in the shared lane order; a stable radix sort of (entropy, token) picks the
// low-precision tokens, as the CPU's stable_sort does; prefix sums place every token in the sent
// order; a thread per tile swaps, transforms, quantizes and writes its codes, zero and scale;
// prefix sums over the tile flags place the pivots. The wire is the bound's size (chunk_bytes),
// zero after the bytes encoded, as a bounded wire travels. Decodes read the bitmaps back the same
// way. Correct first: one thread per tile, no throughput goal yet (tile values in shared memory).
#include <string>
#include <vector>

#include "codecs/tahquant.hpp"
#include "cuda/codecs/device_codec.hpp"

namespace taco::gpu {

class GpuTahQuant final : public DeviceCodec {
 public:
  explicit GpuTahQuant(const VariantSpec& spec);

  const std::string& name() const override { return cpu_.name(); }
  int64_t chunk_bytes(int64_t rows, int64_t cols) const override;
  int64_t encoded_bytes(const uint8_t* wire, int64_t rows, int64_t cols) const override {
    return cpu_.encoded_bytes(wire, rows, cols);
  }
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
  int encode_launches() const override;
  int decode_launches() const override;
  int decode_reduce_encode_launches() const override;
  std::string kernel_config() const override;

 private:
  // One block's encode from fp32 values (non-finite counted here, then read as 0).
  void encode_block(const float* x, const tah::Layout& L, uint8_t* wire, cudaStream_t stream,
                    unsigned long long* stats) const;
  // out = decode(wire) (accumulate: out += decode(wire)) for one block, in fp32.
  void decode_block(const uint8_t* wire, const tah::Layout& L, float* out, bool accumulate,
                    cudaStream_t stream) const;

  TahQuantCodec cpu_;  // the layout and the wire size (no encoding happens on the host)
};

}  // namespace taco::gpu
