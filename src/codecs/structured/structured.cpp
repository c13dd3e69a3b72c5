// The structured variant grammar (structured.hpp), canonical names, presets and the
// error-feedback / AQ-SGD wrapper codec.
#include "codecs/structured/structured.hpp"

#include "codecs/structured/specs.hpp"
#include "core/error.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <set>

namespace taco::structured {

namespace {

const char* const kFamilies[] = {"subspace", "lowrank", "tt", "topk", "randk", "ef", "aqsgd"};

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(),
                 [](unsigned char c) { return char(std::tolower(c)); });
  return s;
}

std::string family_of(const std::string& v) {
  return v.substr(0, v.find(':'));
}

// key=value or flag tokens after the family name, each key at most once.
struct Tokens {
  std::string variant;
  std::vector<std::pair<std::string, std::string>> kv;  // value "" for a flag
  std::vector<bool> has_value;
  std::set<std::string> used;

  Tokens(const std::string& v, const std::string& rest) : variant(v) {
    size_t start = 0;
    while (start <= rest.size()) {
      size_t p = rest.find(':', start);
      if (p == std::string::npos) p = rest.size();
      const std::string tok = rest.substr(start, p - start);
      TACO_REQUIRE_INPUT(!tok.empty(), "variant '{}': empty token", variant);
      const size_t eq = tok.find('=');
      const std::string key = tok.substr(0, eq);
      for (const auto& [k, unused] : kv)
        TACO_REQUIRE_INPUT(k != key, "variant '{}': token '{}' given twice", variant, key);
      kv.emplace_back(key, eq == std::string::npos ? "" : tok.substr(eq + 1));
      has_value.push_back(eq != std::string::npos);
      start = p + 1;
    }
  }
  // The value of key=value (used: marks it consumed); nullptr if absent.
  const std::string* value(const std::string& key) {
    for (size_t i = 0; i < kv.size(); ++i)
      if (kv[i].first == key) {
        TACO_REQUIRE_INPUT(has_value[i], "variant '{}': token '{}' needs a value ({}=...)", variant,
                           key, key);
        used.insert(key);
        return &kv[i].second;
      }
    return nullptr;
  }
  bool flag(const std::string& key) {
    for (size_t i = 0; i < kv.size(); ++i)
      if (kv[i].first == key) {
        TACO_REQUIRE_INPUT(!has_value[i], "variant '{}': token '{}' takes no value", variant, key);
        used.insert(key);
        return true;
      }
    return false;
  }
  // Every token must have been consumed.
  void finish(const char* allowed) const {
    for (const auto& [k, v] : kv)
      TACO_REQUIRE_INPUT(used.count(k), "variant '{}': unknown token '{}' (allowed: {})", variant,
                         k, allowed);
  }
};

double parse_real(const std::string& variant, const std::string& key, const std::string& v,
                  double lo, double hi, bool lo_open) {
  errno = 0;
  char* end = nullptr;
  const double d = std::strtod(v.c_str(), &end);
  const bool ok = !v.empty() && end == v.c_str() + v.size() && errno == 0 && std::isfinite(d) &&
                  (lo_open ? d > lo : d >= lo) && d <= hi;
  TACO_REQUIRE_INPUT(ok, "variant '{}': {}={} must be a number in {}{}, {}]", variant, key, v,
                     lo_open ? "(" : "[", lo, hi);
  return d;
}

uint64_t parse_uint(const std::string& variant, const std::string& key, const std::string& v,
                    uint64_t lo, uint64_t hi) {
  errno = 0;
  char* end = nullptr;
  const unsigned long long u = std::strtoull(v.c_str(), &end, 10);
  const bool ok = !v.empty() && std::isdigit(static_cast<unsigned char>(v[0])) &&
                  end == v.c_str() + v.size() && errno == 0 && u >= lo && u <= hi;
  TACO_REQUIRE_INPUT(ok, "variant '{}': {}={} must be an integer in [{}, {}]", variant, key, v, lo,
                     hi);
  return u;
}

