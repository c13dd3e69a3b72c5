#pragma once
// Compressed reduce-scatter (direct, as sim::kReduceScatter): encode N chunks; all-to-all
// of the compressed chunks (grouped send/recv); rank r decodes the N copies of chunk r (its own
// from its send buffer) and sums them in rank order. 1 quantization; (N-1)/N x |C| sent per rank.
// Out holds the rank's chunk (plan.out_offset says where it starts in the full buffer).
#include "comm_plan.hpp"

namespace taco::comm {

inline RankPlan plan_reduce_scatter(const PlanRequest& rq, int r) {
  using namespace detail;
  RankPlan plan = base_plan(rq, r);
  const int N = rq.nranks;
  const auto chunks = sim::chunk_layout(rq.rows, rq.cols, N);
  plan.out_elems = chunks[size_t(r)].numel();
  plan.out_offset = chunks[size_t(r)].offset;
  if (N == 1) return single_rank_plan(rq, plan);
  const WireModel& wm = *rq.wire;
  const auto pcs = split_chunks(chunks, wm, rq.pipeline);
  const int P = int(pcs[0].size());
  plan.depth = P;
  std::array<Arena, kWireBufs> A{};
  for (int p = 0; p < P; ++p) {
    Exchange ex = exchange_piece(pcs, wm, r, p, A, plan);
    std::vector<Ref> srcs;
    for (int q = 0; q < N; ++q) srcs.push_back(ex.from(q));
    const Piece& own = pcs[size_t(r)][size_t(p)];
    plan.pieces.push_back({compute(coalesce(std::move(ex.encodes))), comm(std::move(ex.transfers)),
                           compute({decode_op(own, std::move(srcs), own.off - plan.out_offset)})});
  }
  plan.quantizations = 1;
  for (int i = 0; i < kWireBufs; ++i) plan.wire_size[size_t(i)] = A[size_t(i)].size;
  return plan;
}

}  // namespace taco::comm
