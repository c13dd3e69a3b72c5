#pragma once
// Compressed reduce-scatter (direct, as sim::Algorithm::ReduceScatter): encode N chunks; all-to-all
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
  auto bytes_of = [&](int j, int p) { return wm.bytes(pcs[size_t(j)][size_t(p)].rows, pcs[size_t(j)][size_t(p)].cols); };
  for (int p = 0; p < P; ++p) {
    int64_t S = 0;
    for (int j = 0; j < N; ++j) {
      S = std::max(S, round16(bytes_of(j, p)));
      plan.wire_bytes += bytes_of(j, p);
    }
    const int64_t send = A[0].take(S * N), recv = A[1].take(S * N);
    std::vector<Op> enc, x;
    for (int j = 0; j < N; ++j) enc.push_back(encode_op(pcs[size_t(j)][size_t(p)], send + j * S, Buf::W0));
    for (int q = 0; q < N; ++q) {
      if (q == r) continue;
      x.push_back(send_op(Buf::W0, send + q * S, bytes_of(q, p), q));
      x.push_back(recv_op(Buf::W1, recv + q * S, bytes_of(r, p), q));
      plan.bytes_sent += bytes_of(q, p);
    }
    std::vector<Ref> srcs;
    for (int q = 0; q < N; ++q) srcs.push_back(q == r ? Ref{Buf::W0, send + r * S} : Ref{Buf::W1, recv + q * S});
    const Piece& own = pcs[size_t(r)][size_t(p)];
    plan.pieces.push_back({compute(coalesce(std::move(enc))), comm(std::move(x)),
                           compute({decode_op(own, std::move(srcs), own.off - plan.out_offset)})});
  }
  plan.quantizations = 1;
  for (int i = 0; i < kWireBufs; ++i) plan.wire_size[size_t(i)] = A[size_t(i)].size;
  return plan;
}

}  // namespace taco::comm
