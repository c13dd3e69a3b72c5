// taco study: measure codecs on real tensors (per-tensor error metrics, histograms, simulated
// compressed collectives, per-site variant selection). See docs/study.md.
#include "cli_parse.hpp"
#include "codecs/codec.hpp"
#include "command.hpp"
#include "core/atomic_file.hpp"
#include "core/error.hpp"
#include "io/input_files.hpp"
#include "io/name_rules.hpp"
#include "io/tensor_source.hpp"
#include "study/pareto.hpp"
#include "study/report.hpp"
#include "study/selection.hpp"
#include "study/study.hpp"
#include "study/weights.hpp"

#if defined(TACO_HAVE_CUDA) && __has_include("cuda/codecs/gpu_codec.hpp")
#include "cuda/codecs/gpu_codec.hpp"
#define TACO_STUDY_HAS_GPU 1
#endif

#include <fmt/format.h>
#include <omp.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <future>
#include <memory>
#include <string>
#include <vector>

namespace {

// Everything a study (or `taco report` after it) puts in --out: the set that replaces it.
const std::vector<std::string> kStudyFiles = {"results.csv",     "results.json",   "histograms.csv",
                                              "collectives.csv", "selection.json", "pareto.csv",
                                              "feedback.csv",    "structure.csv",  "spectra.csv",
                                              "weights.csv",     "report"};

struct StudyArgs {
  std::vector<std::string> inputs;
  std::string variants, out, candidates, collectives, tp, filter, config, name_map, datasets;
  bool select = false, gpu = false, quiet = false, no_histograms = false;
  bool pareto = false, weights = false;
  double budget = 1.0625, tau = 1e-3;
  int threads = 0;
  int64_t max_tensors = -1;
  uint64_t seed = 0;
};

std::vector<std::string> split_list(const std::string& s, const char* flag) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= s.size()) {
    size_t p = s.find(',', start);
    if (p == std::string::npos) p = s.size();
    std::string item = s.substr(start, p - start);
    const size_t a = item.find_first_not_of(" \t"), b = item.find_last_not_of(" \t");
    item = a == std::string::npos ? std::string() : item.substr(a, b - a + 1);
    TACO_REQUIRE_INPUT(!item.empty(), "{}: empty item in '{}'", flag, s);
    out.push_back(item);
    start = p + 1;
  }
  return out;
}

// The command line as typed, for provenance.
std::vector<std::string> command_line(const StudyArgs& a) {
  std::vector<std::string> argv = taco::cli::self_argv();
  if (argv.empty()) {
    argv = {"taco", "study"};
    argv.insert(argv.end(), a.inputs.begin(), a.inputs.end());
  }
  return argv;
}

// Progress on stderr: rewritten in place on a terminal, one line per update otherwise, at most
// twice a second (and always for the last tensor).
class ProgressPrinter {
 public:
  explicit ProgressPrinter(bool tty) : tty_(tty) {}
  void operator()(const taco::study::Progress& p) {
    const auto now = std::chrono::steady_clock::now();
    if (p.done != p.total && now - last_ < std::chrono::milliseconds(500)) return;
    last_ = now;
    const double rate = p.seconds > 0 ? double(p.elements) / p.seconds : 0.0;
    std::string line = fmt::format("study: tensor {}/{} ({}), {:.1f} M elements/s", p.done, p.total,
                                   p.tensor, rate / 1e6);
    if (tty_) {
      std::fprintf(stderr, "\r%-100s%s", line.c_str(), p.done == p.total ? "\n" : "");
    } else {
      std::fprintf(stderr, "%s\n", line.c_str());
    }
    std::fflush(stderr);
  }

 private:
  bool tty_;
  std::chrono::steady_clock::time_point last_{};
};

// The progress callback of a study: a ProgressPrinter on stderr, none with --quiet.
std::function<void(const taco::study::Progress&)> progress_callback(bool quiet) {
  if (quiet) return {};
  ProgressPrinter printer(::isatty(STDERR_FILENO) == 1);
  return [printer](const taco::study::Progress& p) mutable { printer(p); };
}

// The input files (directories expanded), opened: the study reads them through `sources`.
struct OpenedInputs {
  std::vector<std::unique_ptr<taco::TensorSource>> owned;
  std::vector<taco::TensorSource*> sources;
  std::vector<std::string> paths, labels;  // per file: its path, the input argument it came from
};
OpenedInputs open_inputs(const StudyArgs& a, const std::vector<taco::InputFile>& files) {
  taco::OpenOptions oo;
  oo.datasets = a.datasets;
  if (!a.name_map.empty()) oo.name_map = std::make_shared<taco::NameMap>(a.name_map);
  OpenedInputs in;
  for (const taco::InputFile& f : files) {
    in.owned.push_back(taco::open_tensor_file(f.path, oo));
    in.sources.push_back(in.owned.back().get());
    in.paths.push_back(f.path);
    in.labels.push_back(f.source);
  }
  return in;
}

