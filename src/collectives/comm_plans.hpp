#pragma once
// build_plan(): the compressed plan of any collective for one rank (one file per collective).
#include "comm_alg_allgather.hpp"
#include "comm_alg_allreduce.hpp"
#include "comm_alg_alltoall.hpp"
#include "comm_alg_reduce_scatter.hpp"
#include "comm_alg_sendrecv.hpp"
#include "comm_plan.hpp"

namespace taco::comm {

inline RankPlan build_plan(const PlanRequest& rq, int rank) {
  TACO_REQUIRE_INPUT(rq.algo != Algo::Nccl, "build_plan: plain NCCL collectives have no plan");
  TACO_REQUIRE_INPUT(
      rq.coll == Coll::AllReduce || rq.algo == Algo::Direct,
      "--algo {}: only all_reduce has a choice of compressed algorithm ({} runs 'direct')",
      algo_name(rq.algo), coll_name(rq.coll));
  switch (rq.coll) {
    case Coll::AllReduce:
      return plan_allreduce(rq, rank);
    case Coll::ReduceScatter:
      return plan_reduce_scatter(rq, rank);
    case Coll::AllGather:
      return plan_all_gather(rq, rank);
    case Coll::AllToAll:
      return plan_alltoall(rq, rank);
    case Coll::SendRecv:
      return plan_sendrecv(rq, rank);
  }
  throw_error("build_plan: unknown collective {}", int(rq.coll));
}

// Plans of all ranks (host simulation, single-process drivers, tests).
inline std::vector<RankPlan> build_plans(const PlanRequest& rq) {
  std::vector<RankPlan> out;
  for (int r = 0; r < rq.nranks; ++r) out.push_back(build_plan(rq, r));
  return out;
}

}  // namespace taco::comm
