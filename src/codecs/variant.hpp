#pragma once
// Codec variants as data, and the variant grammar (docs/variants.md has the full reference).
//
// A variant string is a preset name (codec_presets(): "taco", "fp8-g128", "mxfp8", ...) or
// colon-separated tokens, in any order, each at most once (case-insensitive):
//
//   element   e4m3 (= fp8) | e5m2 | e2m1 (= fp4) | int8 | int4 | int3 | int2   required
//   asym      ints only: unsigned codes with a per-block integer zero point
//   blocks    tensor | row | col | g<G> (flat groups of G, row-major) | tile<T> (T x T)
//                                                                       required
//   scale     sf32 (default) | sbf16 | sf16 | se8m0 | sue4m3 (+ fp32 per-tensor scale)
//   sround=   up | rne | ocp  how the ideal scale is rounded into a non-fp32 scale format
//             (defaults: up; ue4m3 rne). ocp = OCP MX rule, e8m0 only.
//   transform had (Hadamard of size G or T) | rht (randomized: signs, then Hadamard)
//   seed=N    RHT sign seed (default 0)
//   taco      TACO's scale rules: one fp32 s_q per group with its clamps, the +-448 pre-clamp,
//             NaN/Inf -> 0 after the transform (methods.md 1.4)
//   dual      taco plus the adaptive scale s_a: two fp32 scales per group (the TACO codec)
//   T=x       target range: the group max maps to T (default: the element max; 448 with taco)
//   lambda=x  dual only: the lambda in s_a (default 1e-6)
//   nosat     non-saturating element encode (overflow -> NaN / Inf); not for ints or e2m1
//
// Other families: "bf16" (identity, 2 B/elem) and "tahquant[:tile=64][:hi=4][:lo=3][:pct=80]".
// canonical_variant() spells a spec with defaults left out, tokens in the order above; a spec
// equal to a preset is named by the preset. parse(canonical(spec)) == spec.
#include "codecs/block_kinds.hpp"
#include "formats/elem.hpp"
#include "formats/scale.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace taco {

std::string_view granularity_name(Granularity g);  // "tensor", "row", "col", "group", "tile"
std::string_view transform_name(Transform t);      // "none", "hadamard", "rht"

// Smallest and largest group / tile size (powers of two).
inline constexpr int kMinGroup = 16, kMaxGroup = 1024;

struct QuantSpec {
  ElemFormat elem = ElemFormat::E4M3;
  bool asym = false;  // ints: unsigned codes + integer zero point
  Granularity gran = Granularity::Group;
  int block = 128;  // G (Group) or T (Tile); unused otherwise
  ScaleFormat scale = ScaleFormat::F32;
  ScaleRound sround = ScaleRound::Exact;  // resolved: never left at a format's "default"
  Transform transform = Transform::None;
  uint64_t seed = 0;     // RHT signs
  bool taco = false;     // TACO scale rules (single s_q unless dual)
  bool dual = false;     // + adaptive scale s_a (implies taco)
  float target = 0;      // T; resolved to the default when not given
  float lambda = 1e-6f;  // dual only
  bool saturate = true;

  bool operator==(const QuantSpec& o) const;
  bool operator!=(const QuantSpec& o) const { return !(*this == o); }
};

struct TahSpec {
  int tile = 64;    // tile along the hidden dimension (power of two, 8..1024)
  int hi_bits = 4;  // bits of the high-entropy tokens
  int lo_bits = 3;  // bits of the lowest-entropy tokens
  int hi_pct = 80;  // percent of tokens at hi_bits; the rest (floor) get lo_bits
  bool operator==(const TahSpec& o) const {
    return tile == o.tile && hi_bits == o.hi_bits && lo_bits == o.lo_bits && hi_pct == o.hi_pct;
  }
};

struct VariantSpec {
  enum class Family : uint8_t { Quant, TahQuant, Bf16 };
  Family family = Family::Quant;
  QuantSpec quant;
  TahSpec tah;
  bool operator==(const VariantSpec& o) const;
};

// Default target range T for a spec (TACO: 448; otherwise the element max).
float default_target(const QuantSpec& s);

// Parses a preset name or the grammar; validates. InputError names the bad token.
VariantSpec parse_variant(const std::string& variant);
// Grammar spelling of a (valid) spec, without consulting presets.
std::string grammar_string(const VariantSpec& spec);
// Preset name if the spec equals a preset, else grammar_string().
std::string canonical_variant(const VariantSpec& spec);
// Throws InputError if the combination is not supported (names the conflicting tokens).
void validate(const QuantSpec& s, const std::string& label = "variant");

// Presets: name, grammar definition, one-line description (stable order).
struct Preset {
  const char* name;
  const char* definition;
  const char* description;
};
const std::vector<Preset>& preset_table();
// The preset the spec equals, or nullptr.
const Preset* find_preset(const VariantSpec& spec);

// Relations between specs, for what results.json says about each variant
// (codecs/variant_facts.hpp). The group size G or tile size T of a g<G> / tile<T> quantizer, the
// tile of TAH-Quant; nullopt for tensor / row / col blocks and bf16.
std::optional<int> block_size(const VariantSpec& spec);
// The same codec with another block size; spec must have one (block_size), and `block` must be
// valid for its family (not checked).
VariantSpec with_block_size(VariantSpec spec, int block);
// The same codec without its had / rht transform (transform none, seed 0); nullopt when there is
// no transform to take away (none given, TAH-Quant whose transform is part of the codec, bf16).
std::optional<VariantSpec> transform_free_twin(const VariantSpec& spec);
// The first preset that equals spec up to the block size (taco-g64 -> taco, e4m3:g64 -> fp8-g128);
// nullptr when none does or spec has no block size.
const Preset* series_preset(const VariantSpec& spec);
// The preset of spec's family that spec is closest to, the block size not compared: the first in
// preset_table() order that matches best on the element class (float or int, bits), then the TACO
// scale rules, the scale format and its rounding, the granularity, whether there is a transform,
// the exact element format, and the fewest other differences.
const Preset& nearest_preset(const VariantSpec& spec);

}  // namespace taco
