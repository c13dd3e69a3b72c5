#pragma once
// The one set of collective and algorithm names: the live collectives (`taco comm`,
// collectives/comm_plan.hpp), the study's simulation (collectives/sim_collectives.hpp) and the
// step-time model (model/) all use these.
#include <cstdint>
#include <string_view>

#include "core/error.hpp"

namespace taco {

enum class Coll : uint8_t { AllReduce, ReduceScatter, AllGather, AllToAll, SendRecv };
inline constexpr Coll kAllColls[] = {Coll::AllReduce, Coll::ReduceScatter, Coll::AllGather,
                                     Coll::AllToAll, Coll::SendRecv};

// nccl-tests' names (all_reduce_perf, ...).
inline std::string_view coll_name(Coll c) {
  switch (c) {
    case Coll::AllReduce:
      return "all_reduce";
    case Coll::ReduceScatter:
      return "reduce_scatter";
    case Coll::AllGather:
      return "all_gather";
    case Coll::AllToAll:
      return "alltoall";
    case Coll::SendRecv:
      return "sendrecv";
  }
  throw_error("coll_name: unknown collective {}", int(c));
}

// coll_name()'s names and the spellings other tools use (allreduce, all_to_all, ...); `where`
// names the flag or field in the error.
inline Coll parse_coll(std::string_view s, std::string_view where = "--coll") {
  for (Coll c : kAllColls)
    if (s == coll_name(c)) return c;
  if (s == "allreduce") return Coll::AllReduce;
  if (s == "reducescatter") return Coll::ReduceScatter;
  if (s == "allgather") return Coll::AllGather;
  if (s == "all_to_all") return Coll::AllToAll;
  throw_input_error(
      "{}: unknown collective \"{}\" (all_reduce, reduce_scatter, all_gather, alltoall, sendrecv)",
      where, s);
}

// Nccl: the library's own collective (plain rows). Direct: the one compressed algorithm of
// all-gather, reduce-scatter, all-to-all and send/recv (encode, move, decode).
enum class Algo : uint8_t { Nccl, OneShot, TwoShot, Ring, Direct };
inline constexpr Algo kAllAlgos[] = {Algo::Nccl, Algo::OneShot, Algo::TwoShot, Algo::Ring,
                                     Algo::Direct};

inline std::string_view algo_name(Algo a) {
  switch (a) {
    case Algo::Nccl:
      return "nccl";
    case Algo::OneShot:
      return "one_shot";
    case Algo::TwoShot:
      return "two_shot";
    case Algo::Ring:
      return "ring";
    case Algo::Direct:
      return "direct";
  }
  throw_error("algo_name: unknown algorithm {}", int(a));
}

inline Algo parse_algo(std::string_view s, std::string_view where) {
  for (Algo a : kAllAlgos)
    if (s == algo_name(a)) return a;
  throw_input_error("{}: unknown algorithm \"{}\" (nccl, one_shot, two_shot, ring, direct)", where,
                    s);
}

// --algo values: the three compressed all-reduce algorithms.
inline Algo parse_allreduce_algo(std::string_view s) {
  for (Algo a : {Algo::OneShot, Algo::TwoShot, Algo::Ring})
    if (s == algo_name(a)) return a;
  throw_input_error("--algo: unknown all-reduce algorithm '{}' (auto, one_shot, two_shot, ring)",
                    s);
}

// COCCL's choice by message size (methods.md 1.6): < 1 MiB one-shot, 1-32 MiB two-shot,
// >= 32 MiB ring; `bytes` is the per-rank input buffer. Except at N = 2, where one-shot sends
// the same bytes as the other two, quantizes once instead of twice and takes fewer steps: it
// measured fastest at 16 and 256 MiB over NVLink, shared memory and sockets
// (bench/comm/2026-11-30-h200x2-run4).
inline Algo auto_allreduce_algo(double bytes, int nranks) {
  if (nranks == 2 || bytes < double(int64_t(1) << 20)) return Algo::OneShot;
  if (bytes < double(int64_t(32) << 20)) return Algo::TwoShot;
  return Algo::Ring;
}

// A compressed collective: what it computes and how.
struct Collective {
  Coll coll = Coll::AllReduce;
  Algo algo = Algo::OneShot;
  constexpr bool operator==(const Collective& o) const { return coll == o.coll && algo == o.algo; }
  constexpr bool operator!=(const Collective& o) const { return !(*this == o); }
  constexpr bool operator<(const Collective& o) const {
    return coll != o.coll ? coll < o.coll : algo < o.algo;
  }
};

// The name of a collective in outputs and flags: an all-reduce by its algorithm ("one_shot",
// "two_shot", "ring"), any other collective by its own name ("all_gather", "reduce_scatter").
inline std::string_view collective_name(Collective c) {
  return c.coll == Coll::AllReduce ? algo_name(c.algo) : coll_name(c.coll);
}

}  // namespace taco
