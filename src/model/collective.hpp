#pragma once
// Time of one collective, plain (NCCL) or compressed (taco's plans, docs/comm.md), on a tier.
//
// A compressed collective is costed the way `taco comm` runs it: the rank's buffer is cut into
// P pieces (--pipeline, fewer when a piece of a rank's chunk would be under --pipeline-min);
// each piece is a list of steps that alternate codec kernels (compute stream) and transfers
// (network stream); step s of piece p is issued in wavefront p + s, each stream in order.
//   codec step:    bytes / GB/s from `taco bench` at that size (+ a per-step overhead)
//   network step:  the tier's alpha-beta time of the plain collective at the wire size
// serial = sum of all steps; ideal = the makespan of that two-stream schedule with no
// interference. Measured runs hide less than the ideal (codec kernels fill the SMs that NCCL
// needs), so the prediction is
//   t = serial - eta * (serial - ideal),   eta = ExecutorParams::overlap_efficiency,
// fitted to the measured records (docs/step-model.md). With no pipelining (P = 1) t = serial.
#include "model/inputs.hpp"
#include "model/links.hpp"

#include <string>
#include <vector>

namespace taco::model {

using taco::Algo;  // collectives/collective_kind.hpp

// The codec of a compressed collective: wire bytes per element and kernel times.
struct CodecModel {
  std::string name = "none";          // variant name as printed
  double bytes_per_elem = 2;          // wire bytes per element
  const CodecTable* table = nullptr;  // measured kernels; nullptr = a free codec (bounds only)
  std::string table_variant;          // the variant's name in `table`
  double time_scale = 1;  // multiplies every kernel time (layer-measured / bench-predicted)
  bool plain() const { return name == "none"; }
  double op_us(CodecOp op, double bytes) const;
  // Fused decode-reduce-encode (two-shot owner, ring hop) of `n_src` wires of `elems` elements
  // each into one wire; from its own rows, else decode_reduce + encode.
  double reduce_encode_us(int n_src, double elems, double in_elem_bytes) const;
};

struct Step {
  bool network = false;
  double us = 0;
};

struct CollCost {
  double total_us = 0;   // predicted time of the collective
  double wire_us = 0;    // sum of the network steps
  double codec_us = 0;   // sum of the codec steps (overheads included)
  double serial_us = 0;  // all steps one after the other
  double ideal_us = 0;   // two-stream makespan without interference
  int pieces = 1;
  Algo algo = Algo::Nccl;
  double wire_bytes = 0;  // encoded size of the rank's buffer
  // Of total_us: the codec time that is not hidden behind transfers (>= 0).
  double exposed_codec_us() const { return total_us > wire_us ? total_us - wire_us : 0; }
};

// Two in-order streams (compute, network), steps issued by wavefront as taco comm does; returns
// the time the last step ends.
double two_stream_makespan(const std::vector<std::vector<Step>>& pieces);

// Plain NCCL collective of a per-rank buffer of `bytes` (all-gather: input per rank).
CollCost plain_collective(const LinkTier& tier, Coll c, int nranks, double bytes);

// Compressed collective of a per-rank buffer of `bytes` holding elements of `in_elem_bytes`
// (2: bf16 activations, 4: fp32 gradients). algo: Nccl is refused; Direct for all_gather,
// reduce_scatter, alltoall and sendrecv. pipelined = false runs one piece (overlap none).
CollCost compressed_collective(const LinkTier& tier, const ExecutorParams& ex,
                               const CodecModel& codec, Coll c, Algo algo, int nranks, double bytes,
                               double in_elem_bytes, bool pipelined);

// The steps of one piece of a compressed collective (all P pieces are alike) and P.
struct PieceSchedule {
  int pieces = 1;
  std::vector<Step> steps;
  double wire_bytes = 0;
};
PieceSchedule compressed_schedule(const LinkTier& tier, const ExecutorParams& ex,
                                  const CodecModel& codec, Coll c, Algo algo, int nranks,
                                  double bytes, double in_elem_bytes, bool pipelined);

// Pieces taco comm would cut this buffer into.
int pipeline_depth(const ExecutorParams& ex, Coll c, int nranks, double bytes, bool pipelined);

}  // namespace taco::model
