// The kernels of the row / column / tensor codecs (8-bit elements: E4M3, E5M2, INT8; scales of
// any format but UE4M3), with and without error feedback. The per-element rules are the group
// kernels' (codec_group.cuh: block_scale, encode_quads, decode_elems) and the CPU reference's
// (QuantCodec::encode_flat for rows, encode_strided for tensor and column blocks):
//   amax over the block's finite values -> scale -> code = enc(finite(v) / s) -> dec = code * s.
//
// Every kernel moves runs of kRun consecutive elements of one row: 16-byte loads of bf16 (two of
// f32), 8-byte stores of codes, when the host allows vectors (cols a multiple of kRun, buffers
// aligned: KernelParams' *_vec flags), element by element otherwise.
//  * rows: one pass. A row is a warp's, four warps' or the block's (row_shape); each thread
//    keeps its kRowThreadElems elements of each slab in registers, the row's amax is a warp or
//    block reduction, and the codes are computed from the registers. Rows longer than a slab
//    read their slabs a second time (from L2) for the codes.
//  * tensor: an amax pass (every chunk's amax into chunk_amax), then the codes; both walk flat
//    runs of a chunk. Each thread derives the chunk's scale from its amax.
//  * columns: an amax pass over tiles (a thread walks tile_rows rows of kRun columns, one
//    atomicMax per column and tile into block_amax), a scales pass (one thread per column), then
//    the codes over the same tiles, each thread holding its columns' scales.
// Decodes: tensor over flat runs, rows and columns over tiles; sums over nsrc wires in order.
#include <utility>

#include "core/error.hpp"
#include "cuda/codecs/codec_group.cuh"
#include "cuda/codecs/codec_kernels.hpp"

