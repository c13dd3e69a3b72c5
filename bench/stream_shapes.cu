// taco_stream_shapes: the streaming rate of the codecs' traffic shapes on one GPU, as a share of
// the same-run device-to-device cudaMemcpy (the denominator of `taco bench`'s "% copy").
//
// An encode reads 2 B and writes 1.0625 B per element, a decode the reverse; `taco bench` counts
// both against a copy (2 B read, 2 B written). These kernels do no codec work at all, only the
// traffic: expand (1 B read, 2 B written: the decode's shape) and shrink (2 B read, 1 B written:
// the encode's shape), each at several block shapes, with plain 16-byte stores, streaming stores,
// or (expand) shared memory and bulk (TMA) stores, and (expand) with one or four loads in flight
// per thread, or with bulk loads through per-warp rings of shared-memory stages (the streaming
// decode's scheme). What the best of them reaches is what a kernel of that shape can reach on
// the machine.
// Cold like `taco bench` (its Timer): the L2 is flushed (a memset of max(2 x L2, 128 MiB)) before
// every sample; median of the samples after three warm-ups.
//
//   taco_stream_shapes [--sizes 256M,1G] [--samples 25] [--device 0]
// Built on the project's pieces: `Timer::cold` (the L2 flush and CUDA-event samples of `taco
// bench`), `DeviceBuffer`, checked CUDA calls, and the CLI's size lists.
#include <cuda_runtime.h>
#include <CLI/CLI.hpp>

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "apps/cli_main.hpp"
#include "apps/cli_parse.hpp"
#include "core/error.hpp"
#include "cuda/bench/bench_timer.hpp"
#include "cuda/runtime/bulk_copy.cuh"
#include "cuda/runtime/cuda_check.hpp"
#include "cuda/runtime/device.hpp"

