#pragma once
// What results.json says about each variant ("variant_facts", docs/results-schema.md), so that
// the analysis never parses a variant string: everything here is derived once from the parsed
// spec (codecs/variant.hpp) or, for the structured codecs, from the codec itself.
#include "codecs/codec.hpp"

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

namespace taco {

struct VariantFacts {
  std::string canonical;  // the name the codec reports (the preset's name when it equals one)
  std::string family;     // params "family": quant (bf16 too), tahquant, subspace, lowrank, tt, ...
  std::optional<std::string> preset;  // the preset (codec or structured) the variant equals
  bool has_transform = false;  // params "transform" is not "none" (as the study's has_transform)
  // Canonical name of the same codec without its had/rht transform (taco -> taco-noh); for
  // ef:/aqsgd: the wrapper around the inner codec's twin. Null when there is none.
  std::optional<std::string> twin;
  std::optional<int64_t> group_size;  // G or T; TAH-Quant: the tile; ef:/aqsgd: the inner codec's
  // Shared by the variants that differ only in the group size: the first preset that equals the
  // variant up to G (taco-g64 -> taco, e4m3:g64 -> fp8-g128), else the canonical name at the
  // default size (G = 128, TAH-Quant tile 64). Null without a group size.
  std::optional<std::string> group_series;
  // The codec preset of the same family the variant is closest to (nearest_preset), and its
  // group size: what a figure takes the variant's colour family from. Null for structured codecs.
  std::optional<std::string> nearest_preset;
  std::optional<int64_t> nearest_preset_group_size;
};

// Facts of a codec, from the spec it was built from (Codec::variant_spec(): the CPU codecs and
// the GPU codec alike) or, for structured codecs, from the codec itself. A codec with neither (a
// test double) gets its name, family, group size and transform flag only.
VariantFacts variant_facts(const Codec& codec);
// As results.json writes them: every field, null where it does not apply.
nlohmann::json variant_facts_json(const VariantFacts& facts);

}  // namespace taco
