// The step-time model (src/model): alpha-beta costs, line fits, the two-stream pipeline of a
// compressed collective, Megatron's 1F1B schedule, DP bucket overlap and the assembled step,
// each against an oracle computed by hand (or a closed form derived independently), plus the
// strictness of the JSON readers.
#include "catch.hpp"
#include "core/error.hpp"
#include "model/collective.hpp"
#include "model/inputs.hpp"
#include "model/links.hpp"
#include "model/pipeline.hpp"
#include "model/step_time.hpp"
#include "model/validate.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

using namespace taco;
using namespace taco::model;
using nlohmann::json;

namespace {

namespace fs = std::filesystem;

std::string source_path(const std::string& rel) {
  return std::string(TACO_SOURCE_DIR) + "/" + rel;
}

// Writes `j` to a fresh file under the temp directory; returns its path.
std::string write_temp(const std::string& name, const json& j) {
  const fs::path dir = fs::temp_directory_path() / "taco_step_model_tests";
  fs::create_directories(dir);
  const fs::path p = dir / name;
  std::ofstream(p) << j.dump(1);
  return p.string();
}

void require_input_error(const std::function<void()>& f, const std::string& needle) {
  try {
    f();
  } catch (const taco::InputError& e) {
    INFO("message: " << e.what());
    REQUIRE(std::string(e.what()).find(needle) != std::string::npos);
    return;
  }
  FAIL("expected an InputError containing '" << needle << "'");
}

LinkTier datasheet_tier(double bw, double eff, double alpha) {
  LinkTier t;
  t.name = "test";
  t.bw_GBps = bw, t.efficiency = eff, t.latency_us = alpha;
  return t;
}

// A codec table with a constant GB/s for every op: kernel time = bytes / (gbps * 1e3) us.
CodecTable constant_table(double gbps, double bpe) {
  CodecTable t;
  t.path = "constant";
  for (CodecOp op : {CodecOp::Encode, CodecOp::DecodeReduce})
    t.curves["c"][op].pts = {{1.0, gbps}, {1e12, gbps}};
  t.bytes_per_elem["c"] = bpe;
  return t;
}

}  // namespace

TEST_CASE("alpha-beta collective shapes and times by hand", "[model]") {
  REQUIRE(coll_shape(Coll::AllReduce, 4).steps == 6);
  REQUIRE(coll_shape(Coll::AllReduce, 4).volume == Approx(1.5));
  REQUIRE(coll_shape(Coll::AllGather, 4).steps == 3);
  REQUIRE(coll_shape(Coll::AllGather, 4).volume == 3);
  REQUIRE(coll_shape(Coll::ReduceScatter, 4).volume == Approx(0.75));
  REQUIRE(coll_shape(Coll::AllToAll, 8).volume == Approx(0.875));
  REQUIRE(coll_shape(Coll::SendRecv, 8).steps == 1);
  // B = 100 GB/s x 0.5 = 50 GB/s = 50e3 bytes/us, alpha 2 us.
  const LinkTier t = datasheet_tier(100, 0.5, 2);
  // Ring all-reduce of 1e6 bytes on 4 ranks: 6 x 2 + 1.5 x 1e6 / 50e3 = 12 + 30.
  REQUIRE(t.time_us(Coll::AllReduce, 4, 1e6) == Approx(42.0));
  // All-gather of a 1e6-byte input on 4 ranks: 3 x 2 + 3 x 20 = 66.
  REQUIRE(t.time_us(Coll::AllGather, 4, 1e6) == Approx(66.0));
  REQUIRE(t.time_us(Coll::SendRecv, 2, 1e6) == Approx(22.0));
  REQUIRE(t.time_us(Coll::AllReduce, 1, 1e6) == 0);  // one rank moves nothing
  // Fitted lines: the lower envelope; a factor scales one collective; own lines replace both.
  LinkTier f = t;
  f.fit = {{0.0, 10.0}, {50.0, 100.0}};  // N = 2 all-reduce: min(S / 10e3, 100 + S / 100e3)
  REQUIRE(f.time_us(Coll::AllReduce, 2, 1e5) == Approx(10.0));           // small: first line
  REQUIRE(f.time_us(Coll::AllReduce, 2, 1e7) == Approx(100.0 + 100.0));  // large: second
  f.coll_factor[Coll::AllGather] = 2.0;
  REQUIRE(f.time_us(Coll::AllGather, 2, 1e7) == Approx(2.0 * (50.0 + 100.0)));
  f.coll_fit[Coll::AllGather] = {{5.0, 50.0}};
  REQUIRE(f.time_us(Coll::AllGather, 2, 1e7) == Approx(5.0 + 200.0));
}

TEST_CASE("line fits recover the lines that made the points", "[model]") {
  // Two NCCL-like regimes at N = 2 (all-reduce: 2 steps, volume 1): t = min(1 + S/20e3, 40 +
  // S/300e3).
  std::vector<TimePoint> pts;
  for (double s = 1 << 16; s <= double(1 << 30); s *= 2)
    pts.push_back({s, std::min(1 + s / 20e3, 40 + s / 300e3)});
  const LineFit f = fit_lines(pts, Coll::AllReduce, 2, 2);
  REQUIRE(f.lines.size() == 2);
  REQUIRE(f.max_rel_err < 1e-9);
  REQUIRE(f.lines[0].alpha_us == Approx(0.5));  // per step: a / 2
  REQUIRE(f.lines[0].bw_GBps == Approx(20.0));
  REQUIRE(f.lines[1].alpha_us == Approx(20.0));
  REQUIRE(f.lines[1].bw_GBps == Approx(300.0));
  // Points of one line: a second line is not taken (it cannot cut the error by a quarter).
  std::vector<TimePoint> one;
  for (double s = 1 << 20; s <= double(1 << 30); s *= 4) one.push_back({s, 10 + s / 50e3});
  const LineFit g = fit_lines(one, Coll::AllReduce, 2, 3);
  REQUIRE(g.lines.size() == 1);
  REQUIRE(g.lines[0].alpha_us == Approx(5.0));
  REQUIRE(g.lines[0].bw_GBps == Approx(50.0));
  // All-gather at N = 2 has 1 step and volume 1: the same points give twice the alpha.
  REQUIRE(fit_lines(one, Coll::AllGather, 2, 1).lines[0].alpha_us == Approx(10.0));
  require_input_error(
      [] {
        fit_lines({{1e6, 10}}, Coll::AllReduce, 2, 2);
      },
      "at least 2 measured sizes");
}

