// taco import: turns safetensors, .npy and .npz files (and existing traces) into one taco
// trace, attaching TP metadata from the tensor names, a sidecar JSON file or --set.
#include "command.hpp"
#include "core/atomic_file.hpp"
#include "core/error.hpp"
#include "io/input_files.hpp"
#include "io/meta_fields.hpp"
#include "io/name_pattern.hpp"
#include "io/name_rules.hpp"
#include "io/tensor_source.hpp"

#include <fmt/format.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <sstream>

namespace {

using taco::DType;

struct ImportArgs {
  std::vector<std::string> inputs;
  std::string out;
  std::string store = "auto";
  std::string name_pattern, sidecar, name_map, datasets;
  std::vector<std::string> sets;
  std::string u16_as = "bf16", u8_as = "f8e4m3";
  int gzip = 4;
  bool skip_unmatched = false, prefix_file_names = false, quiet = false;
};

// Per-tensor metadata from the sidecar file: {"tensor name": {"layer": 3, "site": "...", ...}}.
using Sidecar = std::map<std::string, std::map<std::string, std::string>>;

Sidecar read_sidecar(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  TACO_REQUIRE_INPUT(in && !std::filesystem::is_directory(path), "--sidecar {}: cannot open", path);
  std::stringstream text;
  text << in.rdbuf();
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text.str());
  } catch (const nlohmann::json::exception& e) {
    taco::throw_input_error("--sidecar {}: malformed JSON: {}", path, e.what());
  }
  TACO_REQUIRE_INPUT(j.is_object(),
                     "--sidecar {}: expected a JSON object {{tensor name: {{field: value}}}}",
                     path);
  Sidecar out;
  for (const auto& [name, fields] : j.items()) {
    TACO_REQUIRE_INPUT(fields.is_object(), "--sidecar {}: entry '{}' is not an object", path, name);
    for (const auto& [key, value] : fields.items()) {
      std::string text_value;
      if (value.is_string())
        text_value = value.get<std::string>();
      else if (value.is_number_integer() || value.is_boolean() || value.is_number_float())
        text_value = value.dump();
      else
        taco::throw_input_error("--sidecar {}: '{}'.{} must be a string or a number", path, name,
                                key);
      out[name][key] = text_value;
    }
  }
  return out;
}

DType parse_store(const std::string& s) {
  if (s == "bf16") return DType::BF16;
  if (s == "f16") return DType::F16;
  if (s == "f32") return DType::F32;
  taco::throw_input_error("--store: expected auto, bf16, f16 or f32, got '{}'", s);
}

// What `--store auto` keeps each source dtype as: exact for everything but f64.
DType auto_store(DType src) {
  switch (src) {
    case DType::BF16:
    case DType::F8E4M3:
    case DType::F8E5M2:
      return DType::BF16;  // fp8 fits bf16 exactly
    case DType::F16:
      return DType::F16;
    case DType::F32:
    case DType::F64:
      return DType::F32;
    case DType::I8:
    case DType::U8:
    case DType::I16:
    case DType::I32:
    case DType::I64:
      break;
  }
  taco::throw_error("no trace dtype for source dtype {}", taco::dtype_name(src));
}

// How many values change when stored as `store` (NaN stays NaN, so it does not count).
int64_t rounded_values(const std::vector<float>& v, DType store) {
  int64_t changed = 0;
  for (float x : v) {
    float back = x;
    if (store == DType::BF16) back = taco::bf16_to_float(taco::float_to_bf16(x));
    if (store == DType::F16) back = taco::fp16_to_float(taco::float_to_fp16(x));
    changed += !(back == x || (std::isnan(back) && std::isnan(x)));
  }
  return changed;
}

std::string command_line() {
  std::ifstream in("/proc/self/cmdline", std::ios::binary);
  std::string arg, line;
  while (std::getline(in, arg, '\0')) line += (line.empty() ? "" : " ") + arg;
  return line.empty() ? "taco import" : line;
}

