#include "codecs/variant.hpp"

#include "core/error.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <set>

namespace taco {

std::string_view granularity_name(Granularity g) {
  switch (g) {
    case Granularity::Tensor:
      return "tensor";
    case Granularity::Row:
      return "row";
    case Granularity::Col:
      return "col";
    case Granularity::Group:
      return "group";
    case Granularity::Tile:
      return "tile";
  }
  throw_error("unknown granularity {}", int(g));
}

std::string_view transform_name(Transform t) {
  switch (t) {
    case Transform::None:
      return "none";
    case Transform::Hadamard:
      return "hadamard";
    case Transform::RandHadamard:
      return "rht";
  }
  throw_error("unknown transform {}", int(t));
}

bool QuantSpec::operator==(const QuantSpec& o) const {
  return elem == o.elem && asym == o.asym && gran == o.gran && block == o.block &&
         scale == o.scale && sround == o.sround && transform == o.transform && seed == o.seed &&
         taco == o.taco && dual == o.dual && float_bits(target) == float_bits(o.target) &&
         float_bits(lambda) == float_bits(o.lambda) && saturate == o.saturate;
}

bool VariantSpec::operator==(const VariantSpec& o) const {
  if (family != o.family) return false;
  switch (family) {
    case Family::Quant:
      return quant == o.quant;
    case Family::TahQuant:
      return tah == o.tah;
    case Family::Bf16:
      return true;
  }
  throw_error("unknown codec family {}", int(family));
}

float default_target(const QuantSpec& s) {
  return s.taco ? 448.0f : elem_max(s.elem, s.asym);
}

const std::vector<Preset>& preset_table() {
  static const std::vector<Preset> table = {
      {"bf16", "bf16", "no compression: bf16 passthrough, 2 B/elem"},
      {"fp8-tensor", "e4m3:tensor", "FP8 E4M3, one fp32 scale per tensor (current scaling)"},
      {"fp8-row", "e4m3:row", "FP8 E4M3, one fp32 scale per row (token)"},
      {"fp8-col", "e4m3:col", "FP8 E4M3, one fp32 scale per column (channel)"},
      {"fp8-g128", "e4m3:g128", "FP8 E4M3, fp32 scale per flat group of 128"},
      {"fp8-g32", "e4m3:g32", "FP8 E4M3, fp32 scale per flat group of 32"},
      {"fp8-g128-had", "e4m3:g128:had", "FP8 E4M3, Hadamard-128 then fp32 scale per group"},
      {"fp8-1x128-e8m0", "e4m3:g128:se8m0",
       "FP8 E4M3, 1x128 groups, power-of-two E8M0 scale "
       "rounded up (DeepSeek style)"},
      {"fp8-tile128", "e4m3:tile128", "FP8 E4M3, fp32 scale per 128x128 tile"},
      {"taco", "e4m3:g128:had:dual",
       "TACO: adaptive scale + Hadamard-128 + dual fp32 scales, "
       "E4M3 (reference configuration)"},
      {"taco-noh", "e4m3:g128:dual", "TACO without the Hadamard transform"},
      {"taco-nosa", "e4m3:g128:had:taco", "TACO without the adaptive scale (one fp32 scale)"},
      {"taco-e5m2", "e5m2:g128:had:dual", "TACO with E5M2 codes (still clamped to +-448)"},
      {"taco-g32", "e4m3:g32:had:dual", "TACO, groups of 32"},
      {"taco-g64", "e4m3:g64:had:dual", "TACO, groups of 64"},
      {"taco-g256", "e4m3:g256:had:dual", "TACO, groups of 256"},
      {"taco-g512", "e4m3:g512:had:dual", "TACO, groups of 512"},
      {"taco-rht", "e4m3:g128:rht:dual", "TACO with a randomized Hadamard (seed 0)"},
      {"taco-noh-g32", "e4m3:g32:dual", "TACO without the Hadamard transform, groups of 32"},
      {"taco-noh-g64", "e4m3:g64:dual", "TACO without the Hadamard transform, groups of 64"},
      {"taco-noh-g256", "e4m3:g256:dual", "TACO without the Hadamard transform, groups of 256"},
      {"taco-noh-g512", "e4m3:g512:dual", "TACO without the Hadamard transform, groups of 512"},
      {"mxfp8", "e4m3:g32:se8m0:sround=ocp", "MXFP8 (OCP MX v1.0): E4M3, E8M0 scale per 32"},
      {"mxfp8-e5m2", "e5m2:g32:se8m0:sround=ocp", "MXFP8 with E5M2 elements"},
      {"mxfp4", "e2m1:g32:se8m0:sround=ocp", "MXFP4 (OCP MX v1.0): E2M1, E8M0 scale per 32"},
      {"nvfp4", "e2m1:g16:sue4m3", "NVFP4: E2M1, UE4M3 scale per 16, fp32 per-tensor scale"},
      {"int8-g128", "int8:g128", "INT8 symmetric, fp32 scale per group of 128"},
      {"int8-g128-had", "int8:g128:had", "INT8 symmetric, Hadamard-128, fp32 scale per group"},
      {"int8-g128-asym", "int8:asym:g128", "UINT8 asymmetric (zero point), fp32 scale per 128"},
      {"int4-g32", "int4:g32", "INT4 symmetric, fp32 scale per group of 32"},
      {"int4-g32-had", "int4:g32:had", "INT4 symmetric, Hadamard-32, fp32 scale per group"},
      {"int3-g32", "int3:g32", "INT3 symmetric [-3, 3], fp32 scale per group of 32 (0.5 B/elem)"},
      {"int3-g32-had", "int3:g32:had",
       "INT3 symmetric, Hadamard-32, fp32 scale per group (0.5 B/elem)"},
      {"int3-g64-had", "int3:g64:had",
       "INT3 symmetric, Hadamard-64, fp32 scale per group (0.4375 B/elem)"},
      {"int3-g128-had", "int3:g128:had",
       "INT3 symmetric, Hadamard-128, fp32 scale per group (0.40625 B/elem)"},
      {"int2-g32", "int2:g32",
       "INT2 symmetric [-1, 1] (ternary), fp32 scale per group of 32 (0.375 B/elem)"},
      {"int2-g32-had", "int2:g32:had",
       "INT2 symmetric, Hadamard-32, fp32 scale per group (0.375 B/elem)"},
      {"int2-g64-had", "int2:g64:had",
       "INT2 symmetric, Hadamard-64, fp32 scale per group (0.3125 B/elem)"},
      {"int2-g128-had", "int2:g128:had",
       "INT2 symmetric, Hadamard-128, fp32 scale per group (0.28125 B/elem)"},
      {"tahquant", "tahquant",
       "TAH-Quant: entropy-chosen 4/3-bit tokens, pivot swap + "
       "Hadamard-64 tiles, fp16 zero/scale per tile"},
  };
  return table;
}

namespace {

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(),
                 [](unsigned char c) { return char(std::tolower(c)); });
  return s;
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  size_t start = 0;
  for (;;) {
    const size_t p = s.find(sep, start);
    out.push_back(s.substr(start, p == std::string::npos ? std::string::npos : p - start));
    if (p == std::string::npos) break;
    start = p + 1;
  }
  return out;
}

