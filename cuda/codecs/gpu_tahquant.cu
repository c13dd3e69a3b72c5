#include "cuda/codecs/gpu_tahquant.hpp"

#include <fmt/format.h>
#include <cub/device/device_radix_sort.cuh>
#include <cub/device/device_scan.cuh>

#include <algorithm>
#include <memory>

#include "core/error.hpp"
#include "cuda/codecs/codec_params.hpp"
#include "cuda/codecs/elementwise_kernels.hpp"
#include "cuda/runtime/cuda_check.hpp"
#include "cuda/runtime/device.hpp"

namespace taco::gpu {

namespace {

constexpr int kThreads = 256;
// Tile values of one thread per tile live in shared memory, 8192 floats per block (32 KiB): a
// tile of 1024 runs 8 threads per block, a tile of 64 runs 128. Each thread's slice is tile + 1
// floats apart, so element i of every slice falls in a different bank.
constexpr int kSharedFloats = 8192;

int tile_threads(int tile) {
  return std::max(1, std::min(kThreads, kSharedFloats / tile));
}
size_t tile_shared_bytes(int tile) {
  return size_t(tile_threads(tile)) * size_t(tile + 1) * sizeof(float);
}
unsigned blocks(int64_t n, int threads) {
  return unsigned((n + threads - 1) / threads);
}

// The sent position of token r: the low group in index order, then the high group.
__device__ __forceinline__ int64_t sent_position(const tah::Layout& L, const int* is_lo,
                                                 const int* lo_before, int64_t r) {
  return is_lo[r] ? lo_before[r] : L.n_lo + (r - lo_before[r]);
}

// ---- encode ------------------------------------------------------------------------------------

// A warp per token: H[r] in the shared lane order; non-finite inputs counted.
__global__ void entropy_kernel(const float* x, tah::Layout L, double* H,
                               unsigned long long* nonfinite) {
  const int lane = threadIdx.x % tah::kLanes;
  const int64_t r = int64_t(blockIdx.x) * (blockDim.x / tah::kLanes) + threadIdx.x / tah::kLanes;
  if (r >= L.rows) return;
  const float* xr = x + r * L.cols;
  const unsigned full = 0xffffffffu;
  if (nonfinite) {
    unsigned long long n = 0;
    for (int64_t c = lane; c < L.cols; c += tah::kLanes)
      n += (__float_as_uint(xr[c]) & 0x7f800000u) == 0x7f800000u;
    for (int s = tah::kLanes / 2; s >= 1; s >>= 1) n += __shfl_down_sync(full, n, s);
    if (lane == 0 && n) atomicAdd(nonfinite, n);
  }
  double sum = tah::lane_abs_sum(xr, L.cols, lane);
  for (int s = tah::kLanes / 2; s >= 1; s >>= 1)
    sum = tah::add_rn(sum, __shfl_down_sync(full, sum, s));
  const double denom = tah::add_rn(__shfl_sync(full, sum, 0), tah::kEps);
  double h = tah::lane_neg_plogp(xr, L.cols, lane, denom);
  for (int s = tah::kLanes / 2; s >= 1; s >>= 1) h = tah::add_rn(h, __shfl_down_sync(full, h, s));
  if (lane == 0) H[r] = h;
}

__global__ void iota_kernel(int* v, int64_t n) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) v[i] = int(i);
}

// The first n_lo tokens of the (entropy, index) order are the low-precision ones.
__global__ void mark_low_kernel(const int* by_entropy, int64_t n_lo, int* is_lo) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n_lo) is_lo[by_entropy[i]] = 1;
}

// Byte b of an LSB-first bitmap of n flags.
__global__ void bitmap_kernel(const int* flags, int64_t n, uint8_t* out) {
  const int64_t b = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (b >= (n + 7) / 8) return;
  uint32_t v = 0;
  for (int i = 0; i < 8 && 8 * b + i < n; ++i) v |= uint32_t(flags[8 * b + i] != 0) << i;
  out[b] = uint8_t(v);
}