TEST_CASE("two-stream makespan of pipelined pieces, by hand", "[model]") {
  // Two pieces of [codec 1, transfer 2, codec 1], issued by wavefront, newest piece first:
  // w0: p0.enc [0,1]; w1: p1.enc [1,2], p0.net [1,3]; w2: p1.net [3,5], p0.dec [3,4];
  // w3: p1.dec [5,6].
  const std::vector<Step> piece = {{false, 1}, {true, 2}, {false, 1}};
  REQUIRE(two_stream_makespan({piece, piece}) == Approx(6.0));
  REQUIRE(two_stream_makespan({piece}) == Approx(4.0));
  // Transfer-bound: 4 pieces of [1, 3, 1]: first encode 1 + 4 transfers 12 + last decode 1.
  const std::vector<Step> wide = {{false, 1}, {true, 3}, {false, 1}};
  REQUIRE(two_stream_makespan({wide, wide, wide, wide}) == Approx(14.0));
}

TEST_CASE("compressed collectives: pieces, schedule and overlap", "[model]") {
  ExecutorParams ex;
  ex.pipeline = 4;
  ex.pipeline_min_bytes = 4 << 20;
  // taco comm's depth: the rank's chunk (1/N of the buffer; all of it for all-gather) over 4 MiB.
  REQUIRE(pipeline_depth(ex, Coll::AllReduce, 2, 32 << 20, true) == 4);
  REQUIRE(pipeline_depth(ex, Coll::AllReduce, 2, 16 << 20, true) == 2);
  REQUIRE(pipeline_depth(ex, Coll::AllReduce, 2, 8 << 20, true) == 1);
  REQUIRE(pipeline_depth(ex, Coll::AllGather, 2, 8 << 20, true) == 2);
  REQUIRE(pipeline_depth(ex, Coll::AllReduce, 2, 1 << 30, false) == 1);

  const LinkTier t = datasheet_tier(100, 1.0, 0);      // 100e3 bytes/us, no latency
  const CodecTable table = constant_table(1000, 1.0);  // 1e6 bytes/us, 1 wire byte per element
  CodecModel c;
  c.name = "c";
  c.table = &table;
  c.table_variant = "c";
  c.bytes_per_elem = 1.0;
  // One-shot all-reduce of 8e6 bf16 bytes (4e6 elements) on 2 ranks, one piece:
  //   encode 8e6 + 4e6 bytes -> 12 us; all-gather of 4e6 wire bytes -> 40 us;
  //   decode-reduce 2 x 4e6 + 8e6 bytes -> 16 us.
  ex.overlap_efficiency = 0.5;
  const CollCost one =
      compressed_collective(t, ex, c, Coll::AllReduce, Algo::OneShot, 2, 8e6, 2, false);
  REQUIRE(one.pieces == 1);
  REQUIRE(one.codec_us == Approx(28.0));
  REQUIRE(one.wire_us == Approx(40.0));
  REQUIRE(one.total_us == Approx(68.0));  // one piece: nothing to overlap
  REQUIRE(one.exposed_codec_us() == Approx(28.0));
  REQUIRE(one.wire_bytes == Approx(4e6));
  // Four pieces of 2e6 bytes: steps [3, 10, 4]; ideal = 3 + 4 x 10 + 4 = 47, serial = 68;
  // t = 68 - 0.5 x (68 - 47) = 57.5.
  ex.pipeline_min_bytes = 0;
  const CollCost four =
      compressed_collective(t, ex, c, Coll::AllReduce, Algo::OneShot, 2, 8e6, 2, true);
  REQUIRE(four.pieces == 4);
  REQUIRE(four.ideal_us == Approx(47.0));
  REQUIRE(four.serial_us == Approx(68.0));
  REQUIRE(four.total_us == Approx(57.5));
  // A free codec at 1 B/elem: only the all-gather of the wire bytes is left.
  CodecModel free = c;
  free.table = nullptr;
  REQUIRE(compressed_collective(t, ex, free, Coll::AllReduce, Algo::OneShot, 2, 8e6, 2, false)
              .total_us == Approx(40.0));
  // The plain all-reduce of the same buffer: volume 1 at N = 2 -> 80 us; compression halves the
  // bytes, so a free codec gives exactly 2x.
  REQUIRE(plain_collective(t, Coll::AllReduce, 2, 8e6).total_us == Approx(80.0));
  // Reduce-scatter (direct): encode 12, alltoall of 4e6 wire (volume 1/2) 20, decode-reduce of
  // 2 chunks of 2e6 wire into 2e6 elements (4e6 bytes) 8.
  REQUIRE(compressed_collective(t, ex, c, Coll::ReduceScatter, Algo::Direct, 2, 8e6, 2, false)
              .total_us == Approx(40.0));
  require_input_error(
      [&] { compressed_collective(t, ex, c, Coll::AllReduce, Algo::Direct, 2, 8e6, 2, false); },
      "not one_shot, two_shot or ring");
  REQUIRE(auto_allreduce_algo(64 << 20, 2) == Algo::OneShot);
  REQUIRE(auto_allreduce_algo(512 << 10, 4) == Algo::OneShot);
  REQUIRE(auto_allreduce_algo(8 << 20, 4) == Algo::TwoShot);
  REQUIRE(auto_allreduce_algo(32 << 20, 8) == Algo::Ring);
}

