// Device helpers of the collective benchmark: structured inputs, output checks, the fused ring
// hop (decode + add own + encode) and element-wise sums. See comm_kernels.hpp.
#include "cuda/collectives/comm_kernels.hpp"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include "core/splitmix64.hpp"

#include <algorithm>
#include <cstring>

#include "core/error.hpp"
#include "cuda/codecs/codec_group.cuh"
#include "cuda/codecs/codec_kernels.hpp"
#include "cuda/runtime/cuda_check.hpp"

namespace taco::gpu {

int64_t exact_integer_limit(DType t) {
  switch (t) {
    case DType::BF16:
      return 256;
    case DType::F16:
      return 2048;
    case DType::F32:
      return int64_t(1) << 24;
    case DType::F8E4M3:
      return 16;
    case DType::F8E5M2:
      return 8;
    default:
      break;
  }
  throw_input_error("collectives: dtype {} is not one of bf16, f16, f32, f8e4m3, f8e5m2",
                    dtype_name(t));
}

int data_k(DType t, int nranks) {
  const int64_t k = exact_integer_limit(t) / std::max(1, nranks);
  return int(std::max<int64_t>(1, std::min<int64_t>(1024, k)));
}

size_t comm_dtype_bytes(DType t) {
  (void)exact_integer_limit(t);  // rejects the others
  return dtype_size(t);
}

namespace {

constexpr int kThreads = 256;

int grid_for(int64_t n, int per_thread = 4) {
  const int64_t blocks =
      (n + int64_t(kThreads) * per_thread - 1) / (int64_t(kThreads) * per_thread);
  return int(std::max<int64_t>(1, std::min<int64_t>(blocks, 65536)));
}

// The exponent of element i (the same for every rank, so sums stay exact).
__device__ __forceinline__ int gen_exp(const DataGen& g, int64_t i) {
  return int(mix64(g.seed * 0x2545f4914f6cdd1dull + uint64_t(i >> 10)) % 7u) - 3;
}

__device__ __forceinline__ float gen_value(const DataGen& g, int rank, int64_t i) {
  const uint64_t h = mix64(mix64(g.seed ^ (uint64_t(rank + 1) << 40)) + uint64_t(i));
  const int k = int(h % uint64_t(2 * g.k + 1)) - g.k;
  return ldexpf(float(k), gen_exp(g, i));
}

__device__ __forceinline__ float load_as_float(const void* p, int64_t i, DType t) {
  switch (t) {
    case DType::BF16:
      return __uint_as_float(uint32_t(static_cast<const uint16_t*>(p)[i]) << 16);
    case DType::F16:
      return __half2float(static_cast<const __half*>(p)[i]);
    case DType::F32:
      return static_cast<const float*>(p)[i];
    case DType::F8E4M3: {
      const __half_raw h =
          __nv_cvt_fp8_to_halfraw(static_cast<const __nv_fp8_storage_t*>(p)[i], __NV_E4M3);
      return __half2float(__half(h));
    }
    case DType::F8E5M2: {
      const __half_raw h =
          __nv_cvt_fp8_to_halfraw(static_cast<const __nv_fp8_storage_t*>(p)[i], __NV_E5M2);
      return __half2float(__half(h));
    }
    default:
      return __uint_as_float(0x7fc00000u);
  }
}

// Round to nearest even into t (values here are exact, or sums that round like NCCL's).
__device__ __forceinline__ void store_from_float(void* p, int64_t i, DType t, float x) {
  switch (t) {
    case DType::BF16:
      static_cast<__nv_bfloat16*>(p)[i] = __float2bfloat16_rn(x);
      break;
    case DType::F16:
      static_cast<__half*>(p)[i] = __float2half_rn(x);
      break;
    case DType::F32:
      static_cast<float*>(p)[i] = x;
      break;
    case DType::F8E4M3:
      static_cast<__nv_fp8_storage_t*>(p)[i] = __nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E4M3);
      break;
    case DType::F8E5M2:
      static_cast<__nv_fp8_storage_t*>(p)[i] = __nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E5M2);
      break;
    default:
      break;
  }
}

__global__ void fill_kernel(void* out, DType t, int64_t count, int rank, DataGen g) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
       i += int64_t(gridDim.x) * blockDim.x)
    store_from_float(out, i, t, gen_value(g, rank, i));
}

