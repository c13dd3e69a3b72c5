// taco codec: list the codec variants, encode/decode a tensor to/from wire bytes, element-wise
// casts to the number formats (used by the Python oracle tests), and a CPU throughput benchmark.
#include "cli_parse.hpp"
#include "codecs/codec.hpp"
#include "codecs/hadamard.hpp"
#include "codecs/structured/structured.hpp"
#include "codecs/variant.hpp"
#include "command.hpp"
#include "core/atomic_file.hpp"
#include "core/error.hpp"
#include "formats/elem.hpp"
#include "io/npy_write.hpp"
#include "io/tensor_source.hpp"

#include <fmt/format.h>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

namespace {

using taco::Tensor;

// The one tensor of IN (or the one named by --tensor), as [rows, cols].
Tensor read_input(const std::string& path, const std::string& name) {
  auto src = taco::open_tensor_file(path);
  TACO_REQUIRE_INPUT(src->size() > 0, "{}: no tensors", path);
  if (name.empty()) {
    TACO_REQUIRE_INPUT(src->size() == 1, "{}: holds {} tensors; pick one with --tensor NAME", path,
                       src->size());
    return src->read(0);
  }
  for (size_t i = 0; i < src->size(); ++i)
    if (src->info(i).name == name) return src->read(i);
  taco::throw_input_error("{}: no tensor named '{}'", path, name);
}

std::vector<int64_t> parse_shape(const std::string& s) {
  std::vector<int64_t> dims;
  size_t start = 0;
  while (start <= s.size()) {
    const size_t p = std::min(s.find(',', start), s.size());
    const std::string d = s.substr(start, p - start);
    TACO_REQUIRE_INPUT(!d.empty() && d.size() < 13 && std::all_of(d.begin(), d.end(), ::isdigit),
                       "--shape '{}': expected positive integers like 4096,1024", s);
    dims.push_back(std::stoll(d));
    TACO_REQUIRE_INPUT(dims.back() > 0, "--shape '{}': dimensions must be positive", s);
    start = p + 1;
  }
  TACO_REQUIRE_INPUT(dims.size() == 2, "--shape '{}': expected two dimensions ROWS,COLS", s);
  TACO_REQUIRE_INPUT(dims[0] <= INT64_MAX / int64_t(sizeof(float)) / dims[1],
                     "--shape '{}': too many elements", s);
  return dims;
}

std::vector<uint8_t> read_bytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  TACO_REQUIRE_INPUT(f.good(), "{}: cannot open", path);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}

// ---- list -----------------------------------------------------------------------------------

void run_list() {
  fmt::print("Presets (taco codec list):\n");
  for (const auto& p : taco::preset_table())
    fmt::print("  {:<16} {:<28} {}\n", p.name, p.definition, p.description);
  fmt::print(
      "\nGrammar: colon-separated tokens, any order (docs/variants.md):\n"
      "  element   e4m3 | e5m2 | e2m1 | int8 | int4 | int3 | int2 [asym]\n"
      "  blocks    tensor | row | col | g<G> | tile<T>      (G, T powers of two, {}..{})\n"
      "  scale     sf32 | sbf16 | sf16 | se8m0 | sue4m3     [sround=up|rne|ocp]\n"
      "  transform had | rht [seed=N]\n"
      "  TACO      taco (TACO scale rules, one fp32 scale) | dual (+ adaptive scale s_a) "
      "[lambda=X]\n"
      "  other     T=X (target range) | nosat\n"
      "  families  bf16 | tahquant[:tile=64][:hi=4][:lo=3][:pct=80]\n"
      "Examples: e4m3:g64:had:dual   int8:row:asym   e5m2:tile32:se8m0   e2m1:g16:sue4m3:had\n",
      taco::kMinGroup, taco::kMaxGroup);
  fmt::print("\nStructured codecs and error feedback (docs/structured.md):\n");
  for (const auto& p : taco::structured::structured_presets())
    fmt::print("  {:<16} {:<28} {}\n", p.name, p.definition, p.description);
  fmt::print(
      "  families  subspace:k=K|frac=F   lowrank:rank=R|energy=E|bpe=B[:rsvd]   "
      "tt:order=D[:rank=R|eps=E]\n"
      "            topk:frac=F   randk:frac=F[:unbiased]   ef:<variant>   aqsgd:<variant>\n");
}

