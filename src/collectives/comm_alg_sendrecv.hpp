#pragma once
// Compressed send/recv (direct), the pattern of nccl-tests' sendrecv_perf: rank r sends its buffer
// to r+1 and receives rank r-1's (mod N). Encode (in pipeline pieces), send/recv, decode.
// 1 quantization; |C| sent per rank.
#include "comm_plan.hpp"

namespace taco::comm {

inline RankPlan plan_sendrecv(const PlanRequest& rq, int r) {
  using namespace detail;
  RankPlan plan = base_plan(rq, r);
  const int N = rq.nranks;
  plan.out_elems = plan.in_elems;
  if (N == 1) return single_rank_plan(rq, plan);
  const WireModel& wm = *rq.wire;
  const auto pcs = split_chunks({sim::Chunk{0, rq.rows, rq.cols}}, wm, rq.pipeline);
  const int P = int(pcs[0].size());
  plan.depth = P;
  std::array<Arena, kWireBufs> A{};
  for (int p = 0; p < P; ++p) {
    const Piece& pc = pcs[0][size_t(p)];
    const int64_t b = wm.bytes(pc.rows, pc.cols);
    plan.wire_bytes += b;
    const int64_t send = A[0].take(b), recv = A[1].take(b);
    plan.pieces.push_back(
        {compute({encode_op(pc, send, Buf::W0)}),
         comm({send_op(Buf::W0, send, b, mod(r + 1, N)), recv_op(Buf::W1, recv, b, mod(r - 1, N))}),
         compute({decode_op(pc, {Ref{Buf::W1, recv}}, pc.off)})});
    plan.bytes_sent += b;
  }
  plan.quantizations = 1;
  for (int i = 0; i < kWireBufs; ++i) plan.wire_size[size_t(i)] = A[size_t(i)].size;
  return plan;
}

}  // namespace taco::comm