constexpr uint64_t kMaxSeed = UINT64_MAX;
constexpr uint64_t kMaxDim = uint64_t(1) << 31;

std::unique_ptr<Codec> build(const std::string& variant, std::string* canonical);

std::unique_ptr<Codec> build_subspace(const std::string& v, Tokens& t, std::string* canon) {
  SubspaceSpec s;
  const std::string* k = t.value("k");
  const std::string* f = t.value("frac");
  TACO_REQUIRE_INPUT((k != nullptr) != (f != nullptr),
                     "variant '{}': subspace needs exactly one of k=K, frac=F", v);
  if (k) s.k = int64_t(parse_uint(v, "k", *k, 1, kMaxDim));
  if (f) s.frac = parse_real(v, "frac", *f, 0, 1, true);
  if (const std::string* x = t.value("seed")) s.seed = parse_uint(v, "seed", *x, 0, kMaxSeed);
  if (const std::string* x = t.value("coef"))
    s.coef = parse_num_format(*x, fmt::format("variant '{}': coef", v));
  t.finish("k, frac, seed, coef");
  *canon = k ? fmt::format("subspace:k={}", s.k) : fmt::format("subspace:frac={}", s.frac);
  if (s.seed) *canon += fmt::format(":seed={}", s.seed);
  if (s.coef != NumFormat::BF16) *canon += fmt::format(":coef={}", num_format_name(s.coef));
  return make_subspace_codec(s, structured_variant_name(*canon), *canon);
}

std::unique_ptr<Codec> build_lowrank(const std::string& v, Tokens& t, std::string* canon) {
  LowRankSpec s;
  const std::string* r = t.value("rank");
  const std::string* e = t.value("energy");
  const std::string* b = t.value("bpe");
  TACO_REQUIRE_INPUT(int(r != nullptr) + int(e != nullptr) + int(b != nullptr) == 1,
                     "variant '{}': lowrank needs exactly one of rank=R, energy=E, bpe=B", v);
  if (r) {
    s.mode = LowRankSpec::Mode::Rank;
    s.rank = int64_t(parse_uint(v, "rank", *r, 1, kMaxDim));
    *canon = fmt::format("lowrank:rank={}", s.rank);
  } else if (e) {
    s.mode = LowRankSpec::Mode::Energy;
    s.energy = parse_real(v, "energy", *e, 0, 1, true);
    *canon = fmt::format("lowrank:energy={}", s.energy);
  } else {
    s.mode = LowRankSpec::Mode::Bpe;
    s.bpe = parse_real(v, "bpe", *b, 0, 64, true);
    *canon = fmt::format("lowrank:bpe={}", s.bpe);
  }
  s.rsvd = t.flag("rsvd");
  if (const std::string* x = t.value("power")) {
    TACO_REQUIRE_INPUT(s.rsvd, "variant '{}': power= needs rsvd", v);
    s.power = int(parse_uint(v, "power", *x, 0, 16));
  }
  if (const std::string* x = t.value("seed")) {
    TACO_REQUIRE_INPUT(s.rsvd, "variant '{}': seed= needs rsvd", v);
    s.seed = parse_uint(v, "seed", *x, 0, kMaxSeed);
  }
  if (const std::string* x = t.value("factors"))
    s.factors = parse_num_format(*x, fmt::format("variant '{}': factors", v));
  t.finish("rank, energy, bpe, rsvd, power, seed, factors");
  if (s.rsvd) *canon += ":rsvd";
  if (s.rsvd && s.power != 2) *canon += fmt::format(":power={}", s.power);
  if (s.rsvd && s.seed) *canon += fmt::format(":seed={}", s.seed);
  if (s.factors != NumFormat::BF16)
    *canon += fmt::format(":factors={}", num_format_name(s.factors));
  return make_lowrank_codec(s, structured_variant_name(*canon), *canon);
}