TEST_CASE("1F1B schedule: the closed form without transfers, and a case by hand with them",
          "[model]") {
  for (int p : {1, 2, 3, 4, 8})
    for (int m : {1, 2, 3, 5, 16}) {
      CAPTURE(p, m);
      std::vector<StageCost> st(static_cast<size_t>(p), StageCost{1.0, 2.0, 0.0, 0.0});
      const PipelineResult r = simulate_1f1b(st, m);
      REQUIRE(r.makespan_us == Approx((m + p - 1) * 3.0));  // bubble (p - 1) / m of m (t_f + t_b)
      REQUIRE(r.busy_us[0] == Approx(m * 3.0));
    }
  // p = 2, m = 2, t_f = 1, t_b = 2, transfers 0.5 (the sender waits):
  //   S0: F0 [0,1] send ->1.5; F1 [1.5,2.5] send ->3; B0 waits for S1's gradient (5) [5,7];
  //       B1 waits (8.5) [8.5,10.5].
  //   S1: F0 [1.5,2.5]; B0 [2.5,4.5] send ->5; F1 [5,6]; B1 [6,8] send ->8.5.
  std::vector<StageCost> st(2, StageCost{1.0, 2.0, 0.5, 0.5});
  const PipelineResult r = simulate_1f1b(st, 2);
  REQUIRE(r.makespan_us == Approx(10.5));
  REQUIRE(r.stage_end_us[1] == Approx(8.5));
  REQUIRE(r.last_bwd_start_us[0] == Approx(8.5));
  REQUIRE(r.last_bwd_end_us[0] == Approx(10.5));
  REQUIRE(r.last_bwd_start_us[1] == Approx(6.0));
  // An uneven pipeline is limited by its slowest stage: m x (its t_f + t_b) + the others' fill.
  std::vector<StageCost> uneven = {{1, 2, 0, 0}, {2, 4, 0, 0}};
  REQUIRE(simulate_1f1b(uneven, 8).makespan_us == Approx(1 + 8 * 6.0 + 2));
  require_input_error([] { simulate_1f1b({}, 4); }, "no stages");
}

TEST_CASE("DP gradient buckets overlapped with the last backward, by hand", "[model]") {
  // Backward [0, 10], 2 buckets ready at 5 and 10, 4 us each: 5 -> 9, 10 -> 14: 4 us exposed.
  REQUIRE(dp_exposed_us(0, 10, 2, 4, true) == Approx(4.0));
  REQUIRE(dp_exposed_us(0, 10, 2, 4, false) == Approx(8.0));
  // 7 us each: 5 -> 12, then 12 -> 19: 9 us exposed.
  REQUIRE(dp_exposed_us(0, 10, 2, 7, true) == Approx(9.0));
  REQUIRE(dp_exposed_us(100, 110, 1, 3, true) == Approx(3.0));  // one bucket waits for the end
}

TEST_CASE("FLOPs and parameters against the textbook closed forms", "[model]") {
  // GPT with ffn = 4h, full MHA: forward GEMMs 24 b s h^2, attention scores and values
  // 4 b s^2 h (x causal share); parameters 12 h^2 + 13 h per layer (Megatron's count).
  ModelShape m = preset_model("gpt-345m");
  TrainShape t;
  t.seq = 2048, t.micro_batch = 8;
  Parallel par;
  par.tp = 2;
  const double b = 8, s = 2048, h = 1024;
  REQUIRE(layer_fwd_flops(m, t, par, 0.5) ==
          Approx((24 * b * s * h * h + 0.5 * 4 * b * s * s * h) / 2));
  REQUIRE(layer_params_per_rank(m, 1) == Approx(12 * h * h + 13 * h));
  REQUIRE(head_fwd_flops(m, t, par) == Approx(2 * b * s * h * 50257 / 2));
  // Qwen2.5-3B-like (GQA, SwiGLU, q/k/v biases): q + k + v = h (h + 2 kv_dim), o = h^2,
  // MLP 3 h f, biases h + 2 kv_dim, 2 RMSNorms.
  const ModelShape q = preset_model("qwen2.5-3b");
  const double H = 2048, F = 11008, KV = 2 * 128;
  REQUIRE(layer_params_per_rank(q, 1) ==
          Approx(H * (H + 2 * KV) + H * H + 3 * H * F + (H + 2 * KV) + 2 * H));
  // The preset's totals land on the names: ~0.35 B and ~3.1 B parameters.
  const double gpt_total = 24 * layer_params_per_rank(m, 1) + embedding_params_per_rank(m, 1);
  REQUIRE(gpt_total / 1e9 == Approx(0.355).epsilon(0.02));
  const double qwen_total = 36 * layer_params_per_rank(q, 1) + embedding_params_per_rank(q, 1);
  REQUIRE(qwen_total / 1e9 == Approx(3.09).epsilon(0.02));
  require_input_error([] { preset_model("gpt-9000"); }, "unknown preset");
}

namespace {

LinkConfig one_tier_links(double bw, double alpha) {
  LinkConfig L;
  L.path = "test";
  L.tiers["t"] = datasheet_tier(bw, 1.0, alpha);
  L.exec.pipeline = 1;
  L.exec.pipeline_min_bytes = 0;
  return L;
}

StepConfig small_config(int tp, int pp, int dp) {
  StepConfig c;
  c.model.name = "toy";
  c.model.arch = "gpt";
  c.model.layers = 4, c.model.hidden = 256, c.model.ffn = 1024, c.model.heads = 4,
  c.model.kv_heads = 4;
  c.model.vocab = 1000;
  c.model.max_positions = 0;
  c.model.tied_embeddings = true;
  c.train.seq = 128, c.train.micro_batch = 2, c.train.global_batch = 32 * dp;  // 16 micro-batches
  c.par.tp = tp, c.par.pp = pp, c.par.dp = dp;
  c.place = {"t", "t", "t"};
  c.compute.peak_tflops = 100;
  c.compute.efficiency = 1.0;
  c.compute.copy_TBps = 1.0;
  return c;
}

}  // namespace

