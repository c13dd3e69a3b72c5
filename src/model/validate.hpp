#pragma once
// The model against what was measured: every collective of `taco comm` records (plain and
// compressed, each size and transport) and every row of a layer benchmark record.
//
// Calibration and prediction are kept apart and labelled:
//   * per (transport, ranks): the alpha-beta lines are fitted to the plain all-reduce rows
//     (their residuals are in-sample; a leave-one-out refit gives each row's out-of-sample
//     error); other plain collectives get one factor each from their own plain rows;
//   * the executor's overlap efficiency is fitted to the measured overlap of the pipelined
//     compressed rows of one transport (default nvlink): how much codec time they hid
//     (t_comm + t_codec - t) against what an interference-free pipeline of the same measured
//     parts would hide;
//   * every compressed row is then predicted from the plain fit of its transport, the codec
//     kernels' measured GB/s (`taco bench`) and the executor parameters: its error is a
//     prediction error, except for the overlap fit on its own transport.
#include "model/inputs.hpp"
#include "model/links.hpp"

#include <optional>
#include <string>
#include <vector>

namespace taco::model {

struct TransportFit {
  std::string transport;
  int nranks = 0;
  LineFit all_reduce;  // lines fitted to the plain all-reduce rows
  int points = 0;
  std::map<Coll, double>
      factor;  // other plain collectives at one size: measured / all-reduce-derived
  std::map<Coll, int> factor_points;
  std::map<Coll, LineFit> own;  // other plain collectives at >= 2 sizes: their own lines
  std::map<Coll, int> own_points;
  LinkTier tier() const;  // the fit as a tier (basis "measured")
};

struct ValidationRow {
  std::string source;  // file and index
  std::string
      kind;  // comm-plain | comm-compressed | layer-compute | layer-codec | layer-step | layer-dist
  std::string config;     // one readable line
  std::string transport;  // or the GPU for layer rows
  double size = 0;        // bytes (per-rank buffer) or 0
  double measured_us = 0, predicted_us = 0;
  std::string basis;                       // "fit (in-sample)", "predicted", ...
  std::optional<double> loo_predicted_us;  // plain rows: without the row in the fit
  std::optional<double> wire_measured_us, wire_predicted_us, codec_measured_us, codec_predicted_us;
  double err() const { return predicted_us / measured_us - 1; }
};

struct ValidationSummary {
  std::string kind, transport;
  int n = 0;
  double median_abs_err = 0, max_abs_err = 0;
  int within_10pct = 0;
};

struct ValidationReport {
  std::vector<TransportFit> fits;
  ExecutorParams exec;
  std::string exec_basis;
  std::vector<ValidationRow> rows;
  std::vector<ValidationSummary> summary;
  std::vector<std::string> notes;  // rows left out and why
};

struct ValidationOptions {
  int max_lines = 2;
  std::string fit_overlap_on =
      "nvlink";         // transport whose pipelined rows fit the executor; "" = keep links'
  ExecutorParams exec;  // starting point (the links file's)
  std::string layer_tier = "nvlink-h200";  // tier of the layer benchmark's dist rows
  double peak_tflops = 790, compute_efficiency = 0.5, causal_attention = 0.5;
};

ValidationReport validate(const std::vector<CommRecord>& comm, const CodecTable* bench,
                          const LayerRecord* layer, const LinkConfig& links,
                          const ValidationOptions& opt);

// Fits per (transport, ranks) from the plain rows of the records (used by validate and by the
// predictions' --comm recalibration).
std::vector<TransportFit> fit_transports(const std::vector<CommRecord>& comm, int max_lines);

}  // namespace taco::model
