#include "model/collective.hpp"

#include "core/error.hpp"

#include <algorithm>
#include <cmath>

namespace taco::model {

double CodecModel::op_us(CodecOp op, double bytes) const {
  if (table == nullptr) return 0;  // a free codec: bounds what compression could give
  return time_scale * table->time_us(table_variant, op, bytes);
}

double CodecModel::reduce_encode_us(int n_src, double elems, double in_elem_bytes) const {
  if (table == nullptr) return 0;
  const double w = elems * bytes_per_elem;
  if (table->has_op(table_variant, CodecOp::DecodeReduceEncode))
    return op_us(CodecOp::DecodeReduceEncode, n_src * w + w);
  // Unfused: the sum goes through memory between the two kernels.
  return op_us(CodecOp::DecodeReduce, n_src * w + elems * in_elem_bytes) +
         op_us(CodecOp::Encode, elems * in_elem_bytes + w);
}

double two_stream_makespan(const std::vector<std::vector<Step>>& pieces) {
  const int P = int(pieces.size());
  int K = 0;
  for (const auto& p : pieces) K = std::max(K, int(p.size()));
  std::vector<std::vector<double>> done(size_t(P), std::vector<double>(size_t(K), 0));
  double free_at[2] = {0, 0};  // [0] compute stream, [1] network stream
  double end = 0;
  // taco comm (cuda/collectives/comm_exec.cpp) issues wavefront w from the newest piece to the
  // oldest.
  for (int w = 0; w <= P + K - 2; ++w) {
    for (int p = std::min(w, P - 1); p >= 0 && w - p < K; --p) {
      const int s = w - p;
      if (s >= int(pieces[size_t(p)].size())) continue;
      const Step& st = pieces[size_t(p)][size_t(s)];
      const double ready = s > 0 ? done[size_t(p)][size_t(s - 1)] : 0;
      double& f = free_at[st.network ? 1 : 0];
      f = std::max(f, ready) + st.us;
      done[size_t(p)][size_t(s)] = f;
      end = std::max(end, f);
    }
  }
  return end;
}

int pipeline_depth(const ExecutorParams& ex, Coll c, int nranks, double bytes, bool pipelined) {
  if (!pipelined) return 1;
  // taco comm (cuda/bench/comm_bench.cpp): a rank's chunk is the whole buffer for all-gather and
  // send/recv, 1/N of it otherwise; pieces never smaller than pipeline_min_bytes.
  const double chunk = (c == Coll::AllGather || c == Coll::SendRecv) ? bytes : bytes / nranks;
  if (ex.pipeline_min_bytes <= 0) return ex.pipeline;
  const double fit = std::floor(chunk / double(ex.pipeline_min_bytes));
  return int(std::max(1.0, std::min(double(ex.pipeline), fit)));
}

CollCost plain_collective(const LinkTier& tier, Coll c, int nranks, double bytes) {
  CollCost r;
  r.algo = Algo::Nccl;
  r.wire_bytes = bytes;
  r.total_us = r.wire_us = r.serial_us = r.ideal_us = tier.time_us(c, nranks, bytes);
  return r;
}

PieceSchedule compressed_schedule(const LinkTier& tier, const ExecutorParams& ex,
                                  const CodecModel& codec, Coll c, Algo algo, int nranks,
                                  double bytes, double in_elem_bytes, bool pipelined) {
  TACO_REQUIRE_INPUT(!codec.plain(), "compressed_collective needs a codec");
  TACO_REQUIRE_INPUT(in_elem_bytes > 0 && bytes > 0, "compressed {}: empty buffer", coll_name(c));
  const int N = nranks;
  if (c == Coll::AllReduce) {
    TACO_REQUIRE_INPUT(algo == Algo::OneShot || algo == Algo::TwoShot || algo == Algo::Ring,
                       "compressed all_reduce: algorithm '{}' is not one_shot, two_shot or ring",
                       algo_name(algo));
  } else {
    TACO_REQUIRE_INPUT(algo == Algo::Direct,
                       "compressed {}: the only algorithm is 'direct', got '{}'", coll_name(c),
                       algo_name(algo));
  }
  PieceSchedule sch;
  const double elems = bytes / in_elem_bytes;
  sch.wire_bytes = elems * codec.bytes_per_elem;
  if (N == 1) return sch;  // nothing crosses a link, and taco's plans run no codec for one rank
  const int P = pipeline_depth(ex, c, N, bytes, pipelined);
  sch.pieces = P;
  const double rb = in_elem_bytes, bpe = codec.bytes_per_elem, ovh = ex.codec_step_overhead_us;
  const double np = elems / P, wp = np * bpe;  // a piece: elements and wire bytes per rank
  const double nc = np / N, wc = wp / N;       // 1/N of a piece (a rank's chunk of it)
  auto cpu = [&](double us) { return Step{false, us + ovh}; };
  auto net = [&](Coll k, double b) { return Step{true, tier.time_us(k, N, b)}; };
  std::vector<Step>& steps = sch.steps;
  switch (c) {
    case Coll::AllReduce:
      if (algo == Algo::OneShot) {
        steps = {cpu(codec.op_us(CodecOp::Encode, np * rb + wp)), net(Coll::AllGather, wp),
                 cpu(codec.op_us(CodecOp::DecodeReduce, N * wp + np * rb))};
      } else if (algo == Algo::TwoShot) {
        steps = {cpu(codec.op_us(CodecOp::Encode, np * rb + wp)), net(Coll::AllToAll, wp),
                 cpu(codec.reduce_encode_us(N, nc, rb)), net(Coll::AllGather, wc),
                 cpu(codec.op_us(CodecOp::Decode, wp + np * rb))};
      } else {
        steps = {cpu(codec.op_us(CodecOp::Encode, nc * rb + wc))};
        for (int h = 1; h < N; ++h) {
          steps.push_back(net(Coll::SendRecv, wc));
          // decode the received chunk, add the own raw chunk, re-encode: one fused kernel
          steps.push_back(cpu(codec.reduce_encode_us(1, nc, rb)));
        }
        steps.push_back(net(Coll::AllGather, wc));
        steps.push_back(cpu(codec.op_us(CodecOp::Decode, wp + np * rb)));
      }
      break;
    case Coll::ReduceScatter:
      steps = {cpu(codec.op_us(CodecOp::Encode, np * rb + wp)), net(Coll::AllToAll, wp),
               cpu(codec.op_us(CodecOp::DecodeReduce, N * wc + nc * rb))};
      break;
    case Coll::AllGather:  // bytes = the rank's input; the output is N times larger
      steps = {cpu(codec.op_us(CodecOp::Encode, np * rb + wp)), net(Coll::AllGather, wp),
               cpu(codec.op_us(CodecOp::Decode, N * wp + N * np * rb))};
      break;
    case Coll::AllToAll:
      steps = {cpu(codec.op_us(CodecOp::Encode, np * rb + wp)), net(Coll::AllToAll, wp),
               cpu(codec.op_us(CodecOp::Decode, wp + np * rb))};
      break;
    case Coll::SendRecv:
      steps = {cpu(codec.op_us(CodecOp::Encode, np * rb + wp)), net(Coll::SendRecv, wp),
               cpu(codec.op_us(CodecOp::Decode, wp + np * rb))};
      break;
  }
  return sch;
}

CollCost compressed_collective(const LinkTier& tier, const ExecutorParams& ex,
                               const CodecModel& codec, Coll c, Algo algo, int nranks, double bytes,
                               double in_elem_bytes, bool pipelined) {
  const PieceSchedule sch =
      compressed_schedule(tier, ex, codec, c, algo, nranks, bytes, in_elem_bytes, pipelined);
  CollCost r;
  r.algo = algo;
  r.wire_bytes = sch.wire_bytes;
  r.pieces = sch.pieces;
  if (sch.steps.empty()) return r;
  for (const Step& s : sch.steps) (s.network ? r.wire_us : r.codec_us) += sch.pieces * s.us;
  r.serial_us = r.wire_us + r.codec_us;
  r.ideal_us = two_stream_makespan(
      std::vector<std::vector<Step>>(static_cast<size_t>(sch.pieces), sch.steps));
  r.total_us = r.serial_us - ex.overlap_efficiency * (r.serial_us - r.ideal_us);
  return r;
}

}  // namespace taco::model
