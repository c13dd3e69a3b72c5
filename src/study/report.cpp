#include "study/report.hpp"

#include "core/atomic_file.hpp"
#include "core/csv.hpp"
#include "core/error.hpp"
#include "core/provenance.hpp"
#include "study/selection.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>
#include <set>
#include <sstream>

namespace taco::study {
namespace {

// results-schema.md: numbers are plain decimal (%.9g), empty for "not applicable".
using csv::known;
using csv::num;
std::string num(const std::optional<double>& v) {
  return v ? num(*v) : std::string();
}

std::string csv_line(const std::vector<std::string>& fields) {
  std::string line;
  for (size_t i = 0; i < fields.size(); ++i) {
    if (i) line += ',';
    line += csv::field(fields[i]);
  }
  return line + "\n";
}

nlohmann::json jnum(const std::optional<double>& v) {
  // JSON has no NaN/Inf: those become null (the CSV keeps "inf"/"nan").
  if (!v || !std::isfinite(*v)) return nullptr;
  return *v;
}
nlohmann::json jknown(int64_t v) {
  return v < 0 ? nlohmann::json(nullptr) : nlohmann::json(v);
}

const std::vector<std::string> kResultColumns = {
    "file", "tensor", "layer", "site", "direction", "collective", "tp_rank", "tp_size", "step",
    "shape", "numel", "in_dtype", "variant", "family", "elem_format", "scale_format", "granularity",
    "group_size", "transform", "rel_l2", "mse", "snr_db", "cosine", "max_abs_err", "max_rel_err",
    "underflow_frac", "saturation_frac", "nan_count", "inf_count", "wire_bytes", "bytes_per_elem",
    "compression_ratio",
    // appended after the first schema version
    "calc_diff", "source", "out_of_range_groups"};

const std::vector<std::string> kCollectiveColumns = {
    "layer", "site", "direction", "step", "variant", "algorithm", "tp_size", "quantizations",
    "numel", "rel_l2", "mse", "snr_db", "max_abs_err", "cosine",
    // appended after the first schema version
    "file", "tensor", "trace_ranks", "bytes_sent_per_rank", "max_rel_err", "calc_diff", "source"};

// One results.csv row as (column, text) pairs, plus the JSON value for results.json.
struct Cell {
  std::string text;
  nlohmann::json json;
};

std::vector<Cell> result_cells(const StudyResult& r, const TensorRow& row) {
  const VariantInfo& v = r.variants[row.variant_index];
  const ErrorMetrics& m = row.metrics;
  auto s = [](const std::string& x) { return Cell{x, x}; };
  auto i = [](int64_t x) { return Cell{std::to_string(x), x}; };
  auto k = [](int64_t x) { return Cell{known(x), jknown(x)}; };
  auto d = [](const std::optional<double>& x) { return Cell{num(x), jnum(x)}; };
  auto f = [](double x) {
    return Cell{num(x), std::isfinite(x) ? nlohmann::json(x) : nlohmann::json(nullptr)};
  };
  // Rows exist only for non-empty tensors (empty ones are skipped).
  const double sat = double(row.saturated) / double(std::max<int64_t>(row.numel, 1));
  return {s(r.files[row.file_index]),
          s(row.tensor),
          k(row.meta.layer),
          s(row.meta.site),
          s(row.meta.direction),
          s(row.meta.collective),
          k(row.meta.tp_rank),
          k(row.meta.tp_size),
          k(row.meta.step),
          s(shape_string(row.shape)),
          i(row.numel),
          s(std::string(dtype_name(row.in_dtype))),
          s(v.name),
          s(v.family),
          s(v.elem_format),
          s(v.scale_format),
          s(v.granularity),
          v.group_size ? i(*v.group_size) : Cell{"", nullptr},
          s(v.transform),
          d(m.rel_l2),
          d(m.mse),
          d(m.snr_db),
          d(m.cosine),
          d(m.max_abs_err),
          d(m.max_rel_err),
          d(m.underflow_frac),
          f(sat),
          i(row.nan_count),
          i(row.inf_count),
          i(row.wire_bytes),
          f(row.bytes_per_elem()),
          f(row.compression_ratio()),
          d(m.calc_diff),
          s(r.sources.empty() ? r.files[row.file_index] : r.sources[row.file_index]),
          k(row.out_of_range)};
}

}  // namespace

std::string results_csv(const StudyResult& r) {
  std::string out = csv_line(kResultColumns);
  for (const TensorRow& row : r.rows) {
    std::vector<std::string> f;
    for (const Cell& c : result_cells(r, row)) f.push_back(c.text);
    out += csv_line(f);
  }
  return out;
}

nlohmann::json results_json(const StudyResult& r, const Provenance& p) {
  nlohmann::json j;
  j["provenance"] = provenance_json(p);
  nlohmann::json variants = nlohmann::json::object();
  for (const VariantInfo& v : r.variants) variants[v.name] = v.params;
  j["variants"] = variants;
  nlohmann::json facts = nlohmann::json::object();
  for (const VariantInfo& v : r.variants) facts[v.name] = variant_facts_json(v.facts);
  j["variant_facts"] = facts;
  nlohmann::json rows = nlohmann::json::array();
  for (const TensorRow& row : r.rows) {
    const std::vector<Cell> cells = result_cells(r, row);
    nlohmann::json o = nlohmann::json::object();
    for (size_t c = 0; c < cells.size(); ++c) o[kResultColumns[c]] = cells[c].json;
    rows.push_back(std::move(o));
  }
  j["rows"] = rows;
  nlohmann::json skipped = nlohmann::json::array();
  for (const Skipped& s : r.skipped)
    skipped.push_back(
        {{"file", s.file}, {"tensor", s.tensor}, {"variant", s.variant}, {"reason", s.reason}});
  j["skipped"] = skipped;
  return j;
}

std::string collectives_csv(const StudyResult& r) {
  std::string out = csv_line(kCollectiveColumns);
  for (const CollectiveRow& c : r.collective_rows) {
    const ErrorMetrics& m = c.metrics;
    out += csv_line({known(c.meta.layer),
                     c.meta.site,
                     c.meta.direction,
                     known(c.meta.step),
                     r.variants[c.variant_index].name,
                     std::string(collective_name(c.algorithm)),
                     std::to_string(c.tp_size),
                     std::to_string(c.quantizations),
                     std::to_string(c.numel),
                     num(m.rel_l2),
                     num(m.mse),
                     num(m.snr_db),
                     num(m.max_abs_err),
                     num(m.cosine),
                     r.files[c.file_index],
                     c.tensor,
                     std::to_string(c.trace_ranks),
                     num(c.bytes_sent_per_rank),
                     num(m.max_rel_err),
                     num(m.calc_diff),
                     r.sources.empty() ? r.files[c.file_index] : r.sources[c.file_index]});
  }
  return out;
}

std::string histograms_csv(const StudyResult& r) {
  std::string out = csv_line({"site", "direction", "scope", "bin_lo_log2", "bin_hi_log2", "count"});
  for (const auto& [key, h] : r.histograms) {
    for (int s = 0; s < kHistScopes; ++s) {
      const auto scope = HistScope(s);
      const std::string name = hist_scope_name(scope);
      out += csv_line({key.first, key.second, name, "", "", std::to_string(h.zeros(scope))});
      for (int b = 0; b < Log2Histogram::kBins; ++b) {
        const int64_t c = h.count(scope, b);
        if (c == 0) continue;
        out += csv_line({key.first, key.second, name, num(Log2Histogram::bin_lo(b)),
                         num(Log2Histogram::bin_hi(b)), std::to_string(c)});
      }
    }
  }
  return out;
}

std::vector<std::pair<std::string, std::string>> study_files(const StudyResult& r,
                                                             const Provenance& p) {
  std::vector<std::pair<std::string, std::string>> files;
  files.emplace_back("results.csv", results_csv(r));
  if (!r.histograms.empty()) files.emplace_back("histograms.csv", histograms_csv(r));
  if (!r.collective_rows.empty()) files.emplace_back("collectives.csv", collectives_csv(r));
  files.emplace_back("results.json", results_json(r, p).dump(1) + "\n");
  return files;
}

void write_study_outputs(const StudyResult& r, const Provenance& p, const std::string& dir) {
  // Build everything first, then write: a failure leaves no partial set behind.
  const auto files = study_files(r, p);
  make_directories(dir);
  const std::filesystem::path d(dir);
  // A file this run does not produce is removed if an earlier run left it, so that the
  // directory never mixes results of two runs.
  for (const char* name : {"histograms.csv", "collectives.csv"}) {
    const bool have =
        std::any_of(files.begin(), files.end(), [&](const auto& f) { return f.first == name; });
    std::error_code ec;
    if (!have) std::filesystem::remove(d / name, ec);
  }
  // results.json last: its presence marks a complete study directory.
  for (const auto& [name, text] : files) write_file_atomically((d / name).string(), text);
}

std::string format_summary(const StudyResult& r) {
  const std::vector<Aggregate> agg = aggregate(r);
  std::ostringstream os;
  // Rows of several inputs are pooled per site below: say so, and which inputs are synthetic.
  std::vector<std::string> used;
  std::set<std::string> synthetic;
  for (const TensorRow& row : r.rows) {
    const std::string& src =
        r.sources.empty() ? r.files[row.file_index] : r.sources[row.file_index];
    if (std::find(used.begin(), used.end(), src) == used.end()) used.push_back(src);
    if (row.meta.model.rfind("synth:", 0) == 0) synthetic.insert(src);
  }
  if (used.size() > 1) {
    std::string list;
    for (const std::string& u : used)
      list += fmt::format("{}{}{}", list.empty() ? "" : ", ", u,
                          synthetic.count(u) ? " (synthetic)" : "");
    os << fmt::format(
        "note: the rows below pool {} inputs{}: {}; results.csv has a source column, and --filter "
        "file=NAME studies one\n",
        used.size(),
        !synthetic.empty() && synthetic.size() < used.size() ? ", synthetic and real data mixed"
                                                             : "",
        list);
  }
  // Groups a codec clipped or flushed to zero without an error (codecs/range.hpp): per variant.
  std::map<size_t, std::pair<int64_t, int64_t>> out_of_range;  // variant -> groups, tensors
  for (const TensorRow& row : r.rows)
    if (row.out_of_range > 0) {
      auto& [groups, tensors] = out_of_range[row.variant_index];
      groups += row.out_of_range;
      ++tensors;
    }
  for (const auto& [v, n] : out_of_range)
    os << fmt::format(
        "note: {}: {} group(s) in {} tensor(s) lie outside the range the codec represents: they "
        "decode clipped, coarser or as almost zero, without an error (results.csv "
        "out_of_range_groups; ranges: docs/variants.md)\n",
        r.variants[v].name, n.first, n.second);
  std::string site, direction;
  int rank = 0;
  auto flush_hadamard = [&] {
    if (site.empty() && direction.empty() && rank == 0) return;
    for (const HadamardEffect& e : hadamard_effects(r, agg, site, direction)) {
      const double ratio = e.ratio();
      os << fmt::format(
          "  Hadamard: {} vs {}: rel_l2 {:.4g} vs {:.4g}, ratio {:.3f} ({} by {:.1f}%)\n",
          r.variants[e.with].name, r.variants[e.without].name, e.with_rel_l2, e.without_rel_l2,
          ratio, ratio <= 1 ? "helps" : "hurts", std::fabs(1 - ratio) * 100);
    }
  };
  for (const Aggregate& a : agg) {
    if (rank == 0 || a.site != site || a.direction != direction) {
      flush_hadamard();
      site = a.site;
      direction = a.direction;
      rank = 0;
      os << fmt::format("\nsite={} direction={}\n", site.empty() ? "-" : site,
                        direction.empty() ? "-" : direction);
      os << fmt::format("  {:>4}  {:<28} {:>10} {:>13} {:>13} {:>11} {:>7}\n", "rank", "variant",
                        "bytes/elem", "median rel_l2", "p99 rel_l2", "median SNR", "tensors");
    }
    ++rank;
    os << fmt::format("  {:>4}  {:<28} {:>10.5g} {:>13.4e} {:>13.4e} {:>8.2f} dB {:>7}\n", rank,
                      r.variants[a.variant_index].name, a.mean_bytes_per_elem, a.median_rel_l2,
                      a.p99_rel_l2, a.median_snr_db, a.tensors);
  }
  flush_hadamard();
  if (!r.collective_rows.empty()) {
    // Median rel_l2 per (variant, algorithm, tp) over the simulated groups: the statistic of
    // the per-tensor summary above and of the figures.
    std::map<std::tuple<size_t, Collective, int>, std::vector<double>> acc;
    std::map<std::tuple<size_t, Collective, int>, int> quant;
    for (const CollectiveRow& c : r.collective_rows) {
      if (!c.metrics.rel_l2) continue;
      acc[{c.variant_index, c.algorithm, c.tp_size}].push_back(
          std::isnan(*c.metrics.rel_l2) ? std::numeric_limits<double>::infinity()
                                        : *c.metrics.rel_l2);
      quant[{c.variant_index, c.algorithm, c.tp_size}] = c.quantizations;
    }
    os << fmt::format("\nsimulated collectives (median rel_l2 vs the exact fp32 result)\n");
    os << fmt::format("  {:<28} {:<15} {:>3} {:>6} {:>13} {:>7}\n", "variant", "algorithm", "tp",
                      "quant", "median rel_l2", "groups");
    for (const auto& [key, v] : acc) {
      const auto& [vi, alg, tp] = key;
      os << fmt::format("  {:<28} {:<15} {:>3} {:>6} {:>13.4e} {:>7}\n", r.variants[vi].name,
                        collective_name(alg), tp, quant[key], percentile(v, 0.5), v.size());
    }
  }
  if (!r.skipped.empty()) {
    os << fmt::format("\nskipped {} (tensor, variant) pairs or groups; first: {} {} {}: {}\n",
                      r.skipped.size(), r.skipped[0].file, r.skipped[0].tensor,
                      r.skipped[0].variant, r.skipped[0].reason);
  }
  return os.str();
}

}  // namespace taco::study