float parse_float(const std::string& variant, const std::string& tok, const std::string& v) {
  errno = 0;
  char* end = nullptr;
  const float f = std::strtof(v.c_str(), &end);
  TACO_REQUIRE_INPUT(!v.empty() && end == v.c_str() + v.size() && errno == 0 && std::isfinite(f),
                     "variant '{}': token '{}' needs a finite number", variant, tok);
  return f;
}

int64_t parse_int(const std::string& variant, const std::string& tok, const std::string& v) {
  TACO_REQUIRE_INPUT(
      !v.empty() && v.size() <= 18 &&
          std::all_of(v.begin(), v.end(), [](char c) { return c >= '0' && c <= '9'; }),
      "variant '{}': token '{}' needs a non-negative integer", variant, tok);
  return std::stoll(v);
}

bool is_pow2_in(int64_t v, int64_t lo, int64_t hi) {
  return v >= lo && v <= hi && (v & (v - 1)) == 0;
}

// Size after a prefix ("g128" -> 128), or -1 when the token does not have that form.
int64_t sized_token(const std::string& tok, const std::string& prefix) {
  if (tok.size() <= prefix.size() || tok.compare(0, prefix.size(), prefix) != 0) return -1;
  const std::string rest = tok.substr(prefix.size());
  if (rest.size() > 9 ||
      !std::all_of(rest.begin(), rest.end(), [](char c) { return c >= '0' && c <= '9'; }))
    return -1;
  return std::stoll(rest);
}