// --weights: the structure of 2-D weight matrices (study/weights.hpp), no codecs.
void run_weights_command(const StudyArgs& a, const std::vector<taco::InputFile>& files, int threads,
                         taco::AtomicDirectory& out) {
  using namespace taco;
  using namespace taco::study;
  TACO_REQUIRE_INPUT(
      a.variants.empty() && !a.select && !a.pareto && a.collectives.empty() && a.config.empty() &&
          !a.gpu,
      "--weights: takes no --variants, --select, --pareto, --collectives, --config or --gpu");
  WeightsOptions wo;
  wo.filter = parse_filter(a.filter);
  wo.max_tensors = a.max_tensors;
  const OpenedInputs in = open_inputs(a, files);
  wo.progress = progress_callback(a.quiet);
  const WeightsResult r = run_weights_study(in.sources, wo);
  TACO_REQUIRE_INPUT(!r.spectra.empty(),
                     "{}: no 2-D tensor to study (check --filter and the inputs)",
                     a.inputs.front());
  out.write("spectra.csv", spectra_csv(r));
  out.write("weights.csv", weights_csv(r, wo.tt_order));
  out.commit();
  std::fputs(format_weights(r).c_str(), stdout);
  std::printf("\n%zu matrices (%zu other tensors skipped) in %.2f s with %d threads; wrote %s\n",
              r.spectra.size(), r.skipped.size(), r.seconds, threads, a.out.c_str());
}

