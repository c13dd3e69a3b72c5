#include "model/inputs.hpp"

#include "core/error.hpp"
#include "model/json_check.hpp"
#include "model/links.hpp"

#include <algorithm>
#include <cmath>
#include <set>
#include <tuple>

namespace taco::model {

const char* codec_op_name(CodecOp op) {
  switch (op) {
    case CodecOp::Encode:
      return "encode";
    case CodecOp::Decode:
      return "decode";
    case CodecOp::DecodeReduce:
      return "decode_reduce";
    case CodecOp::DecodeReduceEncode:
      return "decode_reduce_encode";
  }
  throw Error("codec_op_name: unknown op");
}

// ---- taco bench --------------------------------------------------------------------------
namespace {

double curve_time_us(const CodecCurve& c, double bytes) {
  const auto& p = c.pts;
  TACO_ASSERT(!p.empty(), "empty codec curve");
  if (bytes <= p.front().first)
    return p.front().first / (p.front().second * 1e3);  // launch-bound floor
  if (bytes >= p.back().first) return bytes / (p.back().second * 1e3);
  size_t i = 1;
  while (p[i].first < bytes) ++i;
  const double x0 = std::log(p[i - 1].first), x1 = std::log(p[i].first);
  const double y0 = std::log(p[i - 1].second), y1 = std::log(p[i].second);
  const double g = std::exp(y0 + (std::log(bytes) - x0) * (y1 - y0) / (x1 - x0));
  return bytes / (g * 1e3);
}

}  // namespace

double CodecTable::time_us(const std::string& variant, CodecOp op, double bytes) const {
  auto v = curves.find(variant);
  TACO_REQUIRE_INPUT(v != curves.end(), "codec '{}' has no throughput rows in {}", variant, path);
  auto c = v->second.find(op);
  if (c != v->second.end()) return curve_time_us(c->second, bytes);
  // A plain decode is a decode_reduce of one source: the same bytes through the same kernel.
  if (op == CodecOp::Decode) return curve_time_us(v->second.at(CodecOp::DecodeReduce), bytes);
  throw_input_error("codec '{}': {} has no {} rows", variant, path, codec_op_name(op));
}

bool CodecTable::has_op(const std::string& variant, CodecOp op) const {
  auto v = curves.find(variant);
  return v != curves.end() && v->second.count(op) > 0;
}

double CodecTable::smallest_encode_input_bytes(const std::string& variant) const {
  if (!has_op(variant, CodecOp::Encode)) return 0;
  // an encode counts input + wire bytes; the input is bf16, 2 bytes an element
  const double counted = curves.at(variant).at(CodecOp::Encode).pts.front().first;
  return counted / (1.0 + bytes_per_elem.at(variant) / 2.0);
}

std::vector<std::string> CodecTable::variants() const {
  std::vector<std::string> out;
  for (const auto& [k, v] : curves) out.push_back(k);
  return out;
}

CodecTable read_bench_json(const std::string& path) {
  const jc::json j = jc::load(path, "a taco bench --json file");
  CodecTable t;
  t.path = path;
  const jc::json& meta = jc::member(j, "meta", path);
  TACO_REQUIRE_INPUT(meta.is_object(), "{}: \"meta\" is not an object", path);
  if (meta.contains("gpu") && meta["gpu"].is_string()) t.gpu = meta["gpu"].get<std::string>();
  if (j.contains("copy")) {
    const jc::json& cp = j.at("copy");
    TACO_REQUIRE_INPUT(cp.is_array(), "{}: \"copy\" is not a list", path);
    double largest = 0;
    for (size_t i = 0; i < cp.size(); ++i) {
      const std::string w = fmt::format("{}: copy[{}]", path, i);
      const double b = jc::positive(cp[i], "bytes", w), tb = jc::non_negative(cp[i], "tbps", w);
      if (b >= largest) largest = b, t.copy_TBps = tb;
    }
  }
  const jc::json& res = jc::member(j, "results", path);
  TACO_REQUIRE_INPUT(res.is_array() && !res.empty(), "{}: \"results\" is not a non-empty list",
                     path);
  struct R {
    std::string variant;
    CodecOp op;
    double numel, bytes, gbps;
    bool cold;
  };
  std::vector<R> rows;
  bool any_cold = false;
  for (size_t i = 0; i < res.size(); ++i) {
    const std::string w = fmt::format("{}: results[{}]", path, i);
    const jc::json& r = res[i];
    const std::string impl = jc::string(r, "impl", w), dtype = jc::string(r, "dtype", w);
    const std::string op = jc::string(r, "op", w);
    const std::string variant = jc::string(r, "variant", w);
    const double numel = jc::positive(r, "numel", w), gbps = jc::non_negative(r, "gbps", w);
    const double bytes = jc::positive(r, "bytes_counted", w);
    bool cold = false;
    if (r.contains("cold")) cold = jc::boolean(r, "cold", w);
    if (impl != "fused" || (dtype != "bf16" && dtype != "bfloat16") || gbps <= 0) continue;
    CodecOp o;
    if (op == "encode")
      o = CodecOp::Encode;
    else if (op == "decode")
      o = CodecOp::Decode;
    else if (op == "decode_reduce")
      o = CodecOp::DecodeReduce;
    else if (op == "decode_reduce_encode")
      o = CodecOp::DecodeReduceEncode;
    else if (op == "encode_ef") {
      // The encode of "ef:VARIANT": its time, counted as a plain encode's bytes (the model asks
      // for encode times by input + wire) so that the residual's 8 B/elem stay in the time.
      const double plain_bytes = bytes - 8 * numel;
      TACO_REQUIRE_INPUT(plain_bytes > 0, "{}: an encode_ef row counts fewer than 8 B/elem", w);
      any_cold = any_cold || cold;
      rows.push_back(
          {"ef:" + variant, CodecOp::Encode, numel, plain_bytes, gbps * plain_bytes / bytes, cold});
      continue;
    } else
      throw_input_error("{}.op: unknown operation \"{}\"", w, op);
    any_cold = any_cold || cold;
    rows.push_back({variant, o, numel, bytes, gbps, cold});
  }
  std::map<std::string, double> largest;  // variant -> numel of the largest encode row so far
  for (const R& r : rows) {
    if (any_cold && !r.cold) continue;  // cold (L2 flushed) rows: a collective's data is not in L2
    auto& pts = t.curves[r.variant][r.op].pts;
    auto it =
        std::find_if(pts.begin(), pts.end(), [&](const auto& p) { return p.first == r.bytes; });
    if (it == pts.end())
      pts.emplace_back(r.bytes, r.gbps);
    else
      it->second = std::max(it->second, r.gbps);  // several launch configurations: the best
    if (r.op == CodecOp::Encode) {
      // encode counts input (2 B/elem, bf16) + wire; the largest size gives the asymptotic ratio
      // (per-tensor scales add 4 bytes per tensor, not per element).
      const double bpe = (r.bytes - 2 * r.numel) / r.numel;
      TACO_REQUIRE_INPUT(bpe > 0, "{}: encode row of '{}' counts fewer bytes than its bf16 input",
                         path, r.variant);
      if (r.numel >= largest[r.variant])
        largest[r.variant] = r.numel, t.bytes_per_elem[r.variant] = bpe;
    }
  }
  // "ef:V" decodes, reduces and re-encodes (ring hops) as V does: error feedback is one more
  // read and write of the residual in the first encode only.
  for (auto& [variant, ops] : t.curves) {
    if (variant.rfind("ef:", 0) != 0) continue;
    const auto plain = t.curves.find(variant.substr(3));
    if (plain == t.curves.end()) continue;
    for (const auto& [op, c] : plain->second)
      if (op != CodecOp::Encode) ops[op] = c;
  }
  for (auto it = t.curves.begin(); it != t.curves.end();) {
    for (auto& [op, c] : it->second) std::sort(c.pts.begin(), c.pts.end());
    if (!it->second.count(CodecOp::Encode) || !it->second.count(CodecOp::DecodeReduce)) {
      t.bytes_per_elem.erase(it->first);
      it = t.curves.erase(it);
    } else {
      ++it;
    }
  }
  TACO_REQUIRE_INPUT(!t.curves.empty(),
                     "{}: no variant has fused bf16 encode and decode_reduce rows", path);
  return t;
}

CodecTable merge_codec_tables(const std::vector<CodecTable>& tables) {
  TACO_REQUIRE_INPUT(!tables.empty(), "no bench file to merge");
  CodecTable t = tables.front();
  for (size_t i = 1; i < tables.size(); ++i) {
    const CodecTable& u = tables[i];
    TACO_REQUIRE_INPUT(u.gpu == t.gpu,
                       "{} measured {} but {} measured {}: codec rows of one GPU only",
                       tables.front().path, t.gpu, u.path, u.gpu);
    for (const auto& [variant, ops] : u.curves) {
      TACO_REQUIRE_INPUT(!t.has(variant), "variant '{}' is in {} and {}: give each variant once",
                         variant, t.path, u.path);
      t.curves[variant] = ops;
      t.bytes_per_elem[variant] = u.bytes_per_elem.at(variant);
    }
    t.copy_TBps = std::max(t.copy_TBps, u.copy_TBps);
    t.path += "," + u.path;
  }
  return t;
}

// ---- taco comm ---------------------------------------------------------------------------
CommRecord read_comm_json(const std::string& path) {
  const jc::json j = jc::load(path, "a taco comm --json file");
  CommRecord rec;
  rec.path = path;
  const jc::json& meta = jc::member(j, "meta", path);
  TACO_REQUIRE_INPUT(meta.is_object(), "{}: \"meta\" is not an object", path);
  if (meta.contains("launch") && meta["launch"].is_string())
    rec.launch = meta["launch"].get<std::string>();
  const jc::json& res = jc::member(j, "results", path);
  TACO_REQUIRE_INPUT(res.is_array() && !res.empty(), "{}: \"results\" is not a non-empty list",
                     path);
  auto opt = [](const jc::json& r, const char* k, const std::string& w) -> std::optional<double> {
    if (!r.contains(k) || r.at(k).is_null()) return std::nullopt;
    return jc::number(r, k, w);
  };
  for (size_t i = 0; i < res.size(); ++i) {
    const std::string w = fmt::format("{}: results[{}]", path, i);
    const jc::json& r = res[i];
    CommRow row;
    row.file = path;
    row.index = int(i);
    row.collective = jc::string(r, "collective", w);
    parse_coll(row.collective, w + ".collective");
    row.size = jc::positive(r, "size", w);
    row.type = jc::string(r, "type", w);
    row.codec = jc::string(r, "codec", w);
    row.algorithm = jc::string(r, "algorithm", w);
    row.transport = jc::string(r, "transport", w);
    row.nranks = int(jc::integer(r, "nranks", w, 1));
    row.time_us = jc::positive(r, "time_us", w);
    if (r.contains("pipeline")) row.pipeline = int(jc::integer(r, "pipeline", w, 1));
    row.wire_bytes = r.contains("wire_bytes") ? jc::positive(r, "wire_bytes", w) : row.size;
    row.t_comm_us = opt(r, "t_comm_us", w);
    row.t_codec_us = opt(r, "t_codec_us", w);
    row.hidden_codec_pct = opt(r, "hidden_codec_pct", w);
    rec.rows.push_back(std::move(row));
  }
  return rec;
}

// ---- layer benchmark ----------------------------------------------------------------------
namespace {

void require_string_or_null(const jc::json& o, const char* key, const std::string& w) {
  const jc::json& v = jc::member(o, key, w);
  TACO_REQUIRE_INPUT(v.is_string() || v.is_null(), "{}.{}: expected a string or null, got {}", w,
                     key, jc::show(v));
}

LayerMessage read_message(const jc::json& m, const std::string& w) {
  LayerMessage x;
  x.site = jc::one_of(m, "site", w, {"attn_out", "mlp_out", "attn_qkv", "mlp_fc1"});
  x.direction = jc::one_of(m, "direction", w, {"fwd", "bwd"});
  x.collective = jc::one_of(m, "collective", w, {"all_reduce", "all_gather", "reduce_scatter"});
  x.elements = jc::integer(m, "elements", w, 1);
  x.bytes_plain = jc::integer(m, "bytes_plain", w, 1);
  x.bytes_wire = jc::integer(m, "bytes_wire", w, 1);
  x.codec_ms = jc::non_negative(m, "codec_ms", w);
  TACO_REQUIRE_INPUT(x.bytes_plain == 2 * x.elements,
                     "{}: bytes_plain {} is not 2 x elements ({}) for bfloat16 messages", w,
                     x.bytes_plain, 2 * x.elements);
  return x;
}

LayerRow read_layer_row(const jc::json& r, const std::string& w, int index) {
  LayerRow x;
  x.index = index;
  const jc::json& m = jc::member(r, "model", w);
  const std::string mw = w + ".model";
  // taco.bench.layer names the GPT-2-style layer "gpt2" (taco.train's --arch): the same shape.
  x.model.arch = jc::one_of(m, "arch", mw, {"gpt", "gpt2", "llama"});
  if (x.model.arch == "gpt2") x.model.arch = "gpt";
  x.model.hidden = jc::integer(m, "hidden", mw, 1);
  x.model.ffn = jc::integer(m, "ffn", mw, 1);
  x.model.heads = jc::integer(m, "heads", mw, 1);
  x.model.kv_heads = jc::integer(m, "kv_heads", mw, 1);
  TACO_REQUIRE_INPUT(x.model.hidden % x.model.heads == 0,
                     "{}: hidden {} is not a multiple of heads {}", mw, x.model.hidden,
                     x.model.heads);
  TACO_REQUIRE_INPUT(x.model.heads % x.model.kv_heads == 0,
                     "{}: heads {} is not a multiple of kv_heads {}", mw, x.model.heads,
                     x.model.kv_heads);
  x.seq = jc::integer(r, "seq", w, 1);
  x.micro_batch = jc::integer(r, "micro_batch", w, 1);
  x.tp = jc::integer(r, "tp", w, 1);
  TACO_REQUIRE_INPUT(
      x.model.hidden % x.tp == 0 && x.model.ffn % x.tp == 0 && x.model.heads % x.tp == 0,
      "{}: tp {} does not divide hidden {}, ffn {} and heads {}", w, x.tp, x.model.hidden,
      x.model.ffn, x.model.heads);
  x.sp = jc::boolean(r, "sp", w);
  x.dtype = jc::one_of(r, "dtype", w, {"bfloat16"});
  x.variant = jc::string(r, "variant", w);
  TACO_REQUIRE_INPUT(!x.variant.empty(), "{}.variant: empty", w);
  x.algo = jc::one_of(r, "algo", w, {"nccl", "auto", "one_shot", "two_shot", "ring", "direct"});
  x.mode = jc::one_of(r, "mode", w, {"shard", "dist"});
  const jc::json& s = jc::member(r, "step_ms", w);
  const std::string sw = w + ".step_ms";
  x.step_median_ms = jc::positive(s, "median", sw);
  x.step_p10_ms = jc::positive(s, "p10", sw);
  x.step_p90_ms = jc::positive(s, "p90", sw);
  x.samples = jc::integer(s, "samples", sw, 1);
  TACO_REQUIRE_INPUT(x.step_p10_ms <= x.step_median_ms && x.step_median_ms <= x.step_p90_ms,
                     "{}: expected p10 <= median <= p90, got {} / {} / {}", sw, x.step_p10_ms,
                     x.step_median_ms, x.step_p90_ms);
  const jc::json& p = jc::member(r, "parts_ms", w);
  const std::string pw = w + ".parts_ms";
  x.gemm_ms = jc::non_negative(p, "gemm", pw);
  x.attention_ms = jc::non_negative(p, "attention", pw);
  x.codec_ms = jc::non_negative(p, "codec", pw);
  x.comm_exposed_ms = jc::non_negative(p, "comm_exposed", pw);
  x.other_ms = jc::non_negative(p, "other", pw);
  const jc::json& ms = jc::member(r, "messages", w);
  TACO_REQUIRE_INPUT(ms.is_array(), "{}.messages: expected a list", w);
  for (size_t i = 0; i < ms.size(); ++i)
    x.messages.push_back(read_message(ms[i], fmt::format("{}.messages[{}]", w, i)));
  const jc::json& sv = jc::member(r, "speedup_vs_plain", w);
  if (!sv.is_null()) x.speedup_vs_plain = jc::positive(r, "speedup_vs_plain", w);
  // What the schema implies: plain rows send plain bytes with no codec; one-GPU (shard) rows
  // communicate nothing.
  if (x.variant == "bf16") {
    TACO_REQUIRE_INPUT(x.algo == "nccl",
                       "{}: variant bf16 (plain NCCL) needs algo \"nccl\", got \"{}\"", w, x.algo);
    for (const LayerMessage& msg : x.messages)
      TACO_REQUIRE_INPUT(
          msg.bytes_wire == msg.bytes_plain && msg.codec_ms == 0,
          "{}: a bf16 (plain) row has a message with bytes_wire != bytes_plain or codec_ms != 0",
          w);
  }
  if (x.mode == "shard")
    TACO_REQUIRE_INPUT(x.comm_exposed_ms == 0,
                       "{}: mode \"shard\" communicates nothing, but parts_ms.comm_exposed is {}",
                       w, x.comm_exposed_ms);
  return x;
}

}  // namespace

const LayerRow* LayerRecord::find(const LayerModelShape& m, int64_t seq, int64_t micro_batch,
                                  int64_t tp, bool sp, const std::string& variant,
                                  const std::string& mode) const {
  for (const LayerRow& r : rows)
    if (r.model == m && r.seq == seq && r.micro_batch == micro_batch && r.tp == tp && r.sp == sp &&
        r.variant == variant && r.mode == mode)
      return &r;
  return nullptr;
}

LayerRecord read_layer_json(const std::string& path) {
  const jc::json j = jc::load(path, "a layer benchmark JSON (taco.layer/1)");
  LayerRecord rec;
  rec.path = path;
  const std::string schema = jc::string(j, "schema", path);
  TACO_REQUIRE_INPUT(schema == "taco.layer/1", "{}: schema \"{}\" is not \"taco.layer/1\"", path,
                     schema);
  const jc::json& env = jc::member(j, "env", path);
  const std::string ew = path + ": env";
  rec.gpu = jc::string(env, "gpu", ew);
  rec.gpus = jc::integer(env, "gpus", ew, 1);
  jc::string(env, "torch", ew);
  jc::string(env, "cuda", ew);
  require_string_or_null(env, "nccl", ew);
  require_string_or_null(env, "driver", ew);
  jc::string(env, "taco", ew);
  rec.command = jc::string(env, "command", ew);
  rec.date_utc = jc::string(env, "date_utc", ew);
  const jc::json& rows = jc::member(j, "rows", path);
  TACO_REQUIRE_INPUT(rows.is_array() && !rows.empty(), "{}: \"rows\" is not a non-empty list",
                     path);
  std::set<std::tuple<std::string, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t,
                      bool, std::string, std::string, std::string>>
      seen;
  for (size_t i = 0; i < rows.size(); ++i) {
    const std::string w = fmt::format("{}: rows[{}]", path, i);
    LayerRow r = read_layer_row(rows[i], w, int(i));
    const auto key =
        std::make_tuple(r.model.arch, r.model.hidden, r.model.ffn, r.model.heads, r.model.kv_heads,
                        r.seq, r.micro_batch, r.tp, r.sp, r.variant, r.algo, r.mode);
    TACO_REQUIRE_INPUT(seen.insert(key).second,
                       "{}: measures the same configuration (model, seq, micro_batch, tp, sp, "
                       "variant, algo, mode) as "
                       "an earlier row",
                       w);
    rec.rows.push_back(std::move(r));
  }
  return rec;
}

}  // namespace taco::model