// A thread per tile (token r, tile j): codes, zero and scale into the wire, flag and pivot aside.
__global__ void encode_tiles_kernel(const float* x, tah::Layout L, const int* is_lo,
                                    const int* lo_before, uint8_t* wire, int* flag, uint8_t* pivot,
                                    unsigned long long* saturated) {
  extern __shared__ float slices[];
  const int64_t t = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (t >= L.tiles) return;
  const int64_t r = t / L.tiles_per_row, j = t % L.tiles_per_row;
  const int64_t p = sent_position(L, is_lo, lo_before, r);
  const int64_t ti = p * L.tiles_per_row + j;
  const int bits = L.bits_of(p);
  float* v = slices + size_t(threadIdx.x) * size_t(L.tile + 1);
  const float* xt = x + r * L.cols + j * L.tile;
  for (int i = 0; i < L.tile; ++i) v[i] = tah::finite_or_zero(xt[i]);
  const tah::TileCode c = tah::encode_tile(v, L.tile, bits, L.hscale,
                                           wire + L.codes + L.code_byte(p) + j * L.tile * bits / 8);
  uint8_t* z = wire + L.zeros + 2 * ti;
  uint8_t* s = wire + L.scales + 2 * ti;
  z[0] = uint8_t(c.zero);
  z[1] = uint8_t(c.zero >> 8);
  s[0] = uint8_t(c.scale);
  s[1] = uint8_t(c.scale >> 8);
  flag[ti] = c.flagged;
  pivot[ti] = uint8_t(c.pivot);
  if (saturated && c.saturated) atomicAdd(saturated, (unsigned long long)c.saturated);
}

// Flagged tile ti puts its pivot at bit pivot_bits * k, k = the flagged tiles before it, into
// 32-bit words (zeroed; little-endian, so their bytes are the LSB-first stream).
__global__ void pivots_kernel(const int* flag, const int* k_before, const uint8_t* pivot,
                              tah::Layout L, uint32_t* words) {
  const int64_t ti = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (ti >= L.tiles || !flag[ti]) return;
  const int64_t bit = int64_t(k_before[ti]) * L.pivot_bits;
  const uint64_t v = uint64_t(pivot[ti]) << (bit & 31);
  atomicOr(words + (bit >> 5), uint32_t(v));
  if (v >> 32) atomicOr(words + (bit >> 5) + 1, uint32_t(v >> 32));
}

// ---- decode ------------------------------------------------------------------------------------

__global__ void unpack_maps_kernel(const uint8_t* wire, tah::Layout L, int* is_lo, int* flag) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < L.rows) is_lo[i] = int(tah::get_bits(wire + L.token_map, i, 1));
  if (i < L.tiles) flag[i] = int(tah::get_bits(wire + L.tile_map, i, 1));
}

// A thread per tile: out (accumulate: out + value) for token r's tile j. A wire whose token
// bitmap does not mark n_lo tokens (the CPU refuses it) decodes to zeros where positions fall
// outside the block, never outside the buffers.
__global__ void decode_tiles_kernel(const uint8_t* wire, tah::Layout L, const int* is_lo,
                                    const int* lo_before, const int* flag, const int* k_before,
                                    float* out, bool accumulate) {
  extern __shared__ float slices[];
  const int64_t t = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (t >= L.tiles) return;
  const int64_t r = t / L.tiles_per_row, j = t % L.tiles_per_row;
  const int64_t p = sent_position(L, is_lo, lo_before, r);
  float* v = slices + size_t(threadIdx.x) * size_t(L.tile + 1);
  if (p < L.rows) {
    const int64_t ti = p * L.tiles_per_row + j;
    const int bits = L.bits_of(p);
    const uint8_t* z = wire + L.zeros + 2 * ti;
    const uint8_t* s = wire + L.scales + 2 * ti;
    const bool flagged = flag[ti] != 0;
    const int piv = flagged ? int(tah::get_bits(wire + L.pivots,
                                                int64_t(k_before[ti]) * L.pivot_bits, L.pivot_bits))
                            : 0;
    tah::decode_tile(wire + L.codes + L.code_byte(p) + j * L.tile * bits / 8, L.tile, bits,
                     uint16_t(z[0] | (z[1] << 8)), uint16_t(s[0] | (s[1] << 8)), flagged, piv,
                     L.hscale, v);
  } else {
    for (int i = 0; i < L.tile; ++i) v[i] = 0.0f;
  }
  float* o = out + r * L.cols + j * L.tile;
  for (int i = 0; i < L.tile; ++i) o[i] = accumulate ? add_rn(o[i], v[i]) : v[i];
}

void require_value_type(DType t, const char* what) {
  TACO_REQUIRE_INPUT(t == DType::F32 || t == DType::BF16 || t == DType::F16,
                     "GPU codec tahquant: {} must be f32, bf16 or f16, not {}", what,
                     dtype_name(t));
}

