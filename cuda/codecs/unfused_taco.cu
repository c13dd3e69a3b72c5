// The unfused TACO pipeline (see unfused_taco.hpp). Every kernel is deliberately simple and
// writes its result to device memory, as the authors' v1 did; the float operations are those of
// the CPU reference, in the same order.
#include "cuda/codecs/unfused_taco.hpp"

#include <algorithm>

#include "core/error.hpp"
#include "cuda/codecs/codec_formats.cuh"
#include "cuda/runtime/cuda_check.hpp"

namespace taco::gpu {
namespace {

using namespace detail;

constexpr int kThreads = 256;

// Work arrays: y is [chunks][nblocks][G] fp32 (groups zero-padded to G); per-group arrays are
// [chunks][nblocks].
struct UParams {
  KernelParams k;
  float* y;
  float* acc;
  float* sumsq;
  float* s_a;
  float* s_q;
  float* r;            // the codes' factor k / s_q
  const uint8_t* src;  // one decode source
  int first_source;    // accumulate: acc = y (1) or acc + y (0)
};

__device__ __forceinline__ int64_t padded_total(const KernelParams& p) {
  return p.chunks * p.geo.nblocks * int64_t(p.rules.group);
}
__device__ __forceinline__ int group_valid(const KernelParams& p, int64_t b) {
  const int64_t rem = p.geo.numel - b * p.rules.group;
  return int(rem < p.rules.group ? rem : p.rules.group);
}

// 1. cast to fp32 into padded groups
__global__ void u_cast(const __grid_constant__ UParams u) {
  const KernelParams& p = u.k;
  const int G = p.rules.group;
  for (int64_t t = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; t < padded_total(p);
       t += int64_t(gridDim.x) * blockDim.x) {
    const int64_t cb = t / G, i = t - cb * G;
    const int64_t c = cb / p.geo.nblocks, b = cb - c * p.geo.nblocks;
    float x = 0.0f;
    if (i < group_valid(p, b)) {
      const int64_t e = c * p.in_stride + b * G + i;
      x = p.in_type == DType::BF16 ? bf16_bits_to_float(static_cast<const uint16_t*>(p.in)[e])
                                   : static_cast<const float*>(p.in)[e];
    }
    u.y[t] = x;
  }
}

// 2. sum of squares per group, lane-tree order with fused multiply-adds: one warp per group
__global__ void u_sumsq(const __grid_constant__ UParams u) {
  const KernelParams& p = u.k;
  const int G = p.rules.group, L = G < 32 ? G : 32, S = G / L;
  const int lane = int(threadIdx.x & 31);
  const int64_t groups = p.chunks * p.geo.nblocks;
  for (int64_t g = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) / 32; g < groups;
       g += int64_t(gridDim.x) * blockDim.x / 32) {
    const float* v = u.y + g * G;
    const int l = lane % L;
    float acc = __fmul_rn(v[l * S], v[l * S]);
    for (int j = 1; j < S; ++j) acc = __fmaf_rn(v[l * S + j], v[l * S + j], acc);
    for (int s = L / 2; s >= 1; s >>= 1)
      acc = __fadd_rn(acc, __shfl_xor_sync(0xffffffffu, acc, s, L));
    if (lane == 0) u.sumsq[g] = acc;
  }
}

// 3. adaptive scale per group
__global__ void u_adaptive(const __grid_constant__ UParams u) {
  const KernelParams& p = u.k;
  const QuantRules& q = p.rules;
  const int64_t groups = p.chunks * p.geo.nblocks;
  for (int64_t g = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; g < groups;
       g += int64_t(gridDim.x) * blockDim.x) {
    const int64_t b = g % p.geo.nblocks;
    float var = __fdiv_rn(u.sumsq[g], float(group_valid(p, b)));
    var = __fadd_rn(var, q.lambda);
    var = var < 1e-12f ? 1e-12f : var;
    u.s_a[g] = clampf(__fdiv_rn(q.fmax, __fsqrt_rn(var)), 1e-3f, 1e3f);
  }
}

// 4. Hadamard butterflies of every group in shared memory, one block per group (G/2 threads),
// strides 1, 2, ..., G/2 (1/sqrt(G) is part of the per-group factors)
__global__ void u_hadamard(const __grid_constant__ UParams u) {
  extern __shared__ float sh[];
  const KernelParams& p = u.k;
  const int G = p.rules.group;
  const int64_t groups = p.chunks * p.geo.nblocks;
  for (int64_t g = blockIdx.x; g < groups; g += gridDim.x) {
    float* v = u.y + g * G;
    for (int i = int(threadIdx.x); i < G; i += blockDim.x) sh[i] = v[i];
    for (int h = 1; h < G; h <<= 1) {
      __syncthreads();
      for (int t = int(threadIdx.x); t < G / 2; t += blockDim.x) {
        const int i = (t / h) * 2 * h + (t % h);
        const float a = sh[i], b = sh[i + h];
        sh[i] = __fadd_rn(a, b);
        sh[i + h] = __fsub_rn(a, b);
      }
    }
    __syncthreads();
    for (int i = int(threadIdx.x); i < G; i += blockDim.x) v[i] = sh[i];
    __syncthreads();
  }
}

// 5. group max -> s_q and the codes' factor (warp per group; NaN only for an all-NaN group)
__global__ void u_scales(const __grid_constant__ UParams u) {
  const KernelParams& p = u.k;
  const int G = p.rules.group;
  const int lane = int(threadIdx.x & 31);
  const int64_t groups = p.chunks * p.geo.nblocks;
  for (int64_t g = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) / 32; g < groups;
       g += int64_t(gridDim.x) * blockDim.x / 32) {
    const float* v = u.y + g * G;
    float m = fabsf(v[lane % G]);
    for (int i = lane; i < G; i += 32) m = fmaxf(m, fabsf(v[i]));
    for (int s = 16; s >= 1; s >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, s));
    const float k = p.rules.transform ? __fmul_rn(u.s_a[g], p.rules.hconst) : u.s_a[g];
    const float M = __fmul_rn(m, k);
    const float mv = M < 1e-12f ? 1e-12f : M;
    const float s_q = clampf(safe_div(mv, p.rules.target), 1e-12f, 1e6f);
    if (lane == 0) {
      u.s_q[g] = s_q;
      u.r[g] = __fdiv_rn(k, s_q);
    }
  }
}

