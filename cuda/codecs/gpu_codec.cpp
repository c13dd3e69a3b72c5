#include "cuda/codecs/gpu_codec.hpp"

#include <cuda_runtime_api.h>
#include <fmt/format.h>

#include <mutex>

#include "codecs/quant_codec.hpp"
#include "codecs/structured/structured.hpp"
#include "core/error.hpp"
#include "cuda/codecs/codec_params.hpp"
#include "cuda/codecs/device_codec.hpp"
#include "cuda/runtime/cuda_check.hpp"
#include "cuda/runtime/device.hpp"

namespace taco::gpu {

namespace {

class GpuCodec final : public taco::Codec {
 public:
  explicit GpuCodec(const VariantSpec& spec)
      : spec_(spec), q_(make_device_codec(spec)), cpu_(taco::make_codec(spec)) {}

  const VariantSpec* variant_spec() const override { return &spec_; }

  const std::string& name() const override { return q_->name(); }

  nlohmann::json params() const override {
    nlohmann::json j = cpu_->params();
    j["backend"] = "cuda";
    return j;
  }

  std::vector<uint8_t> encode(const float* x, int64_t rows, int64_t cols,
                              EncodeStats* stats) const override {
    const std::lock_guard<std::mutex> lock(mu_);
    const int64_t bytes = q_->chunk_bytes(rows, cols);  // InputError for bad shapes
    const size_t in_bytes = size_t(rows * cols) * sizeof(float);
    ensure(in_, in_bytes, "cudaMalloc(GPU codec input)");
    ensure(out_, size_t(bytes), "cudaMalloc(GPU codec wire output)");
    const cudaStream_t s = stream_.get();
    TACO_CUDA_CHECK(cudaMemcpyAsync(in_.get(), x, in_bytes, cudaMemcpyHostToDevice, s));
    zero_counters(stats, s);
    q_->encode(in_.get(), DType::F32, 1, rows, cols, out_.as<uint8_t>(), s, counters(stats));
    std::vector<uint8_t> wire;
    download_wire(bytes, wire, stats, s, rows, cols);
    return wire;
  }

  WireSize wire_size(int64_t rows, int64_t cols) const override {
    return {q_->chunk_bytes(rows, cols), cpu_->wire_size(rows, cols).exact};
  }

  void decode(const uint8_t* wire, size_t nbytes, int64_t rows, int64_t cols,
              float* out) const override {
    decode_reduce({WireView{wire, nbytes}}, rows, cols, out);  // DeviceCodec::decode is the same
  }

  void decode_reduce(const std::vector<WireView>& wires, int64_t rows, int64_t cols,
                     float* out) const override {
    if (wires.empty() || wires.size() > size_t(kMaxSources))
      return Codec::decode_reduce(wires, rows, cols, out);
    const std::lock_guard<std::mutex> lock(mu_);
    const cudaStream_t s = stream_.get();
    const std::vector<const uint8_t*> src = upload_wires(wires, rows, cols);
    const size_t out_bytes = size_t(rows * cols) * sizeof(float);
    ensure(out_, out_bytes, "cudaMalloc(GPU codec output)");
    q_->decode_reduce(src, 1, rows, cols, out_.get(), DType::F32, s);
    TACO_CUDA_CHECK(cudaMemcpyAsync(out, out_.get(), out_bytes, cudaMemcpyDeviceToHost, s));
    stream_.synchronize();
  }