// ---- encode / decode ------------------------------------------------------------------------

struct EncodeArgs {
  std::string variant, in, out, tensor;
};

void run_encode(const EncodeArgs& a) {
  taco::check_not_an_input(a.out, {a.in}, "OUT", taco::OutputKind::File);
  const auto codec = taco::make_codec(a.variant);
  const Tensor t = read_input(a.in, a.tensor);
  taco::EncodeStats st;
  const std::vector<uint8_t> wire = codec->encode(t.values.data(), t.rows(), t.cols(), &st);
  taco::AtomicFile f(a.out, true);
  f.stream().write(reinterpret_cast<const char*>(wire.data()), std::streamsize(wire.size()));
  f.commit();
  fmt::print(
      "{}: [{}, {}] -> {} bytes ({:.6g} B/elem), saturated {}, non-finite {}; decode with "
      "--variant {} --shape {},{}\n",
      codec->name(), t.rows(), t.cols(), wire.size(), double(wire.size()) / double(t.numel()),
      st.saturated, st.nonfinite, codec->name(), t.rows(), t.cols());
}

struct DecodeArgs {
  std::string variant, shape, in, out;
};

void run_decode(const DecodeArgs& a) {
  taco::check_not_an_input(a.out, {a.in}, "OUT", taco::OutputKind::File);
  const auto codec = taco::make_codec(a.variant);
  const std::vector<int64_t> shape = parse_shape(a.shape);
  const std::vector<uint8_t> wire = read_bytes(a.in);
  // The shape sets the output's size: bounded by the wire's bytes, as a reader bounds a
  // compressed tensor by the bytes it stores.
  taco::check_expansion(uint64_t(shape[0] * shape[1]), wire.size(),
                        fmt::format("{}: --shape {}", a.in, a.shape));
  std::vector<float> out(static_cast<size_t>(shape[0] * shape[1]));
  codec->decode(wire.data(), wire.size(), shape[0], shape[1], out.data());
  taco::write_npy(a.out, out, shape);
}

// ---- cast -----------------------------------------------------------------------------------

struct CastArgs {
  std::string format, in, out, tensor;
  bool nosat = false, decode = false;
};

void run_cast(const CastArgs& a) {
  taco::check_not_an_input(a.out, {a.in}, "OUT", taco::OutputKind::File);
  const taco::CastFormat f = taco::parse_cast_format(a.format);
  const Tensor t = read_input(a.in, a.tensor);
  const std::vector<int64_t> shape = t.shape.empty() ? std::vector<int64_t>{1} : t.shape;
  const std::vector<uint16_t> codes =
      taco::cast_encode(f, t.values.data(), t.values.size(), !a.nosat);
  if (a.decode) {
    taco::write_npy(a.out, taco::cast_decode(f, codes.data(), codes.size()), shape);
  } else if (taco::cast_code_bits(f) == 16) {
    taco::write_npy(a.out, codes, shape);
  } else {
    taco::write_npy(a.out, std::vector<uint8_t>(codes.begin(), codes.end()), shape);
  }
}

// ---- bench ----------------------------------------------------------------------------------

struct BenchArgs {
  std::string variant = "taco";
  int64_t numel = int64_t(1) << 26, cols = 4096;
  int reps = 5;
  uint64_t seed = 1;
};

