#include "cuda/codecs/device_codec.hpp"

#include "core/error.hpp"
#include "cuda/codecs/elementwise_kernels.hpp"
#include "cuda/codecs/gpu_bf16.hpp"
#include "cuda/codecs/gpu_quant.hpp"
#include "cuda/codecs/gpu_tahquant.hpp"
#include "cuda/runtime/device.hpp"

namespace taco::gpu {

std::string device_unsupported_reason(const VariantSpec& spec) {
  switch (spec.family) {
    case VariantSpec::Family::Bf16:
      return "";
    case VariantSpec::Family::TahQuant:
      return "";
    case VariantSpec::Family::Quant:
      return GpuQuant::unsupported_reason(spec);
  }
  return "unknown codec family";
}

void DeviceCodec::encode_ef_round_trip(const void* in, DType in_type, float* residual,
                                       int64_t chunks, int64_t rows, int64_t cols, uint8_t* wire,
                                       cudaStream_t stream, unsigned long long* stats) const {
  const int64_t n = chunks * rows * cols;
  StreamScratch v(size_t(n) * 4, stream), d(size_t(n) * 4, stream);
  ew::add_f32(in, in_type, residual, v.f32(), n, true, stream);  // v = finite(x) + e
  encode(v.get(), DType::F32, chunks, rows, cols, wire, stream, stats);
  decode(wire, chunks, rows, cols, d.get(), DType::F32, stream);
  ew::sub_f32(v.f32(), d.f32(), residual, n, true, stream);  // e = v - finite(d)
}

void DeviceCodec::decode_add_encode_round_trip(const uint8_t* wire_in, const void* own,
                                               DType own_type, int64_t rows, int64_t cols,
                                               uint8_t* wire_out, float* scratch,
                                               cudaStream_t stream) const {
  TACO_ASSERT(scratch != nullptr, "GPU codec {}: a ring hop needs an fp32 scratch buffer", name());
  decode(wire_in, 1, rows, cols, scratch, DType::F32, stream);
  ew::add_f32(own, own_type, scratch, scratch, rows * cols, false, stream);  // own + decoded
  encode(scratch, DType::F32, 1, rows, cols, wire_out, stream);
}

std::unique_ptr<DeviceCodec> make_device_codec(const VariantSpec& spec) {
  const std::string why = device_unsupported_reason(spec);
  TACO_REQUIRE_INPUT(why.empty(), "variant '{}' has no GPU implementation ({})",
                     canonical_variant(spec), why);
  if (spec.family == VariantSpec::Family::Bf16) return std::make_unique<GpuBf16>();
  if (spec.family == VariantSpec::Family::TahQuant) return std::make_unique<GpuTahQuant>(spec);
  return std::make_unique<GpuQuant>(spec);
}

std::vector<std::string> device_presets() {
  std::vector<std::string> out;
  for (const Preset& p : preset_table())
    if (device_unsupported_reason(parse_variant(p.name)).empty()) out.emplace_back(p.name);
  return out;
}

VariantSpec require_device_variant(const std::string& variant) {
  const VariantSpec v = parse_variant(variant);  // InputError naming a bad token
  const std::string why = device_unsupported_reason(v);
  if (!why.empty()) {
    std::string list;
    for (const auto& s : device_presets()) list += (list.empty() ? "" : ", ") + s;
    throw_input_error(
        "variant '{}' has no GPU implementation ({}); GPU variants: {}, and the grammar "
        "forms e4m3|e5m2|int8 : g<G> (G = 16..1024) | row | col | tensor [: had | rht] "
        "[: sf32 | sbf16 | sf16 | se8m0] [: taco | dual], e2m1|int4 : g<G> [: had | rht] "
        "[: sf32 | sbf16 | sf16 | se8m0 | sue4m3], and int3|int2 : g<G> [: had | rht] "
        "[: sf32 | sbf16 | sf16 | se8m0]",
        variant, why, list);
  }
  return v;
}

}  // namespace taco::gpu
