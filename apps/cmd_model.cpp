// taco model: when does compressing TP (and DP / PP) communication make a training step faster?
// A calibrated step-time model of Megatron-style 3D parallelism (1F1B pipeline, TP collectives
// per layer, DP gradient reduction), fed by measured costs: the layer benchmark's JSON,
// `taco bench --json` (codec GB/s), `taco comm --json` (collective times) and the link tiers of
// configs/links.json. Three modes: one prediction (default), the paper's settings (--paper),
// the model against every measured configuration (--validate). docs/step-model.md.
#include "cli_parse.hpp"
#include "command.hpp"
#include "core/atomic_file.hpp"
#include "core/error.hpp"
#include "core/provenance.hpp"
#include "core/version.hpp"
#include "model/inputs.hpp"
#include "model/links.hpp"
#include "model/step_time.hpp"
#include "model/validate.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace {

using nlohmann::json;
using namespace taco::model;

#ifdef TACO_SOURCE_DIR
constexpr const char* kDefaultLinks = TACO_SOURCE_DIR "/configs/links.json";
#else
constexpr const char* kDefaultLinks = "configs/links.json";
#endif

// The bf16 dense rate the placeholder compute scales (issue #28: measured on an H200 of the
// project's machines; no committed record yet).
constexpr const char* kPeakSource =
    "790 TFLOP/s bf16 dense GEMM measured on an H200 here (issue #28), no record yet";

struct ModelArgs {
  std::string model = "gpt-345m";
  std::string arch;
  int64_t layers = 0, hidden = 0, ffn = 0, heads = 0, kv_heads = 0, vocab = 0;
  int64_t seq = 2048, mbs = 8, gbs = 256;
  int tp = 2, pp = 2, dp = 2;
  bool sp = false;
  std::string dist_opt = "auto";  // auto: on for gpt-345m (COCCL's script), off otherwise
  bool no_dp_overlap = false;
  double grad_bytes = 4;
  std::string tp_link = "nvlink-h200", pp_link, dp_link;
  std::string links = kDefaultLinks;
  std::string codec = "taco", site_codecs, dp_codec = "none", pp_codec = "none";
  bool best = false;
  std::string candidates;
  std::string tp_algo = "auto";
  std::string overlap = "pipeline";
  std::string bench, comm, layer;
  double peak_tflops = 790, efficiency = 0.5;
  bool paper = false, validate = false;
  std::string fit_overlap_on = "nvlink";
  std::string layer_tier = "nvlink-h200";
  int fit_lines = 2;
  std::string json_path;
  bool quiet = false;
  int64_t subspace = 0;           // --subspace K (0: off)
  double projection_us = 0;       // --subspace-projection-us
  bool projection_given = false;  // whether --subspace-projection-us was given
};

Subspace subspace_of(const ModelArgs& a) {
  return {a.subspace, a.projection_us};
}

// The subspace-confined messages of a layer, as layer_messages confines and scales them (the
// CLI test checks that the sites with subspace_k > 0 are these).
std::vector<std::string> confined_sites() {
  return {"attn_out:fwd", "mlp_out:fwd", "attn_qkv:bwd", "mlp_fc1:bwd"};
}

std::string fmt_bytes(double b) {
  if (b >= double(1 << 30)) return fmt::format("{:.3g} GiB", b / double(1 << 30));
  if (b >= double(1 << 20)) return fmt::format("{:.3g} MiB", b / double(1 << 20));
  if (b >= 1024) return fmt::format("{:.3g} KiB", b / 1024);
  return fmt::format("{:.0f} B", b);
}

// ---- inputs --------------------------------------------------------------------------------
struct Inputs {
  LinkConfig links;
  std::unique_ptr<CodecTable> bench;
  std::unique_ptr<LayerRecord> layer;
  std::vector<CommRecord> comm;
  std::vector<std::string> recalibrated;  // tiers whose fit came from --comm
};

Inputs load_inputs(const ModelArgs& a) {
  Inputs in;
  in.links = read_links(a.links);
  if (!a.bench.empty()) {
    std::vector<CodecTable> tables;
    for (const auto& f : taco::cli::split_list(a.bench, "--bench"))
      tables.push_back(read_bench_json(f));
    in.bench = std::make_unique<CodecTable>(merge_codec_tables(tables));
  }
  if (!a.layer.empty()) in.layer = std::make_unique<LayerRecord>(read_layer_json(a.layer));
  if (!a.comm.empty())
    for (const auto& f : taco::cli::split_list(a.comm, "--comm"))
      in.comm.push_back(read_comm_json(f));
  if (!a.validate && !in.comm.empty()) {
    // Recalibrate every tier that a record measures (same transport label), at 2 ranks.
    for (const TransportFit& f : fit_transports(in.comm, a.fit_lines)) {
      for (auto& [name, t] : in.links.tiers) {
        if (t.transport != f.transport) continue;
        t.fit = f.all_reduce.lines;
        t.coll_factor = f.factor;
        t.coll_fit.clear();
        for (const auto& [c, lf] : f.own) t.coll_fit[c] = lf.lines;
        t.fit_source =
            fmt::format("refit to the plain rows of --comm ({} all-reduce sizes, {} ranks)",
                        f.points, f.nranks);
        in.recalibrated.push_back(name);
      }
    }
  }
  return in;
}

StepConfig make_config(const ModelArgs& a, const Inputs& in) {
  StepConfig c;
  const bool custom = a.model == "custom";
  if (!custom)
    c.model = preset_model(a.model);
  else
    c.model.source = "given on the command line";
  if (!a.arch.empty()) c.model.arch = a.arch;
  if (a.layers) c.model.layers = a.layers;
  if (a.hidden) c.model.hidden = a.hidden;
  if (a.ffn) c.model.ffn = a.ffn;
  if (a.heads) c.model.heads = a.heads, c.model.kv_heads = a.kv_heads ? a.kv_heads : a.heads;
  if (a.kv_heads) c.model.kv_heads = a.kv_heads;
  if (a.vocab) c.model.vocab = a.vocab;
  if (custom) {
    TACO_REQUIRE_INPUT(c.model.layers && c.model.hidden && c.model.heads && c.model.vocab,
                       "--model custom needs --layers, --hidden, --heads and --vocab (--ffn "
                       "defaults to 4 x --hidden)");
    if (c.model.ffn == 0) c.model.ffn = 4 * c.model.hidden;
  }
  c.train = {a.seq, a.mbs, a.gbs};
  c.par.tp = a.tp, c.par.pp = a.pp, c.par.dp = a.dp;
  c.par.sp = a.sp;
  TACO_REQUIRE_INPUT(a.dist_opt == "auto" || a.dist_opt == "on" || a.dist_opt == "off",
                     "--dist-opt '{}': auto, on or off", a.dist_opt);
  c.par.dist_opt = a.dist_opt == "on" || (a.dist_opt == "auto" && a.model == "gpt-345m");
  c.par.dp_overlap = !a.no_dp_overlap;
  c.par.grad_bytes = a.grad_bytes;
  c.place.tp = a.tp_link;
  c.place.pp = a.pp_link.empty() ? a.tp_link : a.pp_link;
  c.place.dp = a.dp_link.empty() ? c.place.pp : a.dp_link;
  c.compute.layer = in.layer.get();
  c.compute.peak_tflops = a.peak_tflops;
  c.compute.efficiency = a.efficiency;
  c.compute.peak_source = kPeakSource;
  if (in.bench) c.compute.copy_TBps = in.bench->copy_TBps;
  check_config(c);
  in.links.tier(c.place.tp, "--tp-link");
  in.links.tier(c.place.pp, a.pp_link.empty() ? "--pp-link (default: --tp-link)" : "--pp-link");
  in.links.tier(c.place.dp, a.dp_link.empty() ? "--dp-link (default: --pp-link)" : "--dp-link");
  return c;
}

