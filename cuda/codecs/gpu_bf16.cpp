#include "cuda/codecs/gpu_bf16.hpp"

#include "core/error.hpp"
#include "cuda/codecs/codec_params.hpp"
#include "cuda/codecs/elementwise_kernels.hpp"
#include "cuda/runtime/device.hpp"

namespace taco::gpu {

namespace {

void require_value_type(DType t, const char* what) {
  TACO_REQUIRE_INPUT(t == DType::F32 || t == DType::BF16 || t == DType::F16,
                     "GPU codec bf16: {} must be f32, bf16 or f16, not {}", what, dtype_name(t));
}

std::vector<const uint16_t*> bf16_sources(const std::vector<const uint8_t*>& srcs) {
  TACO_REQUIRE_INPUT(!srcs.empty() && srcs.size() <= size_t(kMaxSources),
                     "GPU codec bf16: decode-reduce takes 1..{} inputs, got {}", kMaxSources,
                     srcs.size());
  std::vector<const uint16_t*> out;
  for (const uint8_t* s : srcs) out.push_back(reinterpret_cast<const uint16_t*>(s));
  return out;
}

}  // namespace

int64_t GpuBf16::chunk_bytes(int64_t rows, int64_t cols) const {
  TACO_REQUIRE_INPUT(rows > 0 && cols > 0 && rows <= (int64_t(1) << 40) / cols,
                     "codec bf16: unusable shape [{}, {}]", rows, cols);
  return 2 * rows * cols;
}

void GpuBf16::encode(const void* in, DType in_type, int64_t chunks, int64_t rows, int64_t cols,
                     uint8_t* wire, cudaStream_t stream, unsigned long long* stats) const {
  require_value_type(in_type, "the input");
  const int64_t n = chunks * (chunk_bytes(rows, cols) / 2);
  if (stats) ew::count_nonfinite(in, in_type, n, stats + 1, stream);
  ew::convert(in, in_type, wire, DType::BF16, n, stream);
}

void GpuBf16::encode_ef(const void* in, DType in_type, float* residual, int64_t chunks,
                        int64_t rows, int64_t cols, uint8_t* wire, cudaStream_t stream,
                        unsigned long long* stats) const {
  require_value_type(in_type, "the input");
  (void)chunk_bytes(rows, cols);  // InputError for a bad shape
  encode_ef_round_trip(in, in_type, residual, chunks, rows, cols, wire, stream, stats);
}

void GpuBf16::decode_reduce(const std::vector<const uint8_t*>& srcs, int64_t chunks, int64_t rows,
                            int64_t cols, void* out, DType out_type, cudaStream_t stream) const {
  require_value_type(out_type, "the output");
  const auto src = bf16_sources(srcs);
  ew::sum_bf16(src.data(), int(src.size()), chunks * (chunk_bytes(rows, cols) / 2), out, out_type,
               stream);
}

void GpuBf16::decode_reduce_encode(const std::vector<const uint8_t*>& srcs, int64_t chunks,
                                   int64_t rows, int64_t cols, uint8_t* wire_out,
                                   bool /*round_bf16: the wire is the bf16 rounding*/,
                                   cudaStream_t stream, unsigned long long* stats) const {
  const auto src = bf16_sources(srcs);
  const int64_t n = chunks * (chunk_bytes(rows, cols) / 2);
  if (stats) {  // the counters see the fp32 sums, as the CPU's encode of them does
    StreamScratch sum(size_t(n) * 4, stream);
    ew::sum_bf16(src.data(), int(src.size()), n, sum.get(), DType::F32, stream);
    encode(sum.get(), DType::F32, chunks, rows, cols, wire_out, stream, stats);
    return;
  }
  ew::sum_bf16(src.data(), int(src.size()), n, wire_out, DType::BF16, stream);
}

void GpuBf16::decode_add_encode(const uint8_t* wire_in, const void* own, DType own_type,
                                int64_t rows, int64_t cols, uint8_t* wire_out, float* scratch,
                                cudaStream_t stream) const {
  require_value_type(own_type, "the own chunk");
  decode_add_encode_round_trip(wire_in, own, own_type, rows, cols, wire_out, scratch, stream);
}

}  // namespace taco::gpu