void run_import(const ImportArgs& a) {
  taco::check_output_file(a.out, "--out");  // before any input is read
  const bool auto_mode = a.store == "auto";
  const DType fixed_store = auto_mode ? DType::BF16 : parse_store(a.store);
  taco::OpenOptions open_opts;
  TACO_REQUIRE_INPUT(a.u16_as == "bf16" || a.u16_as == "f16",
                     "--u16-as: expected bf16 or f16, got '{}'", a.u16_as);
  TACO_REQUIRE_INPUT(a.u8_as == "f8e4m3" || a.u8_as == "f8e5m2",
                     "--u8-as: expected f8e4m3 or f8e5m2, got '{}'", a.u8_as);
  open_opts.u16_as = taco::parse_dtype(a.u16_as);
  open_opts.u8_as = taco::parse_dtype(a.u8_as);
  open_opts.datasets = a.datasets;
  if (!a.name_map.empty()) open_opts.name_map = std::make_shared<taco::NameMap>(a.name_map);

  std::vector<std::pair<std::string, std::string>> sets;
  for (const std::string& s : a.sets) {
    const size_t eq = s.find('=');
    TACO_REQUIRE_INPUT(eq != std::string::npos && eq > 0, "--set '{}': expected key=value", s);
    std::string key = s.substr(0, eq);
    // A typo in a field name must not become an extra attribute: anything else says extra.KEY.
    if (key.rfind("extra.", 0) == 0 && key.size() > 6) {
      key = key.substr(6);
      TACO_REQUIRE_INPUT(!taco::is_meta_field(key), "--set '{}': {} is a field; write --set {}=...",
                         s, key, key);
    } else {
      TACO_REQUIRE_INPUT(taco::is_meta_field(key),
                         "--set '{}': unknown key '{}' (keys: layer, site, direction, collective, "
                         "tp_rank, tp_size, "
                         "step, model; extra.KEY for anything else)",
                         s, key);
    }
    sets.emplace_back(key, s.substr(eq + 1));
    taco::TensorMeta probe;  // validate the value once, up front
    taco::set_meta_field(probe, sets.back().first, sets.back().second,
                         fmt::format("--set '{}'", s));
  }
  std::optional<taco::NamePattern> pattern;
  if (!a.name_pattern.empty()) pattern.emplace(a.name_pattern);
  Sidecar sidecar = a.sidecar.empty() ? Sidecar{} : read_sidecar(a.sidecar);
  std::set<std::string> sidecar_used;

  // Open (and so check the headers of) every input before writing anything, so a bad path
  // fails at once; each is opened again when its turn comes, to hold one file open at a time.
  std::vector<std::string> files, prefixes;
  for (const taco::InputFile& f : taco::expand_inputs(a.inputs)) {
    files.push_back(f.path);
    // A file found in a directory input is named by its path below it ("rank0/step_100").
    std::filesystem::path rel = f.path == f.source
                                    ? std::filesystem::path(f.path).filename()
                                    : std::filesystem::path(f.path).lexically_relative(f.source);
    prefixes.push_back((rel.parent_path() / rel.stem()).string());
  }
  std::vector<std::string> read = files;
  if (!a.sidecar.empty()) read.push_back(a.sidecar);
  taco::check_not_an_input(a.out, read, "--out", taco::OutputKind::File);
  for (const std::string& in : files) taco::open_tensor_file(in, open_opts);

  taco::TraceWriter::Options wopts;
  wopts.store = fixed_store;
  wopts.compression_level = a.gzip;
  wopts.provenance["command"] = command_line();
  std::string source_list;
  for (const std::string& in : files) source_list += (source_list.empty() ? "" : ";") + in;
  wopts.provenance["source"] = source_list;
  taco::TraceWriter writer(a.out, wopts);

  std::map<std::string, std::string> origin;  // tensor name -> input it came from
  std::map<DType, int64_t> stored_count;
  int64_t skipped = 0, total_values = 0, total_rounded = 0;
  for (size_t file = 0; file < files.size(); ++file) {
    const std::unique_ptr<taco::TensorSource> src = taco::open_tensor_file(files[file], open_opts);
    int64_t narrowed_f64 = 0;
    const std::string& stem = prefixes[file];
    for (size_t i = 0; i < src->size(); ++i) {
      const taco::TensorInfo info = src->info(i);
      const std::string name = a.prefix_file_names ? stem + "/" + info.name : info.name;
      taco::TensorMeta meta = info.meta;
      if (pattern && !pattern->match(name, meta)) {
        TACO_REQUIRE_INPUT(a.skip_unmatched,
                           "{}: tensor '{}' does not match --name-pattern '{}' (--skip-unmatched "
                           "leaves such tensors "
                           "out)",
                           src->path(), name, pattern->text());
        ++skipped;
        continue;
      }
      if (auto it = sidecar.find(name); it != sidecar.end()) {
        for (const auto& [key, value] : it->second)
          taco::set_meta_field(meta, key, value,
                               fmt::format("--sidecar {}: '{}'", a.sidecar, name));
        sidecar_used.insert(name);
      }
      for (const auto& [key, value] : sets) taco::set_meta_field(meta, key, value, "--set");
      taco::check_meta(meta, fmt::format("{}: tensor '{}'", src->path(), name));
      auto [prev, fresh] = origin.emplace(name, src->path());
      TACO_REQUIRE_INPUT(
          fresh, "{}: tensor '{}' was already imported from {} (--prefix-file-names keeps both)",
          src->path(), name, prev->second);

      taco::Tensor t = src->read(i);
      t.name = name;
      t.meta = std::move(meta);
      const DType store = auto_mode ? auto_store(t.dtype) : fixed_store;
      if (t.dtype == DType::F64) ++narrowed_f64;
      total_rounded += t.dtype == store ? 0 : rounded_values(t.values, store);
      total_values += t.numel();
      writer.add(t, store);
      ++stored_count[store];
    }
    if (narrowed_f64 > 0 && !a.quiet)
      std::fprintf(
          stderr,
          "taco: note: %s: %lld f64 tensor(s) were rounded to float32 (taco computes in float32)\n",
          src->path().c_str(), static_cast<long long>(narrowed_f64));
  }
  std::vector<std::string> unused;
  for (const auto& [name, fields] : sidecar)
    if (!sidecar_used.count(name)) unused.push_back(name);
  TACO_REQUIRE_INPUT(unused.empty(), "--sidecar {}: no imported tensor is named '{}'{}", a.sidecar,
                     unused.empty() ? "" : unused.front(),
                     unused.size() > 1 ? fmt::format(" (and {} more)", unused.size() - 1) : "");
  TACO_REQUIRE_INPUT(writer.size() > 0, "{}: no tensors to write (all {} were skipped)", a.out,
                     skipped);
  writer.commit();

  if (a.quiet) return;
  if (total_rounded > 0)
    std::fprintf(
        stderr,
        "taco: note: %lld of %lld values changed when rounded to the stored dtype (--store f32 "
        "keeps them)\n",
        static_cast<long long>(total_rounded), static_cast<long long>(total_values));
  std::string kinds;
  for (const auto& [dt, n] : stored_count)
    kinds += fmt::format("{}{} {}", kinds.empty() ? "" : ", ", n, taco::dtype_name(dt));
  fmt::print("imported {} tensors ({}) from {} file(s) into {}{}\n", writer.size(), kinds,
             files.size(), a.out,
             skipped ? fmt::format("; skipped {} not matching the name pattern", skipped) : "");
}