std::vector<CodecModel> candidate_codecs(const ModelArgs& a, const Inputs& in) {
  std::vector<std::string> names;
  if (!a.candidates.empty())
    names = taco::cli::split_list(a.candidates, "--candidates");
  else if (in.bench)
    names = in.bench->variants();
  TACO_REQUIRE_INPUT(!names.empty(),
                     "--best needs --bench FILE (its variants are the candidates) or --candidates");
  std::vector<CodecModel> out;
  for (const auto& n : names) out.push_back(codec_from_table(n, in.bench.get()));
  return out;
}

Compression make_compression(const ModelArgs& a, const Inputs& in, const StepConfig& cfg) {
  TACO_REQUIRE_INPUT(a.overlap == "pipeline" || a.overlap == "none",
                     "--overlap '{}': pipeline or none", a.overlap);
  const bool pipelined = a.overlap == "pipeline";
  const Subspace sub = subspace_of(a);
  check_subspace(cfg.model, cfg.par, sub);
  if (a.best) return best_per_site(cfg, in.links, candidate_codecs(a, in), pipelined, true, sub);
  Compression c = uniform_compression(codec_from_table(a.codec, in.bench.get()),
                                      codec_from_table(a.dp_codec, in.bench.get()),
                                      codec_from_table(a.pp_codec, in.bench.get()), pipelined);
  c.subspace = sub;
  if (a.tp_algo != "auto") taco::parse_algo(a.tp_algo, "--tp-algo");
  c.tp_algo = a.tp_algo;
  if (!a.site_codecs.empty()) {
    for (const auto& kv : taco::cli::split_list(a.site_codecs, "--site-codec")) {
      const auto eq = kv.find('=');
      TACO_REQUIRE_INPUT(eq != std::string::npos,
                         "--site-codec '{}': expected SITE:DIR=VARIANT, e.g. attn_out:fwd=fp8-g128",
                         kv);
      const std::string key = kv.substr(0, eq);
      TACO_REQUIRE_INPUT(c.tp.count(key) > 0,
                         "--site-codec '{}': unknown site (attn_out, mlp_out, attn_qkv, mlp_fc1, "
                         "embed, head; :fwd or "
                         ":bwd)",
                         key);
      c.tp[key] = codec_from_table(kv.substr(eq + 1), in.bench.get());
    }
  }
  return c;
}

// ---- JSON ------------------------------------------------------------------------------------
json cost_json(const CollCost& c) {
  return {{"total_us", c.total_us},    {"wire_us", c.wire_us},
          {"codec_us", c.codec_us},    {"exposed_codec_us", c.exposed_codec_us()},
          {"pieces", c.pieces},        {"algorithm", algo_name(c.algo)},
          {"wire_bytes", c.wire_bytes}};
}

// sites = false (--paper): the per-site costs are left out to keep a 100-result file small; one
// prediction of the configuration gives them.
json result_json(const StepResult& r, bool sites_too = true) {
  json sites = json::array();
  if (sites_too)
    for (const SiteCost& s : r.sites)
      sites.push_back({{"site", s.msg.site},
                       {"direction", s.msg.direction},
                       {"collective", coll_name(s.msg.coll)},
                       {"bytes", s.msg.bytes},
                       {"subspace_k", s.msg.subspace_k},
                       {"codec", s.codec},
                       {"count_per_microbatch", s.count},
                       {"cost", cost_json(s.cost)}});
  const Breakdown& b = r.parts;
  return {{"step_ms", r.step_ms},
          {"tokens_per_s", r.tokens_per_s},
          {"dominant", b.dominant()},
          {"parts_ms",
           {{"compute", b.compute_ms},
            {"tp_comm", b.tp_comm_ms},
            {"codec", b.codec_ms},
            {"pp_comm", b.pp_comm_ms},
            {"pp_bubble", b.bubble_ms},
            {"dp_comm", b.dp_comm_ms},
            {"optimizer", b.optimizer_ms}}},
          {"microbatches", r.microbatches},
          {"critical_stage", r.critical_stage},
          {"layer_compute_ms", r.layer_compute_ms},
          {"subspace_k", r.subspace.k},
          {"projection_ms", r.projection_ms},
          {"projections_per_microbatch", r.projections_per_microbatch},
          {"params_per_rank", r.params_per_rank},
          {"tp_sites", sites_too ? sites : json(nullptr)},
          {"pp_send", cost_json(r.pp_send)},
          {"dp_grad_bucket", cost_json(r.dp_grad)},
          {"dp_param_gather_bucket", cost_json(r.dp_param_gather)},
          {"embedding_sync", cost_json(r.embed_sync)}};
}

json tier_json(const LinkTier& t) {
  json lines = json::array();
  for (const AlphaBeta& l : t.lines())
    lines.push_back({{"alpha_us", l.alpha_us}, {"bw_GBps", l.bw_GBps}});
  json f = json::object();
  for (const auto& [c, v] : t.coll_factor) f[coll_name(c)] = v;
  json own = json::object();
  for (const auto& [c, ls] : t.coll_fit) {
    json a = json::array();
    for (const AlphaBeta& l : ls) a.push_back({{"alpha_us", l.alpha_us}, {"bw_GBps", l.bw_GBps}});
    own[coll_name(c)] = a;
  }
  // The sources of the numbers stay in the links file (meta.links) rather than in every prediction.
  return {{"name", t.name},
          {"basis", t.fit.empty() ? t.basis : "measured"},
          {"lines", lines},
          {"coll_factor", f},
          {"coll_fit", own}};
}

