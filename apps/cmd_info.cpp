// taco info: what is in tensor files (taco traces, safetensors, .npy, .npz): names, shapes,
// dtypes, TP metadata, and the statistics that predict FP8 behaviour (src/stats).
#include "command.hpp"
#include "core/error.hpp"
#include "io/input_files.hpp"
#include "io/name_rules.hpp"
#include "io/tensor_source.hpp"
#include "stats/tensor_stats.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>

namespace {

// A block longer than any hidden dimension measures nothing a row does not.
constexpr int64_t kMaxBlockSize = int64_t(1) << 20;

struct InfoArgs {
  std::vector<std::string> files;
  std::string name_map, datasets;
  bool json = false;
  bool long_form = false;
  int64_t rows = 0;
  int top_k = 8;
  int64_t block_size = 128;
};

// One listed tensor: where it is, what it is (no values kept), its statistics.
struct Entry {
  std::string file, format;
  size_t index = 0;
  taco::TensorInfo info;
  taco::TensorStats stats;
};

struct FileListing {
  std::string path, format;
  size_t total = 0;
  std::vector<Entry> entries;
};

FileListing scan_file(const std::string& path, const InfoArgs& a) {
  taco::OpenOptions oo;
  oo.datasets = a.datasets;
  if (!a.name_map.empty()) oo.name_map = std::make_shared<taco::NameMap>(a.name_map);
  auto src = taco::open_tensor_file(
      path, oo);  // InputError (missing, empty, not a tensor file) propagates
  FileListing f;
  f.path = path;
  f.format = src->format();
  f.total = src->size();
  const size_t shown = a.rows > 0 ? std::min(f.total, size_t(a.rows)) : f.total;
  taco::StatsOptions so;
  so.top_k = a.top_k;
  so.block_size = a.block_size;
  for (size_t i = 0; i < shown; ++i) {
    const taco::Tensor t = src->read(i);  // one tensor in memory at a time
    Entry e;
    e.file = path;
    e.format = f.format;
    e.index = i;
    e.info = {t.name, t.dtype, t.shape, t.meta};
    e.stats = taco::compute_stats(t, so);
    f.entries.push_back(std::move(e));
  }
  return f;
}

nlohmann::json entry_json(const Entry& e) {
  const taco::TensorMeta& m = e.info.meta;
  return {{"file", e.file},           {"format", e.format},
          {"index", e.index},         {"name", e.info.name},
          {"shape", e.info.shape},    {"dtype", taco::dtype_name(e.info.dtype)},
          {"layer", m.layer},         {"site", m.site},
          {"direction", m.direction}, {"collective", m.collective},
          {"tp_rank", m.tp_rank},     {"tp_size", m.tp_size},
          {"step", m.step},           {"model", m.model},
          {"extra", m.extra},         {"stats", taco::to_json(e.stats)}};
}

// ---- text output ------------------------------------------------------------------------

// "-" for undefined values keeps the columns readable.
std::string num(double v, const char* spec = "{:.3g}") {
  if (std::isnan(v)) return "-";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  return fmt::format(fmt::runtime(spec), v);
}
std::string pct(double frac) {
  return num(100.0 * frac, "{:.3g}");
}
std::string known(int64_t v) {
  return v < 0 ? "-" : std::to_string(v);
}
std::string known(const std::string& s) {
  return s.empty() ? "-" : s;
}
std::string rank_of(const taco::TensorMeta& m) {
  if (m.tp_rank < 0 && m.tp_size < 0) return "-";
  return fmt::format("{}/{}", known(m.tp_rank), known(m.tp_size));
}

// Aligned columns: text columns left-aligned, numbers right-aligned.
void print_table(const std::vector<std::string>& header, const std::vector<bool>& numeric,
                 const std::vector<std::vector<std::string>>& rows) {
  std::vector<size_t> w(header.size());
  for (size_t c = 0; c < header.size(); ++c) w[c] = header[c].size();
  for (const auto& r : rows)
    for (size_t c = 0; c < r.size(); ++c) w[c] = std::max(w[c], r[c].size());
  auto line = [&](const std::vector<std::string>& r) {
    std::string s;
    for (size_t c = 0; c < r.size(); ++c) {
      if (c) s += "  ";
      s += numeric[c] ? fmt::format("{:>{}}", r[c], w[c]) : fmt::format("{:<{}}", r[c], w[c]);
    }
    while (!s.empty() && s.back() == ' ') s.pop_back();
    fmt::print("{}\n", s);
  };
  line(header);
  for (const auto& r : rows) line(r);
}

void print_short(const FileListing& f) {
  // NaN/Inf are rare: their column appears only when some listed tensor has any.
  const bool nonfinite = std::any_of(f.entries.begin(), f.entries.end(), [](const Entry& e) {
    return e.stats.nan_count + e.stats.inf_count > 0;
  });
  std::vector<std::string> header = {
      "#",     "name",    "shape",   "dtype",   "layer",  "site",       "dir",
      "coll",  "rank",    "step",    "rms",     "absmax", "crest",      "kurt",
      "zero%", "e4m3uf%", "e5m2uf%", "dr_log2", "blk_dr", "tok_spread", "ch_spread"};
  if (nonfinite) header.push_back("nan/inf");
  std::vector<bool> numeric(header.size(), true);
  for (size_t c : {1, 2, 3, 5, 6, 7, 8}) numeric[c] = false;
  std::vector<std::vector<std::string>> rows;
  for (const Entry& e : f.entries) {
    const auto& m = e.info.meta;
    const auto& s = e.stats;
    rows.push_back({std::to_string(e.index),
                    e.info.name,
                    taco::shape_string(e.info.shape),
                    std::string(taco::dtype_name(e.info.dtype)),
                    known(m.layer),
                    known(m.site),
                    known(m.direction),
                    known(m.collective),
                    rank_of(m),
                    known(m.step),
                    num(s.rms),
                    num(s.absmax),
                    num(s.crest_factor, "{:.1f}"),
                    num(s.kurtosis, "{:.4g}"),
                    pct(s.zero_frac),
                    pct(s.e4m3_underflow_frac),
                    pct(s.e5m2_underflow_frac),
                    num(s.dynamic_range_log2, "{:.1f}"),
                    num(s.max_blockwise_dynamic_range, "{:.1f}"),
                    num(s.row_absmax_spread, "{:.1f}"),
                    num(s.col_absmax_spread, "{:.1f}")});
    if (nonfinite) rows.back().push_back(fmt::format("{}/{}", s.nan_count, s.inf_count));
  }
  print_table(header, numeric, rows);
}

std::string tops(const std::vector<taco::IndexedAbsmax>& v) {
  std::string s;
  for (const auto& e : v)
    s += fmt::format("{}{} ({})", s.empty() ? "" : ", ", e.index, num(e.absmax));
  return s.empty() ? "-" : s;
}

void print_long(const FileListing& f) {
  for (const Entry& e : f.entries) {
    const auto& m = e.info.meta;
    const auto& s = e.stats;
    fmt::print("[{}] {}\n", e.index, e.info.name);
    fmt::print(
        "    shape {}  dtype {}  layer {}  site {}  direction {}  collective {}  tp rank {}  step "
        "{}  model {}\n",
        taco::shape_string(e.info.shape), taco::dtype_name(e.info.dtype), known(m.layer),
        known(m.site), known(m.direction), known(m.collective), rank_of(m), known(m.step),
        known(m.model));
    if (!m.extra.empty()) {
      std::string x;
      for (const auto& [k, v] : m.extra) x += fmt::format("{}{}={}", x.empty() ? "" : "  ", k, v);
      fmt::print("    extra: {}\n", x);
    }
    fmt::print("    values: {} (finite {}, NaN {}, Inf {}, zero {} = {}%)\n", s.numel,
               s.finite_count, s.nan_count, s.inf_count, s.zero_count, pct(s.zero_frac));
    fmt::print("    mean {}  std {}  rms {}  absmax {}  min |x|>0 {}  crest {}  kurtosis {}\n",
               num(s.mean), num(s.std), num(s.rms), num(s.absmax), num(s.min_nonzero_abs),
               num(s.crest_factor, "{:.2f}"), num(s.kurtosis, "{:.3f}"));
    fmt::print(
        "    per-tensor FP8 scaling: E4M3 below normal {}% (below subnormal {}%), E5M2 below "
        "normal {}% "
        "(below subnormal {}%)\n",
        pct(s.e4m3_underflow_frac), pct(s.e4m3_flush_frac), pct(s.e5m2_underflow_frac),
        pct(s.e5m2_flush_frac));
    fmt::print("    dynamic range {} bits; max over {}-element blocks {} bits\n",
               num(s.dynamic_range_log2, "{:.2f}"), s.block_size,
               num(s.max_blockwise_dynamic_range, "{:.2f}"));
    fmt::print("    tokens   (rows {}): absmax max {} / median {} = {}; top {}\n", s.rows,
               num(s.row_absmax_max), num(s.row_absmax_median), num(s.row_absmax_spread, "{:.2f}"),
               tops(s.top_tokens));
    fmt::print("    channels (cols {}): absmax max {} / median {} = {}; top {}\n", s.cols,
               num(s.col_absmax_max), num(s.col_absmax_median), num(s.col_absmax_spread, "{:.2f}"),
               tops(s.top_channels));
  }
}

double median(std::vector<double> v) {
  v.erase(std::remove_if(v.begin(), v.end(), [](double x) { return std::isnan(x); }), v.end());
  if (v.empty()) return std::nan("");
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// One line per (site, direction, collective) over every listed tensor of every file.
void print_summary(const std::vector<FileListing>& files) {
  struct Group {
    std::vector<double> rms, crest, kurt, e4u, bdr, chs;
  };
  std::map<std::tuple<std::string, std::string, std::string>, Group> groups;
  size_t n = 0;
  for (const auto& f : files)
    for (const auto& e : f.entries) {
      const auto& m = e.info.meta;
      Group& g = groups[{known(m.site), known(m.direction), known(m.collective)}];
      g.rms.push_back(e.stats.rms);
      g.crest.push_back(e.stats.crest_factor);
      g.kurt.push_back(e.stats.kurtosis);
      g.e4u.push_back(e.stats.e4m3_underflow_frac);
      g.bdr.push_back(e.stats.max_blockwise_dynamic_range);
      g.chs.push_back(e.stats.col_absmax_spread);
      ++n;
    }
  if (n < 2) return;
  fmt::print("\nSummary by site and direction (medians over tensors):\n");
  std::vector<std::vector<std::string>> rows;
  for (const auto& [key, g] : groups) {
    const auto& [site, dir, coll] = key;
    rows.push_back({site, dir, coll, std::to_string(g.rms.size()), num(median(g.rms)),
                    num(median(g.crest), "{:.1f}"), num(median(g.kurt), "{:.4g}"),
                    pct(median(g.e4u)), num(median(g.bdr), "{:.1f}"),
                    num(median(g.chs), "{:.1f}")});
  }
  print_table(
      {"site", "dir", "coll", "tensors", "rms", "crest", "kurt", "e4m3uf%", "blk_dr", "ch_spread"},
      {false, false, false, true, true, true, true, true, true, true}, rows);
}

void run_info(const InfoArgs& a) {
  TACO_REQUIRE_INPUT(a.rows >= 0, "--rows: must be >= 0, got {}", a.rows);
  TACO_REQUIRE_INPUT(a.top_k >= 0 && a.top_k <= 1000, "--top-k: must be in [0, 1000], got {}",
                     a.top_k);
  TACO_REQUIRE_INPUT(a.block_size >= 1 && a.block_size <= kMaxBlockSize,
                     "--block-size: must be 1 to {}, got {}", kMaxBlockSize, a.block_size);
  std::vector<FileListing> files;
  for (const taco::InputFile& f : taco::expand_inputs(a.files))
    files.push_back(scan_file(f.path, a));  // all read before printing

  if (a.json) {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& f : files)
      for (const auto& e : f.entries) out.push_back(entry_json(e));
    fmt::print("{}\n", out.dump(1));
    return;
  }
  for (size_t i = 0; i < files.size(); ++i) {
    const FileListing& f = files[i];
    fmt::print("{}{}: {} ({} tensor{})\n", i ? "\n" : "", f.path, f.format, f.total,
               f.total == 1 ? "" : "s");
    if (a.long_form)
      print_long(f);
    else
      print_short(f);
    if (f.entries.size() < f.total)
      fmt::print("... {} more tensors not listed (--rows 0 lists all)\n",
                 f.total - f.entries.size());
  }
  print_summary(files);
}

void add_info(CLI::App& root) {
  auto args = std::make_shared<InfoArgs>();
  CLI::App* cmd = root.add_subcommand(
      "info", "Show tensors, TP metadata and FP8-relevant statistics of tensor files");
  cmd->add_option("files", args->files,
                  "Tensor files (HDF5, safetensors, .npy, .npz; by content) or directories of them "
                  "(docs/inputs.md)")
      ->required();
  cmd->add_option(
      "--name-map", args->name_map,
      "Regex with named groups layer, site, direction, rank, step: metadata from tensor names, "
      "over the built-in rules (docs/inputs.md)");
  cmd->add_option(
      "--datasets", args->datasets,
      "HDF5 files other than taco traces: only datasets whose path matches this shell pattern");
  cmd->add_flag("--json", args->json, "Print a JSON array, one object per tensor (for scripts)");
  cmd->add_flag("--long,-l", args->long_form,
                "A block per tensor with every statistic instead of one line");
  cmd->add_option("--rows,-n", args->rows, "List at most N tensors per file (table rows); 0 = all")
      ->capture_default_str();
  cmd->add_option("--top-k", args->top_k, "Outlier tokens and channels to report per tensor")
      ->capture_default_str();
  cmd->add_option("--block-size", args->block_size, "Block length along the hidden dim for blk_dr")
      ->capture_default_str();
  cmd->footer(
      "Columns: rms, absmax; crest = absmax/rms; kurt = Pearson kurtosis (normal 3);\n"
      "  e4m3uf% = nonzeros that per-tensor scaling to 448 puts below the E4M3 min normal 2^-6\n"
      "  (e5m2uf%: 57344 and 2^-14; --long and --json add the fractions below the min subnormal);\n"
      "  dr_log2 = log2(absmax / min nonzero);\n"
      "  blk_dr = the same, max over blocks of --block-size along the hidden dim (TE's\n"
      "  max_blockwise_dynamic_range); tok_spread / ch_spread = max / median of per-token (row) "
      "and\n"
      "  per-channel (column) absmax. NaN and Inf are counted (nan/inf column, shown when any) "
      "and\n"
      "  left out of everything else; '-' is undefined (null in --json). Statistics are computed\n"
      "  in double.\n\n"
      "Examples:\n"
      "  taco info trace.h5\n"
      "  taco info trace.h5 --rows 8 --long\n"
      "  taco info trace.h5 --json > stats.json\n"
      "  taco info dump.safetensors acts.npz\n"
      "  taco info dumps/                      # every tensor file under it\n"
      "  taco info acts.h5 --datasets '/step_100/*'");
  cmd->callback([args] { run_info(*args); });
}

}  // namespace

TACO_REGISTER_COMMAND(10, add_info);
