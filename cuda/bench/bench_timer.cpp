#include "cuda/bench/bench_timer.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <numeric>

#include "cuda/runtime/cuda_check.hpp"

namespace taco::gpu {

TimingResult summarize(std::vector<double> t, int per_sample) {
  TimingResult r;
  r.per_sample = per_sample;
  r.samples = int(t.size());
  if (t.empty()) return r;
  r.times_us = t;
  std::sort(t.begin(), t.end());
  const size_t n = t.size();
  r.median_us = n % 2 ? t[n / 2] : 0.5 * (t[n / 2 - 1] + t[n / 2]);
  r.min_us = t.front();
  r.max_us = t.back();
  r.mean_us = std::accumulate(t.begin(), t.end(), 0.0) / double(n);
  if (n > 1) {
    double ss = 0;
    for (double x : t) ss += (x - r.mean_us) * (x - r.mean_us);
    r.noise_pct = 100.0 * std::sqrt(ss / double(n - 1)) / r.mean_us;
  }
  return r;
}

Timer::Timer(const DeviceInfo& dev, TimingOptions opts, cudaStream_t stream)
    : opts_(opts),
      stream_(stream),
      // at least twice the L2, and never under 128 MiB (as DeepGEMM's 256 MB flush suggests)
      flush_(std::max<size_t>(size_t(2) * size_t(dev.l2_bytes), size_t(128) << 20),
             "cudaMalloc(L2 flush buffer)") {}

void Timer::flush_l2(int i) {
  TACO_CUDA_CHECK(cudaMemsetAsync(flush_.get(), i & 0xff, flush_.bytes(), stream_));
}

TimingResult Timer::run(const std::function<void(int)>& work, int per_sample, bool flush) {
  using clock = std::chrono::steady_clock;
  int run_index = 0;
  for (int w = 0; w < opts_.warmup; ++w) {
    if (flush) flush_l2(run_index);
    for (int k = 0; k < per_sample; ++k) work(run_index++);
  }
  TACO_CUDA_CHECK(cudaStreamSynchronize(stream_));

  std::vector<double> times;
  double gpu_total_s = 0;
  const auto t0 = clock::now();
  bool timed_out = false;
  for (;;) {
    if (flush) flush_l2(run_index);
    start_.record(stream_);
    for (int k = 0; k < per_sample; ++k) work(run_index++);
    stop_.record(stream_);
    TACO_CUDA_CHECK(cudaEventSynchronize(stop_.get()));
    const double ms = double(stop_.elapsed_ms_since(start_));
    times.push_back(1e3 * ms / per_sample);
    gpu_total_s += ms * 1e-3;

    const int n = int(times.size());
    const double wall = std::chrono::duration<double>(clock::now() - t0).count();
    if (n >= opts_.max_samples) break;
    if (n >= opts_.min_samples && gpu_total_s >= opts_.min_time_s) {
      const TimingResult s = summarize(times, per_sample);
      if (s.noise_pct <= opts_.max_noise_pct) break;
    }
    if (wall >= opts_.timeout_s && n >= std::min(opts_.min_samples, 3)) {
      timed_out = true;
      break;
    }
  }
  TimingResult r = summarize(times, per_sample);
  r.timed_out = timed_out;
  return r;
}

TimingResult Timer::cold(const std::function<void(int)>& work) {
  return run(work, 1, true);
}

TimingResult Timer::batch(const std::function<void(int)>& work, int launches) {
  return run(work, std::max(1, launches), false);
}

}  // namespace taco::gpu