std::string codec_summary(const Compression& c) {
  std::map<std::string, std::vector<std::string>> by;
  for (const auto& [k, v] : c.tp) by[v.name].push_back(k);
  std::string s;
  if (by.size() == 1)
    s = "tp " + by.begin()->first;
  else
    for (const auto& [name, keys] : by)
      s += fmt::format("{}tp {} at {}", s.empty() ? "" : "; ", name, fmt::join(keys, ","));
  return s + " | dp " + c.dp.name + " | pp " + c.pp.name;
}

// What a reader needs to check a subspace prediction: K, the byte ratio, the projection time
// and whether it was counted; null when --subspace is off.
json subspace_json(const ModelArgs& a, const ModelShape& m,
                   const std::vector<std::string>& applies_to) {
  if (a.subspace == 0) return nullptr;
  return {{"k", a.subspace},
          {"hidden", m.hidden},
          {"bytes_ratio", double(a.subspace) / double(m.hidden)},
          {"confined_messages", confined_sites()},
          {"unchanged", "embed and head messages, PP sends, DP"},
          {"projection_us_per_message", a.projection_us},
          {"projection_counted", a.projection_given},
          {"projection_in", "compute (parts_ms.compute; projection_ms is its share)"},
          {"layer_compute", "unchanged: the smaller row-parallel GEMMs are not credited"},
          {"applies_to", applies_to},
          {"note", a.projection_given
                       ? fmt::format("projection {:g} us per confined TP message on each rank, "
                                     "added to the compute of its pass",
                                     a.projection_us)
                       : std::string("projection cost is NOT counted (--subspace-projection-us "
                                     "not given): the subspace results are optimistic")}};
}

// The text lines of the same.
void print_subspace(const ModelArgs& a, const std::string& applies_to) {
  if (a.subspace == 0) return;
  fmt::print(
      "# subspace: k {} coordinates per token on the TP all-reduces of every layer ({}): bytes x "
      "k/hidden; embedding / head messages, PP and DP unchanged; applies to {}\n",
      a.subspace, fmt::join(confined_sites(), ", "), applies_to);
  if (a.projection_given)
    fmt::print(
        "# subspace projection: {:g} us per confined message on each rank, counted in compute; "
        "layer compute unchanged (smaller row-parallel GEMMs not credited)\n",
        a.projection_us);
  else
    fmt::print(
        "# subspace projection: NOT counted (--subspace-projection-us not given); layer compute "
        "unchanged\n");
}

json prediction_json(const std::string& label, const std::string& scenario, const StepConfig& cfg,
                     const LinkConfig& links,
                     const std::vector<std::pair<std::string, StepResult>>& results,
                     const std::map<std::string, std::string>& codecs, const StepResult& plain,
                     const json& subspace, bool sites_too = true) {
  json j;
  j["label"] = label;
  j["scenario"] = scenario;
  j["model"] = {
      {"name", cfg.model.name},         {"arch", cfg.model.arch},   {"layers", cfg.model.layers},
      {"hidden", cfg.model.hidden},     {"ffn", cfg.model.ffn},     {"heads", cfg.model.heads},
      {"kv_heads", cfg.model.kv_heads}, {"vocab", cfg.model.vocab}, {"source", cfg.model.source}};
  j["train"] = {{"seq", cfg.train.seq},
                {"micro_batch", cfg.train.micro_batch},
                {"global_batch", cfg.train.global_batch}};
  j["parallel"] = {{"tp", cfg.par.tp},
                   {"pp", cfg.par.pp},
                   {"dp", cfg.par.dp},
                   {"sp", cfg.par.sp},
                   {"dist_opt", cfg.par.dist_opt},
                   {"dp_overlap", cfg.par.dp_overlap},
                   {"grad_bytes", cfg.par.grad_bytes}};
  j["links"] = {{"tp", tier_json(links.tier(cfg.place.tp, "tp"))},
                {"pp", tier_json(links.tier(cfg.place.pp, "pp"))},
                {"dp", tier_json(links.tier(cfg.place.dp, "dp"))}};
  j["compute_source"] = plain.compute_source;
  j["compute_measured"] = plain.compute_measured;
  json res = json::object(), sp = json::object();
  for (const auto& [name, r] : results) {
    res[name] = result_json(r, sites_too);
    sp[name] = plain.step_ms / r.step_ms;
  }
  j["results"] = res;
  j["speedup"] = sp;
  j["codecs"] = codecs;
  j["subspace"] = subspace;
  return j;
}

json meta_json(const ModelArgs& a, const Inputs& in, const std::string& mode) {
  json files = json::array();
  for (const auto& c : in.comm) files.push_back(c.path);
  return {
      {"argv", taco::cli::self_argv()},
      {"taco_version", taco::kVersion},
      {"git_commit", taco::kGitCommit},
      {"date", taco::utc_now_iso8601()},
      {"mode", mode},
      {"links", in.links.path},
      {"bench", a.bench.empty() ? json(nullptr) : json(a.bench)},
      {"bench_gpu", in.bench ? json(in.bench->gpu) : json(nullptr)},
      {"layer", a.layer.empty() ? json(nullptr) : json(a.layer)},
      {"comm", files},
      {"recalibrated_tiers", in.recalibrated},
      {"executor",
       {{"pipeline", in.links.exec.pipeline},
        {"pipeline_min_bytes", in.links.exec.pipeline_min_bytes},
        {"overlap_efficiency", in.links.exec.overlap_efficiency},
        {"codec_step_overhead_us", in.links.exec.codec_step_overhead_us},
        {"source", in.links.exec.source}}},
      {"placeholder_compute",
       {{"peak_tflops", a.peak_tflops}, {"efficiency", a.efficiency}, {"source", kPeakSource}}}};
}

void write_json(const std::string& path, const json& j) {
  if (!path.empty()) taco::write_file_atomically(path, j.dump(1) + "\n");
}

// ---- tables ----------------------------------------------------------------------------------
void print_parts_header() {
  fmt::print("# {:<22} {:>9} {:>10} {:>8} {:>8} {:>7} {:>8} {:>8} {:>8} {:>6} {:>8}  {}\n",
             "configuration", "step(ms)", "tokens/s", "compute", "tp_comm", "codec", "pp_comm",
             "bubble", "dp_comm", "optim", "speedup", "dominant");
}

void print_parts_row(const std::string& name, const StepResult& r, double speedup) {
  const Breakdown& b = r.parts;
  fmt::print(
      "  {:<22} {:>9.2f} {:>10.0f} {:>8.2f} {:>8.2f} {:>7.2f} {:>8.2f} {:>8.2f} {:>8.2f} {:>6.2f} "
      "{:>7.3f}x  {}\n",
      name, r.step_ms, r.tokens_per_s, b.compute_ms, b.tp_comm_ms, b.codec_ms, b.pp_comm_ms,
      b.bubble_ms, b.dp_comm_ms, b.optimizer_ms, speedup, b.dominant());
}