  void decode_reduce_encode(const std::vector<WireView>& wires, int64_t rows, int64_t cols,
                            bool round_bf16, std::vector<uint8_t>& wire_out,
                            EncodeStats* stats) const override {
    if (wires.empty() || wires.size() > size_t(kMaxSources))
      return Codec::decode_reduce_encode(wires, rows, cols, round_bf16, wire_out, stats);
    const std::lock_guard<std::mutex> lock(mu_);
    const cudaStream_t s = stream_.get();
    const std::vector<const uint8_t*> src = upload_wires(wires, rows, cols);
    const int64_t bytes = q_->chunk_bytes(rows, cols);
    ensure(out_, size_t(bytes), "cudaMalloc(GPU codec wire output)");
    zero_counters(stats, s);
    q_->decode_reduce_encode(src, 1, rows, cols, out_.as<uint8_t>(), round_bf16, s,
                             counters(stats));
    download_wire(bytes, wire_out, stats, s, rows, cols);
  }

  void decode_add_encode(WireView wire_in, const float* own, int64_t rows, int64_t cols,
                         std::vector<uint8_t>& wire_out, EncodeStats* stats) const override {
    // The device hop has no counters.
    if (stats) return Codec::decode_add_encode(wire_in, own, rows, cols, wire_out, stats);
    const std::lock_guard<std::mutex> lock(mu_);
    const cudaStream_t s = stream_.get();
    const std::vector<const uint8_t*> src = upload_wires({wire_in}, rows, cols);
    const int64_t bytes = q_->chunk_bytes(rows, cols);
    const size_t in_bytes = size_t(rows * cols) * sizeof(float);
    ensure(in_, in_bytes, "cudaMalloc(GPU codec input)");
    ensure(out_, size_t(bytes), "cudaMalloc(GPU codec wire output)");
    if (q_->hop_needs_scratch()) ensure(hop_, in_bytes, "cudaMalloc(GPU codec ring-hop scratch)");
    TACO_CUDA_CHECK(cudaMemcpyAsync(in_.get(), own, in_bytes, cudaMemcpyHostToDevice, s));
    q_->decode_add_encode(src[0], in_.get(), DType::F32, rows, cols, out_.as<uint8_t>(),
                          hop_.as<float>(), s);
    download_wire(bytes, wire_out, nullptr, s, rows, cols);
  }

 private:
  static void ensure(DeviceBuffer& b, size_t bytes, const char* what) {
    if (b.bytes() < bytes) b = DeviceBuffer(bytes, what);
  }

  // Copies the wires, one after the other, into the device wire buffer; their device addresses.
  // A codec whose size depends on the data takes its encoded bytes (at most the bound) and gets
  // the zeros up to the bound that its device slots hold. Their contents are not checked here
  // (the kernels stay inside the buffers whatever the bytes say; the CPU decode refuses bad ones).
  std::vector<const uint8_t*> upload_wires(const std::vector<WireView>& wires, int64_t rows,
                                           int64_t cols) const {
    const int64_t bytes = q_->chunk_bytes(rows, cols);  // InputError for bad shapes
    const bool exact = cpu_->wire_size(rows, cols).exact;
    for (const WireView& w : wires)
      TACO_REQUIRE_INPUT(int64_t(w.size) == bytes || (!exact && int64_t(w.size) < bytes),
                         "codec {}: wire buffer has {} bytes, but [{}, {}] encodes to {}", name(),
                         w.size, rows, cols, bytes);
    ensure(wire_, size_t(bytes) * wires.size(), "cudaMalloc(GPU codec wire buffer)");
    std::vector<const uint8_t*> src;
    for (size_t i = 0; i < wires.size(); ++i) {
      uint8_t* d = wire_.as<uint8_t>() + i * size_t(bytes);
      const size_t n = wires[i].size;
      TACO_CUDA_CHECK(cudaMemcpyAsync(d, wires[i].data, n, cudaMemcpyHostToDevice, stream_.get()));
      if (n < size_t(bytes))
        TACO_CUDA_CHECK(cudaMemsetAsync(d + n, 0, size_t(bytes) - n, stream_.get()));
      src.push_back(d);
    }
    return src;
  }

