#pragma once
// The host executor of comm plans: N ranks' buffers in host memory, codec operations through a
// Codec (the CPU reference, or the GPU codec behind the same contract), sends and receives as
// memcpy. It runs exactly the plans the GPU executor runs, and it is the study's simulation
// (collectives/sim_collectives.hpp runs the plans through it), so
//   * the study's error and byte figures come from the same statement of each algorithm as the
//     live benchmark, and
//   * tests/gpu/test_comm.cpp checks the GPU executor against it (the GPU kernels reproduce the
//     CPU codecs' bytes, so GPU and host results must match bit for bit).
// Values are floats; `out_bf16` rounds every value written to Out to bf16 (round to nearest
// even), as the GPU does when the collective's dtype is bf16. Inputs must already be
// representable in that dtype.
//
// A codec whose wire size is a bound (Codec::wire_size().exact false: TAH-Quant, low rank by
// energy) writes fewer bytes into its slot; the rest stays zero, which its decode accepts. Each
// rank counts the bytes its codec actually wrote into what it sent (payload_sent), beside the
// plan's bytes_sent, which includes slot padding.
#include <array>
#include <cstdint>
#include <map>
#include <utility>
#include <vector>

#include "codecs/codec.hpp"
#include "collectives/comm_plan.hpp"

namespace taco::comm {

struct HostRank {
  std::vector<float> in, out;
  std::array<std::vector<uint8_t>, kWireBufs> wire;
  // Bytes the codec wrote at each (wire buffer, offset) that holds an encoding (slot padding and
  // a bounded codec's unused tail excluded); moves with the bytes when they are sent.
  std::map<std::pair<int, int64_t>, int64_t> payload;
  int64_t payload_sent = 0;  // sum over the rank's sends of the payload bytes they carried
};

// Runs every rank's plan. `ranks[r].in` must hold plans[r].in_elems values; Out, the wire buffers
// and the payload counts are (re)set here (wire bytes zeroed, so padding never carries stale
// data). `threads`: OpenMP threads across ranks within a compute step (results do not depend on
// it; the codec's const operations must be thread-safe, as the Codec contract says).
void run_host(const std::vector<RankPlan>& plans, const Codec& codec, const WireModel& wm,
              std::vector<HostRank>& ranks, bool out_bf16, int threads = 1);

}  // namespace taco::comm