void run_study_command(const StudyArgs& a) {
  using namespace taco;
  using namespace taco::study;
  StudyOptions opts;
  // Flags first: bad flags fail before any file is opened.
  TACO_REQUIRE_INPUT(a.threads >= 0 && a.threads <= taco::cli::kMaxThreads,
                     "--threads: must be 0 (all cores) to {}, got {}", taco::cli::kMaxThreads,
                     a.threads);
  TACO_REQUIRE_INPUT(a.tau >= 0 && std::isfinite(a.tau), "--tau: must be >= 0, got {}", a.tau);
  TACO_REQUIRE_INPUT(!a.select || (a.budget > 0 && std::isfinite(a.budget)),
                     "--budget: must be a positive number of bytes per element, got {}", a.budget);
  TACO_REQUIRE_INPUT(a.select || a.candidates.empty(), "--candidates: only with --select");
  TACO_REQUIRE_INPUT(!a.collectives.empty() || a.tp.empty(), "--tp: only with --collectives");
  // The output set replaces --out as a whole: an input in it, or a directory of other files,
  // is refused here.
  const std::vector<InputFile> files = expand_inputs(a.inputs);
  std::vector<std::string> read = a.inputs;
  for (const InputFile& f : files) read.push_back(f.path);
  if (!a.config.empty()) read.push_back(a.config);
  check_not_an_input(a.out, read, "--out", OutputKind::Directory);
  AtomicDirectory out(a.out, kStudyFiles, "--out");
  opts.threads = a.threads > 0 ? a.threads : omp_get_num_procs();
  omp_set_num_threads(opts.threads);  // also what codecs' own parallel loops use
  if (a.weights) return run_weights_command(a, files, opts.threads, out);
  opts.seed = a.seed;
  opts.tau_rel = a.tau;
  opts.max_tensors = a.max_tensors;
  opts.histograms = !a.no_histograms;
  opts.filter = parse_filter(a.filter);
  if (!a.variants.empty()) opts.variants = split_list(a.variants, "--variants");
  if (!a.config.empty()) opts.per_site = load_selection(a.config);
  SelectOptions sel;
  if (a.select) {
    sel.budget = a.budget;
    sel.candidates =
        a.candidates.empty() ? default_candidates() : split_list(a.candidates, "--candidates");
    for (const std::string& c : sel.candidates)
      if (std::find(opts.variants.begin(), opts.variants.end(), c) == opts.variants.end())
        opts.variants.push_back(c);
  }
  if (a.pareto)  // every family on one error-against-bytes axis (docs/structured.md)
    for (const std::string& v : pareto_sweep_variants())
      if (std::find(opts.variants.begin(), opts.variants.end(), v) == opts.variants.end())
        opts.variants.push_back(v);
  if (opts.variants.empty() && opts.per_site.empty())
    opts.variants = {"fp8-tensor", "fp8-g128", "mxfp8", "taco-noh", "taco"};
  if (!a.collectives.empty())
    for (const std::string& s : split_list(a.collectives, "--collectives"))
      opts.collectives.push_back(sim::parse_collective(s));
  if (!a.tp.empty()) {
    for (const std::string& s : split_list(a.tp, "--tp")) {
      int n = 0;
      size_t used = 0;
      try {
        n = std::stoi(s, &used);
      } catch (const std::exception&) {
        used = 0;
      }
      TACO_REQUIRE_INPUT(used == s.size() && n >= 2 && n <= sim::kMaxTpDegree,
                         "--tp: '{}' is not a TP degree (an integer 2..{})", s, sim::kMaxTpDegree);
      opts.tp.push_back(n);
    }
  }
  if (a.gpu) {
#if defined(TACO_STUDY_HAS_GPU)
    // Asking for the GPU where none is visible is a usage problem: say so before any work.
    TACO_REQUIRE_INPUT(taco::gpu::gpu_available(),
                       "--gpu: no CUDA device is available on this machine");
    opts.codec_factory = [](const std::string& v) { return taco::gpu::make_gpu_codec(v); };
#else
    throw_input_error(
        "--gpu: this taco was built without the GPU backend (rebuild with CUDA: "
        "cmake -DTACO_CUDA=ON on a machine with nvcc)");
#endif
  } else {
    opts.codec_factory = [](const std::string& v) { return make_codec(v); };
  }
  // Every variant is built before any work, so a typo fails fast (exit 2).
  std::vector<VariantInfo> infos;
  for (const std::string& v : opts.variants)
    infos.push_back(describe_variant(v, *opts.codec_factory(v)));
  // Subspace variants: energies in span(U) and in each tensor's top-k subspace (structure.csv).
  StructureCollector structure(infos);
  if (structure.active()) opts.on_tensor = [&structure](const Tensor& t) { structure.add(t); };

  const OpenedInputs in = open_inputs(a, files);
  opts.source_labels = in.labels;
  opts.progress = progress_callback(a.quiet);
  // Hash the inputs (provenance) on another thread while the study runs.
  std::future<Provenance> provenance = std::async(std::launch::async, [&a, &opts, &in] {
    return make_provenance(in.paths, command_line(a), a.seed, opts.threads);
  });
  const StudyResult result = run_study(in.sources, opts);
  const Provenance prov = provenance.get();
  TACO_REQUIRE_INPUT(!result.rows.empty(),
                     "{}: no tensor was measured (check --filter, --max-tensors and the inputs)",
                     a.inputs.front());
  std::string selection_text;
  std::string selection_file;
  if (a.select) {
    const Selection s = select_variants(result, sel);
    selection_text = format_selection(s, result);
    selection_file = selection_json(s, result).dump(1) + "\n";
  }
  for (const auto& [name, text] : study_files(result, prov)) out.write(name, text);
  if (!selection_file.empty()) out.write("selection.json", selection_file);
  const std::vector<ParetoPoint> front = pareto_points(result);
  out.write("pareto.csv", pareto_csv(front));
  if (!result.feedback_rows.empty()) out.write("feedback.csv", feedback_csv(result.feedback_rows));
  if (structure.active()) out.write("structure.csv", structure.csv());
  out.commit();

  std::fputs(format_summary(result).c_str(), stdout);
  std::fputs(selection_text.c_str(), stdout);
  if (a.pareto) std::fputs(format_pareto(front).c_str(), stdout);
  const double codec_seconds = result.seconds - result.collective_seconds;
  std::printf(
      "\n%lld tensors, %lld elements x variants in %.2f s (%.1f M elements/s%s); wrote %s\n",
      static_cast<long long>(result.tensors), static_cast<long long>(result.elements),
      result.seconds, codec_seconds > 0 ? double(result.elements) / codec_seconds / 1e6 : 0.0,
      result.collective_seconds > 0
          ? fmt::format(" without the {:.2f} s of simulated collectives", result.collective_seconds)
                .c_str()
          : "",
      a.out.c_str());
}