  void zero_counters(const EncodeStats* stats, cudaStream_t s) const {
    if (!stats) return;
    ensure(stats_, 2 * sizeof(unsigned long long), "cudaMalloc(GPU codec counters)");
    TACO_CUDA_CHECK(cudaMemsetAsync(stats_.get(), 0, 2 * sizeof(unsigned long long), s));
  }
  unsigned long long* counters(const EncodeStats* stats) const {
    return stats ? stats_.as<unsigned long long>() : nullptr;
  }

  // out_ (the encoded bytes) to wire_out and the counters to stats; waits for the stream. A
  // codec whose size depends on the data returns what its CPU encode() returns: the bytes
  // before the bound's zeros.
  void download_wire(int64_t bytes, std::vector<uint8_t>& wire_out, EncodeStats* stats,
                     cudaStream_t s, int64_t rows, int64_t cols) const {
    wire_out.resize(size_t(bytes));
    unsigned long long c[2] = {0, 0};
    TACO_CUDA_CHECK(
        cudaMemcpyAsync(wire_out.data(), out_.get(), size_t(bytes), cudaMemcpyDeviceToHost, s));
    if (stats)
      TACO_CUDA_CHECK(cudaMemcpyAsync(c, stats_.get(), sizeof c, cudaMemcpyDeviceToHost, s));
    stream_.synchronize();
    if (stats) {
      stats->saturated += int64_t(c[0]);
      stats->nonfinite += int64_t(c[1]);
    }
    wire_out.resize(size_t(q_->encoded_bytes(wire_out.data(), rows, cols)));
  }

  VariantSpec spec_;
  // One stream and one set of device buffers: calls from several threads (the study's simulated
  // collectives run their ranks in parallel) take turns; every call waits for its stream.
  mutable std::mutex mu_;
  std::unique_ptr<DeviceCodec> q_;
  std::unique_ptr<taco::Codec> cpu_;  // params() and whether the wire size is exact
  CudaStream stream_;
  // Device buffers grow to the largest tensor seen and are reused (one codec, one stream).
  mutable DeviceBuffer in_, wire_, out_, stats_, hop_;
};

}  // namespace

std::unique_ptr<taco::Codec> make_gpu_codec(const VariantSpec& spec) {
  const std::string why = device_unsupported_reason(spec);
  if (!why.empty())  // InputError first, with or without a GPU
    throw_input_error("variant '{}' has no GPU implementation ({})", canonical_variant(spec), why);
  if (device_count_noexcept() == 0)
    throw taco::Error("GPU codec '" + canonical_variant(spec) + "': no CUDA device is available");
  return std::make_unique<GpuCodec>(spec);
}

std::unique_ptr<taco::Codec> make_gpu_codec(const std::string& variant) {
  // ef:<variant> / aqsgd:<variant>: the study keeps their state (study/error_feedback.hpp) and
  // runs the inner codec, here the GPU one.
  if (structured::is_structured_variant(variant)) {
    const std::unique_ptr<taco::Codec> cpu = taco::make_codec(variant);  // InputError for bad ones
    const std::optional<Wrapped> w = cpu->wrapped();
    if (!w)
      throw_input_error("variant '{}' has no GPU implementation (structured codecs run on the CPU)",
                        variant);
    const std::string definition =
        fmt::format("{}:{}", feedback_kind_name(w->kind), w->inner->name());
    // The inner codec as parsed with its wrapper.
    const VariantSpec* inner = w->inner->variant_spec();
    if (!inner)
      throw_input_error(
          "variant '{}' has no GPU implementation (only block-scaled quantization codecs and bf16 "
          "run on the GPU)",
          variant);
    return std::make_unique<structured::FeedbackCodec>(w->kind, make_gpu_codec(*inner), cpu->name(),
                                                       definition);
  }
  return make_gpu_codec(require_device_variant(variant));  // the one parse
}

bool gpu_available() {
  return device_count_noexcept() > 0;
}

std::vector<std::string> gpu_presets() {
  return device_presets();
}

}  // namespace taco::gpu
