#pragma once
// The GPU side of the one codec contract (codecs/codec.hpp): the same operations on device
// buffers, enqueued on a stream, producing the CPU reference's bytes. A call covers `chunks`
// independent [rows, cols] blocks laid side by side (block k of the values at element
// k * rows * cols, of the wire at byte k * chunk_bytes(rows, cols)), exactly as `chunks` CPU
// encode() calls would, concatenated. Values are f32 or bf16 (callers convert other types).
//
// One implementation per codec family, made by make_device_codec(), the one dispatch point:
//   GpuQuant (gpu_quant.hpp)  block-scaled quantization: fused group kernels, strided kernels;
//   GpuBf16  (gpu_bf16.hpp)   the bf16 passthrough (exact sums of bf16 values in fp32);
//   GpuTahQuant (gpu_tahquant.hpp)  TAH-Quant (entropy-ranked tokens, pivot + Hadamard tiles).
// The study (through make_gpu_codec's host-buffer Codec), taco bench, taco comm's executor and the
// Python binding all take this type; a codec gains GPU support in all four by implementing it.
#include <cuda_runtime_api.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "codecs/variant.hpp"
#include "core/dtype.hpp"

namespace taco::gpu {

class DeviceCodec {
 public:
  virtual ~DeviceCodec() = default;

  virtual const std::string& name() const = 0;
  // Wire bytes of one [rows, cols] block (InputError for a shape the codec cannot take). For a
  // codec whose size depends on the data (TAH-Quant) the bound: the encoded bytes, then zeros,
  // as the CPU's bounded wires travel (Codec::wire_size).
  virtual int64_t chunk_bytes(int64_t rows, int64_t cols) const = 0;
  // The bytes encode() wrote at the front of one block's wire (a host copy): chunk_bytes() but
  // for codecs whose size depends on the data, where it is the CPU encode()'s size.
  virtual int64_t encoded_bytes(const uint8_t* wire, int64_t rows, int64_t cols) const {
    (void)wire;
    return chunk_bytes(rows, cols);
  }

  // in: chunks x rows x cols values -> wire: chunks x chunk_bytes. stats, when given, is a zeroed
  // device array of 2 counters (saturated codes, non-finite inputs) to add to, as
  // Codec::EncodeStats counts them.
  virtual void encode(const void* in, DType in_type, int64_t chunks, int64_t rows, int64_t cols,
                      uint8_t* wire, cudaStream_t stream,
                      unsigned long long* stats = nullptr) const = 0;
  // Error feedback on the caller's fp32 residual e (read and rewritten in place), in fp32 and in
  // this order: v = (x finite ? x : 0) + e; wire = encode(v); e' = v - (d finite ? d : 0) with
  // d = decode(wire) (study/error_feedback.cpp, FeedbackState::step).
  virtual void encode_ef(const void* in, DType in_type, float* residual, int64_t chunks,
                         int64_t rows, int64_t cols, uint8_t* wire, cudaStream_t stream,
                         unsigned long long* stats = nullptr) const = 0;
  // out = decode(srcs[0]) + decode(srcs[1]) + ... in that order, in fp32, then out_type
  // (1..kMaxSources sources; one is a plain decode).
  virtual void decode_reduce(const std::vector<const uint8_t*>& srcs, int64_t chunks, int64_t rows,
                             int64_t cols, void* out, DType out_type,
                             cudaStream_t stream) const = 0;
  void decode(const uint8_t* wire, int64_t chunks, int64_t rows, int64_t cols, void* out,
              DType out_type, cudaStream_t stream) const {
    decode_reduce({wire}, chunks, rows, cols, out, out_type, stream);
  }
  // wire_out = encode(the same fp32 sum), first rounded to bf16 when round_bf16: a two-shot
  // all-reduce's owner step.
  virtual void decode_reduce_encode(const std::vector<const uint8_t*>& srcs, int64_t chunks,
                                    int64_t rows, int64_t cols, uint8_t* wire_out, bool round_bf16,
                                    cudaStream_t stream,
                                    unsigned long long* stats = nullptr) const = 0;
  // wire_out = encode(decode(wire_in) + own) for one block, the sum in fp32 (a ring all-reduce
  // hop). `scratch` is rows x cols floats of the caller's, used when hop_needs_scratch().
  virtual void decode_add_encode(const uint8_t* wire_in, const void* own, DType own_type,
                                 int64_t rows, int64_t cols, uint8_t* wire_out, float* scratch,
                                 cudaStream_t stream) const = 0;
  virtual bool hop_needs_scratch() const = 0;

  // At most this many multiprocessors' worth of resident blocks per launch (0: all), so codec
  // kernels overlapped with NCCL leave it SMs. Codecs whose kernels are not resident ignore it.
  virtual void set_max_sms(int n) { (void)n; }
  // Kernel launches (and memsets) one encode() / decode() enqueues, and the kernels' shape, for
  // reports ("" when there is nothing to say).
  virtual int encode_launches() const = 0;
  virtual int decode_launches() const = 0;
  virtual int decode_reduce_encode_launches() const = 0;
  virtual std::string kernel_config() const { return ""; }

 protected:
  // encode_ef() from encode() and decode(), in the contract's order, with stream-ordered fp32
  // temporaries (for codecs without a fused error-feedback kernel).
  void encode_ef_round_trip(const void* in, DType in_type, float* residual, int64_t chunks,
                            int64_t rows, int64_t cols, uint8_t* wire, cudaStream_t stream,
                            unsigned long long* stats) const;
  // decode_add_encode() from decode() and encode() through the caller's fp32 scratch (for codecs
  // without a fused hop kernel).
  void decode_add_encode_round_trip(const uint8_t* wire_in, const void* own, DType own_type,
                                    int64_t rows, int64_t cols, uint8_t* wire_out, float* scratch,
                                    cudaStream_t stream) const;
};

// Empty when the spec has device kernels, else why not (never throws).
std::string device_unsupported_reason(const VariantSpec& spec);
// The device codec of a spec: InputError naming the variant and the reason when it has none.
std::unique_ptr<DeviceCodec> make_device_codec(const VariantSpec& spec);
// The one parse of a GPU variant string: InputError naming a bad token, or naming the variant and
// the supported list when it has no device kernels.
VariantSpec require_device_variant(const std::string& variant);
// Preset names with device kernels (help texts, error messages).
std::vector<std::string> device_presets();

}  // namespace taco::gpu
