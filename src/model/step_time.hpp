#pragma once
// The step-time model: one training step of a Megatron-style transformer under TP x PP x DP,
// with and without compressed communication. docs/step-model.md writes every assumption out.
//
//   per micro-batch and stage:  layers x (compute + TP collectives) (+ embedding / LM head)
//   pipeline:                   1F1B over m = global_batch / (micro_batch x dp) micro-batches,
//                               activations sent between stages (pipeline.hpp)
//   data parallel:              gradient all-reduce, or reduce-scatter + parameter all-gather
//                               (distributed optimizer), overlapped with the last backward
//                               bucket by bucket or not; tied embeddings all-reduced between
//                               the first and last stage; then the optimizer step
// Compute per layer comes from the layer benchmark's JSON (mode "shard", variant "bf16", the
// same shapes) when given; otherwise a PLACEHOLDER: GEMM + attention FLOPs at a stated fraction
// of a stated bf16 rate. Results say which was used.
#include "model/collective.hpp"
#include "model/inputs.hpp"
#include "model/links.hpp"

#include <map>
#include <string>
#include <vector>

namespace taco::model {

struct ModelShape {
  std::string name = "custom";
  std::string arch = "gpt";  // gpt (GELU MLP, 2 matrices, biases) | llama (SwiGLU, 3 matrices)
  int64_t layers = 0, hidden = 0, ffn = 0, heads = 0, kv_heads = 0, vocab = 0;
  int64_t max_positions = 0;  // learned position embeddings (gpt); 0 = rotary
  bool tied_embeddings = true;
  bool qkv_bias = false;  // llama-family models with q/k/v biases (Qwen2)
  std::string source;     // where the numbers come from
};

// "gpt-345m", "qwen2.5-3b"; InputError for other names.
ModelShape preset_model(const std::string& name);
std::vector<std::string> preset_names();

struct TrainShape {
  int64_t seq = 2048, micro_batch = 8, global_batch = 256;
};

struct Parallel {
  int tp = 1, pp = 1, dp = 1;
  bool sp = false;        // sequence parallelism: all-gather / reduce-scatter instead of all-reduce
  bool dist_opt = false;  // distributed optimizer: gradient reduce-scatter + parameter all-gather
  bool dp_overlap = true;  // gradient reduction overlapped with the last backward, bucket by bucket
  double grad_bytes =
      4;  // bytes per gradient element on the DP wire (Megatron bf16: fp32 main grads)
  double bucket_params = 40e6;  // Megatron's default DDP bucket size (parameters)
};

struct Placement {
  std::string tp = "nvlink-h200", pp = "nvlink-h200",
              dp = "nvlink-h200";  // link tier per dimension
};

struct ComputeSource {
  const LayerRecord* layer = nullptr;  // measured per-layer time (preferred when it matches)
  double peak_tflops = 790;            // bf16 dense rate the placeholder scales
  double efficiency = 0.5;             // placeholder: share of peak_tflops reached
  std::string peak_source;
  double causal_attention = 0.5;  // share of the s^2 attention FLOPs a causal kernel computes
  double copy_TBps = 0;           // device copy bandwidth for the optimizer (0: 4.8 TB/s x 0.9)
};

// Subspace-confined TP (Protocol Models, arXiv 2506.01260; methods.md section 6): the residual
// stream's updates live in a fixed k-dimensional basis U (never sent), so every per-layer TP
// all-reduce (forward: attn_out, mlp_out; backward: attn_qkv, mlp_fc1) carries k coordinates
// per token instead of `hidden` values, and a codec, if any, runs on those. The embedding and
// head messages, PP sends and DP are unchanged. Each confined message costs a projection GEMM
// on each rank (forward c -> U c; backward g -> U^T g and back), given as a measured time per
// message; it is added to the compute of the pass the message belongs to. The layer's own
// compute is not reduced (the smaller row-parallel GEMMs are not credited).
struct Subspace {
  int64_t k = 0;             // coordinates per token; 0 = off
  double projection_us = 0;  // per confined TP message on one rank (0: not counted)
  bool on() const { return k > 0; }
};
// InputError unless the subspace is off, or 1 <= k < hidden, projection_us >= 0 and no SP.
void check_subspace(const ModelShape& m, const Parallel& par, const Subspace& sub);

// A TP site: where Megatron's layer communicates (site, direction) and with which collective.
struct TpMessage {
  std::string site;       // attn_out, mlp_out, attn_qkv, mlp_fc1; embed, head (first / last stage)
  std::string direction;  // fwd | bwd
  Coll coll = Coll::AllReduce;
  double bytes = 0;        // per-rank input buffer (all-gather: the shard)
  int64_t subspace_k = 0;  // > 0: subspace-confined, bytes = 2 b s k instead of 2 b s hidden
  std::string key() const { return site + ":" + direction; }
};
// Per-layer messages (no SP: 2 all-reduces forward, 2 backward; SP: all-gather + reduce-scatter
// pairs). With a subspace (checked here) the 4 all-reduces carry 2 b s k bytes each: the one
// place that scales TP messages.
std::vector<TpMessage> layer_messages(const ModelShape& m, const TrainShape& t, const Parallel& par,
                                      const Subspace& sub = {});

struct Compression {
  std::map<std::string, CodecModel> tp;  // key "site:direction"; missing or "none" = plain
  CodecModel dp, pp;                     // gradient reduction, stage-to-stage activations
  std::string tp_algo = "auto";          // compressed all-reduce: auto | one_shot | two_shot | ring
  bool pipelined = true;                 // overlap model: chunked pipeline (true) or none
  Subspace subspace;                     // subspace-confined per-layer TP messages (off: 0)
  const CodecModel& tp_codec(const std::string& key) const;
};

struct Breakdown {
  double compute_ms = 0, tp_comm_ms = 0, codec_ms = 0, pp_comm_ms = 0, bubble_ms = 0,
         dp_comm_ms = 0, optimizer_ms = 0;
  double total_ms() const {
    return compute_ms + tp_comm_ms + codec_ms + pp_comm_ms + bubble_ms + dp_comm_ms + optimizer_ms;
  }
  std::string dominant() const;  // name of the largest term
};

struct SiteCost {
  TpMessage msg;
  std::string codec;  // "none" = plain
  CollCost cost;
  int count = 0;  // per micro-batch on the critical stage
};

struct StepResult {
  double step_ms = 0, tokens_per_s = 0;
  Breakdown parts;
  int microbatches = 0;
  int critical_stage = 0;
  std::string compute_source;  // "layer JSON rows[i]" or "placeholder: ..."
  bool compute_measured = false;
  double layer_compute_ms = 0;  // one layer, fwd + bwd, one micro-batch
  Subspace subspace;            // as predicted (Compression::subspace)
  // Of parts.compute_ms: the subspace projections on the critical stage (micro-batches x
  // layers of the stage x confined messages per layer x projection_us).
  double projection_ms = 0;
  int projections_per_microbatch = 0;  // confined messages per micro-batch, critical stage
  std::vector<SiteCost> sites;  // TP sites of one layer (and embedding / head), per micro-batch
  CollCost pp_send, dp_grad, dp_param_gather, embed_sync;
  double params_per_rank = 0;  // on the critical stage
};

struct StepConfig {
  ModelShape model;
  TrainShape train;
  Parallel par;
  Placement place;
  ComputeSource compute;
};

void check_config(const StepConfig& cfg);  // InputError for impossible shapes and degrees

StepResult predict_step(const StepConfig& cfg, const LinkConfig& links, const Compression& comp);

// Compression with every site plain.
Compression no_compression();
// The same codec at every TP site (and DP / PP when given).
Compression uniform_compression(const CodecModel& tp, const CodecModel& dp, const CodecModel& pp,
                                bool pipelined);
// Per site (each TP site, DP, PP) the fastest of plain and the candidates, by the predicted
// time of that site's collective (with a subspace: of the confined, smaller messages; the
// result carries the subspace).
Compression best_per_site(const StepConfig& cfg, const LinkConfig& links,
                          const std::vector<CodecModel>& candidates, bool pipelined,
                          bool include_dp_pp, const Subspace& sub = {});

// A codec model for `variant` from the bench table (InputError when it has no rows there);
// "none" gives the plain model.
CodecModel codec_from_table(const std::string& variant, const CodecTable* table);

// FLOPs of one layer's forward on one TP rank (GEMMs + attention), and of the LM head.
double layer_fwd_flops(const ModelShape& m, const TrainShape& t, const Parallel& par,
                       double causal);
double head_fwd_flops(const ModelShape& m, const TrainShape& t, const Parallel& par);
// Parameters of one layer held by one TP rank (sharded matrices / tp + replicated norms, biases).
double layer_params_per_rank(const ModelShape& m, int tp);
double embedding_params_per_rank(const ModelShape& m, int tp);

}  // namespace taco::model
