#pragma once
// Compressed all-to-all (direct): block j of rank r's buffer (sim::chunk_layout) goes to rank j.
// Encode the N blocks; grouped send/recv; decode block q of the output from rank q's message (the
// rank's own block through its own send slot, so every element is quantized exactly once).
// Out on rank r: N blocks of chunk r's size, block q from rank q. (N-1)/N x |C| sent per rank.
#include "comm_plan.hpp"

namespace taco::comm {

inline RankPlan plan_alltoall(const PlanRequest& rq, int r) {
  using namespace detail;
  RankPlan plan = base_plan(rq, r);
  const int N = rq.nranks;
  const auto chunks = sim::chunk_layout(rq.rows, rq.cols, N);
  const int64_t nr = chunks[size_t(r)].numel();
  plan.out_elems = nr * N;
  if (N == 1) return single_rank_plan(rq, plan);
  const WireModel& wm = *rq.wire;
  // Every rank's block r has chunk r's shape, so rank q's message to r is piece-for-piece the
  // same shape as r's own block r.
  const auto pcs = split_chunks(chunks, wm, rq.pipeline);
  const int P = int(pcs[0].size());
  plan.depth = P;
  std::array<Arena, kWireBufs> A{};
  auto bytes_of = [&](int j, int p) { return wm.bytes(pcs[size_t(j)][size_t(p)].rows, pcs[size_t(j)][size_t(p)].cols); };
  for (int p = 0; p < P; ++p) {
    int64_t S = 0;
    for (int j = 0; j < N; ++j) {
      S = std::max(S, round16(bytes_of(j, p)));
      plan.wire_bytes += bytes_of(j, p);
    }
    const int64_t send = A[0].take(S * N), recv = A[1].take(S * N);
    std::vector<Op> enc, x, dec;
    for (int j = 0; j < N; ++j) enc.push_back(encode_op(pcs[size_t(j)][size_t(p)], send + j * S, Buf::W0));
    for (int q = 0; q < N; ++q) {
      if (q == r) continue;
      x.push_back(send_op(Buf::W0, send + q * S, bytes_of(q, p), q));
      x.push_back(recv_op(Buf::W1, recv + q * S, bytes_of(r, p), q));
      plan.bytes_sent += bytes_of(q, p);
    }
    const Piece& own = pcs[size_t(r)][size_t(p)];
    const int64_t in_chunk = own.off - chunks[size_t(r)].offset;
    for (int q = 0; q < N; ++q)
      dec.push_back(decode_op(own, {q == r ? Ref{Buf::W0, send + r * S} : Ref{Buf::W1, recv + q * S}},
                              q * nr + in_chunk));
    plan.pieces.push_back({compute(coalesce(std::move(enc))), comm(std::move(x)), compute(std::move(dec))});
  }
  plan.quantizations = 1;
  for (int i = 0; i < kWireBufs; ++i) plan.wire_size[size_t(i)] = A[size_t(i)].size;
  return plan;
}

}  // namespace taco::comm
