#pragma once
// The measured inputs of the step model, read strictly:
//   * `taco bench --json` (codec throughput per variant, operation and size),
//   * `taco comm --json`  (plain and compressed collective times per size and transport),
//   * the layer benchmark's JSON (schema "taco.layer/1": one transformer layer's forward +
//     backward on one rank, its parts and its TP messages; `python -m taco.bench.layer`).
// Each reader throws InputError with one line naming the file, the entry and the problem.
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace taco::model {

// ---- taco bench --json ------------------------------------------------------------------
enum class CodecOp { Encode, Decode, DecodeReduce, DecodeReduceEncode };
const char* codec_op_name(CodecOp op);

struct CodecCurve {
  // (bytes counted, GB/s) sorted by bytes; bytes counted as taco bench counts them
  // (encode: input + wire; decode: wire + output; decode_reduce: N wires + output;
  // decode_reduce_encode: N wires + the re-encoded wire).
  std::vector<std::pair<double, double>> pts;
};

struct CodecTable {
  std::string path;
  std::string gpu;
  std::map<std::string, std::map<CodecOp, CodecCurve>> curves;  // variant -> op -> curve
  std::map<std::string, double> bytes_per_elem;                 // wire bytes per element (bf16 in)
  double copy_TBps = 0;  // device-to-device copy at the largest size (0: the file has none)

  bool has(const std::string& variant) const { return curves.count(variant) > 0; }
  // Time (us) of one kernel that moves `bytes` (counted as above). GB/s is interpolated
  // linearly in log(bytes)-log(GB/s) between measured sizes. Below the smallest size the time
  // stays at the smallest size's (a launch-bound floor); above the largest the GB/s stays.
  // A decode without its own rows is costed as a one-source decode_reduce. InputError when the
  // variant or (other) operation has no rows.
  double time_us(const std::string& variant, CodecOp op, double bytes) const;
  bool has_op(const std::string& variant, CodecOp op) const;
  // The bf16 input bytes of the smallest measured encode (0: no encode rows): below it time_us
  // charges the floor.
  double smallest_encode_input_bytes(const std::string& variant) const;
  std::vector<std::string> variants() const;
};

// Reads fused, bf16 rows (cold ones when the file has any). Variants without an encode and a
// decode_reduce row are left out. encode_ef rows of V make the variant "ef:V" (error feedback):
// that encode, and V's other operations.
CodecTable read_bench_json(const std::string& path);
// Several bench files of one GPU as one table (e.g. a new codec benchmarked in its own run):
// InputError when their GPUs differ or a variant is in two of them. The copy rate is the
// highest of theirs; path lists them comma-separated.
CodecTable merge_codec_tables(const std::vector<CodecTable>& tables);

// ---- taco comm --json --------------------------------------------------------------------
struct CommRow {
  std::string file;
  int index = 0;           // position in the file's "results"
  std::string collective;  // all_reduce, all_gather, reduce_scatter, alltoall, sendrecv
  double size = 0;         // per-rank input buffer, bytes
  std::string type;        // bfloat16, ...
  std::string codec;       // "none" = plain NCCL
  std::string algorithm;
  std::string transport;
  int nranks = 0;
  double time_us = 0;
  int pipeline = 1;
  double wire_bytes = 0;
  std::optional<double> t_comm_us, t_codec_us, hidden_codec_pct;
  bool plain() const { return codec == "none"; }
};

struct CommRecord {
  std::string path;
  std::string launch;  // single-process, mpi, loopback
  std::vector<CommRow> rows;
};
CommRecord read_comm_json(const std::string& path);

// ---- layer benchmark JSON ("taco.layer/1") -----------------------------------------------
struct LayerModelShape {
  std::string arch;  // gpt | llama
  int64_t hidden = 0, ffn = 0, heads = 0, kv_heads = 0;
  bool operator==(const LayerModelShape& o) const {
    return arch == o.arch && hidden == o.hidden && ffn == o.ffn && heads == o.heads &&
           kv_heads == o.kv_heads;
  }
};

struct LayerMessage {
  std::string site;        // attn_out | mlp_out | attn_qkv | mlp_fc1
  std::string direction;   // fwd | bwd
  std::string collective;  // all_reduce | all_gather | reduce_scatter
  int64_t elements = 0, bytes_plain = 0, bytes_wire = 0;
  double codec_ms = 0;
};

struct LayerRow {
  int index = 0;
  LayerModelShape model;
  int64_t seq = 0, micro_batch = 0, tp = 0;
  bool sp = false;
  std::string dtype, variant, algo, mode;
  double step_median_ms = 0, step_p10_ms = 0, step_p90_ms = 0;
  int64_t samples = 0;
  double gemm_ms = 0, attention_ms = 0, codec_ms = 0, comm_exposed_ms = 0, other_ms = 0;
  std::vector<LayerMessage> messages;
  std::optional<double> speedup_vs_plain;
};

struct LayerRecord {
  std::string path;
  std::string gpu, command, date_utc;
  int64_t gpus = 0;
  std::vector<LayerRow> rows;

  // The row measuring (shape, seq, micro_batch, tp, sp, variant, mode), or nullptr.
  const LayerRow* find(const LayerModelShape& m, int64_t seq, int64_t micro_batch, int64_t tp,
                       bool sp, const std::string& variant, const std::string& mode) const;
};
LayerRecord read_layer_json(const std::string& path);

}  // namespace taco::model
