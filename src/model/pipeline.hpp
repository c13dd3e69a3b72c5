#pragma once
// Megatron's non-interleaved 1F1B pipeline schedule, simulated op by op, and the exposure of the
// data-parallel gradient reduction that overlaps the last backward.
//
// Stage s of p runs, for m micro-batches: warm-up = min(p - s - 1, m) forwards, then one
// forward and one backward alternately until every forward ran, then the remaining backwards
// (cool-down). F(i) on stage s needs F(i) of stage s-1 and its activation; B(i) needs B(i) of
// stage s+1 and its gradient (on the last stage, its own F(i)). A transfer starts when the
// sender's op ends and keeps the sender busy until it arrives (Megatron's blocking send/recv
// without --overlap-p2p-comm). With equal stages and free transfers the makespan is
// (m + p - 1) (t_f + t_b): the bubble is (p - 1) / m of the m micro-batches' time.
#include <vector>

namespace taco::model {

struct StageCost {
  double fwd_us = 0;       // one micro-batch's forward on this stage (compute + TP collectives)
  double bwd_us = 0;       // one micro-batch's backward
  double send_fwd_us = 0;  // activation to stage s+1 (ignored on the last stage)
  double send_bwd_us = 0;  // activation gradient to stage s-1 (ignored on the first stage)
};

struct PipelineResult {
  double makespan_us = 0;
  std::vector<double> stage_end_us;       // end of the stage's last op, its last send included
  std::vector<double> last_bwd_start_us;  // the last micro-batch's backward on each stage
  std::vector<double> last_bwd_end_us;
  std::vector<double> busy_us;  // compute and sends, per stage
};

// InputError when stages is empty or microbatches < 1.
PipelineResult simulate_1f1b(const std::vector<StageCost>& stages, int microbatches);

// Time the gradient reduction adds after the last backward ends (bwd_start..bwd_end). The
// gradients form `buckets` equal buckets, ready in turn as the backward proceeds (bucket k at
// bwd_start + (k + 1) / buckets of the backward); each takes bucket_us on the DP link, one
// after another. overlap = false: all buckets start at bwd_end.
double dp_exposed_us(double bwd_start_us, double bwd_end_us, int buckets, double bucket_us,
                     bool overlap);

}  // namespace taco::model