// CUB's temporary storage for a radix sort of rows (double, int) pairs and the exclusive sums
// of up to n ints.
size_t cub_bytes(int rows, int n) {
  size_t sort = 0, scan = 0;
  TACO_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(
      nullptr, sort, static_cast<const double*>(nullptr), static_cast<double*>(nullptr),
      static_cast<const int*>(nullptr), static_cast<int*>(nullptr), rows));
  TACO_CUDA_CHECK(cub::DeviceScan::ExclusiveSum(nullptr, scan, static_cast<const int*>(nullptr),
                                                static_cast<int*>(nullptr), n));
  return std::max<size_t>(std::max(sort, scan), 1);
}

// Exclusive prefix sums of the maps of one block (tokens and tiles).
void exclusive_sums(const int* is_lo, int* lo_before, const int* flag, int* k_before,
                    const tah::Layout& L, void* temp, size_t temp_bytes, cudaStream_t stream) {
  size_t b = temp_bytes;
  TACO_CUDA_CHECK(cub::DeviceScan::ExclusiveSum(temp, b, is_lo, lo_before, int(L.rows), stream));
  b = temp_bytes;
  TACO_CUDA_CHECK(cub::DeviceScan::ExclusiveSum(temp, b, flag, k_before, int(L.tiles), stream));
}

}  // namespace

GpuTahQuant::GpuTahQuant(const VariantSpec& spec) : cpu_(spec.tah, canonical_variant(spec)) {
  TACO_REQUIRE_INPUT(spec.family == VariantSpec::Family::TahQuant,
                     "GpuTahQuant: variant '{}' is not TAH-Quant", canonical_variant(spec));
}

int64_t GpuTahQuant::chunk_bytes(int64_t rows, int64_t cols) const {
  const tah::Layout L = cpu_.layout(rows, cols);  // InputError for a shape it cannot take
  // CUB's sizes and the pivot positions are ints.
  TACO_REQUIRE_INPUT(L.tiles * L.pivot_bits < (int64_t(1) << 31),
                     "GPU codec {}: [{}, {}] has too many tiles for one block", name(), rows, cols);
  return L.bound;
}