void print_config_header(const StepConfig& cfg, const Inputs& in, const StepResult& plain) {
  const ModelShape& m = cfg.model;
  fmt::print("# taco model {} ({}): Megatron 1F1B step time, TP x PP x DP, plain and compressed\n",
             taco::kVersion, taco::kGitCommit);
  fmt::print(
      "# model {} ({}): {} layers, hidden {}, ffn {}, {} heads ({} kv), vocab {} | seq {} mbs {} "
      "gbs {} -> {} "
      "micro-batches per step\n",
      m.name, m.arch, m.layers, m.hidden, m.ffn, m.heads, m.kv_heads, m.vocab, cfg.train.seq,
      cfg.train.micro_batch, cfg.train.global_batch, plain.microbatches);
  fmt::print(
      "# parallel: tp {} over {} x pp {} over {} x dp {} over {} | sp {} | distributed optimizer "
      "{} | dp overlap "
      "{} | grads {} B\n",
      cfg.par.tp, cfg.place.tp, cfg.par.pp, cfg.place.pp, cfg.par.dp, cfg.place.dp,
      cfg.par.sp ? "on" : "off", cfg.par.dist_opt ? "on" : "off", cfg.par.dp_overlap ? "on" : "off",
      cfg.par.grad_bytes);
  fmt::print("# compute: {} ({:.3f} ms per layer, fwd + bwd)\n", plain.compute_source,
             plain.layer_compute_ms);
  fmt::print(
      "# links: {} | executor: {} pieces >= {}, overlap efficiency {:.2f}, +{:.2f} us per codec "
      "step\n",
      in.links.path, in.links.exec.pipeline, fmt_bytes(double(in.links.exec.pipeline_min_bytes)),
      in.links.exec.overlap_efficiency, in.links.exec.codec_step_overhead_us);
  for (const auto& t : in.recalibrated) fmt::print("# tier {} recalibrated from --comm\n", t);
  if (in.bench) fmt::print("# codec kernels: {} ({})\n", in.bench->path, in.bench->gpu);
}

// Below a codec's smallest measured size the model charges that size's time (a launch-bound
// floor): pieces smaller than it are over-charged, so say so where it happens.
void print_unmeasured_sizes(const StepResult& comp, const CodecTable* bench) {
  if (bench == nullptr) return;
  std::set<std::string> said;
  for (const SiteCost& s : comp.sites) {
    if (s.codec == "none" || said.count(s.codec)) continue;
    const double first_input = bench->smallest_encode_input_bytes(s.codec);
    const double piece = s.msg.bytes / std::max(1, s.cost.pieces);
    if (piece >= 0.99 * first_input) continue;
    said.insert(s.codec);
    fmt::print(
        "# note: {}'s encode rows start at {} of input; pieces of {} ({}) are charged that "
        "size's time: measure taco bench --sizes down to the piece size\n",
        s.codec, fmt_bytes(first_input), fmt_bytes(piece), s.msg.key());
  }
}

void print_sites(const StepResult& plain, const StepResult& comp) {
  fmt::print(
      "#\n# TP collectives of stage {} (critical), per micro-batch: plain vs compressed (us)\n",
      comp.critical_stage);
  if (comp.subspace.on())
    fmt::print(
        "# size: the compressed configuration's; the subspace-confined sites carry k {} "
        "coordinates per token where plain carries the hidden size\n",
        comp.subspace.k);
  fmt::print("# {:<14} {:>14} {:>10} {:>6} {:>10} {:>9} {:>6} {:>10} {:>10} {:>9} {:>7}\n", "site",
             "collective", "size", "count", "codec", "algo", "pieces", "plain", "compr",
             "exp.codec", "x");
  for (size_t i = 0; i < comp.sites.size() && i < plain.sites.size(); ++i) {
    const SiteCost& s = comp.sites[i];
    const double tp = plain.sites[i].cost.total_us;
    fmt::print(
        "  {:<14} {:>14} {:>10} {:>6} {:>10} {:>9} {:>6} {:>10.1f} {:>10.1f} {:>9.1f} {:>6.2f}x\n",
        s.msg.key(), coll_name(s.msg.coll), fmt_bytes(s.msg.bytes), s.count, s.codec,
        s.codec == "none" ? "nccl" : algo_name(s.cost.algo), s.cost.pieces, tp, s.cost.total_us,
        s.cost.exposed_codec_us(), tp / s.cost.total_us);
  }
  if (plain.pp_send.total_us > 0)
    fmt::print(
        "  {:<14} {:>14} {:>10} {:>6} {:>10} {:>9} {:>6} {:>10.1f} {:>10.1f} {:>9.1f} {:>6.2f}x\n",
        "pp activation", "sendrecv", fmt_bytes(plain.pp_send.wire_bytes), "", "", "",
        comp.pp_send.pieces, plain.pp_send.total_us, comp.pp_send.total_us,
        comp.pp_send.exposed_codec_us(), plain.pp_send.total_us / comp.pp_send.total_us);
  if (plain.dp_grad.total_us > 0)
    fmt::print(
        "  {:<14} {:>14} {:>10} {:>6} {:>10} {:>9} {:>6} {:>10.1f} {:>10.1f} {:>9.1f} {:>6.2f}x\n",
        "dp grad bucket", "", fmt_bytes(plain.dp_grad.wire_bytes), "", "", "", comp.dp_grad.pieces,
        plain.dp_grad.total_us, comp.dp_grad.total_us, comp.dp_grad.exposed_codec_us(),
        plain.dp_grad.total_us / comp.dp_grad.total_us);
}

