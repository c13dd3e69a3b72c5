// taco comm: live NCCL collective benchmarks, plain and compressed (one-shot, two-shot, ring
// all-reduce; all-gather, reduce-scatter, all-to-all, send/recv), in the shape of nccl-tests:
// the same flags (-b -e -f -i -n -w -c -d -o -g), one table row per size with size, count, type,
// redop, time, algbw, busbw, #wrong, then taco's columns. --json FILE per docs/results-schema.md.
// Harness: cuda/bench/comm_bench.hpp; plans: collectives/comm_plans.hpp; docs/comm.md has the
// details.
#include "cli_parse.hpp"
#include "command.hpp"
#include "core/atomic_file.hpp"
#include "core/error.hpp"
#include "core/provenance.hpp"
#include "core/version.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <cctype>
#include <cmath>
#include <iterator>
#include <map>
#include <string>
#include <vector>

#if defined(TACO_HAVE_CUDA)
#include "cuda/bench/comm_bench.hpp"
#include "cuda/collectives/comm_fabric.hpp"
#include "cuda/runtime/device.hpp"
#endif

namespace {

using taco::cli::parse_bytes;
using taco::cli::split_list;

struct CommArgs {
  std::string colls = "all_reduce";
  std::string minbytes = "32M", maxbytes = "32M", stepbytes;
  int64_t stepfactor = 2;
  int iters = 20, warmup = 5, check = 1;
  std::string dtypes = "bf16";
  std::string op = "sum";
  int ngpus = 0;
  std::string codecs = "taco";
  std::string algos = "auto";
  int pipeline = 1;
  std::string pipeline_min = "4M";
  int codec_sms = 0;
  bool nccl_ce = false;
  int64_t cols = 1024;
  uint64_t seed = 1;
  double timeout = 300;
  std::string transport;
  int loopback = 0;
  int device = 0;
  bool no_plain = false, no_overlap = false, quiet = false;
  std::string json;
  std::vector<std::string> argv;
};

#if defined(TACO_HAVE_CUDA)
using taco::gpu::CommReport;
using taco::gpu::CommRow;

taco::gpu::CommOptions to_options(const CommArgs& a) {
  using namespace taco;
  gpu::CommOptions o;
  o.colls.clear();
  for (const auto& c : split_list(a.colls, "--coll")) {
    if (c == "all") {
      o.colls.assign(std::begin(taco::kAllColls), std::end(taco::kAllColls));
      break;
    }
    o.colls.push_back(taco::parse_coll(c));
  }
  const int64_t step = a.stepbytes.empty() ? 0 : parse_bytes(a.stepbytes, "-i/--stepbytes");
  o.sizes = comm::sweep_sizes(parse_bytes(a.minbytes, "-b/--minbytes"),
                              parse_bytes(a.maxbytes, "-e/--maxbytes"), a.stepfactor, step);
  o.dtypes.clear();
  for (const auto& d : split_list(a.dtypes, "-d/--datatype")) {
    if (d == "all") {
      o.dtypes = {DType::BF16, DType::F16, DType::F32, DType::F8E4M3, DType::F8E5M2};
      break;
    }
    o.dtypes.push_back(gpu::parse_comm_dtype(d));
  }
  TACO_REQUIRE_INPUT(a.op == "sum",
                     "-o/--op '{}': compressed collectives reduce by sum, so taco comm runs -o sum "
                     "(nccl-tests' default)",
                     a.op);
  o.codecs.clear();
  for (const auto& c : split_list(a.codecs, "--codec"))
    if (c != "none") o.codecs.push_back(c);
  o.plain = !a.no_plain;
  o.algos.clear();
  if (a.algos != "auto")
    for (const auto& s : split_list(a.algos, "--algo"))
      o.algos.push_back(taco::parse_allreduce_algo(s));
  o.pipeline = a.pipeline;
  o.pipeline_min_bytes = a.pipeline_min == "0" ? 0 : parse_bytes(a.pipeline_min, "--pipeline-min");
  TACO_REQUIRE_INPUT(a.codec_sms >= 0, "--codec-sms must be >= 0 (0: all SMs), got {}",
                     a.codec_sms);
  o.codec_sms = a.codec_sms;
  o.copy_engine = a.nccl_ce;
  o.iters = a.iters;
  o.warmup = a.warmup;
  o.check = a.check;
  TACO_REQUIRE_INPUT(a.ngpus >= 0, "-g/--ngpus must be >= 0, got {}", a.ngpus);
  o.gpus_per_proc = a.ngpus;
  o.loopback = a.loopback;
  TACO_REQUIRE_INPUT(a.loopback >= 0, "--loopback must be >= 0, got {}", a.loopback);
  TACO_REQUIRE_INPUT(a.loopback == 0 || a.ngpus == 0, "--loopback and -g exclude each other");
  o.device = a.device;
  o.cols = a.cols;
  o.seed = a.seed;
  TACO_REQUIRE_INPUT(a.timeout >= 0, "-T/--timeout must be >= 0 seconds, got {}", a.timeout);
  o.timeout_s = a.timeout;
  o.transport = a.transport;
  o.overlap = !a.no_overlap;
  return o;
}

std::string fmt_opt(double v, const char* f, bool present) {
  return present ? fmt::format(fmt::runtime(f), v) : "-";
}

void print_header(const CommReport& r, const CommArgs& a) {
  const auto& d = r.device;
  fmt::print("# taco comm {} ({}): nccl-tests-shaped collective benchmark, plain and compressed\n",
             taco::kVersion, taco::kGitCommit);
  fmt::print(
      "# nranks {}: {} process(es) x {} GPU(s) ({}) | transport {} | NCCL {} (headers {}) | CUDA "
      "runtime {}, "
      "driver {} ({})\n",
      r.nranks, r.nprocs, r.gpus_per_proc, r.launch, r.transport,
      r.nccl_runtime.empty() ? "-" : r.nccl_runtime, r.nccl_header.empty() ? "-" : r.nccl_header,
      taco::gpu::cuda_version_string(d.runtime_version),
      taco::gpu::cuda_version_string(d.driver_api_version),
      d.driver_version.empty() ? "?" : d.driver_version);
  fmt::print(
      "# iters {} warmup {} check {} pipeline {} cols {} seed {} timeout {} s | wire buffers {} | "
      "settings hash "
      "{:016x}\n",
      a.iters, a.warmup, a.check, a.pipeline, a.cols, a.seed, a.timeout,
      r.wire_memory.empty() ? "-" : r.wire_memory, r.settings_hash);
  for (const auto& k : r.ranks)
    fmt::print("#  Rank {:2} Pid {:6} on {:>10} device {:2} [{}] {}\n", k.rank, k.pid, k.host,
               k.device, k.pci, k.name);
  for (const auto& e : r.env) fmt::print("#  env {}={}\n", e.first, e.second);
  fmt::print("#\n");
  fmt::print(
      "# {:>10} {:>12} {:>8} {:>5} {:>10} {:>8} {:>4} {:>10} {:>8} {:>8} {:>7} {:>11} {:>8} {:>7} "
      "{:>9} {:>9} "
      "{:>7}\n",
      "size", "count", "type", "redop", "codec", "algo", "pipe", "time", "algbw", "busbw", "#wrong",
      "wire", "eff_bw", "speedup", "rel_l2", "max_abs", "hidden");
  fmt::print(
      "# {:>10} {:>12} {:>8} {:>5} {:>10} {:>8} {:>4} {:>10} {:>8} {:>8} {:>7} {:>11} {:>8} {:>7} "
      "{:>9} {:>9} "
      "{:>7}\n",
      "(B)", "(elements)", "", "", "", "", "", "(us)", "(GB/s)", "(GB/s)", "", "(B)", "(GB/s)",
      "(x)", "", "", "(%)");
  std::fflush(stdout);
}

void print_row(const CommRow& w) {
  fmt::print(
      "  {:>10} {:>12} {:>8} {:>5} {:>10} {:>8} {:>4} {:>10.2f} {:>8.2f} {:>8.2f} {:>7} {:>11} "
      "{:>8.2f} {:>7} "
      "{:>9} {:>9} {:>7}\n",
      w.size, w.count, w.type, w.redop, w.codec.size() > 10 ? w.codec.substr(0, 10) : w.codec,
      w.algorithm, w.pipeline, w.time_us, w.algbw, w.busbw,
      w.nwrong < 0 ? std::string("N/A") : std::to_string(w.nwrong), w.wire_bytes, w.eff_busbw,
      fmt_opt(w.speedup, "{:.2f}", w.speedup >= 0), fmt_opt(w.rel_l2, "{:.2e}", w.rel_l2 >= 0),
      fmt_opt(w.max_abs, "{:.2e}", w.max_abs >= 0),
      fmt_opt(w.hidden_codec_pct, "{:.0f}", w.hidden_codec_pct >= 0));
  std::fflush(stdout);
}

nlohmann::json num_or_null(double v, bool present) {
  if (!present || !std::isfinite(v)) return nullptr;
  return v;
}

nlohmann::json to_json(const CommReport& r, const CommArgs& a) {
  using nlohmann::json;
  json m;
  m["argv"] = a.argv;
  m["taco_version"] = taco::kVersion;
  m["git_commit"] = taco::kGitCommit;
  m["gpu"] = r.device.name;
  m["nranks"] = r.nranks;
  m["nccl_version"] = r.nccl_runtime;
  m["date"] = taco::utc_now_iso8601();
  // appended
  m["nccl_header_version"] = r.nccl_header;
  m["cuda_runtime"] = taco::gpu::cuda_version_string(r.device.runtime_version);
  m["cuda_driver"] = taco::gpu::cuda_version_string(r.device.driver_api_version);
  m["driver_version"] = r.device.driver_version;
  m["sm"] = fmt::format("sm_{}{}", r.device.sm_major, r.device.sm_minor);
  m["launch"] = r.launch;
  m["processes"] = r.nprocs;
  m["gpus_per_process"] = r.gpus_per_proc;
  m["transport"] = r.transport;
  m["devices"] = json::array();
  for (const auto& k : r.ranks)
    m["devices"].push_back({{"rank", k.rank},
                            {"pid", k.pid},
                            {"hostname", k.host},
                            {"device", k.device},
                            {"pci_bus_id", k.pci},
                            {"name", k.name}});
  m["env"] = r.env;
  m["config"] = {
      {"iters", a.iters},
      {"warmup_iters", a.warmup},
      {"check", a.check},
      {"pipeline", a.pipeline},
      {"pipeline_min", a.pipeline_min},
      {"codec_sms", a.codec_sms},
      {"nccl_ce", a.nccl_ce},
      {"cols", a.cols},
      {"seed", a.seed},
      {"timeout_s", a.timeout},
      {"algo", a.algos},
      {"overlap_stats", !a.no_overlap},
      {"time", "mean over processes of (wall time of -n back-to-back runs) / n, after a barrier"},
      {"busbw", "nccl-tests factors on the uncompressed size; GB = 1e9 B"},
      {"eff_busbw", "busbw with the data counted as bf16 (2 B/element)"}};
  m["wire_memory"] = r.wire_memory;
  m["settings"] = r.settings;
  m["settings_hash"] = fmt::format("{:016x}", r.settings_hash);
  m["notes"] = r.notes;
  json res = json::array();
  for (const auto& w : r.rows) {
    json o;
    o["collective"] = w.collective;
    o["size"] = w.size;
    o["count"] = w.count;
    o["type"] = w.type;
    o["redop"] = w.redop;
    o["codec"] = w.codec;
    o["algorithm"] = w.algorithm;
    o["transport"] = w.transport;
    o["nranks"] = w.nranks;
    o["time_us"] = w.time_us;
    o["algbw"] = w.algbw;
    o["busbw"] = w.busbw;
    o["wire_bytes"] = w.wire_bytes;
    o["eff_busbw"] = w.eff_busbw;
    o["speedup"] = num_or_null(w.speedup, w.speedup >= 0);
    o["rel_l2"] = num_or_null(w.rel_l2, w.rel_l2 >= 0);
    o["max_abs"] = num_or_null(w.max_abs, w.max_abs >= 0);
    o["nwrong"] = w.nwrong < 0 ? json(nullptr) : json(w.nwrong);
    o["hidden_codec_pct"] = num_or_null(w.hidden_codec_pct, w.hidden_codec_pct >= 0);
    // appended
    o["pipeline"] = w.pipeline;
    o["quantizations"] = w.quantizations;
    o["bytes_sent"] = w.bytes_sent;
    o["t_comm_us"] = num_or_null(w.t_comm_us, w.t_comm_us >= 0);
    o["t_codec_us"] = num_or_null(w.t_codec_us, w.t_codec_us >= 0);
    o["nonfinite"] = w.nonfinite < 0 ? json(nullptr) : json(w.nonfinite);
    o["algo_auto"] = w.algo_auto;
    res.push_back(o);
  }
  return {{"meta", m}, {"results", res}};
}

void run(CommArgs& a) {
  const taco::gpu::CommOptions o = to_options(a);
  bool header = false;
  auto on_row = [&](const CommReport& r, const CommRow& w) {
    if (a.quiet) return;
    if (!header) {
      print_header(r, a);
      header = true;
    }
    print_row(w);
  };
  const CommReport r = taco::gpu::run_comm(o, on_row);
  int64_t wrong = 0;
  for (const auto& w : r.rows) wrong += std::max<int64_t>(0, w.nwrong);
  if (r.root) {
    if (!a.quiet) {
      if (!header) print_header(r, a);
      for (const auto& n : r.notes) fmt::print("# note: {}\n", n);
      fmt::print("# Out of bounds values : {} {}\n", wrong, wrong ? "FAILED" : "OK");
      std::map<std::string, std::pair<double, int>> avg;
      for (const auto& w : r.rows) {
        auto& x = avg[w.codec == "none" ? "plain NCCL" : w.codec + " (" + w.algorithm + ")"];
        x.first += w.busbw;
        ++x.second;
      }
      for (const auto& [k, v] : avg)
        fmt::print("# Avg bus bandwidth    : {:.3f}  {}\n", v.first / v.second, k);
      fmt::print("#\n");
    }
    if (!a.json.empty()) taco::write_file_atomically(a.json, to_json(r, a).dump(1) + "\n");
  }
  if (wrong > 0)
    throw taco::Error(fmt::format(
        "taco comm: {} wrong element(s) (#wrong column): a collective returned corrupted data",
        wrong));
}
#endif

void add_comm(CLI::App& root) {
  auto args = std::make_shared<CommArgs>();
  CLI::App* c = root.add_subcommand(
      "comm", "Live NCCL collective benchmark, plain and compressed, in nccl-tests' shape");
  c->add_option(
       "--coll", args->colls,
       "Collectives (comma list): all_reduce, reduce_scatter, all_gather, alltoall, sendrecv, all")
      ->capture_default_str();
  c->add_option("-b,--minbytes", args->minbytes, "Smallest per-rank buffer (K/M/G suffixes)")
      ->capture_default_str();
  c->add_option("-e,--maxbytes", args->maxbytes, "Largest per-rank buffer")->capture_default_str();
  c->add_option("-f,--stepfactor", args->stepfactor, "Multiplicative size step")
      ->capture_default_str();
  c->add_option("-i,--stepbytes", args->stepbytes, "Additive size step (instead of -f)");
  c->add_option("-n,--iters", args->iters, "Timed iterations per size")->capture_default_str();
  c->add_option("-w,--warmup_iters", args->warmup, "Untimed iterations before timing")
      ->capture_default_str();
  c->add_option("-c,--check", args->check,
                "Checked runs per size (0: no check, #wrong and errors N/A)")
      ->capture_default_str();
  c->add_option("-d,--datatype", args->dtypes,
                "bf16|bfloat16, f16|half, f32|float, f8e4m3, f8e5m2, all (comma list)")
      ->capture_default_str();
  c->add_option("-o,--op", args->op, "Reduction: sum")->capture_default_str();
  c->add_option("-g,--ngpus", args->ngpus,
                "GPUs per process (default: all visible GPUs in one process; 1 under mpirun)");
  c->add_option("--codec", args->codecs,
                "GPU codecs of the compressed rows (comma list; 'none': plain NCCL only)")
      ->capture_default_str();
  c->add_option("--algo", args->algos,
                "Compressed all-reduce: auto (COCCL: <1 MiB one_shot, <32 MiB two_shot, else ring; "
                "one_shot at N = 2), or a comma list "
                "of one_shot, two_shot, ring")
      ->capture_default_str();
  c->add_option("--pipeline", args->pipeline,
                "Pieces per chunk, pipelined so that the codec of one piece overlaps the transfer "
                "of another")
      ->capture_default_str();
  c->add_option("--pipeline-min", args->pipeline_min,
                "Smallest pipeline piece of a rank's chunk: fewer pieces for smaller messages (0: "
                "always --pipeline)")
      ->capture_default_str();
  c->add_option("--codec-sms", args->codec_sms,
                "SMs the codec kernels may fill (0: all); the rest stay free for the NCCL kernels "
                "they overlap")
      ->capture_default_str();
  c->add_flag(
      "--nccl-ce", args->nccl_ce,
      "Compressed messages on a communicator with NCCL_CTA_POLICY_ZERO and wire buffers registered "
      "as "
      "symmetric NCCL windows, so NCCL (>= 2.28) moves all-gathers with copy engines over NVLink");
  c->add_option("--cols", args->cols, "Hidden size: the codec sees a buffer as [count/cols, cols]")
      ->capture_default_str();
  c->add_option("--seed", args->seed, "Seed of the structured inputs")
      ->check(taco::cli::non_negative())
      ->capture_default_str();
  c->add_option(
       "-T,--timeout", args->timeout,
       "Seconds any wait may take before every rank aborts (0: blocking NCCL, no deadline)")
      ->capture_default_str();
  c->add_option("--transport", args->transport,
                "Transport label of the rows (default: p2p, shm or socket from "
                "NCCL_P2P_DISABLE/NCCL_SHM_DISABLE)");
  c->add_option(
      "--loopback", args->loopback,
      "Run N virtual ranks on one GPU through device copies (checks code paths; not a network)");
  c->add_option("--device", args->device, "First CUDA device of this process")
      ->capture_default_str();
  c->add_flag("--no-plain", args->no_plain, "Skip the plain NCCL rows (no speedup column)");
  c->add_flag("--no-overlap", args->no_overlap,
              "Skip the communication-only and codec-only timings (no hidden_codec_pct)");
  c->add_option("-J,--json", args->json, "Write the results as JSON (docs/results-schema.md)");
  c->add_flag("-q,--quiet", args->quiet, "No table on stdout");
  c->footer(
      "Examples:\n"
      "  taco comm -b 1M -e 1G -f 2 -g 2 --json comm.json            # one process, 2 GPUs, bf16 "
      "AR\n"
      "  taco comm --coll all -d bf16 -b 64M -e 64M --codec taco,fp8-g128 --pipeline 4\n"
      "  mpirun -np 2 taco comm -b 1M -e 1G -g 1 --algo one_shot,two_shot,ring\n"
      "  NCCL_P2P_DISABLE=1 taco comm -b 1M -e 1G --transport shm --json shm.json\n"
      "  taco comm --loopback 4 --coll all -b 1M -e 16M              # code paths on one GPU\n"
      "Rows: plain NCCL first (codec 'none'), then each codec at the same size; speedup = plain "
      "time /\n"
      "compressed time; #wrong counts corrupted elements (plain: any difference from the exact "
      "sum;\n"
      "compressed: NaN/Inf or an error above half the largest possible |result|); rel_l2 and "
      "max_abs are\n"
      "the compressed result's error against the exact fp32 result. docs/comm.md has the details.");
  c->callback([args]() {
    args->argv = taco::cli::self_argv();
#if defined(TACO_HAVE_CUDA)
    run(*args);
#else
    taco::throw_input_error("taco comm needs the GPU backend (nvcc and NCCL); this build has none");
#endif
  });
}

}  // namespace

TACO_REGISTER_COMMAND(80, add_comm);