// 6. quantize into the wire's code region
__global__ void u_quant(const __grid_constant__ UParams u) {
  const KernelParams& p = u.k;
  const QuantRules& q = p.rules;
  const int G = q.group;
  for (int64_t t = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; t < padded_total(p);
       t += int64_t(gridDim.x) * blockDim.x) {
    const int64_t g = t / G, i = t - g * G;
    const int64_t c = g / p.geo.nblocks, b = g - c * p.geo.nblocks;
    const int n = q.transform ? G : group_valid(p, b);
    if (i >= n) continue;
    float x = __fmul_rn(finite_or_zero(u.y[t]), u.r[g]);
    x = x > 448.0f ? 448.0f : (x < -448.0f ? -448.0f : x);
    uint32_t code;
    if (q.saturate)
      code = fp8x2_sat(x, 0.0f, q.elem) & 0xffu;
    else
      code = q.elem == ElemFormat::E4M3 ? e4m3_sw(x, false) : e5m2_sw(x, false);
    p.wire_out[c * p.wire_out_stride + b * G + i] = uint8_t(code);
  }
}

// decode 1. code values into padded groups
__global__ void u_dequant(const __grid_constant__ UParams u) {
  const KernelParams& p = u.k;
  const QuantRules& q = p.rules;
  const int G = q.group;
  for (int64_t t = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; t < padded_total(p);
       t += int64_t(gridDim.x) * blockDim.x) {
    const int64_t g = t / G, i = t - g * G;
    const int64_t c = g / p.geo.nblocks, b = g - c * p.geo.nblocks;
    const uint8_t* w = u.src + c * p.wire_in_stride;
    const int n = q.transform ? G : group_valid(p, b);
    float v = 0.0f;
    if (i < n) v = fp8_to_float(w[b * G + i], q.elem);
    u.y[t] = v;
  }
}

