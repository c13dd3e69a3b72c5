#pragma once
// The study engine behind `taco study`: for every tensor of the inputs and every variant
// (codec), encode, decode and measure (metrics.hpp); optionally simulate compressed
// collectives over the TP ranks of each (step, layer, site, direction) (sim_collectives.hpp).
// Tensors are read one at a time (or one TP group at a time when collectives are asked for),
// the next one while the current one is measured, so memory stays bounded by two tensors
// (groups) plus scratch, not by the file.
//
// Results are deterministic: they do not depend on the thread count (metrics combine fixed
// blocks in a fixed order; rows are sorted by input order).
#include "codecs/codec.hpp"
#include "codecs/variant_facts.hpp"
#include "collectives/sim_collectives.hpp"
#include "core/tensor.hpp"
#include "io/tensor_source.hpp"
#include "study/error_feedback.hpp"
#include "study/histogram.hpp"
#include "study/metrics.hpp"

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace taco::study {

using CodecFactory = std::function<std::unique_ptr<Codec>(const std::string& variant)>;
using SiteKey = std::pair<std::string, std::string>;  // (site, direction)

// --filter "site=attn_out|mlp_out,direction=fwd": comma-separated key=value terms, all of which
// must hold; '|' separates alternatives. Keys: site, direction, collective, layer, step,
// tp_rank, name, file (the file's path, its name, or the input argument it came from).
struct TensorFilter {
  std::vector<std::pair<std::string, std::vector<std::string>>> terms;
  bool matches(const TensorInfo& t, const std::string& file = "",
               const std::string& source = "") const;
};
TensorFilter parse_filter(const std::string& spec);  // InputError naming --filter

// A variant as the results describe it: the user's spelling, the codec's parameters and the
// descriptive columns taken from them (empty when the codec does not say).
struct VariantInfo {
  std::string name;
  nlohmann::json params;
  std::string family, elem_format, scale_format, granularity, transform;
  std::optional<int64_t> group_size;
  VariantFacts facts;  // results.json "variant_facts"
};
VariantInfo describe_variant(const std::string& name, const Codec& codec);

struct Progress {
  int64_t done = 0, total = 0;  // tensors
  std::string tensor;           // the one just finished
  int64_t elements = 0;         // numel x variants processed so far
  double seconds = 0;           // since the start, without the collective simulation
};

struct StudyOptions {
  std::vector<std::string> variants;        // run on every tensor
  std::map<SiteKey, std::string> per_site;  // --config: one more variant per (site, direction)
  CodecFactory codec_factory;               // required (make_codec, or the GPU one)
  int threads = 1;
  uint64_t seed = 0;  // derived TP ranks (sim::derive_rank)
  TensorFilter filter;
  int64_t max_tensors = -1;  // < 0: all
  double tau_rel = 1e-3;     // max_rel_err over |x| > tau_rel * absmax
  bool histograms = true;
  // Simulated collectives (empty: none). A group whose tensors name their collective gets only
  // the algorithms that take its inputs: partial sums (all_reduce, reduce_scatter) ->
  // one_shot/two_shot/ring/reduce_scatter, shards (all_gather) -> all_gather; without that
  // metadata, every algorithm asked for. An algorithm no group can take is an InputError.
  std::vector<Collective> collectives;
  std::vector<int> tp;  // TP degrees; empty: the ranks in the trace
  // Per source: the input argument it came from (a directory given on the command line, or the
  // file itself); the `source` column. Empty: each file's own path.
  std::vector<std::string> source_labels;
  std::function<void(const Progress&)> progress;  // may be empty
  // Called once per tensor read, before its codecs run (extra per-tensor analyses, e.g. the
  // subspace energies of weights.hpp's StructureCollector). May be empty.
  std::function<void(const Tensor&)> on_tensor;
};

// One (tensor, variant) measurement: a row of results.csv.
struct TensorRow {
  size_t file_index = 0, tensor_index = 0, variant_index = 0;
  std::string tensor;
  std::vector<int64_t> shape;
  int64_t numel = 0;
  DType in_dtype = DType::F32;
  TensorMeta meta;
  ErrorMetrics metrics;
  int64_t nan_count = 0, inf_count = 0, saturated = 0, wire_bytes = 0;
  // Blocks the codec clips or flushes to (almost) zero: outside its range (codecs/range.hpp).
  // -1 where the codec has no range (structured codecs, error feedback).
  int64_t out_of_range = -1;
  double bytes_per_elem() const { return numel ? double(wire_bytes) / double(numel) : 0.0; }
  double compression_ratio() const {
    return wire_bytes ? double(numel) * double(dtype_size(in_dtype)) / double(wire_bytes) : 0.0;
  }
};

// One simulated collective: a row of collectives.csv.
struct CollectiveRow {
  size_t file_index = 0, tensor_index = 0, variant_index = 0;  // first tensor of the group
  std::string tensor;
  TensorMeta meta;
  Collective algorithm = sim::kOneShot;
  int tp_size = 0, trace_ranks = 0, quantizations = 0;
  int64_t numel = 0;  // per rank input
  double bytes_sent_per_rank = 0;
  ErrorMetrics metrics;
};

// A (tensor, variant) or group that could not be measured, and why (e.g. a tile codec on a
// shape it does not take).
struct Skipped {
  std::string file, tensor, variant, reason;
};

struct StudyResult {
  std::vector<std::string> files;
  std::vector<std::string> sources;  // per file: the input argument it came from
  std::vector<VariantInfo> variants;
  std::vector<TensorRow> rows;  // sorted by (file, tensor, variant)
  std::vector<CollectiveRow> collective_rows;
  std::map<SiteKey, Log2Histogram> histograms;
  std::vector<Skipped> skipped;
  // ef:/aqsgd: variants, one row per measured step in processing order (error_feedback.hpp).
  std::vector<FeedbackRow> feedback_rows;
  int64_t tensors = 0, elements = 0;  // elements: numel x variants measured
  double seconds = 0;                 // the whole run
  double collective_seconds = 0;      // of which simulating collectives
};

// sources[i] is read in order; their paths name the files in the results.
StudyResult run_study(const std::vector<TensorSource*>& sources, const StudyOptions& opts);

// Per (site, direction, variant) over tensors: for the printed summary and --select.
struct Aggregate {
  std::string site, direction;
  size_t variant_index = 0;
  int64_t tensors = 0;
  double median_rel_l2 = 0, p99_rel_l2 = 0, mean_rel_l2 = 0, mean_bytes_per_elem = 0,
         median_snr_db = 0;
};
// Sorted by (site, direction), then median rel_l2 (ties: bytes/elem, then variant order).
std::vector<Aggregate> aggregate(const StudyResult& r);

// Percentile with linear interpolation between order statistics (NumPy's default):
// position p * (n - 1) in the sorted values. n must be > 0.
double percentile(std::vector<double> v, double p);

}  // namespace taco::study