void GpuTahQuant::encode_block(const float* x, const tah::Layout& L, uint8_t* wire,
                               cudaStream_t stream, unsigned long long* stats) const {
  const int rows = int(L.rows);
  const size_t temp_bytes = cub_bytes(rows, int(std::max(L.rows, L.tiles)));
  const int64_t pivot_words = (L.tiles * L.pivot_bits + 31) / 32 + 1;
  StreamScratch H(size_t(rows) * 8, stream), H_sorted(size_t(rows) * 8, stream),
      idx(size_t(rows) * 4, stream), by_entropy(size_t(rows) * 4, stream),
      is_lo(size_t(rows) * 4, stream), lo_before(size_t(rows) * 4, stream),
      flag(size_t(L.tiles) * 4, stream), k_before(size_t(L.tiles) * 4, stream),
      pivot(size_t(L.tiles), stream), words(size_t(pivot_words) * 4, stream),
      temp(temp_bytes, stream);
  int* lo = static_cast<int*>(is_lo.get());
  TACO_CUDA_CHECK(cudaMemsetAsync(lo, 0, size_t(rows) * 4, stream));
  TACO_CUDA_CHECK(cudaMemsetAsync(words.get(), 0, size_t(pivot_words) * 4, stream));

  // 1-2. entropy, then the n_lo lowest (stable: ties in token order, as std::stable_sort)
  entropy_kernel<<<blocks(L.rows, kThreads / tah::kLanes), kThreads, 0, stream>>>(
      x, L, static_cast<double*>(H.get()), stats ? stats + 1 : nullptr);
  TACO_CUDA_CHECK_LAUNCH("TAH-Quant entropy kernel", stream);
  if (L.n_lo > 0) {
    iota_kernel<<<blocks(L.rows, kThreads), kThreads, 0, stream>>>(static_cast<int*>(idx.get()),
                                                                   L.rows);
    TACO_CUDA_CHECK_LAUNCH("TAH-Quant iota kernel", stream);
    size_t b = temp_bytes;
    TACO_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(
        temp.get(), b, static_cast<const double*>(H.get()), static_cast<double*>(H_sorted.get()),
        static_cast<const int*>(idx.get()), static_cast<int*>(by_entropy.get()), rows, 0, 64,
        stream));
    mark_low_kernel<<<blocks(L.n_lo, kThreads), kThreads, 0, stream>>>(
        static_cast<const int*>(by_entropy.get()), L.n_lo, lo);
    TACO_CUDA_CHECK_LAUNCH("TAH-Quant low-token kernel", stream);
  }
  size_t b = temp_bytes;
  TACO_CUDA_CHECK(cub::DeviceScan::ExclusiveSum(temp.get(), b, lo,
                                                static_cast<int*>(lo_before.get()), rows, stream));
  bitmap_kernel<<<blocks((L.rows + 7) / 8, kThreads), kThreads, 0, stream>>>(lo, L.rows,
                                                                             wire + L.token_map);
  TACO_CUDA_CHECK_LAUNCH("TAH-Quant token bitmap kernel", stream);

  // 3-4. tiles, in the sent order
  const int tt = tile_threads(L.tile);
  encode_tiles_kernel<<<blocks(L.tiles, tt), tt, tile_shared_bytes(L.tile), stream>>>(
      x, L, lo, static_cast<const int*>(lo_before.get()), wire, static_cast<int*>(flag.get()),
      static_cast<uint8_t*>(pivot.get()), stats);
  TACO_CUDA_CHECK_LAUNCH("TAH-Quant tile encode kernel", stream);
  bitmap_kernel<<<blocks((L.tiles + 7) / 8, kThreads), kThreads, 0, stream>>>(
      static_cast<const int*>(flag.get()), L.tiles, wire + L.tile_map);
  TACO_CUDA_CHECK_LAUNCH("TAH-Quant tile bitmap kernel", stream);
  b = temp_bytes;
  TACO_CUDA_CHECK(cub::DeviceScan::ExclusiveSum(temp.get(), b, static_cast<const int*>(flag.get()),
                                                static_cast<int*>(k_before.get()), int(L.tiles),
                                                stream));
  pivots_kernel<<<blocks(L.tiles, kThreads), kThreads, 0, stream>>>(
      static_cast<const int*>(flag.get()), static_cast<const int*>(k_before.get()),
      static_cast<const uint8_t*>(pivot.get()), L, static_cast<uint32_t*>(words.get()));
  TACO_CUDA_CHECK_LAUNCH("TAH-Quant pivot kernel", stream);
  // The pivot stream up to the bound: the flagged tiles' bits, then zeros.
  TACO_CUDA_CHECK(cudaMemcpyAsync(wire + L.pivots, words.get(), size_t(L.bound - L.pivots),
                                  cudaMemcpyDeviceToDevice, stream));
}

void GpuTahQuant::decode_block(const uint8_t* wire, const tah::Layout& L, float* out,
                               bool accumulate, cudaStream_t stream) const {
  const size_t temp_bytes = cub_bytes(int(L.rows), int(std::max(L.rows, L.tiles)));
  StreamScratch is_lo(size_t(L.rows) * 4, stream), lo_before(size_t(L.rows) * 4, stream),
      flag(size_t(L.tiles) * 4, stream), k_before(size_t(L.tiles) * 4, stream),
      temp(temp_bytes, stream);
  unpack_maps_kernel<<<blocks(std::max(L.rows, L.tiles), kThreads), kThreads, 0, stream>>>(
      wire, L, static_cast<int*>(is_lo.get()), static_cast<int*>(flag.get()));
  TACO_CUDA_CHECK_LAUNCH("TAH-Quant bitmap unpack kernel", stream);
  exclusive_sums(static_cast<const int*>(is_lo.get()), static_cast<int*>(lo_before.get()),
                 static_cast<const int*>(flag.get()), static_cast<int*>(k_before.get()), L,
                 temp.get(), temp_bytes, stream);
  const int tt = tile_threads(L.tile);
  decode_tiles_kernel<<<blocks(L.tiles, tt), tt, tile_shared_bytes(L.tile), stream>>>(
      wire, L, static_cast<const int*>(is_lo.get()), static_cast<const int*>(lo_before.get()),
      static_cast<const int*>(flag.get()), static_cast<const int*>(k_before.get()), out,
      accumulate);
  TACO_CUDA_CHECK_LAUNCH("TAH-Quant tile decode kernel", stream);
}

