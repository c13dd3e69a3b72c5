#pragma once
// `taco bench`: throughput of the GPU codecs (encode, decode, decode-reduce) per variant and
// size, fused and unfused, against the device-to-device copy measured in the same run.
// The CLI (apps/cmd_bench.cpp) parses options into BenchOptions and prints the BenchReport.
//
// Bytes counted (logical IO, each input read once, each output written once; 1 GB = 1e9 B):
//   encode          numel * in_bytes + wire bytes (all chunks)
//   encode_ef       encode's bytes + 2 * numel * 4 (the fp32 error-feedback residual, read and
//                   written in place)
//   decode          wire bytes + numel * out_bytes
//   decode_reduce   N wires of numel/N elements each + numel/N * out_bytes (numel = N * n is
//                   the number of decoded elements; N = --sources)
//   decode_reduce_encode  N wires + one wire of numel/N elements
//   copy            2 * size (read + write)
#include <cuda_runtime_api.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "cuda/bench/bench_timer.hpp"
#include "cuda/codecs/codec_kernels.hpp"
#include "cuda/codecs/codec_params.hpp"
#include "cuda/runtime/device.hpp"

namespace taco::gpu {

struct BenchOptions {
  std::vector<std::string> variants{"taco", "fp8-g128"};
  std::vector<std::string> ops{"encode", "decode", "decode_reduce"};
  std::vector<std::string> impls{"fused", "unfused"};
  std::vector<int64_t> sizes;                   // bytes of bf16 input (numel = size / 2)
  DType dtype = DType::BF16;                    // encode input and decode output
  int64_t cols = 4096;                          // the tensor is [numel / cols, cols]
  int64_t chunks = 1;                           // chunks per encode / decode launch
  int sources = 2;                              // N of decode_reduce
  bool cold = true;                             // L2 flushed before every sample
  bool batch = true;                            // back-to-back launches over rotating inputs
  int64_t batch_max_bytes = int64_t(64) << 20;  // batch rows only up to this size
  TimingOptions timing;
  bool verify = true;  // check against the CPU codec / unfused pipeline
  int64_t verify_max_bytes = int64_t(16) << 20;
  uint64_t seed = 1;
  int device = 0;
  std::function<void(const std::string&)> progress;  // one line per measurement (or empty)
};

struct BenchRow {
  std::string variant, op, impl, dtype;
  int64_t numel = 0, bytes_counted = 0;
  double median_us = 0, min_us = 0, max_us = 0, noise_pct = 0;
  int samples = 0;
  double gbps = 0, pct_copy = 0;
  bool cold = true;
  // appended columns
  int64_t size_bytes = 0;  // the size axis (bf16 bytes of the logical input)
  int sources = 1, launches = 1;
  int64_t chunks = 1;
  std::string config;  // fused kernels' elements per lane, encode and decode: "e32-d16"
  bool timed_out = false;
  double copy_gbps = 0;  // the copy it is compared with
};

struct CopyRow {
  int64_t bytes = 0;
  double median_us = 0, tbps = 0;
  bool cold = true;
  double noise_pct = 0;
  int samples = 0;
};

struct BenchReport {
  DeviceInfo device;
  std::vector<CopyRow> copy;
  std::vector<BenchRow> rows;
  std::vector<std::string> checks;    // verifications that passed
  std::vector<std::string> failures;  // verifications that failed (the CLI exits 1 after writing)
  size_t flush_bytes = 0;
};

// Throws InputError for bad options, Error for CUDA errors; failed byte checks are reported in
// BenchReport::failures.
BenchReport run_bench(const BenchOptions& opts);

}  // namespace taco::gpu
