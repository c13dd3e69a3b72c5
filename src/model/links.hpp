#pragma once
// Interconnect tiers and the alpha-beta cost of plain (uncompressed) collectives on them.
//
// A tier is one kind of link between the ranks of a group (NVLink inside a node, PCIe, an
// InfiniBand or Ethernet network between nodes). Its numbers live in a JSON file the user edits
// (configs/links.json, schema "taco.links/1"); every number there carries its source: a
// datasheet, a fit to a measured `taco comm` record, or an assumption.
//
// Cost of a plain collective on N ranks with a per-rank buffer of S bytes, one alpha-beta line
// per step (docs/step-model.md has the table):
//   t = steps(c, N) * alpha + volume(c, N) * S / B
//   all_reduce (ring: reduce-scatter + all-gather)  steps 2(N-1)  volume 2(N-1)/N
//   all_gather (S = input per rank)                 steps  N-1   volume  N-1
//   reduce_scatter (S = input per rank)             steps  N-1   volume (N-1)/N
//   alltoall                                        steps  N-1   volume (N-1)/N
//   sendrecv (one peer)                             steps  1     volume  1
// A tier with a calibration ("fit") replaces the single line by several (alpha, B) lines, one
// per NCCL regime (protocol, channel count), and takes the fastest at each size: NCCL's own
// tuner picks the cheapest of its algorithm/protocol choices, so the measured time curve is the
// lower envelope of such lines. Other collectives use lines of their own where plain records of
// them span at least two sizes, else one factor on what the all-reduce lines predict for them.
#include "collectives/collective_kind.hpp"

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace taco::model {

using taco::Coll;  // collectives/collective_kind.hpp

// steps and volume of the table above.
struct CollShape {
  double steps = 0;
  double volume = 0;
};
CollShape coll_shape(Coll c, int nranks);

// One alpha-beta line: alpha per step (us), B in GB/s (1 GB = 1e9 B).
struct AlphaBeta {
  double alpha_us = 0;
  double bw_GBps = 0;
};

struct LinkTier {
  std::string name;            // key in the file, e.g. "nvlink-h200"
  std::string description;     // one line for tables
  std::string scope;           // "intra-node" or "inter-node" (documentation only)
  double bw_GBps = 0;          // datasheet bandwidth per GPU and direction
  double efficiency = 1;       // fraction of bw_GBps a large NCCL collective reaches (assumption)
  double latency_us = 0;       // alpha per step
  std::string basis;           // "datasheet", "measured" or "assumption"
  std::string source;          // where the numbers come from
  std::string transport;       // `taco comm` transport label that measures this tier ("" = none)
  std::vector<AlphaBeta> fit;  // calibrated lines (all-reduce at N = 2); empty = datasheet
  std::string fit_source;      // which records and command produced `fit`
  std::map<Coll, double> coll_factor;  // measured time / all-reduce-derived model, per collective
  std::map<Coll, std::vector<AlphaBeta>>
      coll_fit;  // a collective's own lines (replace `fit` and factor)

  // Plain collective time (us) on this tier: the table above, lower envelope over the lines.
  double time_us(Coll c, int nranks, double bytes) const;
  // The lines used: `fit`, or the one datasheet line {latency_us, bw_GBps * efficiency}.
  std::vector<AlphaBeta> lines() const;
};

// How a compressed collective runs its pieces (taco comm's executor; docs/comm.md).
struct ExecutorParams {
  int pipeline = 4;                      // pieces per chunk (taco comm --pipeline)
  int64_t pipeline_min_bytes = 4 << 20;  // smallest piece of a rank's chunk (--pipeline-min)
  double overlap_efficiency = 0.7;       // share of the ideally hidden time actually hidden
  double codec_step_overhead_us = 0;     // per codec step: launch + issue cost the bench hides
  std::string source;
};

struct LinkConfig {
  std::string path;
  std::map<std::string, LinkTier> tiers;
  ExecutorParams exec;
  const LinkTier& tier(const std::string& name,
                       const std::string& flag) const;  // InputError if unknown
};

// Reads and checks a "taco.links/1" file. Every problem is an InputError naming the file and key.
LinkConfig read_links(const std::string& path);

// ---- calibration -------------------------------------------------------------------------
// Measured (bytes, time_us) points of one plain collective at nranks.
struct TimePoint {
  double bytes = 0;
  double time_us = 0;
};

struct LineFit {
  std::vector<AlphaBeta> lines;  // per-step alpha and B (converted with coll_shape(c, nranks))
  double max_rel_err = 0;        // over the points, in-sample
  double rms_rel_err = 0;
};

// Fits at most `max_lines` lines to the points, each line on a contiguous range of sizes by
// least squares on the relative error, the model being their lower envelope; among the splits
// the one with the smallest largest relative error wins. Needs >= 2 points (InputError).
LineFit fit_lines(std::vector<TimePoint> pts, Coll c, int nranks, int max_lines);

// Time of `lines` for collective c at nranks (the lower envelope), without factors.
double envelope_time_us(const std::vector<AlphaBeta>& lines, Coll c, int nranks, double bytes);

}  // namespace taco::model
