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
  for (int p = 0; p < P; ++p) {
    Exchange ex = exchange_piece(pcs, wm, r, p, A, plan);
    const Piece& own = pcs[size_t(r)][size_t(p)];
    const int64_t in_chunk = own.off - chunks[size_t(r)].offset;
    std::vector<Op> dec;
    for (int q = 0; q < N; ++q) dec.push_back(decode_op(own, {ex.from(q)}, q * nr + in_chunk));
    plan.pieces.push_back({compute(coalesce(std::move(ex.encodes))), comm(std::move(ex.transfers)),
                           compute(std::move(dec))});
  }
  plan.quantizations = 1;
  for (int i = 0; i < kWireBufs; ++i) plan.wire_size[size_t(i)] = A[size_t(i)].size;
  return plan;
}

}  // namespace taco::comm
