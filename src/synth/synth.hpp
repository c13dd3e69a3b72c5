#pragma once
// Synthetic TP traces: the tensors one training step puts on the TP collectives, per step,
// layer, site, direction and rank, drawn from a documented distribution (dist.hpp).
//
// Determinism: every value is a pure function of (seed, the tensor's coordinates, the
// element index) through Philox4x32-10 and samplers that use only IEEE-exact operations
// (+ - * / sqrt and the fixed-recipe log/exp of det_math.hpp). The same options give the same
// bits on any machine and any thread count. Bump kGeneratorVersion whenever that changes.
#include "core/dtype.hpp"
#include "core/tensor.hpp"
#include "synth/dist.hpp"

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace taco::synth {

inline constexpr const char* kGeneratorVersion = "taco-synth/1";

struct SynthOptions {
  int64_t hidden = 1024;
  int64_t tokens = 2048;  // sequence tokens per step (micro-batch x sequence length)
  int64_t layers = 2;
  int64_t tp = 2;
  std::vector<int64_t> steps{0};
  std::vector<std::string> sites{"attn_out", "mlp_out", "attn_qkv", "mlp_fc1"};
  std::vector<std::string> directions{"fwd", "bwd"};
  bool sequence_parallel = false;
  DistSpec dist = parse_dist("realistic");
  uint64_t seed = 1;
  DType store = DType::BF16;  // values are rounded to this (BF16, F16 or F32)
  // Training samples (0: off). With K > 0 the batch at step s is sample s mod K (epochs over a
  // fixed data set), written as extra.sample_id: what AQ-SGD keys its cache by. A sample's
  // tensors at two steps share their values and outlier tokens except for a fresh part of
  // relative size `drift` (the weights moved): x = sqrt(1 - drift^2) z_sample + drift z_step.
  int64_t samples = 0;
  double drift = 0.1;
  int threads = 0;  // OpenMP threads, 0 = default; never changes the values
};

// One tensor of the trace, before its values are drawn.
struct TensorPlan {
  std::string name;            // "step0/layer1/attn_out/fwd/rank0"
  std::vector<int64_t> shape;  // [tokens, hidden], or [tokens/tp, hidden] for all-gather shards
  int64_t token_offset = 0;    // global index of the first row (all-gather shards)
  TensorMeta meta;
};

// Checks the options (InputError naming the flag) and lists the tensors in write order:
// step, direction, layer, site, rank. Only tensors that a TP collective carries:
//   without SP: fwd attn_out/mlp_out (all_reduce of row-parallel partial sums),
//               bwd attn_qkv/mlp_fc1 (all_reduce of column-parallel input-gradient partials);
//   with SP:    the same as reduce_scatter, plus all_gather shards [tokens/tp, hidden] of
//               fwd attn_qkv/mlp_fc1 inputs and bwd attn_out/mlp_out output gradients.
std::vector<TensorPlan> plan_trace(const SynthOptions& o);

// Draws one tensor's values (rounded to o.store; Tensor::dtype = o.store).
Tensor synthesize_tensor(const SynthOptions& o, const TensorPlan& p);

// The layer's outlier channels (sorted) and the step's outlier tokens (sorted, global
// indices) for a recipe: what synthesize_tensor scales. Exposed for tests and docs.
std::vector<int64_t> outlier_channels(const SynthOptions& o, const Recipe& r, int64_t layer);
std::vector<int64_t> outlier_tokens(const SynthOptions& o, const Recipe& r, int64_t step);

// Samplers, exposed for the distribution tests. `index` selects the draw; each is a pure
// function of (seed, stream, index).
std::pair<double, double> sample_gaussian_pair(uint64_t seed, uint64_t stream, uint64_t index);
double sample_laplace(uint64_t seed, uint64_t stream, uint64_t index);               // b = 1
double sample_student_t(uint64_t seed, uint64_t stream, uint64_t index, double nu);  // scale 1

// The canonical command line that reproduces a trace (for provenance).
std::string synth_command_line(const SynthOptions& o, const std::string& out);

struct SynthSummary {
  size_t tensors = 0;
  int64_t elements = 0;
  double generate_seconds = 0;  // drawing values only
  double total_seconds = 0;     // drawing, compressing and writing
};

// Draws every planned tensor and writes the trace atomically (io/TraceWriter), with
// provenance attributes: command, seed, generator, dist, plus `extra_provenance`.
SynthSummary write_synth_trace(const SynthOptions& o, const std::string& out,
                               const std::map<std::string, std::string>& extra_provenance = {});

}  // namespace taco::synth