void GpuTahQuant::encode(const void* in, DType in_type, int64_t chunks, int64_t rows, int64_t cols,
                         uint8_t* wire, cudaStream_t stream, unsigned long long* stats) const {
  require_value_type(in_type, "the input");
  const int64_t bytes = chunk_bytes(rows, cols);
  const tah::Layout L = cpu_.layout(rows, cols);
  const int64_t n = rows * cols;
  const float* x = static_cast<const float*>(in);
  std::unique_ptr<StreamScratch> widened;
  if (in_type != DType::F32) {  // exact: the CPU codec sees the same floats
    widened = std::make_unique<StreamScratch>(size_t(chunks * n) * 4, stream);
    ew::convert(in, in_type, widened->get(), DType::F32, chunks * n, stream);
    x = widened->f32();
  }
  for (int64_t c = 0; c < chunks; ++c) encode_block(x + c * n, L, wire + c * bytes, stream, stats);
}

void GpuTahQuant::encode_ef(const void* in, DType in_type, float* residual, int64_t chunks,
                            int64_t rows, int64_t cols, uint8_t* wire, cudaStream_t stream,
                            unsigned long long* stats) const {
  require_value_type(in_type, "the input");
  (void)chunk_bytes(rows, cols);  // InputError for a bad shape
  encode_ef_round_trip(in, in_type, residual, chunks, rows, cols, wire, stream, stats);
}

void GpuTahQuant::decode_reduce(const std::vector<const uint8_t*>& srcs, int64_t chunks,
                                int64_t rows, int64_t cols, void* out, DType out_type,
                                cudaStream_t stream) const {
  require_value_type(out_type, "the output");
  TACO_REQUIRE_INPUT(!srcs.empty() && srcs.size() <= size_t(kMaxSources),
                     "GPU codec {}: decode-reduce takes 1..{} inputs, got {}", name(), kMaxSources,
                     srcs.size());
  const int64_t bytes = chunk_bytes(rows, cols);
  const tah::Layout L = cpu_.layout(rows, cols);
  const int64_t n = rows * cols;
  std::unique_ptr<StreamScratch> sum;
  float* acc = static_cast<float*>(out);
  if (out_type != DType::F32) {  // the sum in fp32, then one rounding
    sum = std::make_unique<StreamScratch>(size_t(chunks * n) * 4, stream);
    acc = sum->f32();
  }
  for (int64_t c = 0; c < chunks; ++c)
    for (size_t k = 0; k < srcs.size(); ++k)
      decode_block(srcs[k] + c * bytes, L, acc + c * n, k > 0, stream);
  if (sum) ew::convert(acc, DType::F32, out, out_type, chunks * n, stream);
}

void GpuTahQuant::decode_reduce_encode(const std::vector<const uint8_t*>& srcs, int64_t chunks,
                                       int64_t rows, int64_t cols, uint8_t* wire_out,
                                       bool round_bf16, cudaStream_t stream,
                                       unsigned long long* stats) const {
  const int64_t n = chunks * rows * cols;
  StreamScratch sum(size_t(n) * 4, stream);
  decode_reduce(srcs, chunks, rows, cols, sum.get(), DType::F32, stream);
  if (!round_bf16)
    return encode(sum.get(), DType::F32, chunks, rows, cols, wire_out, stream, stats);
  StreamScratch rounded(size_t(n) * 2, stream);  // the owner's bf16 shard, as the CPU rounds it
  ew::convert(sum.get(), DType::F32, rounded.get(), DType::BF16, n, stream);
  encode(rounded.get(), DType::BF16, chunks, rows, cols, wire_out, stream, stats);
}

void GpuTahQuant::decode_add_encode(const uint8_t* wire_in, const void* own, DType own_type,
                                    int64_t rows, int64_t cols, uint8_t* wire_out, float* scratch,
                                    cudaStream_t stream) const {
  require_value_type(own_type, "the own chunk");
  decode_add_encode_round_trip(wire_in, own, own_type, rows, cols, wire_out, scratch, stream);
}

// Our launches and CUB calls per block (CUB's own kernels not counted apart).
int GpuTahQuant::encode_launches() const {
  return 12;  // 2 memsets, entropy, iota, sort, low mark, scan, 2 bitmaps, tiles, scan, pivots
}
int GpuTahQuant::decode_launches() const {
  return 4;  // bitmap unpack, 2 scans, tiles
}
int GpuTahQuant::decode_reduce_encode_launches() const {
  return decode_launches() + encode_launches();  // per source decoded, then one encode
}

std::string GpuTahQuant::kernel_config() const {
  const int tile = cpu_.spec().tile;
  return fmt::format("warp/token entropy, radix sort, thread/tile ({} per block)",
                     tile_threads(tile));
}

}  // namespace taco::gpu
