#pragma once
// Benchmark inputs generated on the device (a 1 GiB host-side random fill would take seconds).
#include <cuda_runtime_api.h>

#include <cstdint>

namespace taco::gpu {

// x[i] ~ approximately N(0, 1) times a per-column factor in [0.5, 2) (cols > 0), with one in
// 4096 columns 100x larger (outlier channels, as TP activations have); bf16 (as bits) or f32.
// Deterministic in (seed, i). Never all zeros.
void fill_random(void* x, bool bf16, int64_t n, int64_t cols, uint64_t seed, cudaStream_t stream);

}  // namespace taco::gpu