std::unique_ptr<Codec> build_tt(const std::string& v, Tokens& t, std::string* canon) {
  TtSpec s;
  const std::string* o = t.value("order");
  TACO_REQUIRE_INPUT(o, "variant '{}': tt needs order=D (2..{})", v, TtSpec::kMaxOrder);
  s.order = int(parse_uint(v, "order", *o, 2, TtSpec::kMaxOrder));
  const std::string* r = t.value("rank");
  const std::string* e = t.value("eps");
  TACO_REQUIRE_INPUT(!(r && e), "variant '{}': tt takes rank=R or eps=E, not both", v);
  if (r) s.rank = int64_t(parse_uint(v, "rank", *r, 1, kMaxDim));
  if (e) s.eps = parse_real(v, "eps", *e, 0, 1, true);
  if (const std::string* x = t.value("cores")) {
    s.cores = parse_num_format(*x, fmt::format("variant '{}': cores", v));
    TACO_REQUIRE_INPUT(s.cores != NumFormat::E4M3, "variant '{}': tt cores are f32 or bf16", v);
  }
  t.finish("order, rank, eps, cores");
  *canon = fmt::format("tt:order={}", s.order);
  if (s.rank)
    *canon += fmt::format(":rank={}", s.rank);
  else if (s.eps != TtSpec{}.eps)
    *canon += fmt::format(":eps={}", s.eps);
  if (s.cores != NumFormat::BF16) *canon += fmt::format(":cores={}", num_format_name(s.cores));
  return make_tt_codec(s, structured_variant_name(*canon), *canon);
}

std::unique_ptr<Codec> build_topk(const std::string& v, Tokens& t, std::string* canon) {
  TopKSpec s;
  const std::string* f = t.value("frac");
  TACO_REQUIRE_INPUT(f, "variant '{}': topk needs frac=F", v);
  s.frac = parse_real(v, "frac", *f, 0, 1, true);
  if (const std::string* x = t.value("index")) {
    TACO_REQUIRE_INPUT(*x == "i32" || *x == "bitmap", "variant '{}': index={} (i32 or bitmap)", v,
                       *x);
    s.bitmap = *x == "bitmap";
  }
  t.finish("frac, index");
  *canon = fmt::format("topk:frac={}{}", s.frac, s.bitmap ? ":index=bitmap" : "");
  return make_topk_codec(s, structured_variant_name(*canon), *canon);
}

std::unique_ptr<Codec> build_randk(const std::string& v, Tokens& t, std::string* canon) {
  RandKSpec s;
  const std::string* f = t.value("frac");
  TACO_REQUIRE_INPUT(f, "variant '{}': randk needs frac=F", v);
  s.frac = parse_real(v, "frac", *f, 0, 1, true);
  if (const std::string* x = t.value("seed")) s.seed = parse_uint(v, "seed", *x, 0, kMaxSeed);
  s.unbiased = t.flag("unbiased");
  t.finish("frac, seed, unbiased");
  *canon = fmt::format("randk:frac={}", s.frac);
  if (s.seed) *canon += fmt::format(":seed={}", s.seed);
  if (s.unbiased) *canon += ":unbiased";
  return make_randk_codec(s, structured_variant_name(*canon), *canon);
}

std::unique_ptr<Codec> build_feedback(const std::string& v, FeedbackKind kind,
                                      const std::string& inner_spec, std::string* canon) {
  TACO_REQUIRE_INPUT(!inner_spec.empty(),
                     "variant '{}': {} needs an inner variant, e.g. {}:int4-g32", v,
                     feedback_kind_name(kind), feedback_kind_name(kind));
  const std::string inner_family = family_of(lower(inner_spec));
  TACO_REQUIRE_INPUT(inner_family != "ef" && inner_family != "aqsgd",
                     "variant '{}': ef and aqsgd do not nest", v);
  std::unique_ptr<Codec> inner = make_codec(inner_spec);
  if (inner->wrapped())
    throw_input_error("variant '{}': ef and aqsgd do not nest ({})", v, inner->name());
  *canon = fmt::format("{}:{}", feedback_kind_name(kind), inner->name());
  return std::make_unique<FeedbackCodec>(kind, std::move(inner), structured_variant_name(*canon),
                                         *canon);
}

