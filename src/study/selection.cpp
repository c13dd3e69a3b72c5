#include "study/selection.hpp"

#include "core/error.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <limits>
#include <sstream>

namespace taco::study {
namespace {

// Parameters that name or describe a variant rather than define it, and the transform itself:
// two variants that differ only in these are transform twins.
// Keys as codecs/quant_codec.cpp writes them: the names, the transform, and what only exists
// or differs because of the transform (RHT sign seed, tail-group storage). An ef:/aqsgd: wrapper
// adds the inner codec's name ("inner"), whose parameters it carries as its own.
bool is_transform_or_name_key(const std::string& k) {
  return k == "variant" || k == "definition" || k == "name" || k == "inner" || k == "transform" ||
         k == "seed" || k == "sign_generator" || k == "tail_policy";
}

nlohmann::json defining_params(const nlohmann::json& p) {
  if (!p.is_object()) return p;
  nlohmann::json out = nlohmann::json::object();
  for (auto it = p.begin(); it != p.end(); ++it)
    if (!is_transform_or_name_key(it.key())) out[it.key()] = it.value();
  return out;
}

const Aggregate* find_agg(const std::vector<Aggregate>& agg, const std::string& site,
                          const std::string& direction, size_t variant) {
  for (const Aggregate& a : agg)
    if (a.site == site && a.direction == direction && a.variant_index == variant) return &a;
  return nullptr;
}

}  // namespace

std::vector<std::string> default_candidates() {
  // TACO's group-size sweep with and without the Hadamard transform, plain per-group FP8 and
  // MXFP8: the geometry choices the selection is about.
  // (taco-noh-gG is TACO without the Hadamard at group size G: every taco-gG has its twin.)
  return {"taco-g32",     "taco-g64",     "taco",         "taco-g256",     "taco-g512",
          "taco-noh-g32", "taco-noh-g64", "taco-noh",     "taco-noh-g256", "taco-noh-g512",
          "fp8-g32",      "fp8-g128",     "fp8-g128-had", "mxfp8"};
}

bool has_transform(const VariantInfo& v) {
  return !v.transform.empty() && v.transform != "none";
}

std::optional<size_t> transform_twin(const std::vector<VariantInfo>& variants, size_t i) {
  const VariantInfo& v = variants[i];
  const bool t = has_transform(v);
  const nlohmann::json def = defining_params(v.params);
  for (size_t j = 0; j < variants.size(); ++j) {
    if (j == i || has_transform(variants[j]) == t) continue;
    if (defining_params(variants[j].params) == def) return j;
  }
  return std::nullopt;
}

std::vector<HadamardEffect> hadamard_effects(const StudyResult& r,
                                             const std::vector<Aggregate>& agg,
                                             const std::string& site,
                                             const std::string& direction) {
  std::vector<HadamardEffect> out;
  for (size_t i = 0; i < r.variants.size(); ++i) {
    if (!has_transform(r.variants[i])) continue;
    const auto twin = transform_twin(r.variants, i);
    if (!twin) continue;
    const Aggregate* w = find_agg(agg, site, direction, i);
    const Aggregate* wo = find_agg(agg, site, direction, *twin);
    if (!w || !wo) continue;
    out.push_back(HadamardEffect{i, *twin, w->median_rel_l2, wo->median_rel_l2});
  }
  return out;
}

Selection select_variants(const StudyResult& r, const SelectOptions& opts) {
  TACO_REQUIRE_INPUT(opts.budget > 0 && std::isfinite(opts.budget),
                     "--budget: must be a positive number of bytes per element, got {}",
                     opts.budget);
  Selection s;
  s.budget = opts.budget;
  s.candidates = opts.candidates;
  s.tie_tolerance = opts.tie_tolerance;
  std::vector<size_t> cand;
  for (const std::string& c : opts.candidates) {
    size_t idx = r.variants.size();
    for (size_t i = 0; i < r.variants.size(); ++i)
      if (r.variants[i].name == c) idx = i;
    TACO_ASSERT(idx < r.variants.size(), "candidate '{}' was not part of the study", c);
    cand.push_back(idx);
  }
  const std::vector<Aggregate> agg = aggregate(r);
  std::vector<SiteKey> sites;
  for (const Aggregate& a : agg)
    if (sites.empty() || sites.back() != SiteKey{a.site, a.direction})
      sites.emplace_back(a.site, a.direction);
  for (const SiteKey& site : sites) {
    // The lowest median among the candidates that fit, then the cheapest within the tolerance.
    double lowest = std::numeric_limits<double>::infinity();
    std::vector<std::pair<size_t, const Aggregate*>> fit;  // (candidate rank, aggregate)
    for (size_t k = 0; k < cand.size(); ++k) {
      const Aggregate* a = find_agg(agg, site.first, site.second, cand[k]);
      // Small slack: bytes/elem is a ratio of integers, and budgets are typed in decimal.
      if (!a || a->mean_bytes_per_elem > opts.budget * (1 + 1e-12)) continue;
      fit.emplace_back(k, a);
      lowest = std::min(lowest, a->median_rel_l2);
    }
    const Aggregate* best = nullptr;
    for (const auto& [k, a] : fit) {
      if (a->median_rel_l2 > lowest * (1 + opts.tie_tolerance)) continue;
      if (!best || a->mean_bytes_per_elem < best->mean_bytes_per_elem) best = a;  // first wins ties
    }
    if (!best) {
      s.unmet.push_back(site);
      continue;
    }
    Choice c;
    c.site = site.first;
    c.direction = site.second;
    c.variant = r.variants[best->variant_index].name;
    c.rel_l2 = best->median_rel_l2;
    c.bytes_per_elem = best->mean_bytes_per_elem;
    c.tensors = best->tensors;
    // The transform's effect for the chosen variant: with = the one with the transform.
    for (const HadamardEffect& e : hadamard_effects(r, agg, site.first, site.second))
      if (e.with == best->variant_index || e.without == best->variant_index) c.hadamard = e;
    s.choices.push_back(c);
  }
  return s;
}

nlohmann::json selection_json(const Selection& s, const StudyResult& r) {
  nlohmann::json choices = nlohmann::json::array();
  for (const Choice& c : s.choices) {
    nlohmann::json o = {
        {"site", c.site},     {"direction", c.direction},           {"variant", c.variant},
        {"rel_l2", c.rel_l2}, {"bytes_per_elem", c.bytes_per_elem}, {"tensors", c.tensors}};
    if (c.hadamard) {
      o["hadamard_effect"] = {{"with", r.variants[c.hadamard->with].name},
                              {"without", r.variants[c.hadamard->without].name},
                              {"with_rel_l2", c.hadamard->with_rel_l2},
                              {"without_rel_l2", c.hadamard->without_rel_l2},
                              {"ratio", c.hadamard->ratio()}};
    } else {
      o["hadamard_effect"] = nullptr;
    }
    choices.push_back(o);
  }
  nlohmann::json unmet = nlohmann::json::array();
  for (const SiteKey& k : s.unmet) unmet.push_back({{"site", k.first}, {"direction", k.second}});
  return {{"budget_bytes_per_elem", s.budget},
          {"statistic", "median rel_l2 over the site's tensors"},
          {"tie_tolerance", s.tie_tolerance},
          {"candidates", s.candidates},
          {"choices", choices},
          {"unmet", unmet}};
}

std::string format_selection(const Selection& s, const StudyResult& r) {
  std::ostringstream os;
  os << fmt::format("\nselection (budget {} bytes/elem, lowest median rel_l2 per site)\n",
                    s.budget);
  for (const Choice& c : s.choices) {
    os << fmt::format("  {:<12} {:<4} -> {:<20} rel_l2 {:.4e} at {:.5g} bytes/elem", c.site,
                      c.direction, c.variant, c.rel_l2, c.bytes_per_elem);
    if (c.hadamard)
      os << fmt::format("; Hadamard {} by {:.2f}% ({} vs {})",
                        c.hadamard->ratio() <= 1 ? "helps" : "hurts",
                        std::fabs(1 - c.hadamard->ratio()) * 100, r.variants[c.hadamard->with].name,
                        r.variants[c.hadamard->without].name);
    os << "\n";
  }
  for (const SiteKey& k : s.unmet)
    os << fmt::format("  {:<12} {:<4} -> no candidate within the budget\n", k.first, k.second);
  return os.str();
}

std::map<SiteKey, std::string> load_selection(const std::string& path) {
  std::ifstream in(path);
  TACO_REQUIRE_INPUT(bool(in), "--config {}: cannot open", path);
  nlohmann::json j;
  try {
    in >> j;
  } catch (const nlohmann::json::parse_error& e) {
    // (e.what() may quote the offending bytes, which need not be text.)
    throw_input_error("--config {}: not valid JSON (syntax error at byte {})", path, e.byte);
  } catch (const nlohmann::json::exception&) {
    throw_input_error("--config {}: not valid JSON", path);
  }
  TACO_REQUIRE_INPUT(j.is_object() && j.contains("choices") && j["choices"].is_array(),
                     "--config {}: not a selection.json (no \"choices\" list)", path);
  std::map<SiteKey, std::string> out;
  size_t i = 0;
  for (const auto& c : j["choices"]) {
    TACO_REQUIRE_INPUT(
        c.is_object() && c.contains("site") && c["site"].is_string() && c.contains("direction") &&
            c["direction"].is_string() && c.contains("variant") && c["variant"].is_string() &&
            !c["variant"].get<std::string>().empty(),
        "--config {}: choices[{}] needs string site, direction and variant", path, i);
    const SiteKey key{c["site"].get<std::string>(), c["direction"].get<std::string>()};
    TACO_REQUIRE_INPUT(!out.count(key), "--config {}: choices[{}] repeats site {} direction {}",
                       path, i, key.first, key.second);
    out[key] = c["variant"].get<std::string>();
    ++i;
  }
  TACO_REQUIRE_INPUT(!out.empty(), "--config {}: \"choices\" is empty", path);
  return out;
}

}  // namespace taco::study