// Deterministic test data: Gaussian(0, 1e-2) (Box-Muller on SplitMix64) with one in 1024
// values 50x larger, like TP activations with a few outliers.
std::vector<float> bench_data(int64_t n, uint64_t seed) {
  std::vector<float> x(static_cast<size_t>(n));
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; i += 2) {
    uint64_t st = seed ^ (uint64_t(i) * 0x9E3779B97F4A7C15ull);
    const double u1 = (double(taco::splitmix64_next(st) >> 11) + 1.0) * 0x1.0p-53;
    const double u2 = double(taco::splitmix64_next(st) >> 11) * 0x1.0p-53;
    const double r = std::sqrt(-2.0 * std::log(u1)) * 1e-2;
    const bool outlier = (taco::splitmix64_next(st) & 1023u) == 0;
    x[size_t(i)] = float(r * std::cos(2 * M_PI * u2) * (outlier ? 50.0 : 1.0));
    if (i + 1 < n) x[size_t(i + 1)] = float(r * std::sin(2 * M_PI * u2));
  }
  return x;
}

void run_bench(const BenchArgs& a) {
  TACO_REQUIRE_INPUT(a.cols > 0 && a.numel >= a.cols && a.numel % a.cols == 0,
                     "--numel {} must be a positive multiple of --cols {}", a.numel, a.cols);
  TACO_REQUIRE_INPUT(a.reps >= 1, "--reps must be >= 1");
  const auto codec = taco::make_codec(a.variant);
  const int64_t rows = a.numel / a.cols;
  const std::vector<float> x = bench_data(a.numel, a.seed);
  std::vector<float> y(x.size());
  using clock = std::chrono::steady_clock;
  std::vector<double> te, td;
  std::vector<uint8_t> wire;
  for (int r = 0; r < a.reps + 1; ++r) {  // the first round warms up
    const auto t0 = clock::now();
    codec->encode_into(x.data(), rows, a.cols,
                       wire);  // buffer reused: no page faults after round 0
    const auto t1 = clock::now();
    codec->decode(wire.data(), wire.size(), rows, a.cols, y.data());
    const auto t2 = clock::now();
    if (r == 0) continue;
    te.push_back(std::chrono::duration<double>(t1 - t0).count());
    td.push_back(std::chrono::duration<double>(t2 - t1).count());
  }
  std::sort(te.begin(), te.end());
  std::sort(td.begin(), td.end());
  const double e = te[te.size() / 2], d = td[td.size() / 2];
  double num = 0, den = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    num += double(x[i] - y[i]) * double(x[i] - y[i]);
    den += double(x[i]) * double(x[i]);
  }
  const double n = double(a.numel) / 1e6;
  fmt::print(
      "{}: [{}, {}] ({} elements), {} threads, median of {}: encode {:.1f} ms ({:.1f} M elem/s), "
      "decode {:.1f} ms ({:.1f} M elem/s), encode+decode {:.1f} M elem/s; {:.6g} B/elem, rel_l2 "
      "{:.4g}\n",
      codec->name(), rows, a.cols, a.numel, omp_get_max_threads(), a.reps, e * 1e3, n / e, d * 1e3,
      n / d, n / (e + d), double(wire.size()) / double(a.numel), std::sqrt(num / den));
}