// ---- modes -----------------------------------------------------------------------------------
void run_predict(const ModelArgs& a) {
  const Inputs in = load_inputs(a);
  const StepConfig cfg = make_config(a, in);
  const Compression comp = make_compression(a, in, cfg);
  const StepResult plain = predict_step(cfg, in.links, no_compression());
  const StepResult compressed = predict_step(cfg, in.links, comp);
  // With --subspace: plain stays the full-width baseline; "subspace" confines the TP messages
  // with plain NCCL; "compressed" confines them and runs the codecs on the smaller buffers.
  std::vector<std::pair<std::string, StepResult>> results = {{"plain", plain}};
  if (comp.subspace.on()) {
    Compression only = no_compression();
    only.subspace = comp.subspace;
    results.emplace_back("subspace", predict_step(cfg, in.links, only));
  }
  results.emplace_back("compressed", compressed);
  if (!a.quiet) {
    print_config_header(cfg, in, plain);
    print_subspace(a, "every configuration but plain");
    fmt::print("# codecs ({}): {}\n#\n",
               a.best ? "fastest per site of plain and the candidates" : "as given",
               codec_summary(comp));
    print_parts_header();
    print_parts_row("plain (no compression)", plain, 1.0);
    if (comp.subspace.on()) {
      const StepResult& only = results[1].second;
      print_parts_row("subspace, plain NCCL", only, plain.step_ms / only.step_ms);
      print_parts_row("subspace + codecs", compressed, plain.step_ms / compressed.step_ms);
    } else {
      print_parts_row("compressed", compressed, plain.step_ms / compressed.step_ms);
    }
    print_sites(plain, compressed);
    print_unmeasured_sizes(compressed, in.bench.get());
    fmt::print("#\n# speed-up {:.3f}x; dominant term plain: {}, compressed: {}\n",
               plain.step_ms / compressed.step_ms, plain.parts.dominant(),
               compressed.parts.dominant());
    if (comp.subspace.on())
      fmt::print(
          "# subspace: {} projections per micro-batch on stage {} -> {:.3f} ms of the compressed "
          "step's compute{}\n",
          compressed.projections_per_microbatch, compressed.critical_stage,
          compressed.projection_ms, a.projection_given ? "" : " (projection cost is not counted)");
    if (!plain.compute_measured)
      fmt::print(
          "# note: compute is a PLACEHOLDER until a layer benchmark record is given (--layer "
          "FILE)\n");
  }
  std::map<std::string, std::string> codecs;
  for (const auto& [k, v] : comp.tp) codecs["tp:" + k] = v.name;
  codecs["dp"] = comp.dp.name;
  codecs["pp"] = comp.pp.name;
  json j = {{"schema", "taco.model/1"}, {"meta", meta_json(a, in, "predict")}};
  std::vector<std::string> confined;
  for (const auto& r : results)
    if (r.second.subspace.on()) confined.push_back(r.first);
  j["predictions"] =
      json::array({prediction_json("prediction", "as given", cfg, in.links, results, codecs, plain,
                                   subspace_json(a, cfg.model, confined))});
  write_json(a.json_path, j);
}

struct Scenario {
  std::string name, description, tp, pp, dp;
};

std::vector<Scenario> paper_scenarios() {
  return {
      {"nvlink", "8 x H200, one NVLink node: TP, PP, DP over NVLink", "nvlink-h200", "nvlink-h200",
       "nvlink-h200"},
      {"pcie-gen5", "8 GPUs on PCIe Gen5 (no NVLink): every dimension over PCIe", "pcie-gen5",
       "pcie-gen5", "pcie-gen5"},
      {"pcie-shm", "8 GPUs, P2P off (host shared memory, the measured shm tier)", "h200-shm",
       "h200-shm", "h200-shm"},
      {"nvl+ib-100", "2-GPU NVLink nodes: TP inside, PP and DP over 100 Gb/s", "nvlink-h200",
       "ib-100", "ib-100"},
      {"nvl+ib-200", "2-GPU NVLink nodes: TP inside, PP and DP over 200 Gb/s", "nvlink-h200",
       "ib-200", "ib-200"},
      {"nvl+ib-400", "2-GPU NVLink nodes: TP inside, PP and DP over 400 Gb/s", "nvlink-h200",
       "ib-400", "ib-400"},
      {"ib-100", "1 GPU per node: TP, PP and DP over 100 Gb/s", "ib-100", "ib-100", "ib-100"},
      {"ib-200", "1 GPU per node: TP, PP and DP over 200 Gb/s", "ib-200", "ib-200", "ib-200"},
      {"ib-400", "1 GPU per node: TP, PP and DP over 400 Gb/s", "ib-400", "ib-400", "ib-400"},
      {"eth-25", "1 GPU per node: TP, PP and DP over 25 Gb/s Ethernet (TCP)", "eth-25", "eth-25",
       "eth-25"},
  };
}