namespace taco::gpu::detail {

namespace {

constexpr int kRun = 8;
// Blocks per multiprocessor the quantizing kernels ask of ptxas (kernel_tuning.hpp says why).
template <bool kFeedback>
constexpr int kQuantMinBlocks = tuning::quant_min_blocks(kFeedback);

// ---- runs of kRun elements ---------------------------------------------------------------------
// n: the valid elements of the run (the rest read as 0 and are not written); vec: the whole run
// may move as vectors (n == kRun and the alignment the host checked). Vector loads: load_runs.
template <typename InT>
__device__ __forceinline__ void load_run_scalar(const InT* src, int n, float (&v)[kRun]) {
#pragma unroll
  for (int r = 0; r < kRun; ++r) {
    if constexpr (sizeof(InT) == 2)
      v[r] = r < n ? bf16_bits_to_float(src[r]) : 0.0f;
    else
      v[r] = r < n ? src[r] : 0.0f;
  }
}

// The residual: coherent loads (the kernel rewrites it), fp32.
__device__ __forceinline__ void load_residual_scalar(const float* src, int n, float (&e)[kRun]) {
#pragma unroll
  for (int r = 0; r < kRun; ++r) e[r] = r < n ? src[r] : 0.0f;
}

__device__ __forceinline__ void store_residual_run(float* dst, int n, bool vec,
                                                   const float (&e)[kRun]) {
  if (vec && n == kRun) {
    __stcs(reinterpret_cast<float4*>(dst), make_float4(e[0], e[1], e[2], e[3]));
    __stcs(reinterpret_cast<float4*>(dst) + 1, make_float4(e[4], e[5], e[6], e[7]));
    return;
  }
#pragma unroll
  for (int r = 0; r < kRun; ++r)
    if (r < n) dst[r] = e[r];
}

__device__ __forceinline__ void store_code_run(uint8_t* dst, int n, bool vec,
                                               const uint32_t (&w)[2]) {
  if (vec && n == kRun) {
    *reinterpret_cast<uint2*>(dst) = make_uint2(w[0], w[1]);
    return;
  }
#pragma unroll
  for (int r = 0; r < kRun; ++r)
    if (r < n) dst[r] = uint8_t(w[r / 4] >> (8 * (r % 4)));
}

__device__ __forceinline__ void load_code_run(const uint8_t* src, int n, bool vec,
                                              uint32_t (&w)[2]) {
  if (vec && n == kRun) {
    const uint2 q = __ldcs(reinterpret_cast<const uint2*>(src));
    w[0] = q.x;
    w[1] = q.y;
    return;
  }
  w[0] = w[1] = 0;
#pragma unroll
  for (int r = 0; r < kRun; ++r)
    if (r < n) w[r / 4] |= uint32_t(src[r]) << (8 * (r % 4));
}

// out[i], i < n, as out_type (element offset `at` of out).
__device__ __forceinline__ void store_out_run(const KernelParams& p, int64_t at, int n, bool vec,
                                              const float (&v)[kRun]) {
  if (p.out_type == DType::BF16) {
    uint16_t* o = static_cast<uint16_t*>(p.out) + at;
    if (vec && n == kRun) {
      __stcs(reinterpret_cast<uint4*>(o),
             make_uint4(bf16x2_bits_hw(v[0], v[1]), bf16x2_bits_hw(v[2], v[3]),
                        bf16x2_bits_hw(v[4], v[5]), bf16x2_bits_hw(v[6], v[7])));
      return;
    }
#pragma unroll
    for (int r = 0; r < kRun; ++r)
      if (r < n) o[r] = uint16_t(bf16x2_bits_hw(v[r], 0.0f));
  } else {
    float* o = static_cast<float*>(p.out) + at;
    if (vec && n == kRun) {
      __stcs(reinterpret_cast<float4*>(o), make_float4(v[0], v[1], v[2], v[3]));
      __stcs(reinterpret_cast<float4*>(o) + 1, make_float4(v[4], v[5], v[6], v[7]));
      return;
    }
#pragma unroll
    for (int r = 0; r < kRun; ++r)
      if (r < n) o[r] = v[r];
  }
}

// The values an encode quantizes, of K runs of a thread: the input, or with error feedback
// v = finite(x) + e (group_kernels.cuh feedback_values); counts the non-finite values of what is
// encoded. at[k]: the run's first element (input and residual); n[k]: its valid elements. The
// vector path issues every load before it unpacks any: a load used at once would leave one
// 16-byte load per thread in flight. With vectors allowed, cols % kRun == 0, so a run is whole
// (n = kRun) or past the end (n = 0).
template <typename InT, bool kFeedback, int K>
__device__ __forceinline__ void load_runs(const KernelParams& p, const int64_t (&at)[K],
                                          const int (&n)[K], float (&v)[K][kRun],
                                          unsigned long long* nonfin) {
  if (p.in_vec16 && (!kFeedback || p.residual_vec16)) {
    constexpr int kVecs = sizeof(InT) == 2 ? 1 : 2;  // 16-byte loads per run
    uint4 raw[K][kVecs];
    float4 res[K][2];
#pragma unroll
    for (int k = 0; k < K; ++k) {
      const uint4* src = reinterpret_cast<const uint4*>(static_cast<const InT*>(p.in) + at[k]);
#pragma unroll
      for (int w = 0; w < kVecs; ++w)
        raw[k][w] = n[k] > 0 ? __ldg(src + w) : make_uint4(0, 0, 0, 0);
      if constexpr (kFeedback) {
        const float4* e = reinterpret_cast<const float4*>(p.residual + at[k]);
#pragma unroll
        for (int w = 0; w < 2; ++w)
          res[k][w] = n[k] > 0 ? __ldcs(e + w) : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
      }
    }
#pragma unroll
    for (int k = 0; k < K; ++k) {
      if constexpr (sizeof(InT) == 2) {
        const uint32_t w[4] = {raw[k][0].x, raw[k][0].y, raw[k][0].z, raw[k][0].w};
#pragma unroll
        for (int r = 0; r < kRun; ++r)
          v[k][r] = bitsf(r % 2 ? (w[r / 2] & 0xffff0000u) : (w[r / 2] << 16));
      } else {
#pragma unroll
        for (int r = 0; r < kRun; ++r) {
          const uint4& q = raw[k][r / 4];
          v[k][r] = bitsf(r % 4 == 0 ? q.x : r % 4 == 1 ? q.y : r % 4 == 2 ? q.z : q.w);
        }
      }
      if constexpr (kFeedback) {
        const float e[kRun] = {res[k][0].x, res[k][0].y, res[k][0].z, res[k][0].w,
                               res[k][1].x, res[k][1].y, res[k][1].z, res[k][1].w};
#pragma unroll
        for (int r = 0; r < kRun; ++r) v[k][r] = __fadd_rn(finite_or_zero(v[k][r]), e[r]);
      }
    }
  } else {
#pragma unroll
    for (int k = 0; k < K; ++k) {
      load_run_scalar<InT>(static_cast<const InT*>(p.in) + at[k], n[k], v[k]);
      if constexpr (kFeedback) {
        float e[kRun];
        load_residual_scalar(p.residual + at[k], n[k], e);
#pragma unroll
        for (int r = 0; r < kRun; ++r) v[k][r] = __fadd_rn(finite_or_zero(v[k][r]), e[r]);
      }
    }
  }
  if (nonfin)
#pragma unroll
    for (int k = 0; k < K; ++k)
#pragma unroll
      for (int r = 0; r < kRun; ++r) *nonfin += (r < n[k] && nonfinite(v[k][r])) ? 1u : 0u;
}

// The largest |value| of K runs, NaN if any is NaN (one instruction per element): finite exactly
// when every value is.
template <int K>
__device__ __forceinline__ float runs_absmax_nan(const float (&v)[K][kRun]) {
  float m = 0.0f;
#pragma unroll
  for (int k = 0; k < K; ++k)
#pragma unroll
    for (int r = 0; r < kRun; ++r) m = fmax_nan(m, fabsf(v[k][r]));
  return m;
}
__device__ __forceinline__ bool finite_max(float m) {
  return m <= kHdFltMax;
}

// The largest finite |value| of K runs as bits, from their runs_absmax_nan.
template <int K>
__device__ __forceinline__ uint32_t runs_amax_bits(const float (&v)[K][kRun], float absmax_nan) {
  if (finite_max(absmax_nan)) return fbits(absmax_nan);
  uint32_t b = 0;
#pragma unroll
  for (int k = 0; k < K; ++k)
#pragma unroll
    for (int r = 0; r < kRun; ++r) b = max(b, abs_bits_finite(v[k][r]));
  return b;
}

// A scale in use: the value, and its reciprocal for the division when that is exact for codes.
struct RunScale {
  float s;
  ScaleDivisor d;
  bool fast;
};
__device__ __forceinline__ RunScale run_scale(float s, const QuantRules& q) {
  return {s, scale_divisor(s), q.fast_div && code_divisor_ok(s)};
}

// Codes of v / s (the reference: enc(finite(v) / s)); with error feedback v becomes
// e' = v - finite(code * s). Counts saturated codes of the n valid elements. finite: every value
// of v is finite (finite(v) = v, no test per element).
template <bool kFeedback>
__device__ __forceinline__ void quantize_run(const QuantRules& q, const RunScale& rs, int n,
                                             float (&v)[kRun], uint32_t (&w)[2],
                                             unsigned long long& sat, bool count, bool finite) {
  float t[kRun];
  if (rs.fast && finite) {
#pragma unroll
    for (int r = 0; r < kRun; ++r) t[r] = div_by_scale(v[r], rs.d);
  } else if (rs.fast) {
#pragma unroll
    for (int r = 0; r < kRun; ++r) t[r] = div_by_scale(finite_or_zero(v[r]), rs.d);
  } else {
#pragma unroll
    for (int r = 0; r < kRun; ++r) t[r] = __fdiv_rn(finite_or_zero(v[r]), rs.s);
  }
  encode_quads<kRun, true>(t, w, q);
  if (count)
#pragma unroll
    for (int r = 0; r < kRun; ++r)
      sat += (r < n && is_sat_code((w[r / 4] >> (8 * (r % 4))) & 0xffu, q)) ? 1u : 0u;
  if constexpr (kFeedback) {
    float d[kRun];
    decode_elems<kRun>(w, rs.s, q.elem, d);
#pragma unroll
    for (int r = 0; r < kRun; ++r) v[r] = __fsub_rn(v[r], finite_or_zero(d[r]));
  }
}

// Stores a block's scale code in the wire (aligned fp32 scales as one store).
__device__ __forceinline__ void put_scale(uint8_t* sp, uint32_t code, const QuantRules& q,
                                          bool vec4) {
  if (q.scale_bytes == 4 && vec4)
    *reinterpret_cast<uint32_t*>(sp) = code;
  else
    put_le(sp, code, q.scale_bytes);
}
// The scale a wire stores for block b.
__device__ __forceinline__ float wire_scale(const uint8_t* wire, int64_t b, const KernelParams& p) {
  const uint8_t* sp = wire + p.geo.scale_off + b * p.rules.scale_bytes;
  if (p.rules.scale_bytes == 4 && p.scale_vec4) return __ldg(reinterpret_cast<const float*>(sp));
  return device_scale_value(get_le(sp, p.rules.scale_bytes), p.rules.scale);
}

// ---- rows ---------------------------------------------------------------------------------------
// kRowThreads threads per row; the block (kStridedThreads) takes kStridedThreads / kRowThreads
// rows at a time. Thread t of a row holds, per slab of kRowThreads * kRowThreadElems elements,
// the runs t, kRowThreads + t, ... (each run's accesses coalesced across the row's threads).
template <typename InT, int kRowThreads, bool kFeedback>
__global__ void __launch_bounds__(kStridedThreads, kQuantMinBlocks<kFeedback>)
    row_encode_kernel(const __grid_constant__ KernelParams p) {
  constexpr int kRuns = kRowThreadElems / kRun;
  constexpr int kRowsPerBlock = kStridedThreads / kRowThreads;
  constexpr int kWarpsPerRow = kRowThreads / 32;
  constexpr int64_t kSlab = int64_t(kRowThreads) * kRowThreadElems;
  __shared__ uint32_t red[2][kStridedThreads / 32];
  const QuantRules& q = p.rules;
  const int t = int(threadIdx.x % kRowThreads), sub = int(threadIdx.x / kRowThreads);
  const int lane = int(threadIdx.x & 31), warp = int(threadIdx.x / 32);
  const int64_t rows = p.geo.rows, cols = p.geo.cols, nrows = p.chunks * rows;
  const int64_t nslabs = (cols + kSlab - 1) / kSlab;
  unsigned long long sat = 0, nonfin = 0;
  const bool count = p.stats != nullptr;
  int parity = 0;
  // The loop's trip count is the block's (its barrier); a row past the end moves nothing.
  for (int64_t base = int64_t(blockIdx.x) * kRowsPerBlock; base < nrows;
       base += int64_t(gridDim.x) * kRowsPerBlock) {
    const int64_t R = base + sub;
    const bool valid = R < nrows;
    // (a 64-bit division per row costs more than the row's amax: one chunk needs none, and
    // row counts below 2^32 take the 32-bit one)
    const int64_t c = !valid || p.chunks == 1 ? 0
                      : nrows <= 0xffffffffll ? int64_t(uint32_t(R) / uint32_t(rows))
                                              : R / rows;
    const int64_t r = valid ? R - c * rows : 0;
    const int64_t ncols = valid ? cols : 0;
    const int64_t row_at = c * p.in_stride + r * cols;  // the row's first element (input, residual)
    float v[kRuns][kRun];
    uint32_t m = 0;
    bool finite = true;  // every value this thread holds of the row
    int64_t at[kRuns];
    int n[kRuns];
    // the runs of slab sl this thread holds: at[] (element offsets) and n[] (valid elements)
    auto slab_runs = [&](int64_t sl, int64_t width) {
#pragma unroll
      for (int k = 0; k < kRuns; ++k) {
        const int64_t j = sl * kSlab + (int64_t(k) * kRowThreads + t) * kRun;  // column of the run
        n[k] = int(max(int64_t(0), min(int64_t(kRun), width - j)));
        at[k] = row_at + min(j, cols);
      }
    };
    for (int64_t sl = 0; sl < nslabs; ++sl) {
      slab_runs(sl, ncols);
      load_runs<InT, kFeedback, kRuns>(p, at, n, v, count ? &nonfin : nullptr);
      const float am = runs_absmax_nan(v);
      finite = finite && finite_max(am);
      m = max(m, runs_amax_bits(v, am));
    }
    m = __reduce_max_sync(kFullMask, m);
    if constexpr (kWarpsPerRow > 1) {
      // one barrier per row: the next row writes the other slot
      if (lane == 0) red[parity][warp] = m;
      __syncthreads();
#pragma unroll
      for (int w = 0; w < kWarpsPerRow; ++w) m = max(m, red[parity][sub * kWarpsPerRow + w]);
      parity ^= 1;
    }
    if (!valid) continue;
    const ScaleOut so = block_scale(bitsf(m), q);
    uint8_t* wire = p.wire_out + c * p.wire_out_stride;
    if (t == 0) put_scale(wire + p.geo.scale_off + r * q.scale_bytes, so.code, q, p.scale_vec4);
    const RunScale rs = run_scale(so.s, q);
    uint8_t* codes = wire + r * cols;
    for (int64_t sl = 0; sl < nslabs; ++sl) {
      slab_runs(sl, cols);
      if (nslabs > 1) load_runs<InT, kFeedback, kRuns>(p, at, n, v, nullptr);
#pragma unroll
      for (int k = 0; k < kRuns; ++k) {
        uint32_t w[2];
        quantize_run<kFeedback>(q, rs, n[k], v[k], w, sat, count, finite);
        if (n[k] > 0) {
          const int64_t j = at[k] - row_at;
          store_code_run(codes + j, n[k], p.code_vec, w);
          if constexpr (kFeedback)
            store_residual_run(p.residual + at[k], n[k], p.residual_vec16, v[k]);
        }
      }
    }
  }
  if (count) flush_stats(p.stats, sat, nonfin);
}

// ---- tensor -------------------------------------------------------------------------------------
// Runs of kRun over each chunk, chunk by chunk (a collective's few chunks); a thread loads
// kBatch runs, nthreads apart, before it works on them.
constexpr int kBatch = 4;

// Runs u0, u0 + nthreads, ... of chunk c: element offsets at[] and valid elements n[].
template <int K>
__device__ __forceinline__ void flat_runs(const KernelParams& p, int64_t c, int64_t u0,
                                          int64_t nthreads, int64_t (&at)[K], int (&n)[K]) {
  const int64_t numel = p.geo.numel;
#pragma unroll
  for (int k = 0; k < K; ++k) {
    const int64_t u = u0 + k * nthreads;
    n[k] = int(max(int64_t(0), min(int64_t(kRun), numel - u * kRun)));
    at[k] = c * p.in_stride + min(u * kRun, numel);
  }
}

template <typename InT, bool kFeedback>
__global__ void __launch_bounds__(kStridedThreads)
    tensor_amax_kernel(const __grid_constant__ KernelParams p) {
  const int64_t tid = int64_t(blockIdx.x) * kStridedThreads + threadIdx.x,
                nthreads = int64_t(gridDim.x) * kStridedThreads;
  const int64_t numel = p.geo.numel, runs = (numel + kRun - 1) / kRun;
  unsigned long long nonfin = 0;
  const bool count = p.stats != nullptr;
  for (int64_t c = 0; c < p.chunks; ++c) {
    uint32_t m = 0;
    for (int64_t u0 = tid; u0 < runs; u0 += kBatch * nthreads) {
      float v[kBatch][kRun];
      int64_t at[kBatch];
      int n[kBatch];
      flat_runs(p, c, u0, nthreads, at, n);
      load_runs<InT, kFeedback, kBatch>(p, at, n, v, count ? &nonfin : nullptr);
      m = max(m, runs_amax_bits(v, runs_absmax_nan(v)));
    }
    m = __reduce_max_sync(kFullMask, m);
    if ((threadIdx.x & 31) == 0 && m) atomicMax(p.chunk_amax + c, m);
  }
  if (count) flush_stats(p.stats, 0, nonfin);
}

template <typename InT, bool kFeedback>
__global__ void __launch_bounds__(kStridedThreads, kQuantMinBlocks<kFeedback>)
    tensor_quant_kernel(const __grid_constant__ KernelParams p) {
  const QuantRules& q = p.rules;
  const int64_t tid = int64_t(blockIdx.x) * kStridedThreads + threadIdx.x,
                nthreads = int64_t(gridDim.x) * kStridedThreads;
  const int64_t numel = p.geo.numel, runs = (numel + kRun - 1) / kRun;
  unsigned long long sat = 0;
  const bool count = p.stats != nullptr;
  for (int64_t c = 0; c < p.chunks; ++c) {
    const ScaleOut so = block_scale(bitsf(__ldg(p.chunk_amax + c)), q);
    uint8_t* wire = p.wire_out + c * p.wire_out_stride;
    if (tid == 0) put_scale(wire + p.geo.scale_off, so.code, q, p.scale_vec4);
    const RunScale rs = run_scale(so.s, q);
    for (int64_t u0 = tid; u0 < runs; u0 += kBatch * nthreads) {
      float v[kBatch][kRun];
      int64_t at[kBatch];
      int n[kBatch];
      flat_runs(p, c, u0, nthreads, at, n);
      load_runs<InT, kFeedback, kBatch>(p, at, n, v, nullptr);
      const bool finite = finite_max(runs_absmax_nan(v));
#pragma unroll
      for (int k = 0; k < kBatch; ++k) {
        if (n[k] == 0) continue;
        uint32_t w[2];
        quantize_run<kFeedback>(q, rs, n[k], v[k], w, sat, count, finite);
        store_code_run(wire + (at[k] - c * p.in_stride), n[k], p.code_vec, w);
        if constexpr (kFeedback)
          store_residual_run(p.residual + at[k], n[k], p.residual_vec16, v[k]);
      }
    }
  }
  if (count) flush_stats(p.stats, sat, 0);
}

// ---- columns ------------------------------------------------------------------------------------
// Tiles of p.tile_rows rows x kRun columns: item i of chunk c, row block rb, column run cr
// (consecutive threads take consecutive column runs: a warp reads 32 runs of one row). A thread
// loads kBatch rows before it works on them.
struct Tile {
  int64_t c, r0, r1, j;  // chunk, rows [r0, r1), first column
  int n;                 // valid columns
};
__device__ __forceinline__ Tile tile_of(const KernelParams& p, int64_t item) {
  const int64_t ncr = (p.geo.cols + kRun - 1) / kRun,
                nrb = (p.geo.rows + p.tile_rows - 1) / p.tile_rows;
  const int64_t cr = item % ncr, rest = item / ncr, rb = rest % nrb;
  Tile t;
  t.c = rest / nrb;
  t.r0 = rb * p.tile_rows;
  t.r1 = min(p.geo.rows, t.r0 + p.tile_rows);
  t.j = cr * kRun;
  t.n = int(min(int64_t(kRun), p.geo.cols - t.j));
  return t;
}
// Rows r0 .. r0 + kBatch - 1 of a tile (a row past the tile: n = 0, at its first row).
template <int K>
__device__ __forceinline__ void tile_runs(const KernelParams& p, const Tile& tl, int64_t base,
                                          int64_t r0, int64_t (&at)[K], int (&n)[K]) {
#pragma unroll
  for (int k = 0; k < K; ++k) {
    const bool in = r0 + k < tl.r1;
    at[k] = base + (in ? r0 + k : tl.r0) * p.geo.cols;
    n[k] = in ? tl.n : 0;
  }
}
__device__ __forceinline__ int64_t tile_count(const KernelParams& p) {
  return p.chunks * ((p.geo.rows + p.tile_rows - 1) / p.tile_rows) *
         ((p.geo.cols + kRun - 1) / kRun);
}

template <typename InT, bool kFeedback>
__global__ void __launch_bounds__(kStridedThreads)
    col_amax_kernel(const __grid_constant__ KernelParams p) {
  const int64_t tid = int64_t(blockIdx.x) * kStridedThreads + threadIdx.x,
                nthreads = int64_t(gridDim.x) * kStridedThreads;
  const int64_t items = tile_count(p);
  unsigned long long nonfin = 0;
  const bool count = p.stats != nullptr;
  for (int64_t i = tid; i < items; i += nthreads) {
    const Tile tl = tile_of(p, i);
    uint32_t m[kRun] = {0, 0, 0, 0, 0, 0, 0, 0};
    const int64_t base = tl.c * p.in_stride + tl.j;
    for (int64_t r0 = tl.r0; r0 < tl.r1; r0 += kBatch) {
      float v[kBatch][kRun];
      int64_t at[kBatch];
      int n[kBatch];
      tile_runs(p, tl, base, r0, at, n);
      load_runs<InT, kFeedback, kBatch>(p, at, n, v, count ? &nonfin : nullptr);
#pragma unroll
      for (int k = 0; k < kBatch; ++k)
#pragma unroll
        for (int e = 0; e < kRun; ++e) m[e] = max(m[e], abs_bits_finite(v[k][e]));
    }
#pragma unroll
    for (int e = 0; e < kRun; ++e)
      if (e < tl.n && m[e]) atomicMax(p.block_amax + tl.c * p.geo.cols + tl.j + e, m[e]);
  }
  if (count) flush_stats(p.stats, 0, nonfin);
}

// One thread per (chunk, column): the scale from the amax, into the wire and block_scale.
__global__ void __launch_bounds__(kStridedThreads)
    col_scales_kernel(const __grid_constant__ KernelParams p) {
  const int64_t n = p.chunks * p.geo.cols;
  for (int64_t i = int64_t(blockIdx.x) * kStridedThreads + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * kStridedThreads) {
    const int64_t c = i / p.geo.cols, col = i - c * p.geo.cols;
    const ScaleOut so = block_scale(bitsf(p.block_amax[i]), p.rules);
    put_le(p.wire_out + c * p.wire_out_stride + p.geo.scale_off + col * p.rules.scale_bytes,
           so.code, p.rules.scale_bytes);
    p.block_scale[i] = so.s;
  }
}

template <typename InT, bool kFeedback>
__global__ void __launch_bounds__(kStridedThreads, tuning::kColQuantMinBlocks)
    col_quant_kernel(const __grid_constant__ KernelParams p) {
  const QuantRules& q = p.rules;
  const int64_t tid = int64_t(blockIdx.x) * kStridedThreads + threadIdx.x,
                nthreads = int64_t(gridDim.x) * kStridedThreads;
  const int64_t items = tile_count(p);
  unsigned long long sat = 0;
  const bool count = p.stats != nullptr;
  for (int64_t i = tid; i < items; i += nthreads) {
    const Tile tl = tile_of(p, i);
    float s[kRun];
    ScaleDivisor d[kRun];
    bool fast = q.fast_div != 0;  // every column's division through its reciprocal
#pragma unroll
    for (int e = 0; e < kRun; ++e) {
      s[e] = e < tl.n ? p.block_scale[tl.c * p.geo.cols + tl.j + e] : 1.0f;
      d[e] = scale_divisor(s[e]);
      fast = fast && code_divisor_ok(s[e]);
    }
    uint8_t* codes = p.wire_out + tl.c * p.wire_out_stride + tl.j;
    const int64_t base = tl.c * p.in_stride + tl.j;
    for (int64_t r0 = tl.r0; r0 < tl.r1; r0 += kBatch) {
      float v[kBatch][kRun];
      int64_t rat[kBatch];
      int n[kBatch];
      tile_runs(p, tl, base, r0, rat, n);
      load_runs<InT, kFeedback, kBatch>(p, rat, n, v, nullptr);
      const bool finite = finite_max(runs_absmax_nan(v));
#pragma unroll
      for (int k = 0; k < kBatch; ++k) {
        if (r0 + k >= tl.r1) continue;
        const int64_t at = (r0 + k) * p.geo.cols;
        float t[kRun];
        if (fast && finite) {
#pragma unroll
          for (int e = 0; e < kRun; ++e) t[e] = div_by_scale(v[k][e], d[e]);
        } else if (fast) {
#pragma unroll
          for (int e = 0; e < kRun; ++e) t[e] = div_by_scale(finite_or_zero(v[k][e]), d[e]);
        } else {
#pragma unroll
          for (int e = 0; e < kRun; ++e) t[e] = __fdiv_rn(finite_or_zero(v[k][e]), s[e]);
        }
        uint32_t w[2];
        encode_quads<kRun, true>(t, w, q);
        if (count)
#pragma unroll
          for (int e = 0; e < kRun; ++e)
            sat += (e < tl.n && is_sat_code((w[e / 4] >> (8 * (e % 4))) & 0xffu, q)) ? 1u : 0u;
        store_code_run(codes + at, tl.n, p.code_vec, w);
        if constexpr (kFeedback) {
#pragma unroll
          for (int e = 0; e < kRun; ++e) {
            const float dec =
                __fmul_rn(code_value((w[e / 4] >> (8 * (e % 4))) & 0xffu, q.elem), s[e]);
            v[k][e] = __fsub_rn(v[k][e], finite_or_zero(dec));
          }
          store_residual_run(p.residual + base + at, tl.n, p.residual_vec16, v[k]);
        }
      }
    }
  }
  if (count) flush_stats(p.stats, sat, 0);
}

// ---- decode -------------------------------------------------------------------------------------
// out = decode(src[0]) + decode(src[1]) + ... in fp32 (rounded to bf16 first when round_sum_bf16:
// the decode-reduce-encode fallback), then out_type. Tensor scales over flat runs; row and column
// scales over tiles.
__device__ __forceinline__ void decode_run(const QuantRules& q, const uint32_t (&w)[2], float s,
                                           float (&d)[kRun]) {
  decode_elems<kRun>(w, s, q.elem, d);
}

__global__ void __launch_bounds__(kStridedThreads)
    tensor_decode_kernel(const __grid_constant__ KernelParams p) {
  const QuantRules& q = p.rules;
  const int64_t tid = int64_t(blockIdx.x) * kStridedThreads + threadIdx.x,
                nthreads = int64_t(gridDim.x) * kStridedThreads;
  const int64_t numel = p.geo.numel, runs = (numel + kRun - 1) / kRun;
  for (int64_t c = 0; c < p.chunks; ++c) {
    const float s0 = wire_scale(p.src[0] + c * p.wire_in_stride, 0, p);
    for (int64_t u0 = tid; u0 < runs; u0 += kBatch * nthreads) {
      // the first source's codes of kBatch runs first, then the work
      uint32_t w0[kBatch][2];
      int n[kBatch];
#pragma unroll
      for (int b = 0; b < kBatch; ++b) {
        const int64_t u = u0 + b * nthreads;
        n[b] = int(max(int64_t(0), min(int64_t(kRun), numel - u * kRun)));
        load_code_run(p.src[0] + c * p.wire_in_stride + min(u * kRun, numel), n[b], p.code_vec,
                      w0[b]);
      }
#pragma unroll
      for (int b = 0; b < kBatch; ++b) {
        if (n[b] == 0) continue;
        const int64_t u = u0 + b * nthreads;
        float acc[kRun];
        decode_run(q, w0[b], s0, acc);
        for (int k = 1; k < p.nsrc; ++k) {
          const uint8_t* wire = p.src[k] + c * p.wire_in_stride;
          uint32_t w[2];
          load_code_run(wire + u * kRun, n[b], p.code_vec, w);
          float d[kRun];
          decode_run(q, w, wire_scale(wire, 0, p), d);
#pragma unroll
          for (int r = 0; r < kRun; ++r) acc[r] = __fadd_rn(acc[r], d[r]);
        }
        if (p.round_sum_bf16)
#pragma unroll
          for (int r = 0; r < kRun; ++r) acc[r] = round_to_bf16(acc[r]);
        store_out_run(p, c * p.out_stride + u * kRun, n[b], p.out_vec16, acc);
      }
    }
  }
}

template <bool kCol>
__global__ void __launch_bounds__(kStridedThreads)
    tile_decode_kernel(const __grid_constant__ KernelParams p) {
  const QuantRules& q = p.rules;
  const int64_t tid = int64_t(blockIdx.x) * kStridedThreads + threadIdx.x,
                nthreads = int64_t(gridDim.x) * kStridedThreads;
  const int64_t items = tile_count(p), cols = p.geo.cols;
  for (int64_t i = tid; i < items; i += nthreads) {
    const Tile tl = tile_of(p, i);
    const uint8_t* wire0 = p.src[0] + tl.c * p.wire_in_stride;
    // columns: the first source's kRun scales hold for the whole tile
    float s0[kRun];
    if constexpr (kCol) {
#pragma unroll
      for (int e = 0; e < kRun; ++e) s0[e] = e < tl.n ? wire_scale(wire0, tl.j + e, p) : 1.0f;
    }
    for (int64_t r0 = tl.r0; r0 < tl.r1; r0 += kBatch) {
      // the first source's codes (and row scales) of kBatch rows first, then the work
      uint32_t w0[kBatch][2];
      float rs0[kBatch];
#pragma unroll
      for (int b = 0; b < kBatch; ++b) {
        const bool in = r0 + b < tl.r1;
        const int64_t r = in ? r0 + b : tl.r0;
        load_code_run(wire0 + r * cols + tl.j, in ? tl.n : 0, p.code_vec, w0[b]);
        if constexpr (!kCol) rs0[b] = wire_scale(wire0, r, p);
      }
#pragma unroll
      for (int b = 0; b < kBatch; ++b) {
        if (r0 + b >= tl.r1) continue;
        const int64_t r = r0 + b;
        float acc[kRun];
        for (int k = 0; k < p.nsrc; ++k) {
          const uint8_t* wire = p.src[k] + tl.c * p.wire_in_stride;
          uint32_t w[2];
          if (k == 0) {
            w[0] = w0[b][0];
            w[1] = w0[b][1];
          } else {
            load_code_run(wire + r * cols + tl.j, tl.n, p.code_vec, w);
          }
          float d[kRun];
          if constexpr (kCol) {
#pragma unroll
            for (int e = 0; e < kRun; ++e) {
              const float s = k == 0 ? s0[e] : (e < tl.n ? wire_scale(wire, tl.j + e, p) : 1.0f);
              d[e] = __fmul_rn(code_value((w[e / 4] >> (8 * (e % 4))) & 0xffu, q.elem), s);
            }
          } else {
            decode_run(q, w, k == 0 ? rs0[b] : wire_scale(wire, r, p), d);
          }
#pragma unroll
          for (int e = 0; e < kRun; ++e) acc[e] = k == 0 ? d[e] : __fadd_rn(acc[e], d[e]);
        }
        if (p.round_sum_bf16)
#pragma unroll
          for (int e = 0; e < kRun; ++e) acc[e] = round_to_bf16(acc[e]);
        store_out_run(p, tl.c * p.out_stride + r * cols + tl.j, tl.n, p.out_vec16, acc);
      }
    }
  }
}

// The row encodes of every shape: [shape][in type: bf16, f32][error feedback].
template <int... S>
void add_row_shapes(StridedKernels& k, std::integer_sequence<int, S...>) {
  ((k.row_encode[S][0][0] = row_encode_kernel<uint16_t, kRowShapes[S], false>,
    k.row_encode[S][0][1] = row_encode_kernel<uint16_t, kRowShapes[S], true>,
    k.row_encode[S][1][0] = row_encode_kernel<float, kRowShapes[S], false>,
    k.row_encode[S][1][1] = row_encode_kernel<float, kRowShapes[S], true>),
   ...);
}

}  // namespace
}  // namespace taco::gpu::detail