// decode 3. times the group's factor s_q * 1/sqrt(G) / max(s_a, 1e-12), accumulated over the
// sources in order
__global__ void u_unscale_acc(const __grid_constant__ UParams u) {
  const KernelParams& p = u.k;
  const int G = p.rules.group;
  for (int64_t t = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; t < padded_total(p);
       t += int64_t(gridDim.x) * blockDim.x) {
    const int64_t g = t / G;
    const int64_t c = g / p.geo.nblocks, b = g - c * p.geo.nblocks;
    const uint8_t* w = u.src + c * p.wire_in_stride;
    float f = bitsf(get_le(w + p.geo.scale_off + 4 * b, 4));
    if (p.rules.transform) f = __fmul_rn(f, p.rules.hconst);
    const float a = bitsf(get_le(w + p.geo.aux_off + 4 * b, 4));
    f = __fdiv_rn(f, a < 1e-12f ? 1e-12f : a);
    const float d = finite_or_zero(__fmul_rn(u.y[t], f));
    u.acc[t] = u.first_source ? d : __fadd_rn(u.acc[t], d);
  }
}

// decode 4. cast the valid elements to the output
__global__ void u_store(const __grid_constant__ UParams u) {
  const KernelParams& p = u.k;
  const int G = p.rules.group;
  for (int64_t t = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; t < padded_total(p);
       t += int64_t(gridDim.x) * blockDim.x) {
    const int64_t g = t / G, i = t - g * G;
    const int64_t c = g / p.geo.nblocks, b = g - c * p.geo.nblocks;
    if (i >= group_valid(p, b)) continue;
    const int64_t e = c * p.out_stride + b * G + i;
    if (p.out_type == DType::BF16)
      static_cast<uint16_t*>(p.out)[e] = uint16_t(float_to_bf16_bits(u.acc[t]));
    else
      static_cast<float*>(p.out)[e] = u.acc[t];
  }
}

unsigned grid_for(int64_t threads_needed, int sm_count) {
  const int64_t blocks = (threads_needed + kThreads - 1) / kThreads;
  return unsigned(std::max<int64_t>(1, std::min<int64_t>(blocks, int64_t(sm_count) * 8)));
}

}  // namespace

bool UnfusedTaco::supports(const VariantSpec& v) {
  return v.family == VariantSpec::Family::Quant && v.quant.taco && v.quant.dual &&
         v.quant.transform != Transform::RandHadamard && v.quant.gran == Granularity::Group &&
         v.quant.block >= 16 && v.quant.block <= kMaxGroupSize;
}

UnfusedTaco::UnfusedTaco(const VariantSpec& spec) : q_(spec) {
  TACO_REQUIRE_INPUT(supports(spec),
                     "the unfused pipeline implements TACO dual-scale variants (taco, "
                     "taco-noh, taco-e5m2, taco-g<G>), not '{}'",
                     q_.name());
  int dev = 0;
  TACO_CUDA_CHECK(cudaGetDevice(&dev));
  TACO_CUDA_CHECK(cudaDeviceGetAttribute(&sm_count_, cudaDevAttrMultiProcessorCount, dev));
}

void UnfusedTaco::ensure(int64_t chunks, const ChunkGeometry& g) const {
  const size_t padded = size_t(chunks * g.nblocks) * size_t(q_.spec().block) * 4;
  if (y_.bytes() < padded) y_ = DeviceBuffer(padded, "cudaMalloc(unfused fp32 workspace)");
  if (acc_.bytes() < padded) acc_ = DeviceBuffer(padded, "cudaMalloc(unfused fp32 sums)");
  const size_t per_group = size_t(chunks * g.nblocks) * 4 * 4;
  if (group_.bytes() < per_group)
    group_ = DeviceBuffer(per_group, "cudaMalloc(unfused group scalars)");
}