void add_import(CLI::App& root) {
  auto args = std::make_shared<ImportArgs>();
  CLI::App* cmd = root.add_subcommand(
      "import", "Turn safetensors, .npy, .npz files (or traces) into a taco trace");
  cmd->add_option("inputs", args->inputs,
                  "Input files (HDF5, safetensors, .npy, .npz; by content) or directories of them "
                  "(docs/inputs.md)")
      ->required();
  cmd->add_option(
      "--name-map", args->name_map,
      "Regex with named groups layer, site, direction, rank, step: metadata from tensor names, "
      "over the built-in rules (docs/inputs.md)");
  cmd->add_option(
      "--datasets", args->datasets,
      "HDF5 files other than taco traces: only datasets whose path matches this shell pattern");
  cmd->add_option("--out,-o", args->out, "Output trace (HDF5); written whole or not at all")
      ->required();
  cmd->add_option("--store", args->store,
                  "Stored dtype: auto (bf16/f16/f32 as the source; fp8 -> bf16, f64 -> f32), bf16, "
                  "f16 or f32")
      ->capture_default_str();
  cmd->add_option(
      "--name-pattern", args->name_pattern,
      "Read metadata from tensor names, e.g. 'layers.{layer}.{site}.{direction}.rank{tp_rank}'");
  cmd->add_flag("--skip-unmatched", args->skip_unmatched,
                "Leave out tensors that do not match --name-pattern");
  cmd->add_option("--sidecar", args->sidecar,
                  "JSON file {tensor name: {layer: 3, site: \"mlp_out\", ...}}");
  cmd->add_option("--set", args->sets,
                  "key=value metadata for every tensor (repeatable), e.g. --set model=llama")
      ->allow_extra_args(false);
  cmd->add_flag("--prefix-file-names", args->prefix_file_names,
                "Name tensors '<file stem>/<name>' (for inputs that reuse names, e.g. one file per "
                "rank; a file "
                "found in a directory input: '<its path below it, without extension>/<name>')");
  cmd->add_option("--u16-as", args->u16_as, "What npy <u2/<V2 elements hold: bf16 or f16 bits")
      ->capture_default_str();
  cmd->add_option("--u8-as", args->u8_as, "What npy |u1/<V1 elements hold: f8e4m3 or f8e5m2 bits")
      ->capture_default_str();
  cmd->add_option("--gzip", args->gzip, "gzip level for the trace's chunks, 0..9")
      ->capture_default_str();
  cmd->add_flag("--quiet,-q", args->quiet, "Print nothing on success");
  cmd->footer(
      "Metadata, later sources winning: the input's own (safetensors __metadata__ keys layer, "
      "site,\n"
      "direction, collective, tp_rank, tp_size, step, model; trace attributes) completed by the\n"
      "built-in name rules and --name-map (docs/inputs.md), then --name-pattern, then --sidecar,\n"
      "then --set (fields, or extra.KEY for anything else).\n"
      "Name pattern placeholders: {layer} {tp_rank} {tp_size} {step} match digits; {site} "
      "{direction}\n"
      "{collective} {model} {extra.KEY} {*} match text without '.' or '/'; the rest is literal and "
      "the\n"
      "whole name must match. Placeholders must be separated by literal text.\n"
      "\n"
      "Examples:\n"
      "  taco import dump.safetensors --out trace.h5\n"
      "  taco import acts.npz --out trace.h5 --store bf16 \\\n"
      "      --name-pattern 'layers.{layer}.{site}.{direction}.rank{tp_rank}.step{step}' --set "
      "tp_size=4\n"
      "  taco import rank0.safetensors rank1.safetensors --prefix-file-names \\\n"
      "      --name-pattern 'rank{tp_rank}/layers.{layer}.{site}' --set tp_size=2 --set "
      "direction=fwd --out tp.h5\n"
      "  taco import x.npy --sidecar meta.json --set model=llama-8b --out x.h5");
  cmd->callback([args] { run_import(*args); });
}

}  // namespace

TACO_REGISTER_COMMAND(30, add_import);
