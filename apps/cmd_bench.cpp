// taco bench: GPU codec throughput (encode, decode, decode-reduce) per variant and size, fused
// and unfused, as a share of the device-to-device copy measured in the same run. Timing follows
// nvbench: CUDA events, warm-up, L2-flushed cold samples, batch samples over rotating inputs,
// median and noise, noise-based stopping. Output: a markdown table on stdout, --json / --csv
// files as docs/results-schema.md describes.
#include "cli_parse.hpp"
#include "command.hpp"
#include "core/atomic_file.hpp"
#include "core/error.hpp"
#include "core/provenance.hpp"
#include "core/version.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <cctype>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#if defined(TACO_HAVE_CUDA)
#include "cuda/bench/bench_runner.hpp"
#endif

namespace {

using taco::cli::parse_bytes;
using taco::cli::split_list;

struct BenchArgs {
  std::string variants = "taco,fp8-g128";
  std::string ops = "encode,decode,decode_reduce";
  std::string impls = "fused,unfused";
  std::string sizes;
  std::string min_size = "1M", max_size = "1G";
  int factor = 4;
  std::string dtype = "bf16";
  int64_t cols = 4096;
  int64_t chunks = 1;
  int sources = 2;
  int min_samples = 10;
  double max_noise = 0.5, min_time = 0.5, timeout = 15.0;
  bool no_cold = false, no_batch = false;
  std::string batch_max = "64M";
  bool no_verify = false;
  uint64_t seed = 1;
  int device = 0;
  std::string json, csv;
  bool quiet = false;
};

#if defined(TACO_HAVE_CUDA)
std::string human_bytes(int64_t b) {
  if (b >= (int64_t(1) << 30) && b % (int64_t(1) << 30) == 0) return fmt::format("{} GiB", b >> 30);
  if (b >= (int64_t(1) << 20) && b % (int64_t(1) << 20) == 0) return fmt::format("{} MiB", b >> 20);
  if (b >= 1024 && b % 1024 == 0) return fmt::format("{} KiB", b >> 10);
  return fmt::format("{} B", b);
}

std::string fmt_num(double v) {
  return fmt::format("{:.9g}", v);
}

nlohmann::json meta_json(const taco::gpu::BenchReport& rep, const taco::gpu::BenchOptions& o,
                         const std::string& argv) {
  const auto& d = rep.device;
  nlohmann::json m;
  m["argv"] = argv;
  m["taco_version"] = taco::kVersion;
  m["git_commit"] = taco::kGitCommit;
  m["gpu"] = d.name;
  m["sm"] = fmt::format("sm_{}{}", d.sm_major, d.sm_minor);
  m["cuda_runtime"] = taco::gpu::cuda_version_string(d.runtime_version);
  m["cuda_driver"] = taco::gpu::cuda_version_string(d.driver_api_version);
  m["driver_version"] = d.driver_version;
  m["date"] = taco::utc_now_iso8601();
  // appended keys
  m["sm_count"] = d.sm_count;
  m["l2_bytes"] = d.l2_bytes;
  m["global_mem_bytes"] = d.global_mem_bytes;
  m["mem_bus_width_bits"] = d.mem_bus_width_bits;
  m["mem_clock_khz"] = d.mem_clock_khz;
  m["l2_flush_bytes"] = rep.flush_bytes;
  m["timing"] = {{"min_samples", o.timing.min_samples}, {"max_noise_pct", o.timing.max_noise_pct},
                 {"min_time_s", o.timing.min_time_s},   {"timeout_s", o.timing.timeout_s},
                 {"warmup", o.timing.warmup},           {"batch_launches_per_sample", 16},
                 {"batch_max_bytes", o.batch_max_bytes}};
  m["sources"] = o.sources;
  m["chunks"] = o.chunks;
  m["cols"] = o.cols;
  m["seed"] = o.seed;
  m["bytes_counted"] =
      "encode: numel*in_bytes + wire; encode_ef: encode + 2*numel*4 (the fp32 residual read and "
      "written); decode: wire + numel*out_bytes; decode_reduce: "
      "N wires of numel/N elements + numel/N*out_bytes; GB = 1e9 B";
  m["checks"] = rep.checks;
  m["check_failures"] = rep.failures;
  return m;
}

void write_json(const std::string& path, const taco::gpu::BenchReport& rep,
                const taco::gpu::BenchOptions& o, const std::string& argv) {
  nlohmann::json j;
  j["meta"] = meta_json(rep, o, argv);
  j["copy"] = nlohmann::json::array();
  for (const auto& c : rep.copy)
    j["copy"].push_back({{"bytes", c.bytes},
                         {"median_us", c.median_us},
                         {"tbps", c.tbps},
                         {"cold", c.cold},
                         {"noise_pct", c.noise_pct},
                         {"samples", c.samples}});
  j["results"] = nlohmann::json::array();
  for (const auto& r : rep.rows)
    j["results"].push_back({{"variant", r.variant},
                            {"op", r.op},
                            {"impl", r.impl},
                            {"dtype", r.dtype},
                            {"numel", r.numel},
                            {"bytes_counted", r.bytes_counted},
                            {"median_us", r.median_us},
                            {"min_us", r.min_us},
                            {"max_us", r.max_us},
                            {"noise_pct", r.noise_pct},
                            {"samples", r.samples},
                            {"gbps", r.gbps},
                            {"pct_copy", r.pct_copy},
                            {"cold", r.cold},
                            {"size_bytes", r.size_bytes},
                            {"sources", r.sources},
                            {"chunks", r.chunks},
                            {"launches", r.launches},
                            {"config", r.config},
                            {"timed_out", r.timed_out},
                            {"copy_gbps", r.copy_gbps}});
  taco::write_file_atomically(path, j.dump(1) + "\n");
}

void write_csv(const std::string& path, const taco::gpu::BenchReport& rep) {
  std::ostringstream s;
  s << "variant,op,impl,dtype,numel,bytes_counted,median_us,min_us,max_us,noise_pct,samples,gbps,"
       "pct_copy,cold,"
       "size_bytes,sources,chunks,launches,config,timed_out,copy_gbps\n";
  for (const auto& r : rep.rows)
    s << r.variant << ',' << r.op << ',' << r.impl << ',' << r.dtype << ',' << r.numel << ','
      << r.bytes_counted << ',' << fmt_num(r.median_us) << ',' << fmt_num(r.min_us) << ','
      << fmt_num(r.max_us) << ',' << fmt_num(r.noise_pct) << ',' << r.samples << ','
      << fmt_num(r.gbps) << ',' << fmt_num(r.pct_copy) << ',' << (r.cold ? "true" : "false") << ','
      << r.size_bytes << ',' << r.sources << ',' << r.chunks << ',' << r.launches << ',' << r.config
      << ',' << (r.timed_out ? "true" : "false") << ',' << fmt_num(r.copy_gbps) << '\n';
  taco::write_file_atomically(path, s.str());
}

void print_table(const taco::gpu::BenchReport& rep, const taco::gpu::BenchOptions& o) {
  const auto& d = rep.device;
  fmt::print("# taco bench: {} (sm_{}{}, {} SMs, L2 {} MiB), CUDA runtime {}, driver {} ({})\n",
             d.name, d.sm_major, d.sm_minor, d.sm_count, d.l2_bytes >> 20,
             taco::gpu::cuda_version_string(d.runtime_version),
             d.driver_version.empty() ? "?" : d.driver_version,
             taco::gpu::cuda_version_string(d.driver_api_version));
  fmt::print(
      "# cold: L2 flushed ({}) before every sample; batch: 16 back-to-back launches per sample "
      "over "
      "rotating inputs. GB/s = logical bytes / median, 1 GB = 1e9 B; % copy = share of the "
      "same-run "
      "device-to-device copy (same size, same mode). decode_reduce: {} sources.\n",
      human_bytes(int64_t(rep.flush_bytes)), o.sources);
  fmt::print(
      "\n| variant | op | impl | config | size | mode | median us | min us | max us | noise % | "
      "samples | GB/s | % copy |\n");
  fmt::print("|---|---|---|---|---:|---|---:|---:|---:|---:|---:|---:|---:|\n");
  for (const auto& r : rep.rows)
    fmt::print(
        "| {} | {} | {} | {} | {} | {} | {:.2f} | {:.2f} | {:.2f} | {:.2f}{} | {} | {:.1f} | "
        "{:.1f} |\n",
        r.variant, r.op, r.impl, r.config.empty() ? "-" : r.config, human_bytes(r.size_bytes),
        r.cold ? "cold" : "batch", r.median_us, r.min_us, r.max_us, r.noise_pct,
        r.timed_out ? " (timeout)" : "", r.samples, r.gbps, r.pct_copy);
  fmt::print(
      "\n| copy size | mode | median us | GB/s | noise % | samples "
      "|\n|---:|---|---:|---:|---:|---:|\n");
  for (const auto& c : rep.copy)
    fmt::print("| {} | {} | {:.2f} | {:.1f} | {:.2f} | {} |\n", human_bytes(c.bytes),
               c.cold ? "cold" : "batch", c.median_us, c.tbps * 1000.0, c.noise_pct, c.samples);
  if (!rep.checks.empty()) {
    fmt::print("\nVerified:\n");
    for (const auto& c : rep.checks) fmt::print("  {}\n", c);
  }
  for (const auto& f : rep.failures) fmt::print("\nVERIFICATION FAILED: {}\n", f);
}

#endif  // TACO_HAVE_CUDA

void run_bench_command(const BenchArgs& a) {
  // Before any measurement: each output can be written, and they are two files (the CSV would
  // replace the JSON).
  if (!a.json.empty()) taco::check_output_file(a.json, "--json");
  if (!a.csv.empty()) taco::check_output_file(a.csv, "--csv");
  if (!a.json.empty() && !a.csv.empty()) {
    namespace fs = std::filesystem;
    std::error_code ec;  // equivalent() is false when either does not exist yet
    const bool same =
        fs::absolute(a.csv).lexically_normal() == fs::absolute(a.json).lexically_normal() ||
        fs::equivalent(a.csv, a.json, ec);
    TACO_REQUIRE_INPUT(!same, "--csv {}: is also the --json output ({}); give two files", a.csv,
                       a.json);
  }
#if !defined(TACO_HAVE_CUDA)
  (void)a;
  taco::throw_input_error(
      "taco bench: this taco was built without CUDA (rebuild with nvcc available, "
      "-DTACO_CUDA=ON)");
#else
  taco::gpu::BenchOptions o;
  o.variants = split_list(a.variants, "--variants");
  o.ops = split_list(a.ops, "--ops");
  o.impls = split_list(a.impls, "--impl");
  if (!a.sizes.empty()) {
    for (const auto& s : split_list(a.sizes, "--sizes"))
      o.sizes.push_back(parse_bytes(s, "--sizes"));
  } else {
    const int64_t lo = parse_bytes(a.min_size, "--min-size"),
                  hi = parse_bytes(a.max_size, "--max-size");
    TACO_REQUIRE_INPUT(a.factor >= 2, "--factor must be >= 2");
    TACO_REQUIRE_INPUT(lo <= hi, "--min-size {} is larger than --max-size {}", a.min_size,
                       a.max_size);
    for (int64_t s = lo; s <= hi; s *= a.factor) o.sizes.push_back(s);
  }
  TACO_REQUIRE_INPUT(a.dtype == "bf16" || a.dtype == "f32", "--dtype '{}': bf16 or f32", a.dtype);
  o.dtype = a.dtype == "bf16" ? taco::DType::BF16 : taco::DType::F32;
  o.cols = a.cols;
  o.chunks = a.chunks;
  o.sources = a.sources;
  o.cold = !a.no_cold;
  o.batch = !a.no_batch;
  o.batch_max_bytes = parse_bytes(a.batch_max, "--batch-max");
  TACO_REQUIRE_INPUT(a.min_samples >= 1 && a.max_noise > 0 && a.min_time >= 0 && a.timeout > 0,
                     "timing options must be positive (--min-samples, --max-noise, --timeout)");
  o.timing.min_samples = a.min_samples;
  o.timing.max_noise_pct = a.max_noise;
  o.timing.min_time_s = a.min_time;
  o.timing.timeout_s = a.timeout;
  o.verify = !a.no_verify;
  o.seed = a.seed;
  o.device = a.device;
  if (!a.quiet)
    o.progress = [](const std::string& line) { std::fprintf(stderr, "%s\n", line.c_str()); };
  const std::string argv = taco::shell_join(taco::cli::self_argv());
  const taco::gpu::BenchReport rep = taco::gpu::run_bench(o);
  print_table(rep, o);
  if (!a.json.empty()) write_json(a.json, rep, o, argv);
  if (!a.csv.empty()) write_csv(a.csv, rep);
  if (!rep.failures.empty())
    taco::throw_error("taco bench: {} byte check(s) failed, first: {}", rep.failures.size(),
                      rep.failures.front());
#endif
}

void add_bench(CLI::App& root) {
  auto a = std::make_shared<BenchArgs>();
  CLI::App* cmd = root.add_subcommand(
      "bench", "GPU codec throughput: encode, decode, decode-reduce vs copy bandwidth");
  cmd->add_option("--variants,--variant,-v", a->variants,
                  "Comma-separated presets or grammar forms")
      ->capture_default_str();
  cmd->add_option(
         "--ops", a->ops,
         "encode, encode_ef (with error feedback), decode, decode_reduce, decode_reduce_encode")
      ->capture_default_str();
  cmd->add_option("--impl", a->impls,
                  "fused (one kernel) and/or unfused (TACO v1-style pipeline; TACO variants)")
      ->capture_default_str();
  cmd->add_option("--sizes", a->sizes,
                  "Comma-separated bf16 input sizes (e.g. 1M,8M,256M,1G); overrides -b/-e/-f");
  cmd->add_option("-b,--min-size", a->min_size, "Smallest size (bytes of bf16 input; K/M/G binary)")
      ->capture_default_str();
  cmd->add_option("-e,--max-size", a->max_size, "Largest size")->capture_default_str();
  cmd->add_option("-f,--factor", a->factor, "Size step factor")->capture_default_str();
  cmd->add_option("--dtype", a->dtype, "Encode input / decode output type: bf16 or f32")
      ->capture_default_str();
  cmd->add_option("--cols", a->cols, "Hidden size: tensors are [numel / cols, cols]")
      ->capture_default_str();
  cmd->add_option("--chunks", a->chunks,
                  "Chunks per encode/decode launch (a collective's per-peer chunks)")
      ->capture_default_str();
  cmd->add_option("--sources", a->sources, "Inputs summed by decode_reduce (the TP degree N)")
      ->capture_default_str();
  cmd->add_option("--min-samples", a->min_samples, "Samples at least")->capture_default_str();
  cmd->add_option("--max-noise", a->max_noise, "Stop once the relative stdev (%) is below this")
      ->capture_default_str();
  cmd->add_option("--min-time", a->min_time, "Seconds of GPU time at least per measurement")
      ->capture_default_str();
  cmd->add_option("--timeout", a->timeout, "Wall seconds at most per measurement")
      ->capture_default_str();
  cmd->add_flag("--no-cold", a->no_cold, "Skip the L2-flushed (cold) measurements");
  cmd->add_flag("--no-batch", a->no_batch,
                "Skip the batch (back-to-back, rotating inputs) measurements");
  cmd->add_option("--batch-max", a->batch_max, "Largest size with batch measurements")
      ->capture_default_str();
  cmd->add_flag("--no-verify", a->no_verify,
                "Skip the GPU-vs-CPU and fused-vs-unfused byte checks (sizes <= 16 MiB)");
  cmd->add_option("--seed", a->seed, "Input data seed")
      ->check(taco::cli::non_negative())
      ->capture_default_str();
  cmd->add_option("--device", a->device, "CUDA device index")->capture_default_str();
  cmd->add_option("--json", a->json, "Write results as JSON (docs/results-schema.md)");
  cmd->add_option("--csv", a->csv, "Write results as CSV");
  cmd->add_flag("-q,--quiet", a->quiet, "No progress lines on stderr");
  cmd->footer(
      "Examples:\n"
      "  taco bench                                   # taco and fp8-g128, 1 MiB..1 GiB (x4), "
      "fused + unfused\n"
      "  taco bench -v taco,fp8-g128,mxfp8 --sizes 8M,256M --json bench.json --csv bench.csv\n"
      "  taco bench -v taco --ops decode_reduce --sources 4 --impl fused --no-batch\n"
      "Exit codes: 0 ok; 2 bad options or a build without CUDA; 1 CUDA errors, out of GPU memory, "
      "or a\n"
      "failed byte check.");
  cmd->callback([a] { run_bench_command(*a); });
}

}  // namespace

TACO_REGISTER_COMMAND(50, add_bench);
