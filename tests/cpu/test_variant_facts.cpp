// What results.json says about each variant (codecs/variant_facts.hpp): every field for presets,
// grammar spellings, TAH-Quant, bf16, the structured codecs and the ef:/aqsgd: wrappers, against
// values written out by hand from the preset table (codecs/variant.cpp) and docs/variants.md;
// plus the invariants the analysis relies on (a G sweep shares its series and colour family).
#include "catch.hpp"
#include "codecs/codec.hpp"
#include "codecs/variant.hpp"
#include "codecs/variant_facts.hpp"
#include "test_study_support.hpp"

#include <optional>
#include <string>

using namespace taco;

namespace {

using Name = std::optional<std::string>;
using Size = std::optional<int64_t>;
const std::nullopt_t none = std::nullopt;

struct Expected {
  std::string variant;  // as a user types it
  std::string canonical, family;
  Name preset;
  bool has_transform;
  Name twin;
  Size group_size;
  Name group_series;
  Name nearest_preset;
  Size nearest_preset_group_size;
};

const Expected kExpected[] = {
    // variant, canonical, family, preset, transform, twin, G, series, nearest, its G
    {"taco", "taco", "quant", "taco", true, "taco-noh", 128, "taco", "taco", 128},
    {"e4m3:g128:had:dual", "taco", "quant", "taco", true, "taco-noh", 128, "taco", "taco", 128},
    {"TACO", "taco", "quant", "taco", true, "taco-noh", 128, "taco", "taco", 128},
    {"taco-noh", "taco-noh", "quant", "taco-noh", false, none, 128, "taco-noh", "taco-noh", 128},
    {"taco-g32", "taco-g32", "quant", "taco-g32", true, "taco-noh-g32", 32, "taco", "taco", 128},
    {"e4m3:g64:dual", "taco-noh-g64", "quant", "taco-noh-g64", false, none, 64, "taco-noh",
     "taco-noh", 128},
    {"taco-rht", "taco-rht", "quant", "taco-rht", true, "taco-noh", 128, "taco-rht", "taco-rht",
     128},
    {"e4m3:g64:rht:seed=5:dual", "e4m3:g64:rht:seed=5:dual", "quant", none, true, "taco-noh-g64",
     64, "e4m3:g128:rht:seed=5:dual", "taco-rht", 128},
    {"e4m3:g64:had", "e4m3:g64:had", "quant", none, true, "e4m3:g64", 64, "fp8-g128-had",
     "fp8-g128-had", 128},
    {"fp8-g128-had", "fp8-g128-had", "quant", "fp8-g128-had", true, "fp8-g128", 128, "fp8-g128-had",
     "fp8-g128-had", 128},
    {"int8:g128:had", "int8-g128-had", "quant", "int8-g128-had", true, "int8-g128", 128,
     "int8-g128-had", "int8-g128-had", 128},
    {"e4m3:g512", "e4m3:g512", "quant", none, false, none, 512, "fp8-g128", "fp8-g128", 128},
    {"e5m2:g128", "e5m2:g128", "quant", none, false, none, 128, "e5m2:g128", "fp8-g128", 128},
    {"e4m3:g128:sbf16", "e4m3:g128:sbf16", "quant", none, false, none, 128, "e4m3:g128:sbf16",
     "fp8-g128", 128},
    {"e4m3:g64:se8m0", "e4m3:g64:se8m0", "quant", none, false, none, 64, "fp8-1x128-e8m0",
     "fp8-1x128-e8m0", 128},
    {"mxfp8", "mxfp8", "quant", "mxfp8", false, none, 32, "mxfp8", "mxfp8", 32},
    {"e2m1:g32:sue4m3", "e2m1:g32:sue4m3", "quant", none, false, none, 32, "nvfp4", "nvfp4", 16},
    {"int4:g64:asym", "int4:asym:g64", "quant", none, false, none, 64, "int4:asym:g128", "int4-g32",
     32},
    {"e4m3:tile64", "e4m3:tile64", "quant", none, false, none, 64, "fp8-tile128", "fp8-tile128",
     128},
    {"fp8-row", "fp8-row", "quant", "fp8-row", false, none, none, none, "fp8-row", none},
    {"int8:row", "int8:row", "quant", none, false, none, none, none, "int8-g128", 128},
    {"bf16", "bf16", "quant", "bf16", false, none, none, none, "bf16", none},
    {"tahquant", "tahquant", "tahquant", "tahquant", true, none, 64, "tahquant", "tahquant", 64},
    {"tahquant:tile=32", "tahquant:tile=32", "tahquant", none, true, none, 32, "tahquant",
     "tahquant", 64},
    {"tahquant:hi=5", "tahquant:hi=5", "tahquant", none, true, none, 64, "tahquant:hi=5",
     "tahquant", 64},
    {"lowrank:rank=8", "lowrank:rank=8", "lowrank", none, true, none, none, none, none, none},
    {"lowrank:bpe=1:rsvd", "lowrank-b1", "lowrank", "lowrank-b1", true, none, none, none, none,
     none},
    {"subspace:k=8", "subspace:k=8", "subspace", none, true, none, none, none, none, none},
    {"tt:order=3", "tt:order=3", "tt", none, true, none, none, none, none, none},
    {"topk:frac=0.1", "topk10", "topk", "topk10", false, none, none, none, none, none},
    {"randk:frac=0.5", "randk:frac=0.5", "randk", none, false, none, none, none, none, none},
    {"ef:int4-g32", "ef-int4-g32", "ef", "ef-int4-g32", false, none, 32, "ef-int4-g32", none, none},
    {"ef:taco-g64", "ef:taco-g64", "ef", none, true, "ef:taco-noh-g64", 64, "ef:taco", none, none},
    {"aqsgd:int4-g32-had", "aqsgd:int4-g32-had", "aqsgd", none, true, "aqsgd-int4-g32", 32,
     "aqsgd:int4-g32-had", none, none},
};

}  // namespace

