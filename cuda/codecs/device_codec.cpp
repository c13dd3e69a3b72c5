#include "cuda/codecs/device_codec.hpp"

#include "core/error.hpp"
#include "cuda/codecs/gpu_bf16.hpp"
#include "cuda/codecs/gpu_quant.hpp"

namespace taco::gpu {

std::string device_unsupported_reason(const VariantSpec& spec) {
  switch (spec.family) {
    case VariantSpec::Family::Bf16:
      return "";
    case VariantSpec::Family::Quant:
      return GpuQuant::unsupported_reason(spec);
    default:
      return "only block-scaled quantization codecs and bf16 run on the GPU";
  }
}

std::unique_ptr<DeviceCodec> make_device_codec(const VariantSpec& spec) {
  const std::string why = device_unsupported_reason(spec);
  TACO_REQUIRE_INPUT(why.empty(), "variant '{}' has no GPU implementation ({})",
                     canonical_variant(spec), why);
  if (spec.family == VariantSpec::Family::Bf16) return std::make_unique<GpuBf16>();
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