namespace taco::gpu {

const StridedKernels& strided_kernels() {
  using namespace detail;
  static const StridedKernels k = [] {
    StridedKernels s{};
    add_row_shapes(s, std::make_integer_sequence<int, kNumRowShapes>{});
    s.tensor_amax[0][0] = tensor_amax_kernel<uint16_t, false>;
    s.tensor_amax[0][1] = tensor_amax_kernel<uint16_t, true>;
    s.tensor_amax[1][0] = tensor_amax_kernel<float, false>;
    s.tensor_amax[1][1] = tensor_amax_kernel<float, true>;
    s.tensor_quant[0][0] = tensor_quant_kernel<uint16_t, false>;
    s.tensor_quant[0][1] = tensor_quant_kernel<uint16_t, true>;
    s.tensor_quant[1][0] = tensor_quant_kernel<float, false>;
    s.tensor_quant[1][1] = tensor_quant_kernel<float, true>;
    s.col_amax[0][0] = col_amax_kernel<uint16_t, false>;
    s.col_amax[0][1] = col_amax_kernel<uint16_t, true>;
    s.col_amax[1][0] = col_amax_kernel<float, false>;
    s.col_amax[1][1] = col_amax_kernel<float, true>;
    s.col_scales = col_scales_kernel;
    s.col_quant[0][0] = col_quant_kernel<uint16_t, false>;
    s.col_quant[0][1] = col_quant_kernel<uint16_t, true>;
    s.col_quant[1][0] = col_quant_kernel<float, false>;
    s.col_quant[1][1] = col_quant_kernel<float, true>;
    s.tensor_decode = tensor_decode_kernel;
    s.row_decode = tile_decode_kernel<false>;
    s.col_decode = tile_decode_kernel<true>;
    return s;
  }();
  return k;
}

}  // namespace taco::gpu
