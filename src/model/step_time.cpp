#include "model/step_time.hpp"

#include "codecs/variant.hpp"
#include "core/error.hpp"
#include "model/pipeline.hpp"

#include <algorithm>
#include <cmath>

namespace taco::model {

ModelShape preset_model(const std::string& name) {
  ModelShape m;
  m.name = name;
  if (name == "gpt-345m") {
    m.arch = "gpt";
    m.layers = 24, m.hidden = 1024, m.ffn = 4096, m.heads = 16, m.kv_heads = 16, m.vocab = 50257;
    m.max_positions = 2048;
    m.tied_embeddings = true;
    m.source =
        "Megatron-LM GPT-2 345M shape (24 layers, hidden 1024, 16 heads, ffn 4 x hidden), GPT-2 "
        "BPE vocabulary "
        "50257, learned positions; COCCL's GPT script (methods.md 1.7): seq 2048, MBS 8, GBS 256, "
        "distributed "
        "optimizer";
  } else if (name == "qwen2.5-3b") {
    m.arch = "llama";
    m.layers = 36, m.hidden = 2048, m.ffn = 11008, m.heads = 16, m.kv_heads = 2, m.vocab = 151936;
    m.max_positions = 0;
    m.tied_embeddings = true;
    m.qkv_bias = true;
    m.source =
        "Hugging Face Qwen/Qwen2.5-3B config.json: hidden_size 2048, intermediate_size 11008, "
        "num_hidden_layers "
        "36, num_attention_heads 16, num_key_value_heads 2, vocab_size 151936, tie_word_embeddings "
        "true, "
        "q/k/v biases (Qwen2); seq 2048 and tp2pp2dp2 from COCCL's Qwen log tag (methods.md 1.7)";
  } else {
    throw_input_error(
        "--model '{}': unknown preset (gpt-345m, qwen2.5-3b; or give --layers --hidden --ffn "
        "--heads "
        "--kv-heads --vocab)",
        name);
  }
  return m;
}

std::vector<std::string> preset_names() {
  return {"gpt-345m", "qwen2.5-3b"};
}

void check_config(const StepConfig& c) {
  const ModelShape& m = c.model;
  const Parallel& p = c.par;
  TACO_REQUIRE_INPUT(m.layers >= 1 && m.hidden >= 1 && m.ffn >= 1 && m.heads >= 1 &&
                         m.kv_heads >= 1 && m.vocab >= 1,
                     "model: layers, hidden, ffn, heads, kv-heads and vocab must be >= 1");
  TACO_REQUIRE_INPUT(m.arch == "gpt" || m.arch == "llama", "--arch '{}': gpt or llama", m.arch);
  TACO_REQUIRE_INPUT(m.hidden % m.heads == 0, "--hidden {} is not a multiple of --heads {}",
                     m.hidden, m.heads);
  TACO_REQUIRE_INPUT(m.heads % m.kv_heads == 0, "--heads {} is not a multiple of --kv-heads {}",
                     m.heads, m.kv_heads);
  TACO_REQUIRE_INPUT(p.tp >= 1 && p.pp >= 1 && p.dp >= 1, "--tp, --pp and --dp must be >= 1");
  TACO_REQUIRE_INPUT(m.heads % p.tp == 0 && m.ffn % p.tp == 0,
                     "--tp {} must divide the heads ({}) and the ffn size ({})", p.tp, m.heads,
                     m.ffn);
  TACO_REQUIRE_INPUT(m.kv_heads % p.tp == 0 || p.tp % m.kv_heads == 0,
                     "--tp {} and --kv-heads {}: one must divide the other", p.tp, m.kv_heads);
  TACO_REQUIRE_INPUT(m.layers % p.pp == 0, "--pp {} must divide the layers ({})", p.pp, m.layers);
  const TrainShape& t = c.train;
  TACO_REQUIRE_INPUT(t.seq >= 1 && t.micro_batch >= 1 && t.global_batch >= 1,
                     "--seq, --mbs and --gbs must be >= 1");
  TACO_REQUIRE_INPUT(t.global_batch % (t.micro_batch * p.dp) == 0,
                     "--gbs {} is not a multiple of --mbs {} x --dp {}", t.global_batch,
                     t.micro_batch, p.dp);
  TACO_REQUIRE_INPUT(!p.sp || (p.tp > 1 && t.seq % p.tp == 0),
                     "--sp needs --tp > 1 and a sequence length divisible by it (tp {}, seq {})",
                     p.tp, t.seq);
  TACO_REQUIRE_INPUT(p.grad_bytes > 0 && p.bucket_params > 0,
                     "gradient bytes and bucket size must be positive");
  TACO_REQUIRE_INPUT(c.compute.efficiency > 0 && c.compute.efficiency <= 1,
                     "--compute-efficiency must be in (0, 1], got {}", c.compute.efficiency);
  TACO_REQUIRE_INPUT(c.compute.peak_tflops > 0, "--peak-tflops must be > 0");
}

// ---- shapes: FLOPs, parameters, messages ----------------------------------------------------
double layer_fwd_flops(const ModelShape& m, const TrainShape& t, const Parallel& par,
                       double causal) {
  const double b = double(t.micro_batch), s = double(t.seq), h = double(m.hidden),
               f = double(m.ffn);
  const double d = h / double(m.heads), kv = double(m.kv_heads) * d;
  const double tokens = b * s;
  const double qkv = 2 * tokens * h * (h + 2 * kv);
  const double out = 2 * tokens * h * h;
  const double mlp = (m.arch == "llama" ? 3 : 2) * 2 * tokens * h * f;
  const double attn = 4 * b * s * s * h * causal;  // Q K^T and (softmax) V over all heads
  return (qkv + out + mlp + attn) / par.tp;
}

double head_fwd_flops(const ModelShape& m, const TrainShape& t, const Parallel& par) {
  return 2.0 * double(t.micro_batch) * double(t.seq) * double(m.hidden) * double(m.vocab) / par.tp;
}

double layer_params_per_rank(const ModelShape& m, int tp) {
  const double h = double(m.hidden), f = double(m.ffn), d = h / double(m.heads),
               kv = double(m.kv_heads) * d;
  if (m.arch == "gpt") {
    const double sharded =
        h * 3 * h + h * h + 2 * h * f + 3 * h + f;  // matrices, column-parallel biases
    const double replicated = h + h + 4 * h;        // row-parallel biases, 2 LayerNorms
    return sharded / tp + replicated;
  }
  const double sharded = h * (h + 2 * kv) + h * h + 3 * h * f + (m.qkv_bias ? h + 2 * kv : 0);
  return sharded / tp + 2 * h;  // 2 RMSNorms
}

double embedding_params_per_rank(const ModelShape& m, int tp) {
  return double(m.vocab) * double(m.hidden) / tp + double(m.max_positions) * double(m.hidden);
}

void check_subspace(const ModelShape& m, const Parallel& par, const Subspace& sub) {
  TACO_REQUIRE_INPUT(sub.projection_us >= 0 && std::isfinite(sub.projection_us),
                     "--subspace-projection-us {}: must be a time >= 0 (us per TP message)",
                     sub.projection_us);
  if (sub.k == 0) return;  // off
  TACO_REQUIRE_INPUT(sub.k >= 1 && sub.k < m.hidden,
                     "--subspace {}: the subspace dimension must be 1..{} (below the hidden size "
                     "{} of {}; 0: off)",
                     sub.k, m.hidden - 1, m.hidden, m.name);
  TACO_REQUIRE_INPUT(!par.sp,
                     "subspace confinement runs without sequence parallelism (--subspace {} with "
                     "--sp)",
                     sub.k);
}

std::vector<TpMessage> layer_messages(const ModelShape& m, const TrainShape& t, const Parallel& par,
                                      const Subspace& sub) {
  check_subspace(m, par, sub);
  if (par.tp == 1) return {};
  const double full =
      2.0 * double(t.micro_batch) * double(t.seq) * double(m.hidden);  // bf16 [b, s, h]
  const double shard = full / par.tp;
  if (!par.sp) {
    // Subspace-confined: k bf16 coordinates per token, [b, s, k]. Exact in double (an integer
    // far below 2^53), so bytes x hidden == full x k holds to the last bit.
    const double bytes =
        sub.on() ? 2.0 * double(t.micro_batch) * double(t.seq) * double(sub.k) : full;
    return {{"attn_out", "fwd", Coll::AllReduce, bytes, sub.k},
            {"mlp_out", "fwd", Coll::AllReduce, bytes, sub.k},
            {"attn_qkv", "bwd", Coll::AllReduce, bytes, sub.k},
            {"mlp_fc1", "bwd", Coll::AllReduce, bytes, sub.k}};
  }
  // Sequence parallel: gather the sequence shards before a column-parallel GEMM, reduce-scatter
  // after a row-parallel one; the backward runs the duals.
  return {{"attn_qkv", "fwd", Coll::AllGather, shard},
          {"attn_out", "fwd", Coll::ReduceScatter, full},
          {"mlp_fc1", "fwd", Coll::AllGather, shard},
          {"mlp_out", "fwd", Coll::ReduceScatter, full},
          {"attn_qkv", "bwd", Coll::ReduceScatter, full},
          {"attn_out", "bwd", Coll::AllGather, shard},
          {"mlp_fc1", "bwd", Coll::ReduceScatter, full},
          {"mlp_out", "bwd", Coll::AllGather, shard}};
}

namespace {

// The embedding's output (first stage) and the LM head's input (last stage) cross TP too.
std::vector<TpMessage> first_stage_messages(const ModelShape& m, const TrainShape& t,
                                            const Parallel& par) {
  if (par.tp == 1) return {};
  const double full = 2.0 * double(t.micro_batch) * double(t.seq) * double(m.hidden);
  return {{"embed", "fwd", par.sp ? Coll::ReduceScatter : Coll::AllReduce, full}};
}

std::vector<TpMessage> last_stage_messages(const ModelShape& m, const TrainShape& t,
                                           const Parallel& par) {
  if (par.tp == 1) return {};
  const double full = 2.0 * double(t.micro_batch) * double(t.seq) * double(m.hidden);
  if (!par.sp) return {{"head", "bwd", Coll::AllReduce, full}};
  return {{"head", "fwd", Coll::AllGather, full / par.tp},
          {"head", "bwd", Coll::ReduceScatter, full}};
}

Algo tp_algo_for(const std::string& name, Coll c, double bytes, int n) {
  if (c != Coll::AllReduce) return Algo::Direct;
  if (name == "auto") return auto_allreduce_algo(bytes, n);
  return parse_algo(name, "--tp-algo");
}

CollCost site_cost(const LinkTier& tier, const ExecutorParams& ex, const CodecModel& codec,
                   const std::string& algo, Coll c, int n, double bytes, double elem_bytes,
                   bool pipelined) {
  if (codec.plain()) return plain_collective(tier, c, n, bytes);
  return compressed_collective(tier, ex, codec, c, tp_algo_for(algo, c, bytes, n), n, bytes,
                               elem_bytes, pipelined);
}

// Layer-measured codec time: scale the bench-predicted kernels of this message to what the
// layer benchmark measured (its codec_ms covers encode + decode of the message on one GPU).
CodecModel layer_scaled(const CodecModel& codec, const StepConfig& cfg, const TpMessage& msg,
                        const LinkTier& tier, const ExecutorParams& ex) {
  const LayerRecord* L = cfg.compute.layer;
  // A subspace-confined message is k/hidden of the buffer the layer benchmark measured: its
  // codec runs at the bench's kernel times for its own size.
  if (L == nullptr || codec.plain() || codec.table == nullptr || msg.subspace_k > 0) return codec;
  LayerModelShape shape{cfg.model.arch, cfg.model.hidden, cfg.model.ffn, cfg.model.heads,
                        cfg.model.kv_heads};
  const LayerRow* row = L->find(shape, cfg.train.seq, cfg.train.micro_batch, cfg.par.tp, cfg.par.sp,
                                codec.name, "shard");
  if (row == nullptr) return codec;
  for (const LayerMessage& lm : row->messages) {
    if (lm.site != msg.site || lm.direction != msg.direction || lm.codec_ms <= 0) continue;
    ExecutorParams bare = ex;
    bare.codec_step_overhead_us = 0;
    const CollCost predicted = compressed_collective(
        tier, bare, codec, msg.coll, tp_algo_for("auto", msg.coll, msg.bytes, cfg.par.tp),
        cfg.par.tp, msg.bytes, 2, false);
    if (predicted.codec_us <= 0) return codec;
    CodecModel scaled = codec;
    scaled.time_scale = lm.codec_ms * 1e3 / predicted.codec_us;
    return scaled;
  }
  return codec;
}

}  // namespace

const CodecModel& Compression::tp_codec(const std::string& key) const {
  static const CodecModel kPlain;
  auto it = tp.find(key);
  return it == tp.end() ? kPlain : it->second;
}

std::string Breakdown::dominant() const {
  const std::pair<const char*, double> terms[] = {
      {"compute", compute_ms},    {"tp_comm", tp_comm_ms}, {"codec", codec_ms},
      {"pp_bubble", bubble_ms},   {"pp_comm", pp_comm_ms}, {"dp_comm", dp_comm_ms},
      {"optimizer", optimizer_ms}};
  const auto* best = &terms[0];
  for (const auto& t : terms)
    if (t.second > best->second) best = &t;
  return best->first;
}

namespace {

// taco bench names its rows by a variant's canonical spelling; a spec written with its tokens in
// another order (int4:g128:had:sbf16 for int4:g128:sbf16:had) is the same codec.
std::string table_name(const std::string& variant, const CodecTable& table) {
  if (table.has(variant)) return variant;
  try {
    const std::string canonical = canonical_variant(parse_variant(variant));
    if (table.has(canonical)) return canonical;
  } catch (const InputError&) {
    // not a codec spec: the caller names what the table has
  }
  return variant;
}

}  // namespace

CodecModel codec_from_table(const std::string& variant, const CodecTable* table) {
  CodecModel c;
  if (variant == "none") return c;
  TACO_REQUIRE_INPUT(table != nullptr,
                     "codec '{}': the model needs its measured kernel throughput (--bench FILE, a "
                     "taco bench --json output)",
                     variant);
  const std::string name = table_name(variant, *table);
  TACO_REQUIRE_INPUT(table->has(name),
                     "codec '{}' has no fused bf16 encode / decode_reduce rows in {} (it has: {})",
                     variant, table->path, fmt::format("{}", fmt::join(table->variants(), ", ")));
  c.name = name;
  c.table = table;
  c.table_variant = name;
  c.bytes_per_elem = table->bytes_per_elem.at(name);
  return c;
}

Compression no_compression() {
  return Compression{};
}

Compression uniform_compression(const CodecModel& tp, const CodecModel& dp, const CodecModel& pp,
                                bool pipelined) {
  Compression c;
  for (const char* site : {"attn_out", "mlp_out", "attn_qkv", "mlp_fc1", "embed", "head"})
    for (const char* dir : {"fwd", "bwd"}) c.tp[std::string(site) + ":" + dir] = tp;
  c.dp = dp;
  c.pp = pp;
  c.pipelined = pipelined;
  return c;
}

// ---- the step --------------------------------------------------------------------------
namespace {

struct StageWork {
  double compute_fwd = 0, compute_bwd = 0;  // per micro-batch
  double tp_fwd = 0, tp_bwd = 0;            // collective totals
  double tp_codec = 0;                      // exposed codec inside tp_fwd + tp_bwd
  double projection = 0;                    // subspace projections inside compute_fwd + _bwd
  int projections = 0;                      // confined messages per micro-batch
  double params = 0;
  std::vector<SiteCost> sites;
};

}  // namespace

StepResult predict_step(const StepConfig& cfg, const LinkConfig& links, const Compression& comp) {
  check_config(cfg);
  const ModelShape& M = cfg.model;
  const Parallel& P = cfg.par;
  const TrainShape& T = cfg.train;
  const LinkTier& tp_tier = links.tier(cfg.place.tp, "--tp-link");
  const LinkTier& pp_tier = links.tier(cfg.place.pp, "--pp-link");
  const LinkTier& dp_tier = links.tier(cfg.place.dp, "--dp-link");
  const ExecutorParams& ex = links.exec;
  StepResult R;
  R.microbatches = int(T.global_batch / (T.micro_batch * P.dp));
  const int m = R.microbatches, p = P.pp;
  const int64_t layers_per_stage = M.layers / p;

  // Compute of one layer (fwd, bwd) per micro-batch.
  double layer_fwd_us, layer_bwd_us;
  const LayerRow* row = nullptr;
  if (cfg.compute.layer != nullptr) {
    LayerModelShape shape{M.arch, M.hidden, M.ffn, M.heads, M.kv_heads};
    row = cfg.compute.layer->find(shape, T.seq, T.micro_batch, P.tp, P.sp, "bf16", "shard");
  }
  const double rate = cfg.compute.efficiency * cfg.compute.peak_tflops * 1e12;  // FLOP/s
  if (row != nullptr) {
    // The layer benchmark times forward + backward together; backward does twice the forward's
    // GEMM work (input and weight gradients), so a third is the forward.
    const double us = row->step_median_ms * 1e3;
    layer_fwd_us = us / 3, layer_bwd_us = 2 * us / 3;
    R.compute_measured = true;
    R.compute_source = fmt::format("measured: {} rows[{}] (shard, bf16, {})",
                                   cfg.compute.layer->path, row->index, cfg.compute.layer->gpu);
  } else {
    const double f = layer_fwd_flops(M, T, P, cfg.compute.causal_attention);
    layer_fwd_us = f / rate * 1e6, layer_bwd_us = 2 * layer_fwd_us;
    R.compute_source =
        fmt::format("placeholder: GEMM + attention FLOPs at {:.0f}% of {:.0f} TFLOP/s ({})",
                    100 * cfg.compute.efficiency, cfg.compute.peak_tflops, cfg.compute.peak_source);
  }
  R.layer_compute_ms = (layer_fwd_us + layer_bwd_us) / 1e3;
  // The LM head is not in the layer benchmark: always FLOPs.
  const double head_fwd_us = head_fwd_flops(M, T, P) / rate * 1e6;

  auto cost_of = [&](const TpMessage& msg) {
    const CodecModel codec = layer_scaled(comp.tp_codec(msg.key()), cfg, msg, tp_tier, ex);
    SiteCost sc;
    sc.msg = msg;
    sc.codec = codec.name;
    sc.cost =
        site_cost(tp_tier, ex, codec, comp.tp_algo, msg.coll, P.tp, msg.bytes, 2, comp.pipelined);
    return sc;
  };
  auto add_sites = [&](StageWork& w, const std::vector<TpMessage>& msgs, int count) {
    for (const TpMessage& msg : msgs) {
      SiteCost sc = cost_of(msg);
      sc.count = count;
      const double t = sc.cost.total_us * count;
      (msg.direction == "fwd" ? w.tp_fwd : w.tp_bwd) += t;
      w.tp_codec += sc.cost.exposed_codec_us() * count;
      if (msg.subspace_k > 0) {
        // The projection GEMM of a confined message runs on each rank, in the pass of its
        // message, serial with it (TP is not overlapped): compute of that pass.
        const double proj = comp.subspace.projection_us * count;
        (msg.direction == "fwd" ? w.compute_fwd : w.compute_bwd) += proj;
        w.projection += proj;
        w.projections += count;
      }
      w.sites.push_back(sc);
    }
  };

  const std::vector<TpMessage> per_layer = layer_messages(M, T, P, comp.subspace);
  std::vector<StageWork> work(static_cast<size_t>(p));
  for (int s = 0; s < p; ++s) {
    StageWork& w = work[size_t(s)];
    w.compute_fwd = double(layers_per_stage) * layer_fwd_us;
    w.compute_bwd = double(layers_per_stage) * layer_bwd_us;
    add_sites(w, per_layer, int(layers_per_stage));
    w.params = double(layers_per_stage) * layer_params_per_rank(M, P.tp);
    if (s == 0) {
      add_sites(w, first_stage_messages(M, T, P), 1);
      w.params += embedding_params_per_rank(M, P.tp);
    }
    if (s == p - 1) {
      w.compute_fwd += head_fwd_us;
      w.compute_bwd += 2 * head_fwd_us;
      add_sites(w, last_stage_messages(M, T, P), 1);
      w.params += double(M.hidden) * (M.arch == "gpt" ? 2 : 1);  // final norm
      // The output layer: its own weights, or (tied) a copy of the embedding on a later stage.
      if (!M.tied_embeddings || p > 1) w.params += double(M.vocab) * double(M.hidden) / P.tp;
    }
  }

  // Stage-to-stage activations: [b, s, h] bf16; with SP each TP rank sends its sequence shard.
  const double act_bytes =
      2.0 * double(T.micro_batch) * double(T.seq) * double(M.hidden) / (P.sp ? P.tp : 1);
  if (p > 1)
    R.pp_send =
        site_cost(pp_tier, ex, comp.pp, "auto", Coll::SendRecv, 2, act_bytes, 2, comp.pipelined);

  std::vector<StageCost> stages(static_cast<size_t>(p));
  for (int s = 0; s < p; ++s) {
    const StageWork& w = work[size_t(s)];
    stages[size_t(s)] = {w.compute_fwd + w.tp_fwd, w.compute_bwd + w.tp_bwd, R.pp_send.total_us,
                         R.pp_send.total_us};
  }
  const PipelineResult pipe = simulate_1f1b(stages, m);

  // Data parallel: buckets of ~bucket_params gradients per stage.
  double finish = pipe.makespan_us, param_gather_exposed = 0;
  if (P.dp > 1) {
    for (int s = 0; s < p; ++s) {
      const double params = work[size_t(s)].params;
      const int buckets = std::max(1, int(std::ceil(params / P.bucket_params)));
      const double bucket_elems = params / buckets;
      const Coll gc = P.dist_opt ? Coll::ReduceScatter : Coll::AllReduce;
      const CollCost grad = site_cost(dp_tier, ex, comp.dp, "auto", gc, P.dp,
                                      bucket_elems * P.grad_bytes, P.grad_bytes, comp.pipelined);
      const double exposed =
          dp_exposed_us(pipe.last_bwd_start_us[size_t(s)], pipe.last_bwd_end_us[size_t(s)], buckets,
                        grad.total_us, P.dp_overlap);
      finish = std::max(finish, std::max(pipe.stage_end_us[size_t(s)],
                                         pipe.last_bwd_end_us[size_t(s)] + exposed));
      if (P.dist_opt) {
        // Updated bf16 parameters gathered after the optimizer step; overlapped with the next
        // step's forward (bucket by bucket) except the first bucket, which the forward waits for.
        const CollCost gather =
            plain_collective(dp_tier, Coll::AllGather, P.dp, bucket_elems / P.dp * 2);
        param_gather_exposed =
            std::max(param_gather_exposed, gather.total_us * (P.dp_overlap ? 1 : buckets));
        if (s == 0) R.dp_param_gather = gather;
      }
      if (s == 0) R.dp_grad = grad;
    }
  }
  // Tied embeddings: the first and last stage all-reduce the word-embedding gradient (fp32).
  double embed_sync = 0;
  if (M.tied_embeddings && p > 1) {
    R.embed_sync = plain_collective(pp_tier, Coll::AllReduce, 2,
                                    double(M.vocab) * double(M.hidden) / P.tp * P.grad_bytes);
    embed_sync = R.embed_sync.total_us;
  }
  // Adam: read fp32 param, grad, m, v; write param, m, v and the bf16 copy: 30 B per parameter.
  double max_params = 0;
  for (const StageWork& w : work) max_params = std::max(max_params, w.params);
  const double copy_TBps = cfg.compute.copy_TBps > 0 ? cfg.compute.copy_TBps : 4.8 * 0.9;
  const double opt_us = max_params / (P.dist_opt ? P.dp : 1) * 30 / (copy_TBps * 1e6);

  // Attribution on the critical stage (largest time per micro-batch).
  int c = 0;
  double tau_c = -1;
  for (int s = 0; s < p; ++s) {
    const StageWork& w = work[size_t(s)];
    const double sends = (s + 1 < p ? R.pp_send.total_us : 0) + (s > 0 ? R.pp_send.total_us : 0);
    const double tau = w.compute_fwd + w.compute_bwd + w.tp_fwd + w.tp_bwd + sends;
    if (tau > tau_c) tau_c = tau, c = s;
  }
  const StageWork& wc = work[size_t(c)];
  const double sends_c = (c + 1 < p ? R.pp_send.total_us : 0) + (c > 0 ? R.pp_send.total_us : 0);
  Breakdown& B = R.parts;
  B.compute_ms = m * (wc.compute_fwd + wc.compute_bwd) / 1e3;
  B.codec_ms = m * wc.tp_codec / 1e3;
  B.tp_comm_ms = m * (wc.tp_fwd + wc.tp_bwd - wc.tp_codec) / 1e3;
  B.pp_comm_ms = (m * sends_c + embed_sync) / 1e3;
  B.bubble_ms = (pipe.makespan_us - m * tau_c) / 1e3;
  if (B.bubble_ms < 0 && B.bubble_ms > -1e-9 * pipe.makespan_us)
    B.bubble_ms = 0;  // rounding, p = 1
  B.dp_comm_ms = (finish - pipe.makespan_us + param_gather_exposed) / 1e3;
  B.optimizer_ms = opt_us / 1e3;
  R.critical_stage = c;
  R.subspace = comp.subspace;
  R.projection_ms = m * wc.projection / 1e3;
  R.projections_per_microbatch = wc.projections;
  R.sites = wc.sites;
  R.params_per_rank = wc.params;
  R.step_ms = (finish + embed_sync + param_gather_exposed + opt_us) / 1e3;
  R.tokens_per_s = double(T.global_batch) * double(T.seq) / (R.step_ms / 1e3);
  return R;
}

Compression best_per_site(const StepConfig& cfg, const LinkConfig& links,
                          const std::vector<CodecModel>& candidates, bool pipelined,
                          bool include_dp_pp, const Subspace& sub) {
  check_config(cfg);
  Compression out = no_compression();
  out.pipelined = pipelined;
  out.subspace = sub;
  const LinkTier& tp_tier = links.tier(cfg.place.tp, "--tp-link");
  const Parallel& P = cfg.par;
  auto pick = [&](const LinkTier& tier, Coll c, int n, double bytes, double elem_bytes) {
    CodecModel best;  // plain
    double t = plain_collective(tier, c, n, bytes).total_us;
    for (const CodecModel& cand : candidates) {
      const double tc =
          site_cost(tier, links.exec, cand, "auto", c, n, bytes, elem_bytes, pipelined).total_us;
      if (tc < t) t = tc, best = cand;
    }
    return best;
  };
  std::vector<TpMessage> msgs = layer_messages(cfg.model, cfg.train, P, sub);
  for (const auto& x : first_stage_messages(cfg.model, cfg.train, P)) msgs.push_back(x);
  for (const auto& x : last_stage_messages(cfg.model, cfg.train, P)) msgs.push_back(x);
  for (const TpMessage& msg : msgs) out.tp[msg.key()] = pick(tp_tier, msg.coll, P.tp, msg.bytes, 2);
  if (include_dp_pp) {
    if (P.pp > 1) {
      const double act = 2.0 * double(cfg.train.micro_batch) * double(cfg.train.seq) *
                         double(cfg.model.hidden) / (P.sp ? P.tp : 1);
      out.pp = pick(links.tier(cfg.place.pp, "--pp-link"), Coll::SendRecv, 2, act, 2);
    }
    if (P.dp > 1) {
      const double params =
          double(cfg.model.layers / P.pp) * layer_params_per_rank(cfg.model, P.tp);
      const int buckets = std::max(1, int(std::ceil(params / P.bucket_params)));
      out.dp = pick(links.tier(cfg.place.dp, "--dp-link"),
                    P.dist_opt ? Coll::ReduceScatter : Coll::AllReduce, P.dp,
                    params / buckets * P.grad_bytes, P.grad_bytes);
    }
  }
  return out;
}

}  // namespace taco::model
