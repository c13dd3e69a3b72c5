#pragma once
// A block-scaled quantization codec on device buffers: the GPU twin of taco::QuantCodec
// (src/codecs/quant_codec.hpp), producing the same wire bytes; the DeviceCodec of Quant specs
// (device_codec.hpp). Every call enqueues work on the given stream and returns; all launches are
// checked.
//
// Shapes: a call processes `chunks` independent [rows, cols] blocks laid side by side (chunk k of
// the input starts at element k * rows * cols, its wire at byte k * chunk_bytes(rows, cols)),
// exactly as `chunks` separate CPU encode() calls would, concatenated. A collective's per-peer
// chunks are one launch.
//
// Kernels (unsupported_reason() says what runs): flat groups g<G> take the fused group kernels
// (codec_kernels.hpp select_group_kernels: 8-bit codes E4M3 / E5M2 / INT8 under TACO or
// block-scaled rules, 4-bit codes E2M1 / INT4 and 3- / 2-bit codes INT3 / INT2 under block-scaled
// rules, NVFP4's two-level UE4M3 scales (4-bit codes) with a statistics pass first); row, column
// and tensor blocks of 8-bit codes take the strided kernels (strided_kernels(): rows in one pass,
// tensor and column scales after an amax pass).
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "codecs/variant.hpp"
#include "cuda/codecs/codec_kernels.hpp"
#include "cuda/codecs/codec_params.hpp"
#include "cuda/codecs/device_codec.hpp"
#include "cuda/runtime/device.hpp"

namespace taco::gpu {

class GpuQuant final : public DeviceCodec {
 public:
  // From a spec parsed once by the caller (require_device_variant() for a string). Throws
  // InputError naming the variant and the reason when the GPU has no kernels for it.
  explicit GpuQuant(const VariantSpec& spec);

  const std::string& name() const override { return name_; }
  const QuantSpec& spec() const { return spec_; }
  const QuantRules& rules() const { return rules_; }
  bool fused() const { return group_; }  // flat groups: one kernel per operation
  const GroupKernels& group_kernels() const { return gk_; }

  ChunkGeometry geometry(int64_t rows, int64_t cols) const;
  int64_t chunk_bytes(int64_t rows, int64_t cols) const override {
    return geometry(rows, cols).total;
  }

  // in: chunks x rows x cols elements (f32 or bf16) -> wire: chunks x chunk_bytes. stats, when
  // given, is a zeroed device array of 2 counters (saturated codes, non-finite inputs) to add to.
  void encode(const void* in, DType in_type, int64_t chunks, int64_t rows, int64_t cols,
              uint8_t* wire, cudaStream_t stream,
              unsigned long long* stats = nullptr) const override;

  // Encode with error feedback, fused: residual is the caller's fp32 [chunks x rows x cols]
  // state e of this stream of tensors (zeros before the first call), read and rewritten in place.
  // Per element, in fp32 and in this order (study/error_feedback.cpp, FeedbackState::step):
  //   v  = (x finite ? x : 0) + e         (x as fp32: bf16 inputs widen exactly)
  //   wire = encode(v)                    (exactly encode() of v, counters included)
  //   e' = v - (d finite ? d : 0),  d = decode(wire)
  // so a CPU caller reproduces it bit for bit with the CPU codec: v = where(isfinite(x), x, 0) + e;
  // wire = codec.encode(v); d = codec.decode(wire); e' = v - where(isfinite(d), d, 0). The
  // receiver decodes the wire as any other. stats count what an encode of v counts.
  void encode_ef(const void* in, DType in_type, float* residual, int64_t chunks, int64_t rows,
                 int64_t cols, uint8_t* wire, cudaStream_t stream,
                 unsigned long long* stats = nullptr) const override;
  // out = decode(src[0]) + decode(src[1]) + ... in that order, in fp32, then out_type.
  void decode_reduce(const std::vector<const uint8_t*>& srcs, int64_t chunks, int64_t rows,
                     int64_t cols, void* out, DType out_type, cudaStream_t stream) const override;
  // wire_out = encode(the same fp32 sum) (first rounded to bf16 when round_bf16), fused into one
  // kernel for flat-group codecs.
  void decode_reduce_encode(const std::vector<const uint8_t*>& srcs, int64_t chunks, int64_t rows,
                            int64_t cols, uint8_t* wire_out, bool round_bf16, cudaStream_t stream,
                            unsigned long long* stats = nullptr) const override;

  // wire_out = encode(decode(wire_in) + own) for one chunk (a ring all-reduce hop): the sum in
  // fp32, the encoder seeing it as a CPU encode of the sums would. Flat-group codecs: one fused
  // kernel; the others decode into `scratch`, add, and encode.
  void decode_add_encode(const uint8_t* wire_in, const void* own, DType own_type, int64_t rows,
                         int64_t cols, uint8_t* wire_out, float* scratch,
                         cudaStream_t stream) const override;
  bool hop_needs_scratch() const override { return !group_; }