void add_study(CLI::App& root) {
  auto args = std::make_shared<StudyArgs>();
  CLI::App* sub = root.add_subcommand(
      "study",
      "Measure codecs on tensors: error metrics, histograms, simulated collectives, selection");
  sub->add_option(
         "inputs", args->inputs,
         "Tensor files (HDF5, safetensors, .npy, .npz) or directories of them (docs/inputs.md)")
      ->required();
  sub->add_option(
      "--name-map", args->name_map,
      "Regex with named groups layer, site, direction, rank, step: metadata from tensor names, "
      "over the built-in rules (docs/inputs.md)");
  sub->add_option(
      "--datasets", args->datasets,
      "HDF5 files other than taco traces: only datasets whose path matches this shell pattern");
  sub->add_option("--variants", args->variants,
                  "Comma-separated presets or variant strings (default: fp8-tensor,fp8-g128,mxfp8,"
                  "taco-noh,taco)");
  sub->add_option("--out", args->out, "Output directory (results.csv, results.json, ...)")
      ->required();
  sub->add_flag(
      "--select", args->select,
      "Pick the lowest-error candidate per (site, direction) within --budget (medians within "
      "0.1% tie: fewest bytes win); writes selection.json");
  sub->add_option("--budget", args->budget,
                  "Bytes per element allowed by --select (default 1.0625)");
  sub->add_option(
      "--candidates", args->candidates,
      "Variants --select chooses from (default: taco-g32..g512, their no-Hadamard twins "
      "taco-noh-g32..g512, fp8-g32, fp8-g128, fp8-g128-had, mxfp8)");
  sub->add_option("--config", args->config,
                  "A selection.json from --select: adds each site's chosen variant");
  sub->add_option(
      "--collectives", args->collectives,
      "Simulate compressed collectives: one_shot,two_shot,ring,all_gather,reduce_scatter");
  sub->add_option(
      "--tp", args->tp,
      "TP degrees to simulate, e.g. 2,4,8 (default: the ranks in the trace; extra ranks "
      "are derived, see docs/study.md)");
  sub->add_option("--threads", args->threads,
                  "Threads (default 0 = all cores); results do not depend on it");
  sub->add_option("--seed", args->seed, "Seed for derived TP ranks (default 0)")
      ->check(taco::cli::non_negative());
  sub->add_option("--filter", args->filter,
                  "Only tensors matching key=value[|value...] terms, comma-separated; keys: site, "
                  "direction, collective, layer, step, tp_rank, name, file");
  sub->add_option("--max-tensors", args->max_tensors, "Stop after N tensors (after --filter)")
      ->check(taco::cli::positive());  // unset: every tensor (-1 here, not a value to give)
  sub->add_option("--tau", args->tau,
                  "max_rel_err counts elements with |x| > tau * absmax(tensor) (default 1e-3)");
  sub->add_flag("--no-histograms", args->no_histograms, "Do not write histograms.csv");
  sub->add_flag(
      "--pareto", args->pareto,
      "Add a sweep over every codec family (quantizers, TACO, ef:, subspace, lowrank, tt, "
      "topk, randk) and print the error-vs-bytes Pareto front per site (pareto.csv is always "
      "written)");
  sub->add_flag(
      "--weights", args->weights,
      "Study 2-D weight matrices instead of codecs: singular values (spectra.csv), effective "
      "rank, TT unfolding ranks, low-rank and TT error vs parameters (weights.csv)");
  sub->add_flag("--gpu", args->gpu, "Run the codecs on the GPU (needs a CUDA build)");
  sub->add_flag("-q,--quiet", args->quiet, "No progress on stderr");
  sub->footer(
      "Examples:\n"
      "  taco study trace.h5 --variants taco,taco-noh,fp8-g128,mxfp8 --out results/\n"
      "  taco study acts.safetensors grads.npz --variants bf16,fp8-g128 --filter site=attn_out "
      "--out r/\n"
      "  taco study trace.h5 --select --budget 1.07 --out sel/    # writes sel/selection.json\n"
      "  taco study trace.h5 --config sel/selection.json --out applied/\n"
      "  taco study trace.h5 --variants taco --collectives one_shot,two_shot,ring --tp 2,4,8 --out "
      "coll/\n"
      "  taco study trace.h5 --pareto --out front/     # every family; front/pareto.csv\n"
      "  taco study trace.h5 --variants ef:int4-g32,int4-g32,lowrank:bpe=0.5:rsvd --out ef/\n"
      "  taco study --weights model.safetensors --out w/   # spectra.csv, weights.csv\n"
      "  taco study dumps/ --name-map '^act(?P<layer>\\d+)_(?P<site>\\w+)$' --out mine/   # your "
      "own dump\n"
      "Inputs (directories, h5py files, how names become layer/site/direction/rank/step): "
      "docs/inputs.md.\n"
      "Outputs are described in docs/results-schema.md; metrics and semantics in docs/study.md.");
  sub->callback([args] { run_study_command(*args); });
}

}  // namespace

TACO_REGISTER_COMMAND(20, add_study);
