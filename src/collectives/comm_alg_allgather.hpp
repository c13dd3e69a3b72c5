#pragma once
// Compressed all-gather (as sim::kAllGather): every rank encodes its whole buffer once
// (as [rows, cols], cut into pipeline pieces) into its own slot of the gather buffer, the
// compressed pieces are all-gathered in place (ncclAllGather of bytes), and every rank decodes
// all N, its own included. Out is the N decoded buffers in rank order. 1 quantization;
// (N-1) x |C| sent per rank.
#include "comm_plan.hpp"

namespace taco::comm {

inline RankPlan plan_all_gather(const PlanRequest& rq, int r) {
  using namespace detail;
  RankPlan plan = base_plan(rq, r);
  const int N = rq.nranks;
  const int64_t n = plan.in_elems;
  plan.out_elems = n * N;
  if (N == 1) return single_rank_plan(rq, plan);
  const WireModel& wm = *rq.wire;
  const auto pcs = split_chunks({sim::Chunk{0, rq.rows, rq.cols}}, wm, rq.pipeline);
  const int P = int(pcs[0].size());
  plan.depth = P;
  std::array<Arena, kWireBufs> A{};
  for (int p = 0; p < P; ++p) {
    const Piece& pc = pcs[0][size_t(p)];
    const int64_t b = wm.bytes(pc.rows, pc.cols), S = round16(b);
    plan.wire_bytes += b;
    const int64_t gath = A[1].take(S * N), own = gath + r * S;  // in place: encode into own slot
    std::vector<Op> dec;
    for (int q = 0; q < N; ++q)
      dec.push_back(decode_op(pc, {Ref{Buf::W1, gath + q * S}}, q * n + pc.off));
    plan.pieces.push_back({compute({encode_op(pc, own, Buf::W1)}),
                           comm({all_gather_op(Buf::W1, own, S, Buf::W1, gath)}),
                           compute(coalesce(std::move(dec)))});
    plan.bytes_sent += S * (N - 1);
  }
  plan.quantizations = 1;
  for (int i = 0; i < kWireBufs; ++i) plan.wire_size[size_t(i)] = A[size_t(i)].size;
  return plan;
}

}  // namespace taco::comm
