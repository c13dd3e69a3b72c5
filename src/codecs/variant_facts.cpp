#include "codecs/variant_facts.hpp"

#include "codecs/structured/structured.hpp"
#include "codecs/variant.hpp"

namespace taco {
namespace {

std::string string_param(const nlohmann::json& params, const char* key) {
  const auto it = params.find(key);
  return it != params.end() && it->is_string() ? it->get<std::string>() : std::string();
}

std::optional<std::string> structured_preset(const std::string& name) {
  for (const structured::StructuredPreset& p : structured::structured_presets())
    if (name == p.name) return std::string(p.name);
  return std::nullopt;
}

void add_spec_facts(const VariantSpec& spec, VariantFacts& f) {
  f.canonical = canonical_variant(spec);
  if (const Preset* p = find_preset(spec)) f.preset = p->name;
  if (const std::optional<VariantSpec> twin = transform_free_twin(spec))
    f.twin = canonical_variant(*twin);
  if (const std::optional<int> block = block_size(spec)) {
    f.group_size = *block;
    if (const Preset* p = series_preset(spec)) {
      f.group_series = p->name;
    } else {
      const int reference =
          spec.family == VariantSpec::Family::TahQuant ? TahSpec{}.tile : QuantSpec{}.block;
      f.group_series = canonical_variant(with_block_size(spec, reference));
    }
  }
  const Preset& nearest = nearest_preset(spec);
  f.nearest_preset = nearest.name;
  if (const std::optional<int> block = block_size(parse_variant(nearest.definition)))
    f.nearest_preset_group_size = *block;
}

}  // namespace

VariantFacts variant_facts(const Codec& codec) {
  const nlohmann::json params = codec.params();
  VariantFacts f;
  f.canonical = codec.name();
  f.family = string_param(params, "family");
  const std::string transform = string_param(params, "transform");
  f.has_transform = !transform.empty() && transform != "none";
  const auto g = params.find("group_size");
  if (g != params.end() && g->is_number_integer()) f.group_size = g->get<int64_t>();

  if (const std::optional<Wrapped> w = codec.wrapped()) {
    const VariantFacts inner = variant_facts(*w->inner);
    const std::string wrapper = std::string(feedback_kind_name(w->kind)) + ":";
    f.preset = structured_preset(f.canonical);
    if (inner.twin) f.twin = structured::structured_variant_name(wrapper + *inner.twin);
    if (inner.group_series)
      f.group_series = structured::structured_variant_name(wrapper + *inner.group_series);
    return f;
  }
  if (const VariantSpec* spec = codec.variant_spec()) {
    add_spec_facts(*spec, f);
    return f;
  }
  f.preset = structured_preset(f.canonical);
  return f;
}

nlohmann::json variant_facts_json(const VariantFacts& f) {
  auto opt = [](const auto& v) { return v ? nlohmann::json(*v) : nlohmann::json(nullptr); };
  return {{"canonical", f.canonical},
          {"family", f.family},
          {"preset", opt(f.preset)},
          {"has_transform", f.has_transform},
          {"twin", opt(f.twin)},
          {"group_size", opt(f.group_size)},
          {"group_series", opt(f.group_series)},
          {"nearest_preset", opt(f.nearest_preset)},
          {"nearest_preset_group_size", opt(f.nearest_preset_group_size)}};
}

}  // namespace taco