std::unique_ptr<Codec> build(const std::string& variant, std::string* canonical) {
  const std::string v = lower(variant);
  for (const StructuredPreset& p : structured_presets())
    if (v == p.name) return build(p.definition, canonical);
  const std::string family = family_of(v);
  const std::string rest = v.size() > family.size() ? v.substr(family.size() + 1) : std::string();
  if (family == "ef" || family == "aqsgd") {
    const FeedbackKind kind = family == "ef" ? FeedbackKind::ErrorFeedback : FeedbackKind::AqSgd;
    const std::string inner =
        variant.size() > family.size() ? variant.substr(family.size() + 1) : std::string();
    return build_feedback(variant, kind, inner, canonical);
  }
  TACO_REQUIRE_INPUT(!rest.empty(), "variant '{}': {} needs parameters (see docs/structured.md)",
                     variant, family);
  Tokens t(variant, rest);
  if (family == "subspace") return build_subspace(variant, t, canonical);
  if (family == "lowrank") return build_lowrank(variant, t, canonical);
  if (family == "tt") return build_tt(variant, t, canonical);
  if (family == "topk") return build_topk(variant, t, canonical);
  if (family == "randk") return build_randk(variant, t, canonical);
  throw_error("structured: unhandled family '{}'", family);
}

}  // namespace

FeedbackCodec::FeedbackCodec(FeedbackKind kind, std::unique_ptr<Codec> inner, std::string name,
                             std::string definition)
    : kind_(kind),
      inner_(std::move(inner)),
      name_(std::move(name)),
      definition_(std::move(definition)) {
  TACO_ASSERT(inner_ != nullptr, "FeedbackCodec needs an inner codec");
}

nlohmann::json FeedbackCodec::params() const {
  nlohmann::json p = inner_->params();
  const nlohmann::json inner = p;
  p["variant"] = name_;
  p["definition"] = definition_;
  p["family"] = std::string(feedback_kind_name(kind_));
  p["inner"] = inner_->name();
  p["inner_family"] = inner.value("family", "");
  p["state"] = kind_ == FeedbackKind::ErrorFeedback
                   ? "residual per (layer, site, direction, tp_rank), in step order"
                   : "cache per (layer, site, direction, tp_rank, sample)";
  return p;
}

std::string structured_variant_name(const std::string& definition) {
  for (const StructuredPreset& p : structured_presets())
    if (definition == p.definition) return p.name;
  return definition;
}

const std::vector<StructuredPreset>& structured_presets() {
  static const std::vector<StructuredPreset> table = {
      {"ef-int4-g32", "ef:int4-g32",
       "INT4 groups of 32 with error feedback across steps (methods.md 4)"},
      {"ef-nvfp4", "ef:nvfp4", "NVFP4 with error feedback across steps"},
      {"aqsgd-int4-g32", "aqsgd:int4-g32",
       "AQ-SGD: INT4 groups of 32 on the delta to a per-sample cache"},
      {"topk10", "topk:frac=0.1", "TopK: the 10% largest magnitudes, bf16 values + i32 indices"},
      {"randk10", "randk:frac=0.1:unbiased", "random 10% of the elements, scaled by 10 (unbiased)"},
      {"lowrank-b1", "lowrank:bpe=1:rsvd", "truncated randomized SVD at 1 byte/elem, bf16 factors"},
      {"subspace-f16", "subspace:frac=0.15625",
       "fixed random subspace, k = 5/32 of the hidden size (Protocol Models: 160 of 1024)"},
  };
  return table;
}

bool is_structured_variant(const std::string& variant) {
  const std::string v = lower(variant);
  for (const StructuredPreset& p : structured_presets())
    if (v == p.name) return true;
  const std::string family = family_of(v);
  return std::any_of(std::begin(kFamilies), std::end(kFamilies),
                     [&](const char* f) { return family == f; });
}

std::unique_ptr<Codec> make_structured_codec(const std::string& variant) {
  if (!is_structured_variant(variant)) return nullptr;
  std::string canon;
  return build(variant, &canon);
}

}  // namespace taco::structured
