#pragma once
// Kernel timing in the manner of nvbench: CUDA events around the work, warm-up first, many
// samples, the median and the spread, stopping once the relative noise is low enough (or a
// timeout passes).
//  * cold samples: before each sample a buffer of at least twice the L2 size is written, so the
//    timed work starts with an L2 that holds none of its inputs;
//  * batch samples: `batch` launches back to back between two events (the time per launch, so
//    launch latency overlaps the previous launch, as in a real pipeline); the caller rotates
//    inputs (the `i` argument) so that small inputs are not served from L2.
#include <cuda_runtime_api.h>

#include <cstddef>
#include <functional>
#include <vector>

#include "cuda/runtime/device.hpp"

namespace taco::gpu {

struct TimingOptions {
  int min_samples = 10;        // --min-samples
  double max_noise_pct = 0.5;  // --max-noise: relative standard deviation, percent
  double min_time_s = 0.5;     // --min-time: summed GPU time of the samples
  double timeout_s = 15.0;     // --timeout: wall clock per measurement
  int max_samples = 100000;
  int warmup = 2;  // untimed runs before the first sample
  int batch = 0;   // launches per batch sample; 0 = choose from the cold time
};

struct TimingResult {
  double median_us = 0, min_us = 0, max_us = 0, mean_us = 0;
  double noise_pct = 0;  // relative standard deviation of the samples, percent
  int samples = 0;
  int per_sample = 1;  // launches per sample (batch)
  bool timed_out = false;
  std::vector<double> times_us;
};

class Timer {
 public:
  Timer(const DeviceInfo& dev, TimingOptions opts, cudaStream_t stream);
  // `work(i)` enqueues one run on the stream; i counts runs (use it to rotate inputs).
  TimingResult cold(const std::function<void(int)>& work);
  // `launches` runs per sample; the result is per run.
  TimingResult batch(const std::function<void(int)>& work, int launches);
  const TimingOptions& options() const { return opts_; }
  size_t flush_bytes() const { return flush_.bytes(); }

 private:
  void flush_l2(int i);
  TimingResult run(const std::function<void(int)>& work, int per_sample, bool flush);

  TimingOptions opts_;
  cudaStream_t stream_;
  DeviceBuffer flush_;
  CudaEvent start_, stop_;
};

// Statistics of a sample set (exposed for tests).
TimingResult summarize(std::vector<double> times_us, int per_sample);

}  // namespace taco::gpu