TEST_CASE("the step assembled: one stage by hand, breakdown sums, compression on a slow link",
          "[model]") {
  // TP 2, one stage, one replica: every micro-batch runs 4 layers (3 x forward FLOPs each at
  // 100 TFLOP/s), 4 all-reduces per layer + the embedding's and the head's, the LM head (3 x its
  // forward FLOPs); then the optimizer (30 B per parameter at 1 TB/s).
  const LinkConfig L = one_tier_links(10, 5);  // 10 GB/s, 5 us per step
  const StepConfig c = small_config(2, 1, 1);
  const StepResult r = predict_step(c, L, no_compression());
  REQUIRE(r.microbatches == 16);
  REQUIRE_FALSE(r.compute_measured);
  const double rate_us = 100e12 / 1e6;  // FLOP per us
  const double layer = 3 * layer_fwd_flops(c.model, c.train, c.par, 0.5) / rate_us;
  const double head = 3 * head_fwd_flops(c.model, c.train, c.par) / rate_us;
  const double msg = 2.0 * 2 * 128 * 256;      // bf16 [b, s, h]
  const double ar = 2 * 5 + msg / (10 * 1e3);  // ring all-reduce at N = 2
  const double per_mb = 4 * (layer + 4 * ar) + head + 2 * ar;
  const double params =
      4 * layer_params_per_rank(c.model, 2) + embedding_params_per_rank(c.model, 2) + 2 * 256;
  const double opt = params * 30 / 1e6;
  REQUIRE(r.step_ms * 1e3 == Approx(16 * per_mb + opt));
  REQUIRE(r.parts.total_ms() == Approx(r.step_ms));
  REQUIRE(r.parts.bubble_ms == Approx(0).margin(1e-9));
  REQUIRE(r.parts.tp_comm_ms * 1e3 == Approx(16 * (4 * 4 + 2) * ar));
  REQUIRE(r.tokens_per_s == Approx(16 * 128 * 2 / (r.step_ms / 1e3)));

  // Pipeline and data parallelism: the parts still add up to the step.
  for (auto [tp, pp, dp] : {std::tuple{1, 2, 1}, std::tuple{2, 2, 2}, std::tuple{1, 4, 2}}) {
    CAPTURE(tp, pp, dp);
    StepConfig cc = small_config(tp, pp, dp);
    cc.par.dist_opt = dp > 1;
    const StepResult rr = predict_step(cc, L, no_compression());
    REQUIRE(rr.parts.total_ms() == Approx(rr.step_ms));
    REQUIRE(rr.parts.bubble_ms > 0);
  }

  // A free codec at 1 B/elem halves every TP message: on a link slow enough for TP to dominate,
  // the speed-up approaches 2 from below and grows as the link slows down.
  CodecModel free;
  free.name = "free";
  free.bytes_per_elem = 1.0;
  const Compression comp = uniform_compression(free, CodecModel{}, CodecModel{}, false);
  double last = 1.0;
  for (double bw : {400.0, 40.0, 4.0, 0.4}) {
    const LinkConfig Lb = one_tier_links(bw, 5);
    const double sp =
        predict_step(c, Lb, no_compression()).step_ms / predict_step(c, Lb, comp).step_ms;
    CAPTURE(bw, sp);
    REQUIRE(sp > last);
    REQUIRE(sp < 2.0);
    last = sp;
  }
  REQUIRE(last > 1.8);
  REQUIRE(predict_step(c, one_tier_links(0.4, 5), no_compression()).parts.dominant() == "tp_comm");
}

TEST_CASE("best per site never loses to plain", "[model]") {
  const CodecTable table = constant_table(50, 1.0);  // a slow codec: 50 GB/s
  CodecModel c;
  c.name = "c";
  c.table = &table;
  c.table_variant = "c";
  c.bytes_per_elem = 1.0;
  for (double bw : {1000.0, 10.0}) {
    const LinkConfig L = one_tier_links(bw, 5);
    const StepConfig cfg = small_config(2, 2, 2);
    const Compression best = best_per_site(cfg, L, {c}, false, true);
    const double plain = predict_step(cfg, L, no_compression()).step_ms;
    const double b = predict_step(cfg, L, best).step_ms;
    CAPTURE(bw, plain, b);
    REQUIRE(b <= plain * (1 + 1e-12));
    // On the fast link the slow codec loses at every site, so the choice is plain throughout.
    if (bw == 1000.0) {
      for (const auto& [k, v] : best.tp) REQUIRE(v.plain());
    } else {
      REQUIRE_FALSE(best.tp_codec("attn_out:fwd").plain());
    }
  }
}

TEST_CASE("configurations that cannot run are refused", "[model]") {
  const LinkConfig L = one_tier_links(10, 5);
  StepConfig c = small_config(2, 3, 1);  // 4 layers on 3 stages
  require_input_error([&] { predict_step(c, L, no_compression()); },
                      "--pp 3 must divide the layers");
  c = small_config(2, 1, 3);
  c.train.global_batch = 32;  // not a multiple of mbs 2 x dp 3
  require_input_error([&] { predict_step(c, L, no_compression()); }, "--gbs 32 is not a multiple");
  c = small_config(8, 1, 1);  // 4 heads on 8 ranks
  require_input_error([&] { predict_step(c, L, no_compression()); },
                      "--tp 8 must divide the heads");
  c = small_config(2, 1, 1);
  c.place.tp = "nope";
  require_input_error([&] { predict_step(c, L, no_compression()); },
                      "--tp-link 'nope': no such link tier");
}

