#pragma once
// A simulated communicator over host buffers: N ranks' fp32 inputs in, per-rank outputs out,
// with every message going through a codec exactly as a compressed collective would send it
// (methods.md §1.6). It reproduces the *numerics* of compressed collectives (where and how
// often each element is quantized, in which order partial sums are added), not their timing.
// It runs the comm plans (collectives/comm_plans.hpp, one statement of each algorithm, shared with
// the live GPU collectives and taco.dist) on the host executor (collectives/comm_hostsim.hpp).
//
// Semantics shared by every algorithm (the live NCCL benchmark follows the same ones):
//  * Chunking (methods.md §1.4): a buffer of rows x cols elements is cut into N chunks, chunk j
//    going to (or owned by) rank j. When rows % N == 0, chunk j is rows [j*rows/N, (j+1)*rows/N)
//    and the codec sees it as [rows/N, cols]; otherwise chunk j is the flat range
//    [floor(j*numel/N), floor((j+1)*numel/N)) seen as [1, n_j]. Groups therefore never straddle
//    chunks.
//  * Decompress -> reduce in fp32 -> recompress (COCCL's fallback; no arithmetic on codes).
//    Reductions add decoded contributions in rank order 0, 1, ..., N-1 (left to right, fp32),
//    so all ranks that reduce the same data get the same bits.
//  * A rank's own contribution goes through the codec like everyone else's (it reads its own
//    slot of the received buffer), so every element of the output is quantized the same number
//    of times and all ranks end with identical results.
//
// Algorithms (quantizations per element in parentheses):
//  one_shot  (1)   all-reduce: every rank encodes its buffer (N chunks) and sends it to every
//                  peer; every rank decodes all N buffers and sums them.
//  two_shot  (2)   all-reduce: encode N chunks; all-to-all; rank j decodes and sums the N
//                  copies of chunk j, re-encodes the sum; all-gather; every rank decodes.
//  ring      (N)   all-reduce: ring reduce-scatter in which chunk j starts at rank j+1 and
//                  travels j+1 -> j+2 -> ... -> j, every hop decoding, adding its own chunk
//                  (received + own) and re-encoding (N-1 quantizations); then a compressed ring
//                  all-gather of the finished shard (encode once, forwarded as is: +1).
//  all_gather (1)  every rank encodes its whole buffer once (as [rows, cols]); all decode all.
//                  Output: the N decoded buffers concatenated in rank order.
//  reduce_scatter (1) direct (all-to-all) reduce-scatter: encode N chunks; rank j decodes and
//                  sums the N copies of chunk j. Output of rank j: chunk j of the sum.
// With N = 1 nothing crosses the network: outputs equal inputs and quantizations is 0.
#include "codecs/codec.hpp"
#include "collectives/collective_kind.hpp"

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace taco::sim {

// The collectives the simulation runs, named as in collectives.csv and --collectives.
inline constexpr Collective kOneShot{Coll::AllReduce, Algo::OneShot};
inline constexpr Collective kTwoShot{Coll::AllReduce, Algo::TwoShot};
inline constexpr Collective kRing{Coll::AllReduce, Algo::Ring};
inline constexpr Collective kAllGather{Coll::AllGather, Algo::Direct};
inline constexpr Collective kReduceScatter{Coll::ReduceScatter, Algo::Direct};
inline constexpr Collective kSimulated[] = {kOneShot, kTwoShot, kRing, kAllGather, kReduceScatter};
// Whether the simulation runs c.
bool simulated(Collective c);

// TP degrees beyond this are not simulated (--tp): no deployment uses them, and memory grows
// with the degree (all_gather: with its square).
inline constexpr int kMaxTpDegree = 256;
// Bytes a simulation of `a` over nranks ranks of rows x cols needs at its peak: the derived
// inputs and the executor's copies, every rank's output, the exact reference and the plans' wire
// buffers.
uint64_t memory_estimate(Collective a, int nranks, int64_t numel);

// One of kSimulated by collective_name(); InputError naming the token.
Collective parse_collective(std::string_view s);
// Times each output element was quantized on its way (results-schema.md collectives.csv).
int quantizations(Collective a, int nranks);

// One chunk of a buffer: elements [offset, offset + rows * cols), shown to the codec as
// [rows, cols].
struct Chunk {
  int64_t offset = 0, rows = 0, cols = 0;
  int64_t numel() const { return rows * cols; }
};
std::vector<Chunk> chunk_layout(int64_t rows, int64_t cols, int nranks);

struct CollectiveResult {
  std::vector<std::vector<float>> outputs;  // per rank
  // Per rank: the wire bytes its codec wrote that it put on the network (the plans' 16-byte slot
  // padding and a bounded codec's unused tail not counted: comm::HostRank::payload_sent).
  std::vector<int64_t> bytes_sent;
  int quantizations = 0;
};

class SimulatedCommunicator {
 public:
  // threads: OpenMP threads across ranks (results do not depend on it).
  SimulatedCommunicator(int nranks, const Codec& codec, int threads = 1);
  int nranks() const { return nranks_; }

  // inputs[r] points to rank r's rows x cols fp32 buffer.
  //  all-reduce algorithms: every output is rows*cols.
  //  all_gather: every output is nranks*rows*cols (rank-major).
  //  reduce_scatter: output r is chunk r of chunk_layout(rows, cols, nranks).
  CollectiveResult run(Collective a, const std::vector<const float*>& inputs, int64_t rows,
                       int64_t cols) const;

 private:
  int nranks_;
  const Codec& codec_;
  int threads_;
};

// What an uncompressed collective with exact arithmetic returns: sums are taken in double and
// rounded once to fp32. Same shapes as SimulatedCommunicator::run.
std::vector<std::vector<float>> reference_outputs(Collective a,
                                                  const std::vector<const float*>& inputs,
                                                  int64_t rows, int64_t cols);

// A stand-in for TP rank `rank` when a trace has fewer ranks than asked for: a copy of `base`
// (rows x cols) with its rows in a seeded random order and each row's sign flipped at random
// (rows == 1: elements' signs flipped and the row rotated by a seeded offset). Magnitudes and
// per-row (per-token) structure are kept; the result is a deterministic function of
// (base, seed, rank).
std::vector<float> derive_rank(const float* base, int64_t rows, int64_t cols, uint64_t seed,
                               int rank);

}  // namespace taco::sim
