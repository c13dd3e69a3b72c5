#pragma once
// Device helpers of the collective benchmark (comm_kernels.cu):
//  * structured inputs in the manner of nccl-tests' "verifiable" data: rank r's element i is
//    k * 2^e with a small integer k in [-K, K] (from a hash of seed, r, i) and e in [-3, 3]
//    (constant over blocks of 1024 elements); K is chosen so that every partial sum of N ranks is
//    exact in the dtype (N * K <= 256 for bf16, 2048 fp16, 16 fp8 e4m3, 8 e5m2), so plain NCCL
//    results are checked exactly in any reduction order, without a host copy;
//  * the check of a collective's output against the exact result recomputed on the device: #wrong
//    (plain: any difference; compressed: NaN/Inf, or an error above half the largest possible
//    |result|, which compression never reaches and a wrong chunk, a wrong rank's data or a missing
//    write do), and the compression error (sum of squares, max |error|);
//  * element-wise sums of N buffers (the loopback fabric's reductions).
#include <cuda_runtime_api.h>

#include <cstdint>

#include "collectives/collective_kind.hpp"
#include "core/dtype.hpp"
#include "cuda/codecs/codec_params.hpp"

namespace taco::gpu {

// Integers exactly representable in a dtype (and every sum of up to that magnitude).
int64_t exact_integer_limit(DType t);
// K for N ranks: the largest K with N * K within the exact limit (at least 1, at most 1024).
int data_k(DType t, int nranks);
// Bytes of one element of a collective dtype (bf16, f16, f32, f8e4m3, f8e5m2).
size_t comm_dtype_bytes(DType t);

struct DataGen {
  uint64_t seed = 1;
  int k = 1;
};

// out[i] = value(rank, i) for i in [0, count), in dtype t.
void fill_structured(void* out, DType t, int64_t count, int rank, const DataGen& g, cudaStream_t s);

struct CheckSpec {
  Coll kind = Coll::AllReduce;  // what a rank's output should be
  int32_t rank = 0, nranks = 1;
  int64_t count = 0;       // per-rank input elements
  int64_t out_count = 0;   // output elements to check
  int64_t out_offset = 0;  // reduce-scatter: first element of the rank's chunk
  int64_t block = 0;       // all-to-all: elements per block
  int32_t compressed = 0;  // lossy: tolerance check instead of exact equality
  DType dtype = DType::BF16;
  DataGen gen;
};

// Accumulated on the device (zero it first); read back with the stream synchronised.
struct CheckStats {
  unsigned long long nwrong = 0;
  unsigned long long nonfinite = 0;
  double err_sq = 0;              // sum (out - ref)^2
  double ref_sq = 0;              // sum ref^2
  unsigned int max_abs_bits = 0;  // float bits of max |out - ref| (finite outputs)
  unsigned int pad = 0;
};

void check_output(const void* out, const CheckSpec& spec, CheckStats* d_stats, cudaStream_t s);

// out[i] = src[0][i] + src[1][i] + ... (fp32, in order), rounded once to t.
inline constexpr int kMaxSumSources = 16;
struct SumSources {
  const void* src[kMaxSumSources];
  int32_t n;
};
void sum_buffers(const SumSources& srcs, DType t, int64_t count, void* out, cudaStream_t s);

}  // namespace taco::gpu