TEST_CASE("codec table: log-log interpolation, floor, wire bytes from the encode rows", "[model]") {
  // Encode rows at 1e6 and 1e8 counted bytes (bf16 input + 1.0625 B/elem wire), 100 and 1000 GB/s.
  auto row = [](const char* op, double numel, double gbps, bool cold) {
    return json{{"variant", "v"},  {"op", op},       {"impl", "fused"},
                {"dtype", "bf16"}, {"numel", numel}, {"bytes_counted", numel * (2 + 1.0625)},
                {"gbps", gbps},    {"cold", cold}};
  };
  const double n1 = 1e6 / 3.0625, n2 = 1e8 / 3.0625;
  json j = {{"meta", {{"gpu", "test"}}},
            {"copy", {{{"bytes", 1e6}, {"tbps", 1.0}}, {{"bytes", 1e9}, {"tbps", 4.0}}}},
            {"results",
             {row("encode", n1, 100, true), row("encode", n2, 1000, true),
              row("decode_reduce", n1, 100, true), row("decode_reduce", n2, 1000, true),
              row("encode", n1, 5000, false),
              // error feedback: encode's bytes + 8 B/elem of fp32 residual, 11.0625 n1 B at 10 GB/s
              json{{"variant", "v"},
                   {"op", "encode_ef"},
                   {"impl", "fused"},
                   {"dtype", "bf16"},
                   {"numel", n1},
                   {"bytes_counted", n1 * 11.0625},
                   {"gbps", 10.0},
                   {"cold", true}},
              json{{"variant", "v"},
                   {"op", "encode"},
                   {"impl", "unfused"},
                   {"dtype", "bf16"},
                   {"numel", n1},
                   {"bytes_counted", 1e6},
                   {"gbps", 1.0}}}}};
  const CodecTable t = read_bench_json(write_temp("bench.json", j));
  REQUIRE(t.bytes_per_elem.at("v") == Approx(1.0625));
  REQUIRE(t.smallest_encode_input_bytes("v") == Approx(2 * n1));  // bf16 input of the n1 row
  REQUIRE(t.smallest_encode_input_bytes("w") == 0.0);             // no rows
  REQUIRE(t.copy_TBps == Approx(4.0));
  // Halfway in log(bytes): 10^2.5 GB/s. Warm and unfused rows are ignored (cold rows exist).
  REQUIRE(t.time_us("v", CodecOp::Encode, 1e7) == Approx(1e7 / (std::pow(10.0, 2.5) * 1e3)));
  REQUIRE(t.time_us("v", CodecOp::Encode, 1e5) == Approx(10.0));    // the smallest size's time
  REQUIRE(t.time_us("v", CodecOp::Encode, 1e9) == Approx(1000.0));  // the largest size's GB/s
  REQUIRE(t.time_us("v", CodecOp::Decode, 1e8) ==
          Approx(100.0));  // a decode: one-source decode_reduce
  // encode_ef makes "ef:v": asked by a plain encode's bytes (1e6 at n1), it takes the time of the
  // 11.0625 n1 bytes it moved at 10 GB/s; its wire, decodes and reductions are v's.
  REQUIRE(t.time_us("ef:v", CodecOp::Encode, 1e6) == Approx(n1 * 11.0625 / 1e4));
  REQUIRE(t.bytes_per_elem.at("ef:v") == Approx(1.0625));
  REQUIRE(t.time_us("ef:v", CodecOp::DecodeReduce, 1e8) ==
          t.time_us("v", CodecOp::DecodeReduce, 1e8));
  REQUIRE(codec_from_table("ef:v", &t).bytes_per_elem == Approx(1.0625));
  require_input_error([&] { t.time_us("w", CodecOp::Encode, 1e6); },
                      "codec 'w' has no throughput rows");
  require_input_error([&] { codec_from_table("taco", &t); }, "codec 'taco' has no fused bf16");
  j["results"][5]["op"] = "encode_twice";
  require_input_error([&] { read_bench_json(write_temp("bench_bad.json", j)); },
                      "results[5].op: unknown operation \"encode_twice\"");
  j["results"][5]["op"] = "encode_ef";
  j["results"][5]["bytes_counted"] = n1 * 8;
  require_input_error([&] { read_bench_json(write_temp("bench_bad.json", j)); },
                      "results[5]: an encode_ef row counts fewer than 8 B/elem");
  j["results"][0]["gbps"] = "fast";
  require_input_error([&] { read_bench_json(write_temp("bench_bad.json", j)); },
                      "results[0].gbps: expected a number");
}

TEST_CASE("bench files of one GPU merge into one table; other GPUs and repeats are refused",
          "[model]") {
  auto file = [](const char* name, const char* gpu, const char* variant, double gbps, double copy) {
    json rows = json::array();
    for (const char* op : {"encode", "decode_reduce"})
      rows.push_back({{"variant", variant},
                      {"op", op},
                      {"impl", "fused"},
                      {"dtype", "bf16"},
                      {"numel", 1e6},
                      {"bytes_counted", 3e6},
                      {"gbps", gbps},
                      {"cold", true}});
    return read_bench_json(write_temp(name, json{{"meta", {{"gpu", gpu}}},
                                                 {"copy", {{{"bytes", 1e8}, {"tbps", copy}}}},
                                                 {"results", rows}}));
  };
  const CodecTable a = file("a.json", "H", "v", 100, 2.0), b = file("b.json", "H", "w", 10, 3.0);
  const CodecTable m = merge_codec_tables({a, b});
  REQUIRE(m.variants() == std::vector<std::string>{"v", "w"});
  REQUIRE(m.time_us("v", CodecOp::Encode, 3e6) == Approx(30.0));  // 3e6 B at 100 GB/s
  REQUIRE(m.time_us("w", CodecOp::Encode, 3e6) == Approx(300.0));
  REQUIRE(m.bytes_per_elem.at("w") == Approx(1.0));
  REQUIRE(m.copy_TBps == Approx(3.0));
  REQUIRE(m.path == a.path + "," + b.path);
  require_input_error(
      [&] {
        merge_codec_tables({a, file("c.json", "G", "x", 1, 1)});
      },
      "codec rows of one GPU only");
  require_input_error(
      [&] {
        merge_codec_tables({a, file("d.json", "H", "v", 1, 1)});
      },
      "variant 'v' is in");
}