  // Kernel launches (and memsets) one encode() / decode() enqueues, for reports; the fused
  // kernels' lanes ("e<lanes>-d<lanes>", "" for strided codecs).
  int encode_launches() const override;
  int decode_launches() const override;
  int decode_reduce_encode_launches() const override {
    return group_ ? encode_launches() : 1 + encode_launches();  // strided: a decode pass first
  }
  std::string kernel_config() const override;

  // Whether encode() with these counters takes the reference-rules kernel
  // (GroupKernels::encode_ref_*: TACO's reference rules, no counters; for the tests).
  bool reference_encode(const unsigned long long* stats) const {
    return reference_rules_ && stats == nullptr;
  }

  // Whether decode() of these arguments takes the streaming kernel (GroupKernels::decode_stream;
  // for the tests).
  bool streams_decode(const uint8_t* wire, int64_t chunks, int64_t rows, int64_t cols,
                      const void* out, DType out_type) const;

  // Decodes of fewer output elements than this do not take the streaming kernel (default: the
  // kernel's GroupKernel::stream_min_elems); the tests set 0 to check it on smaller inputs.
  void set_stream_decode_elems(int64_t n) { stream_decode_elems_ = n; }

  // Decodes of at most this many output elements (chunks x rows x cols) launch
  // GroupKernels::decode_reduce_small; the tests set 0 or a large value to check both kernels.
  void set_small_decode_elems(int64_t n) { small_decode_elems_ = n; }

  // At most this many multiprocessors' worth of resident blocks per launch (0: all). A
  // collective that overlaps codec kernels with NCCL kernels leaves the rest to NCCL: the codec
  // grids are resident (grid-stride), so an uncapped one holds every SM until it finishes.
  void set_max_sms(int n) override { max_sms_ = n; }

  // At most this many groups per group-kernel launch (default and upper bound kMaxLaunchGroups);
  // the tests lower it to check calls split over several launches.
  void set_max_launch_groups(int64_t n) {
    max_launch_groups_ = std::clamp<int64_t>(n, 1, kMaxLaunchGroups);
  }

  // Empty if the spec is implemented, else the reason (device_unsupported_reason() for any spec).
  static std::string unsupported_reason(const VariantSpec& spec);

 private:
  KernelParams base_params(int64_t chunks, int64_t rows, int64_t cols) const;
  // The encode of p (input or decoded sources already in p, value_source set): the statistics
  // pass first where the scale needs one, then the kernel that writes the wire.
  void encode_launch(KernelParams p, bool feedback, cudaStream_t stream) const;
  // Two-level scales: zeroes the per-chunk amax in the scratch and fills it (group_chunk_amax).
  void chunk_amax_pass(KernelParams& p, cudaStream_t stream) const;
  // Row / column / tensor codecs.
  void strided_encode(KernelParams p, bool feedback, size_t scratch_off, cudaStream_t stream) const;
  void strided_decode(const KernelParams& p, cudaStream_t stream) const;
  int strided_occupancy(KernelFn fn) const;
  KernelParams decode_params(const std::vector<const uint8_t*>& srcs, int64_t chunks, int64_t rows,
                             int64_t cols, void* out, DType out_type) const;
  void launch(KernelFn fn, int occupancy, int threads, int64_t blocks_needed, const KernelParams& p,
              cudaStream_t stream, const char* what, size_t shared_bytes = 0) const;
  void launch_group(const GroupKernel& k, int occupancy, const KernelParams& p, cudaStream_t stream,
                    const char* what, size_t shared_bytes = 0) const;
  // The streaming decode's shared memory per block for an output of out_type; whether a plain
  // decode with these parameters may take it.
  size_t stream_shared_bytes(DType out_type) const;
  bool stream_decode_fits(const KernelParams& p) const;
  void ensure_scratch(size_t bytes) const;

  QuantSpec spec_;
  std::string name_;
  QuantRules rules_{};
  bool group_ = false;
  bool two_level_ = false;  // UE4M3 scales: a statistics pass before every encode
  bool reference_rules_ =
      false;  // the rules are the ones GroupCfg::kRef compiles in, and it exists
  GroupKernels gk_{};
  int sm_count_ = 0;
  int64_t small_decode_elems_ = kSmallDecodeElems;
  int64_t stream_decode_elems_ = 0;
  int max_sms_ = 0;
  int64_t max_launch_groups_ = kMaxLaunchGroups;
  int occ_encode_ = 1, occ_encode_f32_ = 1, occ_decode_ = 1, occ_decode_reduce_ = 1,
      occ_decode_small_ = 1, occ_dre_ = 1, occ_dae_ = 1;
  int occ_feedback_bf16_ = 1, occ_feedback_f32_ = 1, occ_chunk_amax_ = 1;
  mutable std::vector<std::pair<KernelFn, int>>
      occ_strided_;                               // strided kernels' occupancy, on first use
  int occ_stream_bf16_ = 1, occ_stream_f32_ = 1;  // the streaming decode, by output type
  int occ_encode_ref_ = 1, occ_encode_ref_f32_ = 1;
  mutable DeviceBuffer scratch_;  // row / tensor codecs: per-block statistics, fp32 sums
  mutable ChunkGeometry geo_{};   // the last geometry computed (one object, one thread)
  mutable bool geo_valid_ = false;
};

}  // namespace taco::gpu