namespace {

using taco::gpu::DeviceBuffer;
using namespace taco::gpu::detail;  // the bulk-copy wrappers (cuda/runtime/bulk_copy.cuh)

// The eight bytes of a and b, each as the high byte of a 16-bit half (a decode's output width).
__device__ __forceinline__ uint4 widen(uint32_t a, uint32_t b) {
  return make_uint4(__byte_perm(a, 0, 0x1404), __byte_perm(a, 0, 0x3424), __byte_perm(b, 0, 0x1404),
                    __byte_perm(b, 0, 0x3424));
}

// n16 vectors of 16 codes in, 2 x n16 vectors out (grid-stride; n16 whole). Each thread issues
// kLoads loads (kLoads grid strides apart) before its stores: more bytes in flight per thread,
// as a codec kernel that loads ahead has.
template <bool kStreaming, int kLoads>
__global__ void expand(const uint4* __restrict__ in, uint4* __restrict__ out, size_t n16) {
  const size_t stride = size_t(gridDim.x) * blockDim.x;
  for (size_t i0 = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i0 < n16; i0 += kLoads * stride) {
    uint4 v[kLoads];
#pragma unroll
    for (int u = 0; u < kLoads; ++u) {
      const size_t i = i0 + u * stride;
      v[u] = i < n16 ? __ldg(in + i) : make_uint4(0, 0, 0, 0);
    }
#pragma unroll
    for (int u = 0; u < kLoads; ++u) {
      const size_t i = i0 + u * stride;
      if (i >= n16) break;
      const uint4 a = widen(v[u].x, v[u].y), b = widen(v[u].z, v[u].w);
      if (kStreaming) {
        __stcs(out + 2 * i, a);
        __stcs(out + 2 * i + 1, b);
      } else {
        out[2 * i] = a;
        out[2 * i + 1] = b;
      }
    }
  }
}

// The same through shared memory: each block iteration widens kLoads x blockDim.x consecutive
// vectors (each thread's kLoads loads issued first) into one of two stages, and one thread stores
// the stage with one bulk copy (n16 a multiple of kLoads x blockDim.x).
template <int kLoads>
__global__ void expand_bulk(const uint4* __restrict__ in, uint4* __restrict__ out, size_t n16) {
  extern __shared__ __align__(128) uint4 stage_mem[];
  const int t = threadIdx.x, T = blockDim.x, tile = kLoads * T;
  int stage = 0;
  for (size_t base = size_t(blockIdx.x) * tile; base < n16; base += size_t(gridDim.x) * tile) {
    uint4 v[kLoads];
#pragma unroll
    for (int u = 0; u < kLoads; ++u) v[u] = __ldg(in + base + u * T + t);
    // the bulk store that last read this stage (two iterations ago) must be done with it
    if (t == 0) bulk_wait_read<1>();
    __syncthreads();
    uint4* s = stage_mem + stage * 2 * tile;
#pragma unroll
    for (int u = 0; u < kLoads; ++u) {
      s[2 * (u * T + t)] = widen(v[u].x, v[u].y);
      s[2 * (u * T + t) + 1] = widen(v[u].z, v[u].w);
    }
    fence_shared_for_bulk();
    __syncthreads();
    if (t == 0) bulk_store(out + 2 * base, s, uint32_t(tile * 32));
    stage ^= 1;
  }
  if (t == 0) bulk_wait_all();
}

// Per-warp pipelines, as a decode kernel whose warps stream independently would run them: each
// warp takes tiles of 32 x kVec input vectors (grid-stride over warps); lane 0 keeps kStages
// tiles on their way with bulk (TMA) loads into the warp's ring of shared-memory stages (an
// mbarrier per stage), so the loads in flight need no registers. The widened output goes out as
// 16-byte stores, or (kBulkStore) through two output stages and one bulk store per tile.
constexpr int kMaxWarpsPerBlock = 8;

template <int kStages, int kVec, bool kBulkStore>
__host__ __device__ constexpr int tma_warp_vectors() {
  return kStages * 32 * kVec + (kBulkStore ? 2 * 2 * 32 * kVec : 0);
}

template <int kStages, int kVec, bool kBulkStore>
__global__ void expand_tma(const uint4* __restrict__ in, uint4* __restrict__ out, size_t n16) {
  extern __shared__ __align__(128) uint4 tma_mem[];
  __shared__ __align__(8) uint64_t bars[kMaxWarpsPerBlock][kStages];
  constexpr int kTile = 32 * kVec;
  const int lane = int(threadIdx.x & 31), w = int(threadIdx.x >> 5), wpb = int(blockDim.x >> 5);
  uint4* ring = tma_mem + w * tma_warp_vectors<kStages, kVec, kBulkStore>();
  uint4* ostage = ring + kStages * kTile;
  uint64_t* full = bars[w];
  const size_t ntiles = n16 / kTile, nw = size_t(gridDim.x) * wpb;
  const size_t first = size_t(blockIdx.x) * wpb + w;
  const auto fetch = [&](int s, size_t t) {  // lane 0: tile t into stage s
    mbar_arrive_expect(&full[s], kTile * 16);
    bulk_load(ring + s * kTile, in + t * kTile, kTile * 16, &full[s]);
  };
  if (lane == 0) {
    for (int s = 0; s < kStages; ++s) mbar_init(&full[s]);
    mbar_init_fence();
    for (int s = 0; s < kStages; ++s)
      if (first + s * nw < ntiles) fetch(s, first + s * nw);
  }
  __syncwarp();
  int k = 0;
  for (size_t t = first; t < ntiles; t += nw, ++k) {
    const int s = k % kStages;
    mbar_wait(&full[s], uint32_t(k / kStages) & 1u);
    uint4 v[kVec];
#pragma unroll
    for (int u = 0; u < kVec; ++u) v[u] = ring[s * kTile + u * 32 + lane];
    __syncwarp();  // every lane has read stage s: refill it
    if (lane == 0) {
      const size_t tn = t + kStages * nw;
      if (tn < ntiles) fetch(s, tn);
    }
    if constexpr (!kBulkStore) {
#pragma unroll
      for (int u = 0; u < kVec; ++u) {
        const size_t i = t * kTile + u * 32 + lane;
        out[2 * i] = widen(v[u].x, v[u].y);
        out[2 * i + 1] = widen(v[u].z, v[u].w);
      }
    } else {
      uint4* o = ostage + (k & 1) * 2 * kTile;
      // the bulk store that last read this output stage (two tiles ago) must be done with it
      if (lane == 0) bulk_wait_read<1>();
      __syncwarp();
#pragma unroll
      for (int u = 0; u < kVec; ++u) {
        o[2 * (u * 32 + lane)] = widen(v[u].x, v[u].y);
        o[2 * (u * 32 + lane) + 1] = widen(v[u].z, v[u].w);
      }
      fence_shared_for_bulk();
      __syncwarp();
      if (lane == 0) bulk_store(out + 2 * t * kTile, o, uint32_t(2 * kTile * 16));
    }
  }
  if (kBulkStore && lane == 0) bulk_wait_all();
}

__global__ void fill_pattern(uint32_t* p, size_t n) {
  for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += size_t(gridDim.x) * blockDim.x)
    p[i] = uint32_t(i) * 2654435761u;
}

