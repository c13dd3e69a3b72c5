#pragma once
// Compressed all-reduce plans (methods.md 1.6; semantics in collectives/sim_collectives.hpp):
//  one_shot  encode N chunks; all-gather the whole compressed buffer (in place); decode and sum
//            all N copies of every chunk (1 quantization; (N-1) x |C| bytes sent per rank).
//  two_shot  encode N chunks; all-to-all (grouped send/recv); the owner decodes and sums the N
//            copies of its chunk and re-encodes the sum; all-gather of the compressed shards;
//            decode (2 quantizations; 2 (N-1)/N x |C|).
//  ring      chunk j starts at rank j+1 (encoded raw) and travels j+1 -> j+2 -> ... -> j; at hop
//            h = 1..N-1 rank r sends chunk r-h to r+1 and receives chunk r-1-h from r-1, decodes
//            it, adds its own raw chunk and re-encodes; after N-1 hops rank r holds its finished
//            shard (chunk r), which a compressed all-gather delivers (N quantizations).
// Wire buffers: W0/W1 send/receive slots, W2 the reduced shard, W3 the gathered shards. Each
// piece has its own slots (16-byte aligned), so pieces never share memory.
#include "comm_plan.hpp"

namespace taco::comm {

inline RankPlan plan_allreduce(const PlanRequest& rq, int r) {
  using namespace detail;
  RankPlan plan = base_plan(rq, r);
  plan.out_elems = plan.in_elems;
  const int N = rq.nranks;
  if (N == 1) return single_rank_plan(rq, plan);
  const WireModel& wm = *rq.wire;
  const auto chunks = sim::chunk_layout(rq.rows, rq.cols, N);
  const auto pcs = split_chunks(chunks, wm, rq.pipeline);
  const int P = int(pcs[0].size());
  plan.depth = P;
  std::array<Arena, kWireBufs> A{};
  auto bytes_of = [&](int j, int p) {
    return wm.bytes(pcs[size_t(j)][size_t(p)].rows, pcs[size_t(j)][size_t(p)].cols);
  };
  for (int j = 0; j < N; ++j)
    for (int p = 0; p < P; ++p) plan.wire_bytes += bytes_of(j, p);

  for (int p = 0; p < P; ++p) {
    // The slot of piece p: large enough for piece p of any chunk.
    int64_t S = 0;
    for (int j = 0; j < N; ++j) S = std::max(S, round16(bytes_of(j, p)));
    std::vector<Step> steps;
    if (rq.algo == Algo::OneShot) {
      // In place: the encodes write this rank's slot of the gather buffer, so the all-gather
      // copies nothing locally.
      const int64_t gath = A[1].take(S * N * N), own = gath + r * S * N;
      std::vector<Op> enc, dec;
      for (int j = 0; j < N; ++j)
        enc.push_back(encode_op(pcs[size_t(j)][size_t(p)], own + j * S, Buf::W1));
      for (int j = 0; j < N; ++j) {
        std::vector<Ref> srcs;
        for (int q = 0; q < N; ++q) srcs.push_back(Ref{Buf::W1, gath + q * S * N + j * S});
        dec.push_back(
            decode_op(pcs[size_t(j)][size_t(p)], std::move(srcs), pcs[size_t(j)][size_t(p)].off));
      }
      steps.push_back(compute(coalesce(std::move(enc))));
      steps.push_back(comm({all_gather_op(Buf::W1, own, S * N, Buf::W1, gath)}));
      steps.push_back(compute(coalesce(std::move(dec))));
      plan.bytes_sent += S * N * (N - 1);
    } else if (rq.algo == Algo::TwoShot) {
      const int64_t send = A[0].take(S * N), recv = A[1].take(S * N), shard = A[2].take(S),
                    gath = A[3].take(S * N);
      std::vector<Op> enc, x, dec;
      for (int j = 0; j < N; ++j)
        enc.push_back(encode_op(pcs[size_t(j)][size_t(p)], send + j * S, Buf::W0));
      for (int q = 0; q < N; ++q) {
        if (q == r) continue;
        x.push_back(send_op(Buf::W0, send + q * S, bytes_of(q, p), q));
        x.push_back(recv_op(Buf::W1, recv + q * S, bytes_of(r, p), q));
        plan.bytes_sent += bytes_of(q, p);
      }
      Op red;
      red.kind = Op::Kind::DecodeReduceEncode;
      red.rows = pcs[size_t(r)][size_t(p)].rows;
      red.cols = pcs[size_t(r)][size_t(p)].cols;
      for (int q = 0; q < N; ++q)
        red.srcs.push_back(q == r ? Ref{Buf::W0, send + r * S} : Ref{Buf::W1, recv + q * S});
      red.dst = Ref{Buf::W2, shard};
      for (int j = 0; j < N; ++j)
        dec.push_back(decode_op(pcs[size_t(j)][size_t(p)], {Ref{Buf::W3, gath + j * S}},
                                pcs[size_t(j)][size_t(p)].off));
      steps.push_back(compute(coalesce(std::move(enc))));
      steps.push_back(comm(std::move(x)));
      steps.push_back(compute({red}));
      steps.push_back(comm({all_gather_op(Buf::W2, shard, S, Buf::W3, gath)}));
      steps.push_back(compute(coalesce(std::move(dec))));
      plan.bytes_sent += S * (N - 1);
    } else if (rq.algo == Algo::Ring) {
      const int64_t a = A[0].take(S), b = A[1].take(S), gath = A[3].take(S * N);
      steps.push_back(compute({encode_op(pcs[size_t(mod(r - 1, N))][size_t(p)], a, Buf::W0)}));
      for (int h = 1; h < N; ++h) {
        const int sent = mod(r - h, N), got = mod(r - 1 - h, N);
        steps.push_back(comm({send_op(Buf::W0, a, bytes_of(sent, p), mod(r + 1, N)),
                              recv_op(Buf::W1, b, bytes_of(got, p), mod(r - 1, N))}));
        plan.bytes_sent += bytes_of(sent, p);
        const Piece& own = pcs[size_t(got)][size_t(p)];
        Op hop;
        hop.kind = Op::Kind::DecodeAddEncode;
        hop.rows = own.rows;
        hop.cols = own.cols;
        hop.srcs = {Ref{Buf::W1, b}, Ref{Buf::In, own.off}};
        hop.dst = Ref{Buf::W0, a};
        steps.push_back(compute({hop}));
      }
      std::vector<Op> dec;
      for (int j = 0; j < N; ++j)
        dec.push_back(decode_op(pcs[size_t(j)][size_t(p)], {Ref{Buf::W3, gath + j * S}},
                                pcs[size_t(j)][size_t(p)].off));
      steps.push_back(comm({all_gather_op(Buf::W0, a, S, Buf::W3, gath)}));
      steps.push_back(compute(coalesce(std::move(dec))));
      plan.bytes_sent += S * (N - 1);
    } else {
      throw_input_error(
          "all_reduce: algorithm '{}' is not a compressed all-reduce (one_shot, two_shot, ring)",
          algo_name(rq.algo));
    }
    plan.pieces.push_back(std::move(steps));
  }
  plan.quantizations = sim::quantizations(Collective{Coll::AllReduce, rq.algo}, N);
  for (int i = 0; i < kWireBufs; ++i) plan.wire_size[size_t(i)] = A[size_t(i)].size;
  return plan;
}

}  // namespace taco::comm