__global__ void check_kernel(const void* out, CheckSpec sp, CheckStats* st) {
  unsigned long long wrong = 0, nonfin = 0;
  double esq = 0, rsq = 0;
  float emax = 0.0f;
  const int N = sp.nranks;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < sp.out_count;
       i += int64_t(gridDim.x) * blockDim.x) {
    float ref = 0.0f;
    int64_t src = i;  // the source element index (sets the exponent)
    int terms = 1;
    switch (sp.kind) {
      case Coll::AllReduce:
      case Coll::ReduceScatter: {
        src = sp.kind == Coll::AllReduce ? i : sp.out_offset + i;
        for (int q = 0; q < N; ++q)
          ref = __fadd_rn(ref, gen_value(sp.gen, q, src));  // exact: |partial| <= N K 2^e
        terms = N;
        break;
      }
      case Coll::AllGather: {
        const int q = int(i / sp.count);
        src = i - int64_t(q) * sp.count;
        ref = gen_value(sp.gen, q, src);
        break;
      }
      case Coll::AllToAll: {
        const int q = int(i / sp.block);
        src = int64_t(sp.rank) * sp.block + (i - int64_t(q) * sp.block);
        ref = gen_value(sp.gen, q, src);
        break;
      }
      case Coll::SendRecv:
        ref = gen_value(sp.gen, (sp.rank + N - 1) % N, i);
        break;
    }
    const float x = load_as_float(out, i, sp.dtype);
    const bool fin = isfinite(x);
    nonfin += fin ? 0u : 1u;
    const float e = fabsf(x - ref);
    bool bad;
    if (sp.compressed) {
      const float tol = ldexpf(0.5f * float(terms) * float(sp.gen.k), gen_exp(sp.gen, src));
      bad = !fin || e > tol;
    } else {
      bad = !(x == ref);  // NaN compares unequal
    }
    wrong += bad ? 1u : 0u;
    if (fin) {
      esq += double(e) * double(e);
      emax = fmaxf(emax, e);
    }
    rsq += double(ref) * double(ref);
  }
  // warp reduction, one set of atomics per warp
  for (int o = 16; o > 0; o >>= 1) {
    wrong += __shfl_xor_sync(0xffffffffu, wrong, o);
    nonfin += __shfl_xor_sync(0xffffffffu, nonfin, o);
    esq += __shfl_xor_sync(0xffffffffu, esq, o);
    rsq += __shfl_xor_sync(0xffffffffu, rsq, o);
    emax = fmaxf(emax, __shfl_xor_sync(0xffffffffu, emax, o));
  }
  if ((threadIdx.x & 31) == 0) {
    if (wrong) atomicAdd(&st->nwrong, wrong);
    if (nonfin) atomicAdd(&st->nonfinite, nonfin);
    atomicAdd(&st->err_sq, esq);
    atomicAdd(&st->ref_sq, rsq);
    atomicMax(&st->max_abs_bits,
              __float_as_uint(emax));  // non-negative floats order like their bits
  }
}

__global__ void sum_kernel(SumSources s, DType t, int64_t count, void* out) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
       i += int64_t(gridDim.x) * blockDim.x) {
    float acc = load_as_float(s.src[0], i, t);
    for (int k = 1; k < s.n; ++k) acc = __fadd_rn(acc, load_as_float(s.src[k], i, t));
    store_from_float(out, i, t, acc);
  }
}

}  // namespace

void fill_structured(void* out, DType t, int64_t count, int rank, const DataGen& g,
                     cudaStream_t s) {
  (void)comm_dtype_bytes(t);
  if (count <= 0) return;
  fill_kernel<<<grid_for(count), kThreads, 0, s>>>(out, t, count, rank, g);
  TACO_CUDA_CHECK_LAUNCH("fill_kernel", s);
}

void check_output(const void* out, const CheckSpec& spec, CheckStats* d_stats, cudaStream_t s) {
  (void)comm_dtype_bytes(spec.dtype);
  if (spec.out_count <= 0) return;
  check_kernel<<<grid_for(spec.out_count), kThreads, 0, s>>>(out, spec, d_stats);
  TACO_CUDA_CHECK_LAUNCH("check_kernel", s);
}

void sum_buffers(const SumSources& srcs, DType t, int64_t count, void* out, cudaStream_t s) {
  (void)comm_dtype_bytes(t);
  TACO_ASSERT(srcs.n >= 1 && srcs.n <= kMaxSumSources, "sum_buffers: {} sources", srcs.n);
  if (count <= 0) return;
  sum_kernel<<<grid_for(count), kThreads, 0, s>>>(srcs, t, count, out);
  TACO_CUDA_CHECK_LAUNCH("sum_kernel", s);
}

}  // namespace taco::gpu