void run_paper(const ModelArgs& a) {
  const Inputs in = load_inputs(a);
  TACO_REQUIRE_INPUT(in.bench != nullptr,
                     "--paper needs --bench FILE (taco bench --json with the taco codec)");
  TACO_REQUIRE_INPUT(in.bench->has("taco"), "--paper: {} has no rows of the taco codec",
                     in.bench->path);
  const CodecModel taco_codec = codec_from_table("taco", in.bench.get());
  const std::vector<CodecModel> cands = candidate_codecs(a, in);
  // The bound: a codec that costs no time at the fewest wire bytes of the candidates, on every
  // TP site, the activations and the gradients. No codec of these can do better.
  CodecModel bound = taco_codec;
  for (const CodecModel& c : cands)
    if (c.bytes_per_elem < bound.bytes_per_elem) bound = c;
  bound.name = fmt::format("free@{:g}B", bound.bytes_per_elem);
  bound.table = nullptr;
  // --subspace K: every configuration but plain confines the per-layer TP messages; the column
  // "subsp" is the subspace with plain NCCL.
  const Subspace sub = subspace_of(a);
  const bool ss = sub.on();
  for (const std::string& mname : preset_names()) {  // refuse a bad K before any output
    Parallel par;
    par.tp = 2, par.sp = a.sp;
    check_subspace(preset_model(mname), par, sub);
  }
  auto confined = [&](Compression c) {
    c.subspace = sub;
    return c;
  };
  json preds = json::array();
  if (!a.quiet) {
    fmt::print(
        "# taco model --paper {} ({}): predicted step time and speed-up, TP2 x PP2 x DP2, seq "
        "2048, MBS 8, GBS "
        "256\n",
        taco::kVersion, taco::kGitCommit);
    fmt::print(
        "# codec kernels: {} ({}); links: {}; overlap efficiency {:.2f}, +{:.2f} us per codec "
        "step\n",
        in.bench->path, in.bench->gpu, in.links.path, in.links.exec.overlap_efficiency,
        in.links.exec.codec_step_overhead_us);
    fmt::print(
        "# columns: plain step and tokens/s; speed-up of taco on TP only, taco on TP + PP + DP, "
        "the fastest of "
        "plain / {} per site (TP sites, PP, DP), and a bound: a codec of no cost at {:g} B/elem on "
        "all three\n",
        fmt::join(in.bench->variants(), " / "), bound.bytes_per_elem);
    print_subspace(a, "every column but plain (subsp: the subspace alone, plain NCCL)");
    fmt::print("# {:<11} {:<11} {:>9} {:>9} {}{:>8} {:>8} {:>8} {:>8}  {:<10} {:<10}  {}\n",
               "model", "scenario", "step(ms)", "tokens/s",
               ss ? fmt::format("{:>8} ", "subsp") : "", "taco-TP", "taco-3D", "best", "bound",
               "dominant", "(taco-TP)", "best per site");
  }
  std::set<std::string> placeholder;  // models whose compute is estimated, not measured
  for (const std::string& mname : preset_names()) {
    for (const Scenario& sc : paper_scenarios()) {
      ModelArgs b = a;
      b.model = mname;
      b.tp = 2, b.pp = 2, b.dp = 2, b.seq = 2048, b.mbs = 8, b.gbs = 256;
      b.tp_link = sc.tp, b.pp_link = sc.pp, b.dp_link = sc.dp;
      b.dist_opt = "auto";
      const StepConfig cfg = make_config(b, in);
      const StepResult plain = predict_step(cfg, in.links, no_compression());
      const StepResult taco_tp =
          predict_step(cfg, in.links,
                       confined(uniform_compression(taco_codec, CodecModel{}, CodecModel{}, true)));
      const StepResult taco_3d = predict_step(
          cfg, in.links, confined(uniform_compression(taco_codec, taco_codec, taco_codec, true)));
      const Compression best_c = best_per_site(cfg, in.links, cands, true, true, sub);
      const StepResult best = predict_step(cfg, in.links, best_c);
      const StepResult bnd =
          predict_step(cfg, in.links, confined(uniform_compression(bound, bound, bound, true)));
      std::vector<std::pair<std::string, StepResult>> results = {{"plain", plain}};
      if (ss)
        results.emplace_back("subspace", predict_step(cfg, in.links, confined(no_compression())));
      for (auto& r : std::vector<std::pair<std::string, StepResult>>{
               {"taco_tp", taco_tp}, {"taco_3d", taco_3d}, {"best", best}, {"bound", bnd}})
        results.push_back(r);
      std::vector<std::string> confined_names;
      for (const auto& r : results)
        if (r.second.subspace.on()) confined_names.push_back(r.first);
      if (!plain.compute_measured) placeholder.insert(mname);
      std::map<std::string, std::string> codecs;
      for (const auto& [k, v] : best_c.tp) codecs["best tp:" + k] = v.name;
      codecs["best dp"] = best_c.dp.name;
      codecs["best pp"] = best_c.pp.name;
      preds.push_back(prediction_json(fmt::format("{} {}", mname, sc.name), sc.description, cfg,
                                      in.links, results, codecs, plain,
                                      subspace_json(a, cfg.model, confined_names), false));
      if (!a.quiet)
        fmt::print(
            "  {:<11} {:<11} {:>9.1f} {:>9.0f} {}{:>7.3f}x {:>7.3f}x {:>7.3f}x {:>7.3f}x  {:<10} "
            "{:<10}  {}\n",
            mname, sc.name, plain.step_ms, plain.tokens_per_s,
            ss ? fmt::format("{:>7.3f}x ", plain.step_ms / results[1].second.step_ms) : "",
            plain.step_ms / taco_tp.step_ms, plain.step_ms / taco_3d.step_ms,
            plain.step_ms / best.step_ms, plain.step_ms / bnd.step_ms, plain.parts.dominant(),
            taco_tp.parts.dominant(), codec_summary(best_c));
    }
  }
  if (!a.quiet) {
    fmt::print("# scenarios:\n");
    for (const Scenario& sc : paper_scenarios())
      fmt::print("#   {:<11} {}\n", sc.name, sc.description);
    if (!placeholder.empty())
      fmt::print(
          "# note: compute of {} is a PLACEHOLDER (GEMM + attention FLOPs at {:.0f}% of {:.0f} "
          "TFLOP/s): no "
          "--layer row matches its shape (seq 2048, MBS 8, TP 2, no SP); the others use the "
          "measured layer\n",
          fmt::join(placeholder, ", "), 100 * a.efficiency, a.peak_tflops);
    if (ss && !a.projection_given)
      fmt::print(
          "# note: --subspace {}: projection cost is not counted (--subspace-projection-us not "
          "given)\n",
          sub.k);
  }
  json j = {
      {"schema", "taco.model/1"}, {"meta", meta_json(a, in, "paper")}, {"predictions", preds}};
  write_json(a.json_path, j);
}

json validation_json(const ValidationReport& v) {
  json fits = json::array();
  for (const TransportFit& f : v.fits) {
    json lines = json::array(), fac = json::object();
    for (const AlphaBeta& l : f.all_reduce.lines)
      lines.push_back({{"alpha_us", l.alpha_us}, {"bw_GBps", l.bw_GBps}});
    for (const auto& [c, x] : f.factor)
      fac[coll_name(c)] = {{"factor", x}, {"points", f.factor_points.at(c)}};
    json own = json::object();
    for (const auto& [c, lf] : f.own) {
      json ls = json::array();
      for (const AlphaBeta& l : lf.lines)
        ls.push_back({{"alpha_us", l.alpha_us}, {"bw_GBps", l.bw_GBps}});
      own[coll_name(c)] = {
          {"lines", ls}, {"points", f.own_points.at(c)}, {"max_rel_err", lf.max_rel_err}};
    }
    fits.push_back({{"transport", f.transport},
                    {"nranks", f.nranks},
                    {"points", f.points},
                    {"lines", lines},
                    {"max_rel_err", f.all_reduce.max_rel_err},
                    {"rms_rel_err", f.all_reduce.rms_rel_err},
                    {"coll_factor", fac},
                    {"coll_fit", own}});
  }
  auto opt = [](const std::optional<double>& x) { return x ? json(*x) : json(nullptr); };
  json rows = json::array();
  for (const ValidationRow& r : v.rows)
    rows.push_back({{"source", r.source},
                    {"kind", r.kind},
                    {"config", r.config},
                    {"transport", r.transport},
                    {"size", r.size},
                    {"measured_us", r.measured_us},
                    {"predicted_us", r.predicted_us},
                    {"err", r.err()},
                    {"basis", r.basis},
                    {"loo_predicted_us", opt(r.loo_predicted_us)},
                    {"wire_measured_us", opt(r.wire_measured_us)},
                    {"wire_predicted_us", opt(r.wire_predicted_us)},
                    {"codec_measured_us", opt(r.codec_measured_us)},
                    {"codec_predicted_us", opt(r.codec_predicted_us)}});
  json sum = json::array();
  for (const ValidationSummary& s : v.summary)
    sum.push_back({{"kind", s.kind},
                   {"transport", s.transport},
                   {"n", s.n},
                   {"median_abs_err", s.median_abs_err},
                   {"max_abs_err", s.max_abs_err},
                   {"within_10pct", s.within_10pct}});
  return {{"fits", fits},
          {"executor",
           {{"overlap_efficiency", v.exec.overlap_efficiency},
            {"codec_step_overhead_us", v.exec.codec_step_overhead_us},
            {"basis", v.exec_basis}}},
          {"rows", rows},
          {"summary", sum},
          {"notes", v.notes}};
}

std::string pct(double x) {
  return fmt::format("{:+.1f}%", 100 * x);
}