TEST_CASE("layer benchmark JSON: the fixture reads, every malformation is one clear error",
          "[model]") {
  const std::string path = source_path("tests/python/fixtures/model/layer.json");
  const LayerRecord rec = read_layer_json(path);
  REQUIRE(rec.rows.size() == 4);
  const LayerModelShape m{"gpt", 1024, 4096, 16, 16};
  const LayerRow* shard = rec.find(m, 2048, 8, 2, false, "bf16", "shard");
  REQUIRE(shard != nullptr);
  REQUIRE(shard->step_median_ms == Approx(2.0));
  REQUIRE(shard->messages.size() == 4);
  REQUIRE(rec.find(m, 2048, 8, 4, false, "bf16", "shard") == nullptr);

  // The measured row replaces the placeholder compute of a matching configuration.
  StepConfig c;
  c.model = preset_model("gpt-345m");
  c.par.tp = 2, c.par.pp = 2, c.par.dp = 2;
  c.place = {"t", "t", "t"};
  c.compute.layer = &rec;
  const StepResult r = predict_step(c, one_tier_links(100, 5), no_compression());
  REQUIRE(r.compute_measured);
  REQUIRE(r.layer_compute_ms == Approx(2.0));
  REQUIRE(r.compute_source.find("rows[0]") != std::string::npos);
  c.train.micro_batch = 4;  // no row at this micro-batch: the placeholder, labelled as such
  c.train.global_batch = 256;
  const StepResult p = predict_step(c, one_tier_links(100, 5), no_compression());
  REQUIRE_FALSE(p.compute_measured);
  REQUIRE(p.compute_source.rfind("placeholder", 0) == 0);

  std::ifstream in(path);
  const json good = json::parse(in);
  struct Case {
    const char* what;
    std::function<void(json&)> edit;
    const char* needle;
  };
  const std::vector<Case> cases = {
      {"schema", [](json& j) { j["schema"] = "taco.layer/2"; }, "is not \"taco.layer/1\""},
      {"env", [](json& j) { j["env"].erase("gpu"); }, "env: missing key \"gpu\""},
      {"no rows", [](json& j) { j["rows"] = json::array(); }, "\"rows\" is not a non-empty list"},
      {"arch", [](json& j) { j["rows"][0]["model"]["arch"] = "bert"; },
       "rows[0].model.arch: \"bert\" is not one of"},
      {"hidden type", [](json& j) { j["rows"][1]["model"]["hidden"] = "1024"; },
       "rows[1].model.hidden: expected an integer"},
      {"tp divides", [](json& j) { j["rows"][0]["tp"] = 3; }, "tp 3 does not divide"},
      {"mode", [](json& j) { j["rows"][0]["mode"] = "both"; },
       "rows[0].mode: \"both\" is not one of shard, dist"},
      {"median", [](json& j) { j["rows"][2]["step_ms"]["median"] = -1; },
       "rows[2].step_ms.median: must be > 0"},
      {"order", [](json& j) { j["rows"][2]["step_ms"]["p10"] = 9.0; },
       "expected p10 <= median <= p90"},
      {"samples", [](json& j) { j["rows"][0]["step_ms"]["samples"] = 0; }, "samples: must be >= 1"},
      {"parts", [](json& j) { j["rows"][0]["parts_ms"].erase("gemm"); },
       "rows[0].parts_ms: missing key \"gemm\""},
      {"site", [](json& j) { j["rows"][0]["messages"][1]["site"] = "mlp"; },
       "messages[1].site: \"mlp\" is not one of"},
      {"bytes", [](json& j) { j["rows"][1]["messages"][0]["bytes_plain"] = 7; },
       "bytes_plain 7 is not 2 x elements"},
      {"plain codec", [](json& j) { j["rows"][0]["messages"][0]["codec_ms"] = 0.1; },
       "a bf16 (plain) row has a message"},
      {"plain algo", [](json& j) { j["rows"][0]["algo"] = "ring"; },
       "variant bf16 (plain NCCL) needs algo \"nccl\""},
      {"shard comm", [](json& j) { j["rows"][1]["parts_ms"]["comm_exposed"] = 0.2; },
       "mode \"shard\" communicates nothing"},
      {"speedup", [](json& j) { j["rows"][1]["speedup_vs_plain"] = 0; },
       "speedup_vs_plain: must be > 0"},
      {"speedup key", [](json& j) { j["rows"][1].erase("speedup_vs_plain"); },
       "missing key \"speedup_vs_plain\""},
      {"dtype", [](json& j) { j["rows"][0]["dtype"] = "float16"; },
       "dtype: \"float16\" is not one of bfloat16"},
      {"duplicate", [](json& j) { j["rows"].push_back(j["rows"][0]); },
       "rows[4]: measures the same configuration"},
  };
  for (const Case& k : cases) {
    CAPTURE(k.what);
    json bad = good;
    k.edit(bad);
    const std::string p2 = write_temp(std::string("layer_") + k.what + ".json", bad);
    require_input_error([&] { read_layer_json(p2); }, k.needle);
  }
  const std::string trunc =
      (fs::temp_directory_path() / "taco_step_model_tests" / "layer_trunc.json").string();
  std::ofstream(trunc) << good.dump().substr(0, 100);
  require_input_error([&] { read_layer_json(trunc); }, "not valid JSON");
  require_input_error([] { read_layer_json("/nonexistent/layer.json"); }, "cannot open");
}

TEST_CASE("links file: the committed one reads and names its sources; typos are refused",
          "[model]") {
  const LinkConfig L = read_links(source_path("configs/links.json"));
  for (const char* t : {"nvlink-h200", "pcie-gen4", "pcie-gen5", "h200-shm", "ib-100", "ib-200",
                        "ib-400", "eth-10", "eth-25", "eth-100"}) {
    CAPTURE(t);
    REQUIRE(L.tiers.count(t) == 1);
    REQUIRE_FALSE(L.tiers.at(t).source.empty());
  }
  // NVLink is calibrated: its fit reproduces run7's plain 64 MiB all-reduce (247.7 us) within 10%.
  REQUIRE_FALSE(L.tiers.at("nvlink-h200").fit.empty());
  REQUIRE(L.tiers.at("nvlink-h200").time_us(Coll::AllReduce, 2, 64 << 20) ==
          Approx(247.7).epsilon(0.10));
  REQUIRE(L.exec.overlap_efficiency > 0);
  REQUIRE(L.exec.overlap_efficiency <= 1);

  std::ifstream in(source_path("configs/links.json"));
  const json good = json::parse(in);
  json bad = good;
  bad["tiers"]["ib-200"]["bandwith_GBps"] = 25;
  require_input_error([&] { read_links(write_temp("links_typo.json", bad)); },
                      "tiers.ib-200: unknown key \"bandwith_GBps\"");
  bad = good;
  bad["tiers"]["ib-200"]["efficiency"] = 1.5;
  require_input_error([&] { read_links(write_temp("links_eff.json", bad)); },
                      "efficiency: must be <= 1");
  bad = good;
  bad["tiers"]["ib-200"]["source"] = "";
  require_input_error([&] { read_links(write_temp("links_src.json", bad)); },
                      "every tier states where its numbers come from");
  bad = good;
  bad["tiers"]["ib-200"]["basis"] = "vibes";
  require_input_error([&] { read_links(write_temp("links_basis.json", bad)); },
                      "basis: \"vibes\" is not one of");
}