void add_codec(CLI::App& root) {
  CLI::App* cmd =
      root.add_subcommand("codec", "Codec variants: list, encode, decode, element casts, bench");
  cmd->require_subcommand(1);
  cmd->footer(
      "Examples:\n"
      "  taco codec list\n"
      "  taco codec encode --variant taco x.npy x.taco.bin\n"
      "  taco codec decode --variant taco --shape 4096,1024 x.taco.bin x.taco.npy\n"
      "  taco codec cast --format e4m3 --nosat x.npy codes.npy\n"
      "  taco codec bench --variant fp8-g128 --numel 67108864");

  cmd->add_subcommand("list", "Presets and the variant grammar")->callback(run_list);

  auto ea = std::make_shared<EncodeArgs>();
  CLI::App* enc = cmd->add_subcommand("encode", "Encode a tensor into the codec's wire bytes");
  enc->add_option("--variant,-v", ea->variant, "Preset or grammar (taco codec list)")->required();
  enc->add_option("IN", ea->in,
                  "Tensor file (npy, npz, safetensors, taco trace); seen as [rows, cols], "
                  "cols = last dimension")
      ->required();
  enc->add_option("OUT", ea->out, "Wire bytes (written whole or not at all)")->required();
  enc->add_option("--tensor", ea->tensor, "Tensor name, when IN holds several");
  enc->footer("Example:\n  taco codec encode --variant e4m3:g64:had:dual x.npy x.bin");
  enc->callback([ea] { run_encode(*ea); });

  auto da = std::make_shared<DecodeArgs>();
  CLI::App* dec = cmd->add_subcommand("decode", "Decode wire bytes into a float32 .npy");
  dec->add_option("--variant,-v", da->variant, "The variant that encoded IN")->required();
  dec->add_option("--shape", da->shape, "ROWS,COLS of the encoded tensor")->required();
  dec->add_option("IN", da->in, "Wire bytes")->required();
  dec->add_option("OUT", da->out, "Output .npy (float32, [ROWS, COLS])")->required();
  dec->footer("Example:\n  taco codec decode --variant taco --shape 4096,1024 x.bin x.dec.npy");
  dec->callback([da] { run_decode(*da); });

  auto ca = std::make_shared<CastArgs>();
  CLI::App* cast =
      cmd->add_subcommand("cast", "Element-wise cast to a number format (codes or decoded values)");
  cast->add_option(
          "--format,-f", ca->format,
          "e4m3, e5m2, e2m1, e8m0, ue4m3, int8, int4, int3, int2, uint8, uint4, uint3, uint2, bf16")
      ->required();
  cast->add_flag("--nosat", ca->nosat,
                 "Non-saturating: overflow -> NaN (e4m3, e8m0, ue4m3) or Inf (e5m2, bf16)");
  cast->add_flag("--decode", ca->decode, "Write the decoded float32 values instead of the codes");
  cast->add_option("IN", ca->in, "Tensor file")->required();
  cast->add_option("OUT", ca->out,
                   "Output .npy: codes as uint8 (uint16 for bf16; 4-bit codes in the low "
                   "nibble; ints two's complement), or float32 with --decode")
      ->required();
  cast->add_option("--tensor", ca->tensor, "Tensor name, when IN holds several");
  cast->footer(
      "Values are cast as they are: no scaling. Rounding is to nearest even (e8m0: ties up).\n"
      "Example:\n  taco codec cast --format e5m2 --nosat --decode x.npy x_e5m2.npy");
  cast->callback([ca] { run_cast(*ca); });

  auto ba = std::make_shared<BenchArgs>();
  CLI::App* bench = cmd->add_subcommand("bench", "CPU encode/decode throughput on synthetic data");
  bench->add_option("--variant,-v", ba->variant, "Preset or grammar")->capture_default_str();
  bench->add_option("--numel", ba->numel, "Elements (a multiple of --cols)")->capture_default_str();
  bench->add_option("--cols", ba->cols, "Row length")->capture_default_str();
  bench->add_option("--reps", ba->reps, "Timed repetitions (median reported) after one warm-up")
      ->capture_default_str();
  bench->add_option("--seed", ba->seed, "Data seed")
      ->check(taco::cli::non_negative())
      ->capture_default_str();
  bench->footer(
      "Threads: OMP_NUM_THREADS (default: all cores). Results are identical for any thread count.\n"
      "Example:\n  OMP_NUM_THREADS=2 taco codec bench --variant taco --numel 67108864");
  bench->callback([ba] { run_bench(*ba); });
}

}  // namespace

TACO_REGISTER_COMMAND(40, add_codec);