void run_validate(const ModelArgs& a) {
  const Inputs in = load_inputs(a);
  TACO_REQUIRE_INPUT(
      !in.comm.empty() || in.layer != nullptr,
      "--validate needs measured records: --comm FILES (taco comm --json) and/or --layer FILE");
  ValidationOptions o;
  o.max_lines = a.fit_lines;
  o.fit_overlap_on = a.fit_overlap_on == "none" ? "" : a.fit_overlap_on;
  o.exec = in.links.exec;
  o.layer_tier = a.layer_tier;
  o.peak_tflops = a.peak_tflops;
  o.compute_efficiency = a.efficiency;
  const ValidationReport v = validate(in.comm, in.bench.get(), in.layer.get(), in.links, o);
  if (!a.quiet) {
    fmt::print("# taco model --validate {} ({}): the model against {} measured configurations\n",
               taco::kVersion, taco::kGitCommit, v.rows.size());
    for (const TransportFit& f : v.fits) {
      std::string lines;
      for (const AlphaBeta& l : f.all_reduce.lines)
        lines += fmt::format("{}alpha {:.2f} us, B {:.1f} GB/s", lines.empty() ? "" : " | ",
                             l.alpha_us, l.bw_GBps);
      std::string fac;
      for (const auto& [c, lf] : f.own) {
        fac += fmt::format("; {} own fit ({} pt, max {:.1f}%):", coll_name(c), f.own_points.at(c),
                           100 * lf.max_rel_err);
        for (const AlphaBeta& l : lf.lines)
          fac += fmt::format(" alpha {:.2f} us, B {:.1f} GB/s", l.alpha_us, l.bw_GBps);
      }
      for (const auto& [c, x] : f.factor)
        fac += fmt::format("; {} x{:.3f} ({} pt)", coll_name(c), x, f.factor_points.at(c));
      fmt::print(
          "# fit {} ({} ranks, {} all-reduce rows): {}; in-sample max {:.1f}%, rms {:.1f}%{}\n",
          f.transport, f.nranks, f.points, lines, 100 * f.all_reduce.max_rel_err,
          100 * f.all_reduce.rms_rel_err, fac);
    }
    fmt::print("# executor: overlap efficiency {:.2f}, codec step overhead {:.2f} us ({})\n",
               v.exec.overlap_efficiency, v.exec.codec_step_overhead_us, v.exec_basis);
    if (in.bench) fmt::print("# codec kernels: {} ({})\n", in.bench->path, in.bench->gpu);
    fmt::print("#\n# {:<15} {:<9} {:<46} {:>11} {:>11} {:>8} {:>8} {:>19} {:>19}  {}\n", "kind",
               "transport", "configuration", "measured", "predicted", "err", "out-of-s",
               "wire meas/pred", "codec meas/pred", "basis");
    fmt::print("# {:<15} {:<9} {:<46} {:>11} {:>11} {:>8} {:>8} {:>19} {:>19}\n", "", "", "",
               "(us)", "(us)", "", "", "(us)", "(us)");
    for (const ValidationRow& r : v.rows) {
      const std::string loo =
          r.loo_predicted_us ? pct(*r.loo_predicted_us / r.measured_us - 1) : "-";
      const std::string wire =
          r.wire_measured_us
              ? fmt::format("{:.0f}/{:.0f}", *r.wire_measured_us, *r.wire_predicted_us)
              : "-";
      const std::string codec =
          r.codec_measured_us
              ? fmt::format("{:.0f}/{:.0f}", *r.codec_measured_us, *r.codec_predicted_us)
              : "-";
      fmt::print("  {:<15} {:<9} {:<46} {:>11.1f} {:>11.1f} {:>8} {:>8} {:>19} {:>19}  {}\n",
                 r.kind, r.transport, r.config.size() > 46 ? r.config.substr(0, 46) : r.config,
                 r.measured_us, r.predicted_us, pct(r.err()), loo, wire, codec, r.basis);
    }
    fmt::print("#\n# summary: |error| per kind and transport (target: within 10%)\n");
    fmt::print("# {:<26} {:<12} {:>4} {:>10} {:>9} {:>11}\n", "kind", "transport", "n", "median",
               "max", "within 10%");
    for (const ValidationSummary& s : v.summary)
      fmt::print("  {:<26} {:<12} {:>4} {:>9.1f}% {:>8.1f}% {:>6} of {}\n", s.kind, s.transport,
                 s.n, 100 * s.median_abs_err, 100 * s.max_abs_err, s.within_10pct, s.n);
    for (const auto& n : v.notes) fmt::print("# note: {}\n", n);
  }
  json j = {{"schema", "taco.model/1"},
            {"meta", meta_json(a, in, "validate")},
            {"predictions", json::array()},
            {"validation", validation_json(v)}};
  write_json(a.json_path, j);
}

