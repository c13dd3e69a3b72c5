#pragma once
// Distributions for synthetic TP traces: parsing of `--dist NAME[:key=value,...]`, the
// catalog (names, parameters, defaults, meaning: the source of --help and docs/synth.md), and
// the per-tensor Recipe a distribution resolves to for a given site and direction.
#include "core/tensor.hpp"

#include <string>
#include <utility>
#include <vector>

namespace taco::synth {

// A parsed distribution: its name and every parameter (defaults filled in, catalog order).
struct DistSpec {
  std::string name = "realistic";
  std::vector<std::pair<std::string, double>> params;

  double get(const std::string& key) const;  // Error if the key is not a parameter
  std::string canonical() const;             // "laplace:b=0.5", every parameter spelled out
};

// What a parameter must satisfy.
enum class ParamKind {
  Positive,     // > 0, finite
  Count,        // integer >= 0
  Probability,  // in [0, 1)
  Factor,       // >= 1, finite
  NuFinite,     // > 2 (finite variance: needed to hit a target rms)
};

struct ParamInfo {
  std::string key;
  double default_value;
  ParamKind kind;
  std::string meaning;
};

struct DistInfo {
  std::string name;
  std::string summary;
  std::vector<ParamInfo> params;
};

const std::vector<DistInfo>& dist_catalog();

// Parses "NAME" or "NAME:key=value,key=value". InputError naming --dist and the bad part.
DistSpec parse_dist(const std::string& text);

// The base law of every element before outlier factors and zeroing.
enum class Base { Gaussian, Laplace, StudentT };

// How one tensor is drawn: x[t, c] = base(scale, nu) * channel_factor[c] * token_factor[t],
// then set to 0 with probability p_zero. Outlier channels are chosen per (seed, layer) and
// shared by all steps, sites, directions and ranks of that layer; outlier tokens are chosen
// per (seed, step) over the global token index and shared by all layers, sites and ranks.
struct Recipe {
  Base base = Base::Gaussian;
  double scale = 1;  // Gaussian sigma, Laplace b, Student-t scale
  double nu = 0;     // Student-t degrees of freedom
  int64_t outlier_channels = 0;
  double channel_min = 1, channel_max = 1;  // factors, log-uniform in [min, max]
  int64_t outlier_tokens = 0;
  double token_min = 1, token_max = 1;
  // Divide the scale by the rms of the step's token factors (over all tokens of the step, so
  // all-gather shards stay slices of one sequence): `scale` is then the whole step's rms
  // rather than that of the ordinary tokens.
  bool token_rms_normalized = false;
  double p_zero = 0;
};

// Resolves a distribution for one tensor (only `realistic` depends on site and direction).
Recipe recipe_for(const DistSpec& d, const TensorMeta& meta);

}  // namespace taco::synth