VariantSpec parse_tahquant(const std::string& variant, const std::vector<std::string>& toks) {
  VariantSpec v;
  v.family = VariantSpec::Family::TahQuant;
  std::set<std::string> seen;
  for (size_t i = 1; i < toks.size(); ++i) {
    const std::string& t = toks[i];
    const size_t eq = t.find('=');
    TACO_REQUIRE_INPUT(eq != std::string::npos,
                       "variant '{}': unknown tahquant token '{}' (tile=, hi=, lo=, pct=)", variant,
                       t);
    const std::string key = t.substr(0, eq), val = t.substr(eq + 1);
    TACO_REQUIRE_INPUT(seen.insert(key).second, "variant '{}': '{}' given twice", variant, key);
    const int64_t n = parse_int(variant, t, val);
    if (key == "tile") {
      TACO_REQUIRE_INPUT(is_pow2_in(n, 8, 1024),
                         "variant '{}': tile must be a power of two in [8, 1024]", variant);
      v.tah.tile = int(n);
    } else if (key == "hi" || key == "lo") {
      TACO_REQUIRE_INPUT(n >= 1 && n <= 8, "variant '{}': '{}' bits must be in [1, 8]", variant,
                         key);
      (key == "hi" ? v.tah.hi_bits : v.tah.lo_bits) = int(n);
    } else if (key == "pct") {
      TACO_REQUIRE_INPUT(n <= 100, "variant '{}': pct must be in [0, 100]", variant);
      v.tah.hi_pct = int(n);
    } else {
      throw_input_error("variant '{}': unknown tahquant token '{}' (tile=, hi=, lo=, pct=)",
                        variant, t);
    }
  }
  return v;
}

