#pragma once
// Codecs with memory across the steps of a trace: error feedback (EF) and AQ-SGD's delta
// compression, both wrapped as `ef:<variant>` / `aqsgd:<variant>` (codecs/structured).
//
// State is kept per stream, in step order. A tensor that names its site has a stream identity:
// (layer, site, direction, tp_rank). One that does not (a dump whose names taco cannot read)
// is its own stream, keyed by its name, so unrelated tensors never share state; a name that
// recurs (one file per step) is one stream. A stream seen twice at one step (the same trace
// given twice, or tensors without a step) is two copies of the stream, not two steps.
//
// Error feedback (methods.md 4; Seide et al. 2014, Karimireddy et al. 2019): one residual e per
// stream, zero at the start. At each step, in step order:
//   v = x + e;  send C(v);  the receiver uses x^ = D(C(v));  e <- v - x^.
// Summed over steps, sum_t x^_t = sum_t x_t - e_T (the residuals telescope), so the error of
// the time-averaged signal is ||e_T|| / T: it vanishes as long as e stays bounded, even though
// each step's x^_t is no better than the codec alone.
//
// AQ-SGD (Wang et al., NeurIPS'22; methods.md 7b): a cache m per (stream, training sample),
// zero on the first visit (then it sends C(x), the direct quantization). At each visit:
//   send C(x - m);  both sides set m <- m + D(C(x - m));  the receiver uses x^ = m.
// Which tensors show the same sample (the rule, SampleIndex):
//   1. extra.sample_id, when the tensor has it (compared verbatim);
//   2. otherwise its name, when the same name occurs at two or more distinct steps (e.g. one
//      file per step, each holding the same named tensors of a fixed batch);
//   3. otherwise the sample occurs once: there is nothing to delta against and AQ-SGD is not
//      measured on it (the study records it as skipped, with the reason).
// A trace with no repeated sample at all (e.g. `taco synth` without --samples, whose names carry
// the step) gets no AQ-SGD rows; the study says so. `taco synth --samples K` writes
// extra.sample_id.
//
// Shapes: a sequence whose shape changes between steps is an InputError (the residual would not
// fit). Non-finite inputs are counted and treated as 0 in x (the codecs' policy).
#include "codecs/codec.hpp"
#include "core/tensor.hpp"
#include "study/metrics.hpp"

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace taco::study {

// "layer=L/site=S/direction=D/tp_rank=R": a stream identity.
std::string feedback_sequence(const TensorMeta& m);
// The stream of a tensor: feedback_sequence when it names its site, else "name=<name>".
std::string feedback_stream(const TensorInfo& t);
// The state keys of tensors given in processing (step) order: feedback_stream, plus "/copy=N"
// for the N-th repeat of a (stream, step).
std::vector<std::string> stream_keys(const std::vector<const TensorInfo*>& in_step_order);

class SampleIndex {
 public:
  SampleIndex() = default;
  // Every tensor that will be processed (metadata only) and its stream key (stream_keys).
  SampleIndex(const std::vector<TensorInfo>& infos, const std::vector<std::string>& streams);
  // The cache key (stream + sample) of a tensor whose sample occurs at least twice in its
  // stream; nullopt otherwise.
  std::optional<std::string> cache_key(const TensorInfo& t, const std::string& stream) const;
  bool any_repeated() const { return !repeated_.empty(); }

 private:
  static std::optional<std::string> sample_of(const TensorInfo& t,
                                              const std::set<std::string>& multi_step_names);
  std::set<std::string> multi_step_names_;  // names seen at >= 2 distinct steps
  std::set<std::string> repeated_;          // cache keys seen >= 2 times
};

// One step's outcome: the wire size, the encoder's counters and the state after the step.
struct FeedbackStep {
  int64_t wire_bytes = 0;
  EncodeStats stats;
  int64_t nonfinite_inputs = 0;
  double x_norm2 = 0;      // ||x||^2 (finite part)
  double state_norm2 = 0;  // EF: ||e'||^2; AQ-SGD: ||m'||^2
  double avg_err = 0;      // EF: ||e'|| / sum of ||x|| over the sequence so far; AQ-SGD: 0
  int64_t visit = 0;       // 1-based: this sequence's (EF) or sample's (AQ-SGD) step count
};

// The memory of one wrapped codec over one trace.
class FeedbackState {
 public:
  // codec: a wrapper (Codec::wrapped(); InputError otherwise).
  explicit FeedbackState(const Codec& codec);
  // One step of sequence / cache entry `key` (feedback_sequence, or SampleIndex::cache_key for
  // AQ-SGD) on x (rows x cols); writes what the receiver uses to xhat.
  FeedbackStep step(const std::string& key, const float* x, int64_t rows, int64_t cols,
                    float* xhat);
  size_t entries() const { return mem_.size(); }
  const Codec& codec() const { return *codec_; }
  FeedbackKind kind() const { return wrapped_.kind; }
  // The residual (EF) or cache (AQ-SGD) of a key; nullptr if never stepped.
  const std::vector<float>* state(const std::string& key) const;

 private:
  struct Entry {
    int64_t rows = 0, cols = 0, visits = 0;
    std::vector<float> mem;
    double sum_x_norm = 0;
  };
  const Codec* codec_;
  Wrapped wrapped_;  // codec_'s kind and the codec it runs
  std::map<std::string, Entry> mem_;
};

// The stream logic over an ordered list of tensors, as the study runs it: tensors are taken in
// (step, list order) order; EF keys by stream_keys, AQ-SGD by SampleIndex (tensors without a
// repeated sample are skipped). Results come back in list order.
struct FeedbackOutcome {
  bool measured = false;
  std::string skip_reason;
  std::string key;
  FeedbackStep step;
  std::vector<float> xhat;  // what the receiver uses
};
std::vector<FeedbackOutcome> run_feedback(const Codec& codec,
                                          const std::vector<const Tensor*>& tensors);

// One study measurement of a wrapped codec on tensor t (info: its metadata; stream: its key from
// stream_keys): keys the state (the stream, or the AQ-SGD cache key from samples), steps it, and
// sums the error of what the receiver uses against t. Throws InputError (the study records the
// tensor as skipped) for an AQ-SGD tensor without a repeated sample. xhat is scratch.
struct FeedbackMeasure {
  ErrorSums sums;
  FeedbackStep step;
  std::string key;
};
FeedbackMeasure measure_feedback(FeedbackState& state, const SampleIndex& samples,
                                 const TensorInfo& info, const std::string& stream, const Tensor& t,
                                 double tau, bool skip_nonfinite, int threads,
                                 std::vector<float>& xhat);

// Indices 0..n-1 stably sorted by step (the order feedback state must see tensors in).
std::vector<size_t> step_order(const std::vector<int64_t>& steps);

// A row of DIR/feedback.csv (docs/results-schema.md): rel_l2 of what the receiver uses against
// x at this step; state_rel = ||e'|| / ||x|| (EF) or ||m'|| / ||x|| (AQ-SGD); avg_err (EF only) =
// ||e'|| / sum of ||x|| over the sequence so far = the relative error of the time-averaged signal.
struct FeedbackRow {
  size_t file_index = 0, tensor_index = 0, variant_index = 0;
  std::string file, tensor, variant, family, key;
  TensorMeta meta;
  int64_t visit = 0;
  double rel_l2 = 0, state_rel = 0, avg_err = 0;
};
std::string feedback_csv(const std::vector<FeedbackRow>& rows);

}  // namespace taco::study