// 2 x n16 vectors of bf16 in, n16 vectors of their high bytes out.
template <bool kStreaming>
__global__ void shrink(const uint4* __restrict__ in, uint4* __restrict__ out, size_t n16) {
  for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n16;
       i += size_t(gridDim.x) * blockDim.x) {
    const uint4 a = __ldg(in + 2 * i), b = __ldg(in + 2 * i + 1);
    const uint4 o = make_uint4(__byte_perm(a.x, a.y, 0x7531), __byte_perm(a.z, a.w, 0x7531),
                               __byte_perm(b.x, b.y, 0x7531), __byte_perm(b.z, b.w, 0x7531));
    if (kStreaming)
      __stcs(out + i, o);
    else
      out[i] = o;
  }
}

// Sizes in bytes of bf16 input (K/M/G binary), each a multiple of 16 KiB (whole stages of the
// bulk kernel).
std::vector<size_t> parse_sizes(const std::string& list) {
  std::vector<size_t> sizes;
  for (const auto& s : taco::cli::split_list(list, "--sizes")) {
    const int64_t bytes = taco::cli::parse_bytes(s, "--sizes");
    TACO_REQUIRE_INPUT(bytes % 16384 == 0 && bytes <= (int64_t(16) << 30),
                       "--sizes '{}': must be a multiple of 16K up to 16G", s);
    sizes.push_back(size_t(bytes));
  }
  return sizes;
}

