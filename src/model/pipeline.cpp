#include "model/pipeline.hpp"

#include "core/error.hpp"

#include <algorithm>

namespace taco::model {

PipelineResult simulate_1f1b(const std::vector<StageCost>& stages, int microbatches) {
  const int p = int(stages.size()), m = microbatches;
  TACO_REQUIRE_INPUT(p >= 1, "pipeline: no stages");
  TACO_REQUIRE_INPUT(m >= 1, "pipeline: need at least one micro-batch, got {}", m);
  struct Op {
    bool fwd;
    int mb;
  };
  // Each stage's op order (Megatron's forward_backward_pipelining_without_interleaving).
  std::vector<std::vector<Op>> order(static_cast<size_t>(p));
  for (int s = 0; s < p; ++s) {
    const int warm = std::min(p - s - 1, m);
    auto& o = order[size_t(s)];
    for (int i = 0; i < warm; ++i) o.push_back({true, i});
    for (int i = 0; i < m - warm; ++i) {
      o.push_back({true, warm + i});
      o.push_back({false, i});
    }
    for (int i = m - warm; i < m; ++i) o.push_back({false, i});
  }
  const double kUnset = -1;
  // Arrival times of inputs: act[s][i] (forward input of stage s), grad[s][i] (backward input).
  std::vector<std::vector<double>> act(size_t(p), std::vector<double>(size_t(m), kUnset));
  std::vector<std::vector<double>> grad(size_t(p), std::vector<double>(size_t(m), kUnset));
  std::vector<std::vector<double>> fdone(size_t(p), std::vector<double>(size_t(m), kUnset));
  for (int i = 0; i < m; ++i) act[0][size_t(i)] = 0;  // the data loader is never the bottleneck
  PipelineResult r;
  r.stage_end_us.assign(size_t(p), 0);
  r.last_bwd_start_us.assign(size_t(p), 0);
  r.last_bwd_end_us.assign(size_t(p), 0);
  r.busy_us.assign(size_t(p), 0);
  std::vector<size_t> next(size_t(p), 0);
  std::vector<double> free_at(size_t(p), 0);
  size_t left = 0;
  for (const auto& o : order) left += o.size();
  // Run every op whose input has arrived; 1F1B never deadlocks, so each sweep makes progress.
  while (left > 0) {
    bool progressed = false;
    for (int s = 0; s < p; ++s) {
      while (next[size_t(s)] < order[size_t(s)].size()) {
        const Op op = order[size_t(s)][next[size_t(s)]];
        const StageCost& c = stages[size_t(s)];
        double ready;
        if (op.fwd)
          ready = act[size_t(s)][size_t(op.mb)];
        else
          ready = s == p - 1 ? fdone[size_t(s)][size_t(op.mb)] : grad[size_t(s)][size_t(op.mb)];
        if (ready == kUnset) break;
        const double start = std::max(free_at[size_t(s)], ready);
        double end = start + (op.fwd ? c.fwd_us : c.bwd_us);
        r.busy_us[size_t(s)] += op.fwd ? c.fwd_us : c.bwd_us;
        if (op.fwd) {
          fdone[size_t(s)][size_t(op.mb)] = end;
          if (s + 1 < p) {
            end += c.send_fwd_us;  // the sender waits until the activation is across
            r.busy_us[size_t(s)] += c.send_fwd_us;
            act[size_t(s + 1)][size_t(op.mb)] = end;
          }
        } else {
          if (op.mb == m - 1) {
            r.last_bwd_start_us[size_t(s)] = start;
            r.last_bwd_end_us[size_t(s)] = start + c.bwd_us;
          }
          if (s > 0) {
            end += c.send_bwd_us;
            r.busy_us[size_t(s)] += c.send_bwd_us;
            grad[size_t(s - 1)][size_t(op.mb)] = end;
          }
        }
        free_at[size_t(s)] = end;
        ++next[size_t(s)];
        --left;
        progressed = true;
      }
    }
    TACO_ASSERT(progressed, "1F1B schedule made no progress ({} ops left)", left);
  }
  for (int s = 0; s < p; ++s) {
    r.stage_end_us[size_t(s)] = free_at[size_t(s)];
    r.makespan_us = std::max(r.makespan_us, free_at[size_t(s)]);
  }
  return r;
}

double dp_exposed_us(double bwd_start_us, double bwd_end_us, int buckets, double bucket_us,
                     bool overlap) {
  TACO_REQUIRE_INPUT(buckets >= 1, "dp: need at least one gradient bucket, got {}", buckets);
  if (!overlap) return buckets * bucket_us;
  const double dur = bwd_end_us - bwd_start_us;
  double done = bwd_start_us;
  for (int k = 0; k < buckets; ++k) {
    const double ready = bwd_start_us + dur * double(k + 1) / buckets;
    done = std::max(done, ready) + bucket_us;
  }
  return std::max(0.0, done - bwd_end_us);
}

}  // namespace taco::model