TEST_CASE("validation against run7: plain fits close, every row labelled", "[model]") {
  const std::string run7 = source_path("bench/comm/2026-12-01-h200x2-run7/");
  std::vector<CommRecord> comm = {read_comm_json(run7 + "nvlink.json"),
                                  read_comm_json(run7 + "shm.json")};
  const CodecTable bench =
      read_bench_json(source_path("bench/records/2026-12-01-h200-v16-bench.json"));
  const LinkConfig L = read_links(source_path("configs/links.json"));
  ValidationOptions o;
  o.exec = L.exec;
  const ValidationReport v = validate(comm, &bench, nullptr, L, o);
  REQUIRE(v.fits.size() == 2);
  int plain = 0, compressed = 0;
  for (const ValidationRow& r : v.rows) {
    CAPTURE(r.source, r.config);
    REQUIRE(r.measured_us > 0);
    REQUIRE(r.predicted_us > 0);
    REQUIRE_FALSE(r.basis.empty());
    if (r.kind == "comm-plain") {
      ++plain;
      REQUIRE(std::abs(r.err()) < 0.10);  // the in-sample fit of the plain curve
    } else {
      ++compressed;
      REQUIRE(r.kind == "comm-compressed");
      REQUIRE(r.wire_measured_us.has_value());
    }
  }
  REQUIRE(plain == 17);  // 11 NVLink + 6 shm sizes
  REQUIRE(compressed == 17);
  // The overlap fit lands where the records' hidden-codec shares put it (50-60% of the codec
  // time at 4 pieces, against 75% for an interference-free pipeline).
  REQUIRE(v.exec.overlap_efficiency > 0.5);
  REQUIRE(v.exec.overlap_efficiency < 0.95);
}

TEST_CASE(
    "subspace-confined TP: K/hidden of the bytes, the same collective model, projection "
    "counted exactly",
    "[model]") {
  const LinkConfig L = one_tier_links(10, 5);  // 10 GB/s, 5 us per step
  const LinkTier& tier = L.tiers.at("t");
  const StepConfig c = small_config(2, 1, 1);  // 4 layers, hidden 256, 16 micro-batches
  const int64_t h = c.model.hidden;
  for (int64_t k : {int64_t(1), int64_t(32), int64_t(100), h - 1}) {
    CAPTURE(k);
    const Subspace sub{k, 0};
    // Per message and site: the same four all-reduces, exactly k / hidden of the bytes.
    const std::vector<TpMessage> dense = layer_messages(c.model, c.train, c.par);
    const std::vector<TpMessage> conf = layer_messages(c.model, c.train, c.par, sub);
    REQUIRE(dense.size() == 4);
    REQUIRE(conf.size() == dense.size());
    for (size_t i = 0; i < dense.size(); ++i) {
      CAPTURE(dense[i].key());
      REQUIRE(conf[i].key() == dense[i].key());
      REQUIRE(conf[i].coll == Coll::AllReduce);
      REQUIRE(dense[i].subspace_k == 0);
      REQUIRE(conf[i].subspace_k == k);
      REQUIRE(conf[i].bytes * double(h) == dense[i].bytes * double(k));  // to the last bit
      REQUIRE(conf[i].bytes == 2.0 * 2 * 128 * double(k));               // bf16 [b, s, k]
    }
  }

  // The predicted TP time is the model's time of the smaller buffers, plain and compressed; the
  // embedding and head messages keep their size and cost.
  const int64_t k = 32;
  const double full = 2.0 * 2 * 128 * 256, small = 2.0 * 2 * 128 * double(k);
  Compression plain_ss = no_compression();
  plain_ss.subspace = {k, 0};
  const StepResult d = predict_step(c, L, no_compression());
  const StepResult r = predict_step(c, L, plain_ss);
  REQUIRE(r.sites.size() == d.sites.size());
  int confined = 0;
  for (size_t i = 0; i < r.sites.size(); ++i) {
    const SiteCost& s = r.sites[i];
    CAPTURE(s.msg.key());
    if (s.msg.site == "embed" || s.msg.site == "head") {
      REQUIRE(s.msg.subspace_k == 0);
      REQUIRE(s.msg.bytes == d.sites[i].msg.bytes);
      REQUIRE(s.cost.total_us == d.sites[i].cost.total_us);
      continue;
    }
    ++confined;
    REQUIRE(s.count == 4);
    REQUIRE(s.msg.bytes == small);
    REQUIRE(s.cost.total_us == plain_collective(tier, Coll::AllReduce, 2, small).total_us);
  }
  REQUIRE(confined == 4);
  const double ar_small = 2 * 5 + small / (10 * 1e3), ar_full = 2 * 5 + full / (10 * 1e3);
  REQUIRE(r.parts.tp_comm_ms * 1e3 == Approx(16 * (4 * 4 * ar_small + 2 * ar_full)));
  REQUIRE(d.parts.tp_comm_ms * 1e3 == Approx(16 * (4 * 4 * ar_full + 2 * ar_full)));
  REQUIRE(r.parts.compute_ms == d.parts.compute_ms);  // layer compute unchanged; no projection
  REQUIRE(r.projection_ms == 0);

  // A codec runs on the confined buffers: each confined site costs exactly the compressed
  // collective of the small buffer.
  const CodecTable table = constant_table(200, 1.0);
  CodecModel cm;
  cm.name = "c", cm.table = &table, cm.table_variant = "c", cm.bytes_per_elem = 1.0;
  Compression cc = uniform_compression(cm, CodecModel{}, CodecModel{}, false);
  cc.subspace = {k, 0};
  const StepResult rc = predict_step(c, L, cc);
  const CollCost want = compressed_collective(tier, L.exec, cm, Coll::AllReduce,
                                              auto_allreduce_algo(small, 2), 2, small, 2, false);
  for (const SiteCost& s : rc.sites) {
    CAPTURE(s.msg.key());
    if (s.msg.subspace_k == 0) continue;
    REQUIRE(s.cost.total_us == want.total_us);
    REQUIRE(s.cost.codec_us == want.codec_us);
    REQUIRE(s.cost.wire_bytes == Approx(small / 2));  // 1 B per element of k-wide rows
  }

  // PP sends, DP gradients, the parameter all-gather and the embedding sync are unchanged.
  StepConfig c3 = small_config(2, 2, 2);
  c3.par.dist_opt = true;
  for (const Compression& base : {no_compression(), uniform_compression(cm, cm, cm, false)}) {
    Compression with = base;
    with.subspace = {k, 0};
    const StepResult a = predict_step(c3, L, base), b = predict_step(c3, L, with);
    REQUIRE(a.pp_send.total_us > 0);
    REQUIRE(b.pp_send.total_us == a.pp_send.total_us);
    REQUIRE(a.dp_grad.total_us > 0);
    REQUIRE(b.dp_grad.total_us == a.dp_grad.total_us);
    REQUIRE(b.dp_param_gather.total_us == a.dp_param_gather.total_us);
    REQUIRE(b.embed_sync.total_us == a.embed_sync.total_us);
    REQUIRE(b.parts.tp_comm_ms < a.parts.tp_comm_ms);
  }
}