VariantSpec parse_grammar(const std::string& variant) {
  const std::vector<std::string> toks = split(lower(variant), ':');
  for (const auto& t : toks) TACO_REQUIRE_INPUT(!t.empty(), "variant '{}': empty token", variant);
  if (toks[0] == "tahquant") return parse_tahquant(variant, toks);
  if (toks[0] == "bf16") {
    TACO_REQUIRE_INPUT(toks.size() == 1, "variant '{}': bf16 takes no options", variant);
    VariantSpec v;
    v.family = VariantSpec::Family::Bf16;
    return v;
  }

  VariantSpec v;
  QuantSpec& s = v.quant;
  std::set<std::string> seen;  // token kinds
  auto once = [&](const std::string& kind, const std::string& tok) {
    TACO_REQUIRE_INPUT(seen.insert(kind).second, "variant '{}': {} given twice (at '{}')", variant,
                       kind, tok);
  };
  bool have_round = false, have_target = false, have_lambda = false, have_seed = false;
  for (const std::string& t : toks) {
    int64_t n;
    if (t == "e4m3" || t == "fp8" || t == "e5m2" || t == "e2m1" || t == "fp4" || t == "int8" ||
        t == "int4" || t == "int3" || t == "int2") {
      once("element format", t);
      s.elem = parse_elem_format(t);
    } else if (t == "asym") {
      once("asym", t);
      s.asym = true;
    } else if (t == "tensor" || t == "row" || t == "col") {
      once("granularity", t);
      s.gran =
          t == "tensor" ? Granularity::Tensor : (t == "row" ? Granularity::Row : Granularity::Col);
    } else if ((n = sized_token(t, "g")) >= 0) {
      once("granularity", t);
      TACO_REQUIRE_INPUT(is_pow2_in(n, kMinGroup, kMaxGroup),
                         "variant '{}': group size in '{}' must be a power of two in [{}, {}]",
                         variant, t, kMinGroup, kMaxGroup);
      s.gran = Granularity::Group;
      s.block = int(n);
    } else if ((n = sized_token(t, "tile")) >= 0) {
      once("granularity", t);
      TACO_REQUIRE_INPUT(is_pow2_in(n, kMinGroup, kMaxGroup),
                         "variant '{}': tile size in '{}' must be a power of two in [{}, {}]",
                         variant, t, kMinGroup, kMaxGroup);
      s.gran = Granularity::Tile;
      s.block = int(n);
    } else if (t == "sf32" || t == "sfp32" || t == "sbf16" || t == "sf16" || t == "sfp16" ||
               t == "se8m0" || t == "sue8m0" || t == "sue4m3") {
      once("scale format", t);
      s.scale = parse_scale_format(t.substr(1));
    } else if (t.rfind("sround=", 0) == 0) {
      once("sround", t);
      s.sround = parse_scale_round(t.substr(7));
      have_round = true;
    } else if (t == "had" || t == "rht") {
      once("transform", t);
      s.transform = t == "had" ? Transform::Hadamard : Transform::RandHadamard;
    } else if (t.rfind("seed=", 0) == 0) {
      once("seed", t);
      s.seed = uint64_t(parse_int(variant, t, t.substr(5)));
      have_seed = true;
    } else if (t == "taco" || t == "dual") {
      once("taco mode", t);
      s.taco = true;
      s.dual = t == "dual";
    } else if (t.rfind("t=", 0) == 0) {
      once("target range", t);
      s.target = parse_float(variant, t, t.substr(2));
      TACO_REQUIRE_INPUT(s.target > 0, "variant '{}': T must be positive", variant);
      have_target = true;
    } else if (t.rfind("lambda=", 0) == 0) {
      once("lambda", t);
      s.lambda = parse_float(variant, t, t.substr(7));
      TACO_REQUIRE_INPUT(s.lambda >= 0, "variant '{}': lambda must be >= 0", variant);
      have_lambda = true;
    } else if (t == "nosat") {
      once("nosat", t);
      s.saturate = false;
    } else {
      throw_input_error("variant '{}': unknown token '{}' (see `taco codec list`)", variant, t);
    }
  }
  TACO_REQUIRE_INPUT(
      seen.count("element format"),
      "variant '{}': not a preset and no element format (e4m3, e5m2, e2m1, int8, int4, int3, int2)",
      variant);
  TACO_REQUIRE_INPUT(seen.count("granularity"),
                     "variant '{}': no granularity (tensor, row, col, g<G>, tile<T>)", variant);
  TACO_REQUIRE_INPUT(!have_seed || s.transform == Transform::RandHadamard,
                     "variant '{}': seed= needs rht", variant);
  TACO_REQUIRE_INPUT(!have_lambda || s.dual, "variant '{}': lambda= needs dual", variant);
  if (!have_round) s.sround = default_scale_round(s.scale);
  TACO_REQUIRE_INPUT(
      !(have_target && s.sround == ScaleRound::OcpFloor),
      "variant '{}': T= has no effect with sround=ocp (the OCP rule uses the element emax)",
      variant);
  validate(s, fmt::format("variant '{}'", variant));
  if (!have_target) s.target = default_target(s);
  return v;
}

std::string fmt_float(float f) {
  return fmt::format("{}", f);
}

}  // namespace