void add_model(CLI::App& root) {
  auto a = std::make_shared<ModelArgs>();
  CLI::App* c = root.add_subcommand(
      "model", "Step-time model of TP x PP x DP training: when does compressed communication pay?");
  c->add_option("--model", a->model, "Preset: gpt-345m, qwen2.5-3b, or custom (give the shape)")
      ->capture_default_str();
  c->add_option("--arch", a->arch, "gpt (GELU MLP) or llama (SwiGLU MLP); overrides the preset");
  c->add_option("--layers", a->layers, "Transformer layers");
  c->add_option("--hidden", a->hidden, "Hidden size");
  c->add_option("--ffn", a->ffn, "MLP inner size (custom default: 4 x --hidden)");
  c->add_option("--heads", a->heads, "Attention heads");
  c->add_option("--kv-heads", a->kv_heads, "Key/value heads (GQA); default: --heads");
  c->add_option("--vocab", a->vocab, "Vocabulary size");
  c->add_option("--seq", a->seq, "Sequence length")->capture_default_str();
  c->add_option("--mbs", a->mbs, "Micro-batch size")->capture_default_str();
  c->add_option("--gbs", a->gbs, "Global batch size")->capture_default_str();
  c->add_option("--tp", a->tp, "Tensor-parallel degree")->capture_default_str();
  c->add_option("--pp", a->pp, "Pipeline-parallel degree (1F1B)")->capture_default_str();
  c->add_option("--dp", a->dp, "Data-parallel degree")->capture_default_str();
  c->add_flag("--sp", a->sp,
              "Sequence parallelism: all-gather / reduce-scatter pairs instead of all-reduces");
  c->add_option("--dist-opt", a->dist_opt,
                "Distributed optimizer (reduce-scatter grads, all-gather params): auto (on for "
                "gpt-345m), on, off")
      ->capture_default_str();
  c->add_flag("--no-dp-overlap", a->no_dp_overlap,
              "Gradient reduction after the backward, not overlapped with it");
  c->add_option("--grad-bytes", a->grad_bytes,
                "Bytes per gradient element on the DP wire (fp32 main grads: 4)")
      ->capture_default_str();
  c->add_option("--tp-link", a->tp_link, "Link tier of the TP groups (configs/links.json)")
      ->capture_default_str();
  c->add_option("--pp-link", a->pp_link, "Link tier between pipeline stages (default: --tp-link)");
  c->add_option("--dp-link", a->dp_link, "Link tier of the DP groups (default: --pp-link)");
  c->add_option("--links", a->links,
                "Link tiers and executor parameters (JSON, schema taco.links/1)")
      ->capture_default_str();
  c->add_option("--codec", a->codec, "Codec of every TP collective ('none': plain)")
      ->capture_default_str();
  c->add_option("--site-codec", a->site_codecs,
                "Per-site TP codecs (comma list of SITE:DIR=VARIANT; sites attn_out, mlp_out, "
                "attn_qkv, mlp_fc1, "
                "embed, head)");
  c->add_option("--dp-codec", a->dp_codec, "Codec of the DP gradient reduction")
      ->capture_default_str();
  c->add_option("--pp-codec", a->pp_codec, "Codec of the stage-to-stage activations")
      ->capture_default_str();
  c->add_flag("--best", a->best,
              "Per site (TP, DP, PP) the fastest of plain and the candidate codecs");
  c->add_option("--candidates", a->candidates,
                "Candidate codecs of --best and --paper (default: every variant in --bench)");
  c->add_option("--tp-algo", a->tp_algo,
                "Compressed all-reduce: auto (COCCL's size rule), one_shot, two_shot, ring")
      ->capture_default_str();
  c->add_option("--overlap", a->overlap,
                "Codec/transfer overlap model: pipeline (chunked, taco comm's) or none")
      ->capture_default_str();
  c->add_option("--bench", a->bench,
                "taco bench --json outputs of one GPU (comma list): codec GB/s per variant and "
                "size (needed to compress)");
  c->add_option("--comm", a->comm,
                "taco comm --json outputs (comma list): --validate checks against them; otherwise "
                "they refit the "
                "tiers that measure the same transport");
  c->add_option("--layer", a->layer,
                "Layer benchmark JSON (taco.layer/1): measured per-layer compute and codec time");
  c->add_option("--peak-tflops", a->peak_tflops, "Placeholder compute: bf16 dense rate")
      ->capture_default_str();
  c->add_option("--compute-efficiency", a->efficiency,
                "Placeholder compute: share of --peak-tflops reached")
      ->capture_default_str();
  c->add_flag("--paper", a->paper,
              "The paper's settings: GPT-345M and Qwen2.5-3B at TP2 x PP2 x DP2 on NVLink, PCIe "
              "and networks");
  c->add_flag("--validate", a->validate,
              "Compare the model with every measured configuration of --comm / --layer");
  c->add_option("--fit-overlap-on", a->fit_overlap_on,
                "--validate: transport whose pipelined compressed rows fit the overlap efficiency "
                "('none': keep the "
                "links file's)")
      ->capture_default_str();
  c->add_option("--fit-lines", a->fit_lines,
                "At most this many alpha-beta lines per fitted transport")
      ->capture_default_str();
  c->add_option("--layer-tier", a->layer_tier,
                "--validate: tier of the layer benchmark's dist rows")
      ->capture_default_str();
  c->add_option("--subspace", a->subspace,
                "Subspace-confined TP (Protocol Models, arXiv 2506.01260): the per-layer TP "
                "all-reduces carry K coordinates per token instead of hidden (1..hidden-1; 0: off; "
                "not with --sp); every configuration but plain");
  CLI::Option* proj = c->add_option(
      "--subspace-projection-us", a->projection_us,
      "Measured time (us) of the subspace projection GEMM per confined TP message on one rank, "
      "added to compute (default 0: not counted)");
  c->add_option("-J,--json", a->json_path,
                "Write the predictions / validation as JSON (schema taco.model/1)");
  c->add_flag("-q,--quiet", a->quiet, "No table on stdout");
  c->footer(
      "Examples:\n"
      "  taco model --model gpt-345m --tp 2 --pp 2 --dp 2 --tp-link pcie-gen5 --bench bench.json\n"
      "  taco model --model qwen2.5-3b --tp-link nvlink-h200 --pp-link ib-200 --best --bench "
      "bench.json -J q.json\n"
      "  taco model --model custom --arch llama --layers 32 --hidden 4096 --ffn 14336 --heads 32 "
      "--kv-heads 8 \\\n"
      "             --vocab 128256 --tp 4 --pp 1 --dp 8 --seq 4096 --mbs 1 --gbs 512 --sp --codec "
      "fp8-g128 --bench b.json\n"
      "  taco model --paper --bench bench/records/2026-12-02-h200-v62-bench.json -J paper.json\n"
      "  taco model --validate --bench bench/records/2026-12-01-h200-v16-bench.json \\\n"
      "             --comm "
      "bench/comm/2026-12-01-h200x2-run7/nvlink.json,bench/comm/2026-12-01-h200x2-run7/shm.json\n"
      "Prediction: step time, tokens/s and the speed-up of the compressed configuration over plain "
      "NCCL,\n"
      "split into compute, TP communication, exposed codec time, PP transfers, pipeline bubble, "
      "DP\n"
      "communication and the optimizer; the dominant term is named. Compute comes from --layer "
      "when it\n"
      "measured the same shapes, else it is a labelled placeholder (FLOPs at --compute-efficiency "
      "of\n"
      "--peak-tflops). Link numbers and their sources: configs/links.json. docs/step-model.md.");
  c->callback([a, proj]() {
    TACO_REQUIRE_INPUT(!(a->paper && a->validate), "--paper and --validate exclude each other");
    a->projection_given = proj->count() > 0;
    TACO_REQUIRE_INPUT(!a->projection_given || a->subspace != 0,
                       "--subspace-projection-us needs --subspace K (K >= 1)");
    TACO_REQUIRE_INPUT(!(a->validate && a->subspace != 0),
                       "--subspace applies to predictions (default mode and --paper), not to "
                       "--validate");
    TACO_REQUIRE_INPUT(a->fit_lines >= 1 && a->fit_lines <= 3,
                       "--fit-lines must be 1, 2 or 3, got {}", a->fit_lines);
    std::vector<std::string> read = {a->links, a->layer};
    if (!a->bench.empty())
      for (const auto& f : taco::cli::split_list(a->bench, "--bench")) read.push_back(f);
    if (!a->comm.empty())
      for (const auto& f : taco::cli::split_list(a->comm, "--comm")) read.push_back(f);
    taco::check_not_an_input(a->json_path, read, "--json", taco::OutputKind::File);
    if (a->validate)
      run_validate(*a);
    else if (a->paper)
      run_paper(*a);
    else
      run_predict(*a);
  });
}

}  // namespace

TACO_REGISTER_COMMAND(85, add_model);