#define TACO_UNFUSED_LAUNCH(kernel, grid, threads, smem) \
  do {                                                   \
    kernel<<<(grid), (threads), (smem), stream>>>(u);    \
    TACO_CUDA_CHECK_LAUNCH(#kernel, stream);             \
  } while (0)

void UnfusedTaco::encode(const void* in, DType in_type, int64_t chunks, int64_t rows, int64_t cols,
                         uint8_t* wire, cudaStream_t stream) const {
  const ChunkGeometry g = q_.geometry(rows, cols);
  ensure(chunks, g);
  UParams u{};
  u.k.rules = {};
  u.k.geo = g;
  u.k.chunks = chunks;
  u.k.in = in;
  u.k.in_type = in_type;
  u.k.in_stride = g.numel;
  u.k.wire_out = wire;
  u.k.wire_out_stride = g.total;
  // the rules come from the fused codec object (same variant)
  u.k.rules = q_.rules();
  const int64_t groups = chunks * g.nblocks, G = q_.spec().block;
  u.y = y_.as<float>();
  u.sumsq = group_.as<float>();
  u.s_a = u.sumsq + groups;
  u.s_q = u.s_a + groups;
  u.r = u.s_q + groups;
  const int64_t padded = groups * G;
  TACO_UNFUSED_LAUNCH(u_cast, grid_for(padded, sm_count_), kThreads, 0);
  TACO_UNFUSED_LAUNCH(u_sumsq, grid_for(groups * 32, sm_count_), kThreads, 0);
  TACO_UNFUSED_LAUNCH(u_adaptive, grid_for(groups, sm_count_), kThreads, 0);
  if (u.k.rules.transform) {
    const int ht = int(std::min<int64_t>(G / 2, 512));
    TACO_UNFUSED_LAUNCH(u_hadamard, unsigned(std::min<int64_t>(groups, int64_t(sm_count_) * 16)),
                        ht, size_t(G) * 4);
  }
  TACO_UNFUSED_LAUNCH(u_scales, grid_for(groups * 32, sm_count_), kThreads, 0);
  TACO_UNFUSED_LAUNCH(u_quant, grid_for(padded, sm_count_), kThreads, 0);
  // scales into the wire (v1: device-to-device copies)
  TACO_CUDA_CHECK(cudaMemcpy2DAsync(wire + g.scale_off, size_t(g.total), u.s_q,
                                    size_t(g.nblocks) * 4, size_t(g.nblocks) * 4, size_t(chunks),
                                    cudaMemcpyDeviceToDevice, stream));
  TACO_CUDA_CHECK(cudaMemcpy2DAsync(wire + g.aux_off, size_t(g.total), u.s_a, size_t(g.nblocks) * 4,
                                    size_t(g.nblocks) * 4, size_t(chunks), cudaMemcpyDeviceToDevice,
                                    stream));
}

void UnfusedTaco::decode_reduce(const std::vector<const uint8_t*>& srcs, int64_t chunks,
                                int64_t rows, int64_t cols, void* out, DType out_type,
                                cudaStream_t stream) const {
  TACO_REQUIRE_INPUT(!srcs.empty(), "unfused decode needs at least one input");
  const ChunkGeometry g = q_.geometry(rows, cols);
  ensure(chunks, g);
  UParams u{};
  u.k.rules = q_.rules();
  u.k.geo = g;
  u.k.chunks = chunks;
  u.k.wire_in_stride = g.total;
  u.k.out = out;
  u.k.out_type = out_type;
  u.k.out_stride = g.numel;
  u.y = y_.as<float>();
  u.acc = acc_.as<float>();
  const int64_t groups = chunks * g.nblocks, G = q_.spec().block, padded = groups * G;
  for (size_t s = 0; s < srcs.size(); ++s) {
    u.src = srcs[s];
    u.first_source = s == 0 ? 1 : 0;
    TACO_UNFUSED_LAUNCH(u_dequant, grid_for(padded, sm_count_), kThreads, 0);
    if (u.k.rules.transform) {
      const int ht = int(std::min<int64_t>(G / 2, 512));
      TACO_UNFUSED_LAUNCH(u_hadamard, unsigned(std::min<int64_t>(groups, int64_t(sm_count_) * 16)),
                          ht, size_t(G) * 4);
    }
    TACO_UNFUSED_LAUNCH(u_unscale_acc, grid_for(padded, sm_count_), kThreads, 0);
  }
  TACO_UNFUSED_LAUNCH(u_store, grid_for(padded, sm_count_), kThreads, 0);
}

}  // namespace taco::gpu