void validate(const QuantSpec& s, const std::string& label) {
  const std::string e(elem_format_name(s.elem));
  const bool grouped = s.gran == Granularity::Group || s.gran == Granularity::Tile;
  TACO_REQUIRE_INPUT(!s.asym || !elem_is_float(s.elem),
                     "{}: asym needs an integer element format (int8, int4, int3, int2), not {}",
                     label, e);
  TACO_REQUIRE_INPUT(s.saturate || s.elem == ElemFormat::E4M3 || s.elem == ElemFormat::E5M2,
                     "{}: nosat needs e4m3 or e5m2 ({} always saturates)", label, e);
  TACO_REQUIRE_INPUT(s.transform == Transform::None || grouped,
                     "{}: had/rht need g<G> or tile<T> blocks (the transform size), not {}", label,
                     granularity_name(s.gran));
  TACO_REQUIRE_INPUT(
      !grouped || (s.block >= kMinGroup && s.block <= kMaxGroup && (s.block & (s.block - 1)) == 0),
      "{}: block size {} is not a power of two in [{}, {}]", label, s.block, kMinGroup, kMaxGroup);
  if (s.scale == ScaleFormat::F32) {
    TACO_REQUIRE_INPUT(s.sround == ScaleRound::Exact,
                       "{}: fp32 scales are exact; sround= applies to "
                       "bf16, fp16, e8m0 and ue4m3 scales",
                       label);
  } else {
    TACO_REQUIRE_INPUT(s.sround != ScaleRound::Exact,
                       "{}: {} scales need a rounding (up, rne, ocp)", label,
                       scale_format_name(s.scale));
  }
  TACO_REQUIRE_INPUT(s.sround != ScaleRound::OcpFloor ||
                         (s.scale == ScaleFormat::E8M0 && elem_is_float(s.elem) && !s.asym),
                     "{}: sround=ocp (OCP MX) needs se8m0 scales and a float element format",
                     label);
  TACO_REQUIRE_INPUT(!s.dual || s.taco, "{}: dual implies taco", label);
  if (s.taco) {
    TACO_REQUIRE_INPUT(s.gran == Granularity::Group, "{}: taco/dual need g<G> groups, not {}",
                       label, granularity_name(s.gran));
    TACO_REQUIRE_INPUT(s.elem == ElemFormat::E4M3 || s.elem == ElemFormat::E5M2,
                       "{}: taco/dual need an FP8 element format (e4m3, e5m2), not {}", label, e);
    TACO_REQUIRE_INPUT(s.scale == ScaleFormat::F32, "{}: taco/dual store fp32 scales, not {}",
                       label, scale_format_name(s.scale));
  }
  TACO_REQUIRE_INPUT(s.target == 0 || (std::isfinite(s.target) && s.target > 0),
                     "{}: T must be positive", label);
  TACO_REQUIRE_INPUT(std::isfinite(s.lambda) && s.lambda >= 0, "{}: lambda must be >= 0", label);
}

VariantSpec parse_variant(const std::string& variant) {
  TACO_REQUIRE_INPUT(!variant.empty(), "empty variant name");
  const std::string l = lower(variant);
  for (const Preset& p : preset_table())
    if (l == p.name) return parse_grammar(p.definition);
  return parse_grammar(variant);
}

std::string grammar_string(const VariantSpec& v) {
  switch (v.family) {
    case VariantSpec::Family::Bf16:
      return "bf16";
    case VariantSpec::Family::TahQuant: {
      std::string out = "tahquant";
      const TahSpec d;
      if (v.tah.tile != d.tile) out += fmt::format(":tile={}", v.tah.tile);
      if (v.tah.hi_bits != d.hi_bits) out += fmt::format(":hi={}", v.tah.hi_bits);
      if (v.tah.lo_bits != d.lo_bits) out += fmt::format(":lo={}", v.tah.lo_bits);
      if (v.tah.hi_pct != d.hi_pct) out += fmt::format(":pct={}", v.tah.hi_pct);
      return out;
    }
    case VariantSpec::Family::Quant:
      break;
    default:
      throw_error("unknown codec family {}", int(v.family));
  }
  const QuantSpec& s = v.quant;
  std::string out(elem_format_name(s.elem));
  if (s.asym) out += ":asym";
  switch (s.gran) {
    case Granularity::Tensor:
      out += ":tensor";
      break;
    case Granularity::Row:
      out += ":row";
      break;
    case Granularity::Col:
      out += ":col";
      break;
    case Granularity::Group:
      out += fmt::format(":g{}", s.block);
      break;
    case Granularity::Tile:
      out += fmt::format(":tile{}", s.block);
      break;
    default:
      throw_error("unknown granularity {}", int(s.gran));
  }
  if (s.scale != ScaleFormat::F32) out += fmt::format(":s{}", scale_format_name(s.scale));
  if (s.sround != default_scale_round(s.scale))
    out += fmt::format(":sround={}", scale_round_name(s.sround));
  if (s.transform == Transform::Hadamard) out += ":had";
  if (s.transform == Transform::RandHadamard) out += ":rht";
  if (s.transform == Transform::RandHadamard && s.seed != 0) out += fmt::format(":seed={}", s.seed);
  if (s.dual)
    out += ":dual";
  else if (s.taco)
    out += ":taco";
  if (float_bits(s.target) != float_bits(default_target(s)) && s.sround != ScaleRound::OcpFloor)
    out += ":T=" + fmt_float(s.target);
  if (s.dual && float_bits(s.lambda) != float_bits(QuantSpec{}.lambda))
    out += ":lambda=" + fmt_float(s.lambda);
  if (!s.saturate) out += ":nosat";
  return out;
}