TEST_CASE("subspace projection: layers x 4 messages x micro-batches x the time per message",
          "[model]") {
  // One stage, one replica: the step is m x (compute + TP) + optimizer, so the projection adds
  // exactly m x layers x 4 (2 forward, 2 backward confined all-reduces) x projection_us.
  const LinkConfig L = one_tier_links(10, 5);
  const StepConfig c = small_config(2, 1, 1);
  const double proj = 7.5;
  Compression off = no_compression(), on = no_compression();
  off.subspace = {32, 0};
  on.subspace = {32, proj};
  const StepResult a = predict_step(c, L, off), b = predict_step(c, L, on);
  const double want_us = 16 * 4 * 4 * proj;  // micro-batches x layers x messages x us
  REQUIRE((b.step_ms - a.step_ms) * 1e3 == Approx(want_us).epsilon(1e-12));
  REQUIRE(b.projection_ms * 1e3 == Approx(want_us).epsilon(1e-12));
  REQUIRE(b.projections_per_microbatch == 4 * 4);
  REQUIRE((b.parts.compute_ms - a.parts.compute_ms) * 1e3 == Approx(want_us).epsilon(1e-12));
  REQUIRE(b.parts.tp_comm_ms == a.parts.tp_comm_ms);
  REQUIRE(b.parts.codec_ms == a.parts.codec_ms);
  REQUIRE(b.parts.total_ms() == Approx(b.step_ms));

  // With pipeline stages the projection is in the critical stage's compute: m x layers of the
  // stage x 4 x projection_us; the step grows by at least that.
  StepConfig c2 = small_config(2, 2, 2);
  c2.par.dist_opt = true;
  const StepResult a2 = predict_step(c2, L, off), b2 = predict_step(c2, L, on);
  const double want2_us = 16 * 2 * 4 * proj;
  REQUIRE(b2.critical_stage == a2.critical_stage);
  REQUIRE(b2.projection_ms * 1e3 == Approx(want2_us).epsilon(1e-12));
  REQUIRE((b2.parts.compute_ms - a2.parts.compute_ms) * 1e3 == Approx(want2_us).epsilon(1e-12));
  REQUIRE((b2.step_ms - a2.step_ms) * 1e3 >= want2_us * (1 - 1e-12));
  REQUIRE(b2.parts.total_ms() == Approx(b2.step_ms));
}

TEST_CASE("subspace: the fastest per site is chosen for the confined sizes; bad K is refused",
          "[model]") {
  // A codec with a 100 us floor per kernel (below 1e7 counted bytes) on a 0.1 GB/s link: at the
  // full 131 KB message plain takes 1311 us, compressed 100 + 655 + 100; at k = 32 (16 KB) plain
  // takes 164 us, compressed 100 + 82 + 100. So the codec wins the full-size embedding and head
  // messages and loses the confined ones.
  CodecTable table;
  table.path = "floor";
  for (CodecOp op : {CodecOp::Encode, CodecOp::DecodeReduce})
    table.curves["c"][op].pts = {{1e7, 100.0}, {1e12, 100.0}};
  table.bytes_per_elem["c"] = 1.0;
  const CodecModel cm = codec_from_table("c", &table);
  const LinkConfig L = one_tier_links(0.1, 0);
  const StepConfig c = small_config(2, 1, 1);
  const Subspace sub{32, 0};
  const Compression dense = best_per_site(c, L, {cm}, false, false);
  const Compression conf = best_per_site(c, L, {cm}, false, false, sub);
  REQUIRE(conf.subspace.k == 32);
  for (const char* key : {"attn_out:fwd", "mlp_out:fwd", "attn_qkv:bwd", "mlp_fc1:bwd"}) {
    CAPTURE(key);
    REQUIRE_FALSE(dense.tp_codec(key).plain());
    REQUIRE(conf.tp_codec(key).plain());
  }
  REQUIRE_FALSE(conf.tp_codec("embed:fwd").plain());
  REQUIRE_FALSE(conf.tp_codec("head:bwd").plain());
  Compression only = no_compression();
  only.subspace = sub;
  REQUIRE(predict_step(c, L, conf).step_ms <= predict_step(c, L, only).step_ms * (1 + 1e-12));

  // K outside 1..hidden-1, a negative projection time, and sequence parallelism are refused.
  const LinkConfig L2 = one_tier_links(10, 5);
  for (int64_t k : {int64_t(-1), int64_t(256), int64_t(1000)}) {
    CAPTURE(k);
    Compression bad = no_compression();
    bad.subspace = {k, 0};
    require_input_error([&] { predict_step(c, L2, bad); },
                        fmt::format("--subspace {}: the subspace dimension must be 1..255", k));
    require_input_error([&] { best_per_site(c, L2, {cm}, false, true, bad.subspace); },
                        "the subspace dimension must be 1..255");
  }
  require_input_error(
      [&] {
        layer_messages(c.model, c.train, c.par, {8, -1});
      },
      "--subspace-projection-us -1: must be a time >= 0");
  StepConfig sp = c;
  sp.par.sp = true;
  require_input_error(
      [&] {
        layer_messages(sp.model, sp.train, sp.par, {8, 0});
      },
      "subspace confinement runs without sequence parallelism");
  Compression ok = no_compression();
  ok.subspace = {8, 0};
  require_input_error([&] { predict_step(sp, L2, ok); },
                      "subspace confinement runs without sequence parallelism");
  // 0 is off: the dense messages, and SP is fine.
  REQUIRE(layer_messages(sp.model, sp.train, sp.par, {0, 0}).size() == 8);
}