TEST_CASE("variant facts of presets, grammar spellings and every codec family", "[codecs][facts]") {
  for (const Expected& e : kExpected) {
    INFO(e.variant);
    const VariantFacts f = variant_facts(*make_codec(e.variant));
    CHECK(f.canonical == e.canonical);
    CHECK(f.family == e.family);
    CHECK(f.preset == e.preset);
    CHECK(f.has_transform == e.has_transform);
    CHECK(f.twin == e.twin);
    CHECK(f.group_size == e.group_size);
    CHECK(f.group_series == e.group_series);
    CHECK(f.nearest_preset == e.nearest_preset);
    CHECK(f.nearest_preset_group_size == e.nearest_preset_group_size);
  }
}

TEST_CASE("variant facts as JSON: every field, null where it does not apply", "[codecs][facts]") {
  const nlohmann::json j = variant_facts_json(variant_facts(*make_codec("e4m3:g64:had")));
  CHECK(j ==
        nlohmann::json::parse(R"({"canonical": "e4m3:g64:had", "family": "quant", "preset": null,
      "has_transform": true, "twin": "e4m3:g64", "group_size": 64, "group_series": "fp8-g128-had",
      "nearest_preset": "fp8-g128-had", "nearest_preset_group_size": 128})"));
  const nlohmann::json s = variant_facts_json(variant_facts(*make_codec("lowrank:rank=8")));
  CHECK(s == nlohmann::json::parse(
                 R"({"canonical": "lowrank:rank=8", "family": "lowrank", "preset": null,
      "has_transform": true, "twin": null, "group_size": null, "group_series": null,
      "nearest_preset": null, "nearest_preset_group_size": null})"));
}

TEST_CASE("a codec that is no known variant gets its own name and params only", "[codecs][facts]") {
  // Test doubles (and any codec without a "definition") are described, not parsed.
  const VariantFacts f = variant_facts(*testing::make_test_codec("int8-g128-h"));
  CHECK(f.canonical == "int8-g128-h");
  CHECK(f.family == "quant");
  CHECK(f.has_transform);
  CHECK(f.group_size == int64_t(128));
  CHECK_FALSE(f.preset);
  CHECK_FALSE(f.twin);
  CHECK_FALSE(f.group_series);
  CHECK_FALSE(f.nearest_preset);
  const VariantFacts id =
      variant_facts(*testing::make_test_codec("bf16"));  // family "test", not the preset
  CHECK(id.canonical == "bf16");
  CHECK(id.family == "test");
  CHECK_FALSE(id.preset);
  CHECK_FALSE(id.nearest_preset);
}

TEST_CASE("a group-size sweep shares its series and nearest preset; twins lose only the transform",
          "[codecs][facts]") {
  for (const char* base :
       {"taco", "taco-noh", "fp8-g128", "fp8-g128-had", "int4-g32", "mxfp8", "nvfp4", "fp8-tile128",
        "e4m3:g128:rht:seed=3:dual", "int8:asym:g128:sbf16", "tahquant:lo=2"}) {
    INFO(base);
    const VariantSpec spec = parse_variant(base);
    const VariantFacts ref = variant_facts(*make_codec(base));
    for (int g = kMinGroup; g <= kMaxGroup; g *= 2) {
      INFO(g);
      const VariantSpec sized = with_block_size(spec, g);
      REQUIRE(block_size(sized) == g);
      const VariantFacts f = variant_facts(*make_codec(sized));
      CHECK(f.group_size == int64_t(g));
      CHECK(f.group_series == ref.group_series);
      CHECK(f.nearest_preset == ref.nearest_preset);
      // The series name is a variant of the same sweep: its own series is itself.
      CHECK(variant_facts(*make_codec(*f.group_series)).group_series == f.group_series);
    }
  }
  for (const Preset& p : preset_table()) {
    INFO(p.name);
    const VariantSpec spec = parse_variant(p.name);
    // A preset's nearest preset is the first of its G sweep (itself when it has no block size).
    const Preset* first_of_sweep = block_size(spec) ? series_preset(spec) : &p;
    CHECK(&nearest_preset(spec) == first_of_sweep);
    const std::optional<VariantSpec> twin = transform_free_twin(spec);
    if (spec.family != VariantSpec::Family::Quant || spec.quant.transform == Transform::None) {
      CHECK_FALSE(twin);
      continue;
    }
    REQUIRE(twin);
    CHECK(twin->quant.transform == Transform::None);
    VariantSpec back = *twin;
    back.quant.transform = spec.quant.transform;
    back.quant.seed = spec.quant.seed;
    CHECK(back == spec);
  }
}