const Preset* find_preset(const VariantSpec& spec) {
  for (const Preset& p : preset_table())
    if (parse_grammar(p.definition) == spec) return &p;
  return nullptr;
}

std::string canonical_variant(const VariantSpec& v) {
  const Preset* p = find_preset(v);
  return p ? p->name : grammar_string(v);
}

std::optional<int> block_size(const VariantSpec& spec) {
  switch (spec.family) {
    case VariantSpec::Family::Quant:
      if (spec.quant.gran == Granularity::Group || spec.quant.gran == Granularity::Tile)
        return spec.quant.block;
      return std::nullopt;
    case VariantSpec::Family::TahQuant:
      return spec.tah.tile;
    case VariantSpec::Family::Bf16:
      return std::nullopt;
  }
  throw_error("unknown codec family {}", int(spec.family));
}

VariantSpec with_block_size(VariantSpec spec, int block) {
  TACO_ASSERT(block_size(spec).has_value(), "with_block_size: '{}' has no block size",
              grammar_string(spec));
  if (spec.family == VariantSpec::Family::TahQuant)
    spec.tah.tile = block;
  else
    spec.quant.block = block;
  return spec;
}

std::optional<VariantSpec> transform_free_twin(const VariantSpec& spec) {
  if (spec.family != VariantSpec::Family::Quant || spec.quant.transform == Transform::None)
    return std::nullopt;
  VariantSpec twin = spec;
  twin.quant.transform = Transform::None;
  twin.quant.seed = 0;  // the RHT signs; meaningless without the transform
  return twin;
}

const Preset* series_preset(const VariantSpec& spec) {
  const std::optional<int> block = block_size(spec);
  if (!block) return nullptr;
  for (const Preset& p : preset_table()) {
    const VariantSpec ps = parse_grammar(p.definition);
    if (ps.family == spec.family && block_size(ps) && with_block_size(ps, *block) == spec)
      return &p;
  }
  return nullptr;
}

namespace {

// T= given explicitly (nullopt: the format's default), so that specs of different element
// formats with default targets do not differ in it.
std::optional<uint32_t> custom_target(const QuantSpec& s) {
  if (float_bits(s.target) == float_bits(default_target(s))) return std::nullopt;
  return float_bits(s.target);
}

// Differences between two specs of one family, the most telling first (nearest_preset compares
// these lexicographically). The block size is left out.
std::array<int, 8> spec_distance(const VariantSpec& a, const VariantSpec& b) {
  if (a.family == VariantSpec::Family::TahQuant)
    return {0,
            0,
            0,
            0,
            0,
            0,
            0,
            int(a.tah.hi_bits != b.tah.hi_bits) + int(a.tah.lo_bits != b.tah.lo_bits) +
                int(a.tah.hi_pct != b.tah.hi_pct)};
  if (a.family != VariantSpec::Family::Quant) return {};
  const QuantSpec& x = a.quant;
  const QuantSpec& y = b.quant;
  const bool same_scale = x.scale == y.scale;
  return {
      int(elem_is_float(x.elem) != elem_is_float(y.elem) || elem_bits(x.elem) != elem_bits(y.elem)),
      int(x.taco != y.taco || x.dual != y.dual),
      int(!same_scale),
      int(same_scale && x.sround != y.sround),
      int(x.gran != y.gran),
      int((x.transform == Transform::None) != (y.transform == Transform::None)),
      int(x.elem != y.elem) + int(x.asym != y.asym),
      int(x.transform != y.transform) + int(x.seed != y.seed) +
          int(custom_target(x) != custom_target(y)) +
          int(float_bits(x.lambda) != float_bits(y.lambda)) + int(x.saturate != y.saturate)};
}

}  // namespace

const Preset& nearest_preset(const VariantSpec& spec) {
  const Preset* best = nullptr;
  std::array<int, 8> best_distance{};
  for (const Preset& p : preset_table()) {
    const VariantSpec ps = parse_grammar(p.definition);
    if (ps.family != spec.family) continue;
    const std::array<int, 8> d = spec_distance(spec, ps);
    if (!best || d < best_distance) {
      best = &p;
      best_distance = d;
    }
  }
  TACO_ASSERT(best != nullptr, "no preset of the family of '{}'", grammar_string(spec));
  return *best;
}

}  // namespace taco
