#pragma once
// --select: the toolkit's reading of TACO's "data-driven reshaping" (methods.md §1.4, [open]).
// Per (site, direction), among candidate variants whose measured mean bytes/elem fits a budget,
// pick the one with the lowest median rel_l2 over that site's tensors. Medians within a relative
// tie_tolerance of the lowest count as equal (e.g. TACO with and without its adaptive scale,
// which differ only by fp32 rounding): among those the fewest bytes win, then candidate order. The
// choice is written to selection.json, which `taco study --config` applies. Each choice also says
// whether the Hadamard transform helps there: the rel_l2 ratio of the transform variant to its
// no-transform twin (e.g. taco vs taco-noh).
#include "study/study.hpp"

#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace taco::study {

// Variants evaluated when --select is given without --candidates.
std::vector<std::string> default_candidates();

// Whether a variant applies a transform (params "transform" present and not "none").
bool has_transform(const VariantInfo& v);
// The variant among `variants` that equals v[i] in every parameter except the transform, with
// the opposite transform state (taco <-> taco-noh). None if there is no such variant.
std::optional<size_t> transform_twin(const std::vector<VariantInfo>& variants, size_t i);

struct HadamardEffect {
  size_t with = 0, without = 0;  // variant indices
  double with_rel_l2 = 0, without_rel_l2 = 0;
  double ratio() const { return without_rel_l2 > 0 ? with_rel_l2 / without_rel_l2 : 0.0; }
};
// Every (transform variant, twin) pair measured at (site, direction), by median rel_l2.
std::vector<HadamardEffect> hadamard_effects(const StudyResult& r,
                                             const std::vector<Aggregate>& agg,
                                             const std::string& site, const std::string& direction);

struct SelectOptions {
  double budget = 1.0625;               // bytes/elem, inclusive
  std::vector<std::string> candidates;  // variant names (must be among the study's variants)
  double tie_tolerance = 1e-3;          // relative: medians this close to the best tie
};

struct Choice {
  std::string site, direction, variant;
  double rel_l2 = 0, bytes_per_elem = 0;
  int64_t tensors = 0;
  std::optional<HadamardEffect> hadamard;
};

struct Selection {
  double budget = 0, tie_tolerance = 0;
  std::vector<std::string> candidates;
  std::vector<Choice> choices;
  std::vector<SiteKey> unmet;  // sites where no candidate fits the budget
};

Selection select_variants(const StudyResult& r, const SelectOptions& opts);
nlohmann::json selection_json(const Selection& s, const StudyResult& r);
std::string format_selection(const Selection& s, const StudyResult& r);

// Reads a selection.json written by --select: (site, direction) -> variant.
// InputError naming the file on any problem.
std::map<SiteKey, std::string> load_selection(const std::string& path);

}  // namespace taco::study
