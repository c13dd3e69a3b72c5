#pragma once
// A codec on tensors: the one codec contract (codecs/codec.hpp) run on flat, contiguous buffers of
// fp32 / bf16 / fp16 values on the CPU or on a CUDA device. It is what the Python binding calls.
//
// The variant is parsed once, at construction. CPU buffers run the CPU reference codec; CUDA
// buffers run the spec's device codec (cuda/codecs/device_codec.hpp: the fused quantization
// kernels, or the bf16 passthrough) on the caller's stream, with no host copy and no
// synchronisation. Both produce the same bytes (the GPU tests check it), so a wire made
// on one side decodes on the other.
//
// Shapes: an operation covers `chunks` blocks of [rows, cols] elements laid side by side, block k
// at element k * rows * cols of the values and at byte k * chunk_bytes(rows, cols) of the wire:
// exactly what `chunks` separate Codec::encode() calls return, concatenated. Sums are in fp32, in
// source order, rounded once to the output type (the collectives' semantics,
// collectives/sim_collectives).
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "codecs/codec.hpp"
#include "codecs/range.hpp"
#include "codecs/variant.hpp"
#include "collectives/comm_plans.hpp"
#include "core/dtype.hpp"

namespace taco::py {

// Buffers are DType::F32, BF16 or F16 values, or DType::U8 wires (core/dtype.hpp).

// A contiguous buffer: `device` is -1 for host memory, else the CUDA device ordinal.
struct Buf {
  void* data = nullptr;
  DType dtype = DType::F32;
  int64_t numel = 0;
  int device = -1;
};

struct Shape {
  int64_t chunks = 1, rows = 0, cols = 0;
  int64_t numel() const { return chunks * rows * cols; }
};

struct GpuState;  // per-device kernels (tensor_codec.cpp); empty without the GPU backend

class TensorCodec {
 public:
  explicit TensorCodec(const std::string& variant);
  ~TensorCodec();
  TensorCodec(const TensorCodec&) = delete;
  TensorCodec& operator=(const TensorCodec&) = delete;

  const std::string& name() const { return name_; }  // canonical; "ef:<inner>" for error feedback
  nlohmann::json params() const { return cpu_->params(); }
  // "ef:<inner>": the codec is the inner one; error feedback is a state the caller keeps and
  // passes to encode_ef().
  bool feedback() const { return feedback_; }
  // Empty when CUDA buffers are supported, else why not (no GPU backend, no kernels).
  std::string gpu_unsupported_reason() const;

  int64_t chunk_bytes(int64_t rows, int64_t cols) const;
  // The block magnitudes the codec represents (codecs/range.hpp): lo, hi, rel_lo; false for
  // codecs without block scales (structured).
  bool range(CodecRange& r) const;
  // Blocks of x outside that range, summed over the chunks; x: host float32. 0 without a range.
  int64_t out_of_range(const Buf& x, const Shape& s) const;
  // Byte offsets of one chunk's wire (quantization codecs: codes, scales, aux, tensor scale).
  nlohmann::json layout(int64_t rows, int64_t cols) const;

  void encode(const Buf& x, const Shape& s, const Buf& wire, uintptr_t stream) const;
  // out = sum_i decode(wires[i]) (one wire: a plain decode).
  void decode_reduce(const std::vector<Buf>& wires, const Shape& s, const Buf& out,
                     uintptr_t stream) const;
  // wire_out = encode(sum_i decode(wires[i])): the two-shot all-reduce's owner step.
  void decode_reduce_encode(const std::vector<Buf>& wires, const Shape& s, const Buf& wire_out,
                            uintptr_t stream) const;
  // wire_out = encode(decode(wire_in) + own), one chunk: a ring all-reduce hop.
  void decode_add_encode(const Buf& wire_in, const Buf& own, int64_t rows, int64_t cols,
                         const Buf& wire_out, uintptr_t stream) const;
  // Error feedback, the study's ef: step (docs/variants.md): v = x + e in fp32 (a non-finite x
  // counts as 0); wire = encode(v); e <- v - decode(wire) (a non-finite decode counts as 0).
  // residual: fp32, same numel as x, updated in place. CUDA: one fused kernel
  // (DeviceCodec::encode_ef).
  void encode_ef(const Buf& x, const Buf& residual, const Shape& s, const Buf& wire,
                 uintptr_t stream) const;

 private:
  void check_shape(const Shape& s) const;
  void check_values(const Buf& b, const Shape& s, const char* what) const;
  void check_wire(const Buf& b, const Shape& s, const char* what) const;
  int common_device(const std::vector<const Buf*>& bufs) const;
  // Checks the wires of a decode (and the buffer it writes); the device they share.
  int sources_device(const std::vector<Buf>& wires, const Shape& s, const Buf& dest) const;
  GpuState& gpu(int device) const;

  std::string name_;
  std::unique_ptr<Codec> cpu_;  // the codec itself (for ef:, the inner codec)
  bool feedback_ = false;
  mutable std::map<int, std::unique_ptr<GpuState>> gpu_;
};

// Variants with one-line descriptions and whether CUDA buffers are supported.
struct VariantInfo {
  std::string name, definition, description;
  bool gpu = false;
};
std::vector<VariantInfo> variant_infos();

// The study's simulated collective (collectives/sim_collectives.hpp) on fp32 host inputs, one per
// rank: the oracle the Python collectives are tested against.
std::vector<std::vector<float>> simulate_collective(const std::string& variant,
                                                    const std::string& algorithm,
                                                    const std::vector<const float*>& inputs,
                                                    int64_t rows, int64_t cols);

// The plan of one rank of a compressed collective (collectives/comm_plans.hpp, the one statement
// of every algorithm) with `codec`'s wire sizes: what taco.dist executes over process groups, in
// one process for a simulated group, and alone for loopback timing. coll: coll_name() or a
// spelling parse_coll() takes; algo: "auto" (auto_allreduce_algo() of the rows x cols x elem_bytes
// input), an all-reduce algorithm, or "direct" (any other collective). One piece: no pipelining.
comm::RankPlan collective_plan(const TensorCodec& codec, const std::string& coll,
                               const std::string& algo, int nranks, int rank, int64_t rows,
                               int64_t cols, int64_t elem_bytes);

bool gpu_backend_built();

}  // namespace taco::py
