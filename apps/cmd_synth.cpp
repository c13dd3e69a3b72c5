// taco synth: synthetic TP traces shaped like one training step, from documented
// distributions (src/synth/dist.cpp; docs/synth.md), bit-identical for a seed on any machine.
#include "cli_parse.hpp"
#include "command.hpp"
#include "core/error.hpp"
#include "synth/synth.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <omp.h>

#include <fstream>
#include <memory>

namespace {

struct SynthArgs {
  std::string out;
  int64_t hidden = 1024, tokens = 2048, layers = 2, tp = 2;
  std::vector<int64_t> steps{0};
  std::vector<std::string> sites{"attn_out", "mlp_out", "attn_qkv", "mlp_fc1"};
  std::vector<std::string> directions{"fwd", "bwd"};
  bool sp = false;
  std::string dist = "realistic";
  uint64_t seed = 1;
  std::string store = "bf16";
  int64_t samples = 0;
  double drift = 0.1;
  bool quiet = false;
};

std::string typed_command_line() {
  std::ifstream in("/proc/self/cmdline", std::ios::binary);
  std::string arg, line;
  while (std::getline(in, arg, '\0')) line += (line.empty() ? "" : " ") + arg;
  return line;
}

taco::DType parse_store(const std::string& s) {
  if (s == "bf16") return taco::DType::BF16;
  if (s == "f16") return taco::DType::F16;
  if (s == "f32") return taco::DType::F32;
  taco::throw_input_error("--store: expected bf16, f16 or f32, got '{}'", s);
}

void run_synth(const SynthArgs& a) {
  taco::synth::SynthOptions o;
  o.hidden = a.hidden;
  o.tokens = a.tokens;
  o.layers = a.layers;
  o.tp = a.tp;
  o.steps = a.steps;
  o.sites = a.sites;
  o.directions = a.directions;
  o.sequence_parallel = a.sp;
  o.dist = taco::synth::parse_dist(a.dist);
  o.seed = a.seed;
  o.store = parse_store(a.store);
  o.samples = a.samples;
  o.drift = a.drift;
  std::map<std::string, std::string> prov;
  if (const std::string typed = typed_command_line(); !typed.empty()) prov["argv"] = typed;
  const auto plan = taco::synth::plan_trace(o);  // fail on bad options before any output
  const taco::synth::SynthSummary s = taco::synth::write_synth_trace(o, a.out, prov);
  if (a.quiet) return;
  const double gib = double(s.elements) * double(taco::dtype_size(o.store)) / double(1 << 30);
  fmt::print("taco synth: wrote {}\n", a.out);
  fmt::print("  {} tensors: steps {}, {} layers, sites {}, directions {}, tp {}{}\n", s.tensors,
             fmt::join(o.steps, ","), o.layers, fmt::join(o.sites, ","),
             fmt::join(o.directions, ","), o.tp,
             o.sequence_parallel ? " with sequence parallelism" : "");
  fmt::print("  dist {}, seed {}, stored as {}\n", o.dist.canonical(), o.seed,
             taco::dtype_name(o.store));
  fmt::print(
      "  {:.1f} M elements ({:.2f} GiB of {}) in {:.2f} s: drawing {:.2f} s ({:.1f} M elements/s "
      "on {} threads), "
      "compressing and writing {:.2f} s\n",
      double(s.elements) / 1e6, gib, taco::dtype_name(o.store), s.total_seconds, s.generate_seconds,
      s.generate_seconds > 0 ? double(s.elements) / s.generate_seconds / 1e6 : 0.0,
      omp_get_max_threads(), s.total_seconds - s.generate_seconds);
  fmt::print("  next: taco info {}\n", a.out);
}

std::string dist_help() {
  std::string h = "Distributions (--dist NAME or NAME:key=value,...; defaults shown):\n";
  for (const auto& d : taco::synth::dist_catalog()) {
    std::string params;
    for (const auto& p : d.params)
      params += fmt::format("{}{}={}", params.empty() ? "" : ",", p.key, p.default_value);
    h += fmt::format("  {}:{}\n      {}\n", d.name, params, d.summary);
  }
  return h;
}

void add_synth(CLI::App& root) {
  auto args = std::make_shared<SynthArgs>();
  CLI::App* cmd = root.add_subcommand(
      "synth", "Synthesize a TP trace (per step, layer, site, direction, rank)");
  cmd->add_option("--out,-o", args->out, "Output trace (HDF5); written whole or not at all")
      ->required();
  cmd->add_option("--hidden", args->hidden, "Hidden size (columns)")->capture_default_str();
  cmd->add_option("--tokens", args->tokens, "Tokens per step (rows; micro-batch x sequence)")
      ->capture_default_str();
  cmd->add_option("--layers", args->layers, "Transformer layers")->capture_default_str();
  cmd->add_option("--tp", args->tp, "Tensor-parallel degree (one tensor per rank)")
      ->capture_default_str();
  cmd->add_option("--steps", args->steps, "Training steps, comma-separated (default 0)")
      ->delimiter(',');
  cmd->add_option("--sites", args->sites,
                  "Sites, comma-separated, from attn_out, mlp_out, attn_qkv, mlp_fc1 (default all)")
      ->delimiter(',');
  cmd->add_option("--directions", args->directions, "fwd, bwd or fwd,bwd (default fwd,bwd)")
      ->delimiter(',');
  cmd->add_flag(
      "--sp", args->sp,
      "Sequence parallelism: reduce_scatter instead of all_reduce, plus all_gather shards "
      "[tokens/tp, hidden]");
  cmd->add_option("--dist", args->dist, "Distribution NAME[:key=value,...] (list below)")
      ->capture_default_str();
  cmd->add_option("--seed", args->seed, "Seed; the same seed gives the same bits everywhere")
      ->check(taco::cli::non_negative())
      ->capture_default_str();
  cmd->add_option("--store", args->store,
                  "Stored dtype: bf16, f16 or f32 (values are rounded to it)")
      ->capture_default_str();
  cmd->add_option("--samples", args->samples,
                  "Training samples: step s uses sample s mod K (extra.sample_id, what aqsgd: keys "
                  "on); 0 = off")
      ->capture_default_str();
  cmd->add_option(
         "--drift", args->drift,
         "With --samples: relative size of the part of a sample's values that is new at each step")
      ->capture_default_str();
  cmd->add_flag("--quiet,-q", args->quiet, "Print nothing on success");
  cmd->footer(
      "Tensors (only those a TP collective carries; Megatron-style TP):\n"
      "  without --sp: fwd attn_out, mlp_out (all_reduce of row-parallel partial sums) and\n"
      "                bwd attn_qkv, mlp_fc1 (all_reduce of column-parallel input-gradient "
      "partials),\n"
      "                each [tokens, hidden] per rank;\n"
      "  with --sp:    the same as reduce_scatter, plus all_gather shards [tokens/tp, hidden] of\n"
      "                fwd attn_qkv, mlp_fc1 inputs and bwd attn_out, mlp_out output gradients.\n"
      "Names: step<S>/layer<L>/<site>/<dir>/rank<R>; model attribute synth:<dist>.\n\n" +
      dist_help() +
      "\nExamples:\n"
      "  taco synth --out trace.h5\n"
      "  taco synth --out small.h5 --hidden 1024 --tokens 512 --layers 2 --tp 2 --seed 7\n"
      "  taco synth --out sp.h5 --tp 4 --sp --steps 0,100 --sites attn_out,mlp_fc1\n"
      "  taco synth --out grads.h5 --directions bwd --dist gradient:rms=1e-7,nu=4 --store f32\n"
      "  taco synth --out massive.h5 --dist outlier_channels:count=4,min=100,max=1000\n"
      "  taco synth --out epochs.h5 --steps 0,1,2,3 --samples 2    # for aqsgd: variants\n"
      "Details: docs/synth.md");
  cmd->callback([args] { run_synth(*args); });
}

}  // namespace

TACO_REGISTER_COMMAND(5, add_synth);