void run(const std::vector<size_t>& sizes, int samples, int device) {
  TACO_CUDA_CHECK(cudaSetDevice(device));
  const taco::gpu::DeviceInfo dev = taco::gpu::query_device(device);
  const int sms = dev.sm_count;
  const taco::gpu::CudaStream stream;
  taco::gpu::TimingOptions opts;  // exactly `samples` samples after 3 warm-ups
  opts.warmup = 3;
  opts.min_samples = opts.max_samples = samples;
  opts.min_time_s = 0;
  opts.timeout_s = 1e9;
  taco::gpu::Timer timer(dev, opts, stream.get());
  std::printf(
      "# taco_stream_shapes: %s (%d SMs, L2 %d MiB), CUDA runtime %s, driver %s; cold (L2 "
      "flushed), "
      "median of %d samples\n",
      dev.name.c_str(), sms, dev.l2_bytes >> 20,
      taco::gpu::cuda_version_string(dev.runtime_version).c_str(),
      dev.driver_version.empty() ? "?" : dev.driver_version.c_str(), samples);
  std::printf(
      "| bf16 size | shape | kernel | threads x blocks/SM | median us | GB/s | %% memcpy |\n");
  std::printf("|---:|---|---|---|---:|---:|---:|\n");

  for (const size_t bytes : sizes) {
    const size_t elems = bytes / 2, n16 = elems / 16;
    const DeviceBuffer src(bytes, "cudaMalloc(input)"), dst(bytes, "cudaMalloc(output)");
    const cudaStream_t st = stream.get();
    fill_pattern<<<unsigned(sms * 4), 256, 0, st>>>(src.as<uint32_t>(), bytes / 4);
    TACO_CUDA_CHECK_LAUNCH("fill_pattern", st);
    const auto* in = src.as<const uint4>();
    auto* out = dst.as<uint4>();
    const double copy_us = timer
                               .cold([&](int) {
                                 TACO_CUDA_CHECK(cudaMemcpyAsync(dst.get(), src.get(), bytes,
                                                                 cudaMemcpyDeviceToDevice, st));
                               })
                               .median_us;
    const double copy_gbs = 2.0 * double(bytes) / copy_us / 1e3;
    auto row = [&](const char* shape, const char* kernel, const std::string& grid, double logical,
                   double us) {
      const double gbs = logical / us / 1e3;
      std::printf("| %zu MiB | %s | %s | %s | %.1f | %.0f | %.1f |\n", bytes >> 20, shape, kernel,
                  grid.c_str(), us, gbs, 100.0 * gbs / copy_gbs);
    };
    row("copy 2:2", "cudaMemcpy D2D", "-", 2.0 * double(bytes), copy_us);
    struct Shape {
      int threads, bpsm;
      std::string name() const { return std::to_string(threads) + " x " + std::to_string(bpsm); }
    };
    auto median_us = [&](const char* what, auto&& launch) {
      return timer
          .cold([&](int) {
            launch();
            TACO_CUDA_CHECK_LAUNCH(what, st);
          })
          .median_us;
    };
    const double logical = 3.0 * double(elems);
    for (const Shape c :
         {Shape{128, 4}, Shape{128, 6}, Shape{128, 8}, Shape{256, 3}, Shape{256, 4}}) {
      const unsigned grid = unsigned(sms * c.bpsm);
      row("expand 1:2", "16-B stores", c.name(), logical,
          median_us("expand", [&] { expand<false, 1><<<grid, c.threads, 0, st>>>(in, out, n16); }));
      row("expand 1:2", "streaming stores", c.name(), logical,
          median_us("expand", [&] { expand<true, 1><<<grid, c.threads, 0, st>>>(in, out, n16); }));
      row("shrink 2:1", "16-B stores", c.name(), logical,
          median_us("shrink", [&] { shrink<false><<<grid, c.threads, 0, st>>>(in, out, n16); }));
    }
    // Four loads in flight per thread before its stores.
    for (const Shape c : {Shape{128, 4}, Shape{128, 8}, Shape{256, 4}}) {
      const unsigned grid = unsigned(sms * c.bpsm);
      row("expand 1:2", "16-B stores, 4 loads ahead", c.name(), logical,
          median_us("expand", [&] { expand<false, 4><<<grid, c.threads, 0, st>>>(in, out, n16); }));
      row("expand 1:2", "streaming stores, 4 loads ahead", c.name(), logical,
          median_us("expand", [&] { expand<true, 4><<<grid, c.threads, 0, st>>>(in, out, n16); }));
    }
    auto bulk_rows = [&](auto kernel, int loads, const char* name,
                         std::initializer_list<Shape> shapes) {
      for (const Shape c : shapes) {
        const int smem = 2 * loads * c.threads * 32;
        TACO_CUDA_CHECK(
            cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
        row("expand 1:2", name, c.name(), logical, median_us("expand_bulk", [&] {
              kernel<<<unsigned(sms * c.bpsm), c.threads, smem, st>>>(in, out, n16);
            }));
      }
    };
    bulk_rows(expand_bulk<1>, 1, "bulk (TMA) stores",
              {Shape{256, 4}, Shape{256, 6}, Shape{256, 8}, Shape{512, 3}, Shape{512, 4}});
    bulk_rows(expand_bulk<4>, 4, "bulk (TMA) stores, 4 loads ahead",
              {Shape{128, 4}, Shape{128, 6}});
    // Bulk (TMA) loads through per-warp rings, 16-byte or bulk stores.
    struct TmaShape {
      Shape shape;
      int stages, vec;
    };
    auto tma_rows = [&](auto kernel, int warp_vectors, const char* name,
                        std::initializer_list<TmaShape> shapes) {
      for (const TmaShape c : shapes) {
        const int smem = c.shape.threads / 32 * warp_vectors * 16;
        TACO_ASSERT(c.shape.threads / 32 <= kMaxWarpsPerBlock,
                    "expand_tma: too many warps per block");
        TACO_CUDA_CHECK(
            cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
        const std::string label = std::string(name) + ", " + std::to_string(c.stages) +
                                  " stages of " + std::to_string(c.vec * 512) + " B";
        row("expand 1:2", label.c_str(), c.shape.name(), logical, median_us("expand_tma", [&] {
              kernel<<<unsigned(sms * c.shape.bpsm), c.shape.threads, smem, st>>>(in, out, n16);
            }));
      }
    };
    tma_rows(expand_tma<4, 2, false>, tma_warp_vectors<4, 2, false>(), "TMA loads, 16-B stores",
             {TmaShape{Shape{128, 4}, 4, 2}, TmaShape{Shape{128, 6}, 4, 2}});
    tma_rows(expand_tma<8, 2, false>, tma_warp_vectors<8, 2, false>(), "TMA loads, 16-B stores",
             {TmaShape{Shape{128, 4}, 8, 2}});
    tma_rows(expand_tma<4, 2, true>, tma_warp_vectors<4, 2, true>(), "TMA loads, bulk stores",
             {TmaShape{Shape{128, 3}, 4, 2}, TmaShape{Shape{128, 4}, 4, 2},
              TmaShape{Shape{128, 5}, 4, 2}, TmaShape{Shape{128, 6}, 4, 2},
              TmaShape{Shape{256, 3}, 4, 2}});
    tma_rows(expand_tma<8, 2, true>, tma_warp_vectors<8, 2, true>(), "TMA loads, bulk stores",
             {TmaShape{Shape{128, 3}, 8, 2}, TmaShape{Shape{128, 4}, 8, 2}});
    tma_rows(expand_tma<4, 4, true>, tma_warp_vectors<4, 4, true>(), "TMA loads, bulk stores",
             {TmaShape{Shape{128, 2}, 4, 4}, TmaShape{Shape{128, 3}, 4, 4}});
    // Every variant writes what the plain one does.
    std::vector<unsigned char> plain(bytes), other(bytes);
    auto written = [&](std::vector<unsigned char>& to, auto&& launch) {
      TACO_CUDA_CHECK(cudaMemsetAsync(dst.get(), 0, bytes, st));
      launch();
      TACO_CUDA_CHECK_LAUNCH("expand", st);
      TACO_CUDA_CHECK(cudaMemcpyAsync(to.data(), dst.get(), bytes, cudaMemcpyDeviceToHost, st));
      stream.synchronize();
    };
    written(plain, [&] { expand<false, 1><<<unsigned(sms * 4), 128, 0, st>>>(in, out, n16); });
    written(other, [&] { expand<true, 4><<<unsigned(sms * 4), 128, 0, st>>>(in, out, n16); });
    if (plain != other)
      throw taco::Error("the 4-loads expand wrote other bytes than the plain one");
    written(other,
            [&] { expand_bulk<1><<<unsigned(sms * 4), 256, 2 * 256 * 32, st>>>(in, out, n16); });
    if (plain != other) throw taco::Error("the bulk expand wrote other bytes than the plain one");
    written(other, [&] {
      expand_bulk<4><<<unsigned(sms * 4), 128, 2 * 4 * 128 * 32, st>>>(in, out, n16);
    });
    if (plain != other)
      throw taco::Error("the 4-loads bulk expand wrote other bytes than the plain one");
    written(other, [&] {
      expand_tma<4, 2, false>
          <<<unsigned(sms * 4), 128, 4 * tma_warp_vectors<4, 2, false>() * 16, st>>>(in, out, n16);
    });
    if (plain != other)
      throw taco::Error("the TMA-load expand wrote other bytes than the plain one");
    written(other, [&] {
      expand_tma<4, 2, true>
          <<<unsigned(sms * 4), 128, 4 * tma_warp_vectors<4, 2, true>() * 16, st>>>(in, out, n16);
    });
    if (plain != other)
      throw taco::Error("the TMA-load bulk-store expand wrote other bytes than the plain one");
  }
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "taco_stream_shapes: streaming rates of the codecs' traffic shapes against cudaMemcpy",
      "taco_stream_shapes"};
  std::string sizes = "256M,1G";
  int samples = 25, device = 0;
  app.add_option("--sizes", sizes,
                 "Comma-separated bf16 input sizes (K/M/G binary, multiples of 16K)")
      ->capture_default_str();
  app.add_option("--samples", samples, "Cold samples per measurement, after 3 warm-ups")
      ->check(CLI::Range(5, 1000))
      ->capture_default_str();
  app.add_option("--device", device, "CUDA device index")
      ->check(CLI::Range(0, 63))
      ->capture_default_str();
  return taco::cli::run_main(app, "taco_stream_shapes", argc, argv,
                             [&] { run(parse_sizes(sizes), samples, device); });
}
