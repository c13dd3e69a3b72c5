#include "cuda/codecs/gpu_codec.hpp"

#include <cuda_runtime_api.h>
#include <fmt/format.h>

#include "codecs/structured/structured.hpp"
#include "core/error.hpp"
#include "cuda/runtime/cuda_check.hpp"
#include "cuda/runtime/device.hpp"
#include "cuda/codecs/gpu_quant.hpp"

namespace taco::gpu {

namespace {

class GpuCodec final : public taco::Codec {
 public:
  explicit GpuCodec(const std::string& variant) : q_(variant), cpu_(taco::make_codec(variant)) {}

  const std::string& name() const override { return q_.name(); }

  nlohmann::json params() const override {
    nlohmann::json j = cpu_->params();
    j["backend"] = "cuda";
    return j;
  }

  std::vector<uint8_t> encode(const float* x, int64_t rows, int64_t cols,
                              EncodeStats* stats) const override {
    const int64_t bytes = q_.chunk_bytes(rows, cols);  // InputError for bad shapes
    const size_t in_bytes = size_t(rows * cols) * sizeof(float);
    ensure(in_, in_bytes, "cudaMalloc(GPU codec input)");
    ensure(wire_, size_t(bytes), "cudaMalloc(GPU codec wire buffer)");
    ensure(stats_, 2 * sizeof(unsigned long long), "cudaMalloc(GPU codec counters)");
    const cudaStream_t s = stream_.get();
    TACO_CUDA_CHECK(cudaMemcpyAsync(in_.get(), x, in_bytes, cudaMemcpyHostToDevice, s));
    TACO_CUDA_CHECK(cudaMemsetAsync(stats_.get(), 0, 2 * sizeof(unsigned long long), s));
    q_.encode(in_.get(), DataType::F32, 1, rows, cols, wire_.as<uint8_t>(), s,
              stats ? stats_.as<unsigned long long>() : nullptr);
    std::vector<uint8_t> wire(static_cast<size_t>(bytes));
    unsigned long long counters[2] = {0, 0};
    TACO_CUDA_CHECK(cudaMemcpyAsync(wire.data(), wire_.get(), size_t(bytes), cudaMemcpyDeviceToHost, s));
    if (stats)
      TACO_CUDA_CHECK(cudaMemcpyAsync(counters, stats_.get(), sizeof counters, cudaMemcpyDeviceToHost, s));
    stream_.synchronize();
    if (stats) {
      stats->saturated += int64_t(counters[0]);
      stats->nonfinite += int64_t(counters[1]);
    }
    return wire;
  }

  void decode(const uint8_t* wire, size_t nbytes, int64_t rows, int64_t cols, float* out) const override {
    const int64_t bytes = q_.chunk_bytes(rows, cols);
    TACO_REQUIRE_INPUT(int64_t(nbytes) == bytes, "codec {}: wire buffer has {} bytes, but [{}, {}] encodes to {}",
                       name(), nbytes, rows, cols, bytes);
    const size_t out_bytes = size_t(rows * cols) * sizeof(float);
    ensure(wire_, nbytes, "cudaMalloc(GPU codec wire buffer)");
    ensure(out_, out_bytes, "cudaMalloc(GPU codec output)");
    const cudaStream_t s = stream_.get();
    TACO_CUDA_CHECK(cudaMemcpyAsync(wire_.get(), wire, nbytes, cudaMemcpyHostToDevice, s));
    q_.decode(wire_.as<uint8_t>(), 1, rows, cols, out_.get(), DataType::F32, s);
    TACO_CUDA_CHECK(cudaMemcpyAsync(out, out_.get(), out_bytes, cudaMemcpyDeviceToHost, s));
    stream_.synchronize();
  }

 private:
  static void ensure(DeviceBuffer& b, size_t bytes, const char* what) {
    if (b.bytes() < bytes) b = DeviceBuffer(bytes, what);
  }

  GpuQuant q_;
  std::unique_ptr<taco::Codec> cpu_;  // for params() only
  CudaStream stream_;
  // Device buffers grow to the largest tensor seen and are reused (one codec, one stream).
  mutable DeviceBuffer in_, wire_, out_, stats_;
};

}  // namespace

std::unique_ptr<taco::Codec> make_gpu_codec(const std::string& variant) {
  // ef:<variant> / aqsgd:<variant>: the study keeps their state (study/error_feedback.hpp) and
  // runs the inner codec, here the GPU one.
  if (structured::is_structured_variant(variant)) {
    const std::unique_ptr<taco::Codec> cpu = taco::make_codec(variant);  // InputError for bad ones
    const auto* fb = dynamic_cast<const structured::FeedbackCodec*>(cpu.get());
    if (!fb)
      throw_input_error("variant '{}' has no GPU implementation (structured codecs run on the CPU)", variant);
    const std::string definition = fmt::format("{}:{}", structured::feedback_kind_name(fb->kind()), fb->inner().name());
    return std::make_unique<structured::FeedbackCodec>(fb->kind(), make_gpu_codec(fb->inner().name()), fb->name(),
                                                       definition);
  }
  (void)GpuQuant::require_supported(variant);  // InputError first, with or without a GPU
  if (device_count_noexcept() == 0)
    throw taco::Error("GPU codec '" + variant + "': no CUDA device is available");
  return std::make_unique<GpuCodec>(variant);
}

bool gpu_available() { return device_count_noexcept() > 0; }

std::vector<std::string> gpu_presets() { return GpuQuant::supported_presets(); }

}  // namespace taco::gpu
