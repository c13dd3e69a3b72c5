#include "synth/dist.hpp"

#include "core/error.hpp"

#include <fmt/format.h>

#include <cerrno>
#include <cmath>
#include <cstdlib>

namespace taco::synth {
namespace {

constexpr ParamKind kPos = ParamKind::Positive, kCount = ParamKind::Count,
                    kProb = ParamKind::Probability, kFactor = ParamKind::Factor,
                    kNu = ParamKind::NuFinite;

std::vector<DistInfo> make_catalog() {
  return {
      {"gaussian", "N(0, sigma^2)", {{"sigma", 1.0, kPos, "standard deviation"}}},
      {"laplace",
       "Laplace(0, b): exponential tails, std = b*sqrt(2), kurtosis 6",
       {{"b", 1.0, kPos, "scale"}}},
      {"student_t",
       "scale * t(nu): power-law tails, kurtosis 3 + 6/(nu-4) for nu > 4",
       {{"nu", 4.0, kPos, "degrees of freedom"},
        {"scale", 1.0, kPos, "scale (std = scale*sqrt(nu/(nu-2)))"}}},
      {"outlier_channels",
       "N(0, sigma^2) with `count` channels per layer scaled by factors log-uniform in [min, max] "
       "(\"massive activations\"; the same channels in every step, site and rank of a layer)",
       {{"sigma", 1.0, kPos, "standard deviation of ordinary channels"},
        {"count", 8.0, kCount, "outlier channels per layer"},
        {"min", 100.0, kFactor, "smallest outlier factor"},
        {"max", 1000.0, kFactor, "largest outlier factor"}}},
      {"outlier_tokens",
       "N(0, sigma^2) with `count` tokens per step scaled by factors log-uniform in [min, max] "
       "(the same tokens in every layer, site and rank of a step)",
       {{"sigma", 1.0, kPos, "standard deviation of ordinary tokens"},
        {"count", 8.0, kCount, "outlier tokens per step"},
        {"min", 10.0, kFactor, "smallest outlier factor"},
        {"max", 100.0, kFactor, "largest outlier factor"}}},
      {"gradient",
       "Student-t(nu) scaled to a target rms: dense, near-zero, heavy-tailed",
       {{"rms", 1e-7, kPos, "target root mean square"},
        {"nu", 4.0, kNu, "degrees of freedom (> 2)"}}},
      {"sparse",
       "N(0, sigma^2) with each element zero with probability p",
       {{"p", 0.9, kProb, "probability of an exact zero"},
        {"sigma", 1.0, kPos, "std of the nonzeros"}}},
      {"realistic",
       "per site and direction: forward activations are Gaussian plus outlier channels "
       "(act_sigma for row-parallel outputs attn_out/mlp_out, ln_sigma for the layernorm outputs "
       "that --sp all-gathers before attn_qkv/mlp_fc1); backward gradients are Student-t plus "
       "outlier "
       "tokens, at rms grad_rms over all tokens of the step",
       {{"act_sigma", 0.5, kPos, "std of forward row-parallel partial outputs"},
        {"ln_sigma", 1.0, kPos, "std of forward all-gathered layernorm outputs (--sp)"},
        {"channels", 4.0, kCount, "outlier channels per layer (forward)"},
        {"ch_min", 100.0, kFactor, "smallest outlier channel factor"},
        {"ch_max", 1000.0, kFactor, "largest outlier channel factor"},
        {"grad_rms", 1e-7, kPos, "rms of backward gradients (outlier tokens included)"},
        {"nu", 4.0, kNu, "degrees of freedom of backward gradients (> 2)"},
        {"tokens", 8.0, kCount, "outlier tokens per step (backward)"},
        {"tok_min", 10.0, kFactor, "smallest outlier token factor"},
        {"tok_max", 100.0, kFactor, "largest outlier token factor"}}},
  };
}

const DistInfo& find_dist(const std::string& name) {
  for (const auto& d : dist_catalog())
    if (d.name == name) return d;
  std::string names;
  for (const auto& d : dist_catalog()) names += (names.empty() ? "" : ", ") + d.name;
  throw_input_error("--dist: unknown distribution '{}' (known: {})", name, names);
}

void check_param(const std::string& dist, const ParamInfo& p, double v) {
  const char* need = "";
  bool ok = std::isfinite(v);
  switch (p.kind) {
    case ParamKind::Positive:
      ok = ok && v > 0;
      need = "> 0";
      break;
    case ParamKind::Count:
      ok = ok && v >= 0 && v == std::floor(v) && v <= 1e12;
      need = "a whole number >= 0";
      break;
    case ParamKind::Probability:
      ok = ok && v >= 0 && v < 1;
      need = "in [0, 1)";
      break;
    case ParamKind::Factor:
      ok = ok && v >= 1;
      need = ">= 1";
      break;
    case ParamKind::NuFinite:
      ok = ok && v > 2;
      need = "> 2";
      break;
    default:
      throw_error("unhandled parameter kind {}", int(p.kind));
  }
  TACO_REQUIRE_INPUT(ok, "--dist {}: {}={} must be {}", dist, p.key, v, need);
}

double parse_number(const std::string& dist, const std::string& key, const std::string& text) {
  errno = 0;
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  TACO_REQUIRE_INPUT(!text.empty() && end == text.c_str() + text.size() && errno == 0,
                     "--dist {}: {}='{}' is not a number", dist, key, text);
  return v;
}

}  // namespace

const std::vector<DistInfo>& dist_catalog() {
  static const std::vector<DistInfo> catalog = make_catalog();  // immutable after first use
  return catalog;
}

double DistSpec::get(const std::string& key) const {
  for (const auto& [k, v] : params)
    if (k == key) return v;
  throw_error("distribution '{}' has no parameter '{}'", name, key);
}

std::string DistSpec::canonical() const {
  std::string s = name;
  for (size_t i = 0; i < params.size(); ++i)
    s += fmt::format("{}{}={}", i == 0 ? ":" : ",", params[i].first, params[i].second);
  return s;
}

DistSpec parse_dist(const std::string& text) {
  const size_t colon = text.find(':');
  DistSpec d;
  d.name = text.substr(0, colon);
  const DistInfo& info = find_dist(d.name);
  for (const auto& p : info.params) d.params.emplace_back(p.key, p.default_value);
  std::vector<bool> seen(info.params.size(), false);
  if (colon != std::string::npos) {
    const std::string rest = text.substr(colon + 1);
    TACO_REQUIRE_INPUT(!rest.empty(), "--dist {}: empty parameter list after ':'", d.name);
    size_t pos = 0;
    while (pos <= rest.size()) {
      const size_t comma = std::min(rest.find(',', pos), rest.size());
      const std::string item = rest.substr(pos, comma - pos);
      const size_t eq = item.find('=');
      TACO_REQUIRE_INPUT(eq != std::string::npos && eq > 0,
                         "--dist {}: expected key=value, got '{}'", d.name, item);
      const std::string key = item.substr(0, eq);
      size_t idx = info.params.size();
      for (size_t i = 0; i < info.params.size(); ++i)
        if (info.params[i].key == key) idx = i;
      if (idx == info.params.size()) {
        std::string keys;
        for (const auto& p : info.params) keys += (keys.empty() ? "" : ", ") + p.key;
        throw_input_error("--dist {}: unknown parameter '{}' (parameters: {})", d.name, key, keys);
      }
      TACO_REQUIRE_INPUT(!seen[idx], "--dist {}: parameter '{}' given twice", d.name, key);
      seen[idx] = true;
      d.params[idx].second = parse_number(d.name, key, item.substr(eq + 1));
      pos = comma + 1;
    }
  }
  for (size_t i = 0; i < info.params.size(); ++i)
    check_param(d.name, info.params[i], d.params[i].second);
  // Ranges: the lower end must not exceed the upper end.
  for (const auto& [lo, hi] : {std::pair<const char*, const char*>{"min", "max"},
                               {"ch_min", "ch_max"},
                               {"tok_min", "tok_max"}}) {
    bool has_lo = false, has_hi = false;
    for (const auto& p : info.params) {
      has_lo = has_lo || p.key == lo;
      has_hi = has_hi || p.key == hi;
    }
    if (has_lo && has_hi)
      TACO_REQUIRE_INPUT(d.get(lo) <= d.get(hi), "--dist {}: {}={} exceeds {}={}", d.name, lo,
                         d.get(lo), hi, d.get(hi));
  }
  return d;
}

Recipe recipe_for(const DistSpec& d, const TensorMeta& meta) {
  Recipe r;
  const auto gaussian = [&](double sigma) {
    r.base = Base::Gaussian;
    r.scale = sigma;
  };
  // Student-t(nu) has variance nu / (nu - 2): scale so the rms is `rms`.
  const auto t_with_rms = [&](double rms, double nu) {
    r.base = Base::StudentT;
    r.nu = nu;
    r.scale = rms * std::sqrt((nu - 2.0) / nu);
  };
  if (d.name == "gaussian") {
    gaussian(d.get("sigma"));
  } else if (d.name == "laplace") {
    r.base = Base::Laplace;
    r.scale = d.get("b");
  } else if (d.name == "student_t") {
    r.base = Base::StudentT;
    r.nu = d.get("nu");
    r.scale = d.get("scale");
  } else if (d.name == "outlier_channels") {
    gaussian(d.get("sigma"));
    r.outlier_channels = int64_t(d.get("count"));
    r.channel_min = d.get("min");
    r.channel_max = d.get("max");
  } else if (d.name == "outlier_tokens") {
    gaussian(d.get("sigma"));
    r.outlier_tokens = int64_t(d.get("count"));
    r.token_min = d.get("min");
    r.token_max = d.get("max");
  } else if (d.name == "gradient") {
    t_with_rms(d.get("rms"), d.get("nu"));
  } else if (d.name == "sparse") {
    gaussian(d.get("sigma"));
    r.p_zero = d.get("p");
  } else if (d.name == "realistic") {
    if (meta.direction == "fwd") {
      const bool row_parallel_output = meta.site == "attn_out" || meta.site == "mlp_out";
      gaussian(row_parallel_output ? d.get("act_sigma") : d.get("ln_sigma"));
      r.outlier_channels = int64_t(d.get("channels"));
      r.channel_min = d.get("ch_min");
      r.channel_max = d.get("ch_max");
    } else if (meta.direction == "bwd") {
      t_with_rms(d.get("grad_rms"), d.get("nu"));
      r.outlier_tokens = int64_t(d.get("tokens"));
      r.token_min = d.get("tok_min");
      r.token_max = d.get("tok_max");
      r.token_rms_normalized = true;
    } else {
      throw_error("realistic: direction '{}' is neither fwd nor bwd", meta.direction);
    }
  } else {
    throw_error("distribution '{}' has no recipe", d.name);
  }
  return r;
}

}  // namespace taco::synth
