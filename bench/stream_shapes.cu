// taco_stream_shapes: the streaming rate of the codecs' traffic shapes on one GPU, as a share of
// the same-run device-to-device cudaMemcpy (the denominator of `taco bench`'s "% copy").
//
// An encode reads 2 B and writes 1.0625 B per element, a decode the reverse; `taco bench` counts
// both against a copy (2 B read, 2 B written). These kernels do no codec work at all, only the
// traffic: expand (1 B read, 2 B written: the decode's shape) and shrink (2 B read, 1 B written:
// the encode's shape), each at several block shapes, with plain 16-byte stores, streaming stores,
// or (expand) shared memory and bulk (TMA) stores. What the best of them reaches is what a
// kernel of that shape can reach on the machine (bench/records/2026-12-02-h200-v44..v47).
// Cold like `taco bench`: the L2 is flushed (a memset of max(2 x L2, 128 MiB)) before every
// sample; median of the samples after three warm-ups.
//
//   taco_stream_shapes [--sizes 256M,1G] [--samples 25] [--device 0]
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

void check(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return;
  std::fprintf(stderr, "taco_stream_shapes: %s: %s\n", what, cudaGetErrorString(e));
  std::exit(1);
}

// The eight bytes of a and b, each as the high byte of a 16-bit half (a decode's output width).
__device__ __forceinline__ uint4 widen(uint32_t a, uint32_t b) {
  return make_uint4(__byte_perm(a, 0, 0x1404), __byte_perm(a, 0, 0x3424), __byte_perm(b, 0, 0x1404),
                    __byte_perm(b, 0, 0x3424));
}

// n16 vectors of 16 codes in, 2 x n16 vectors out (grid-stride; n16 whole).
template <bool kStreaming>
__global__ void expand(const uint4* __restrict__ in, uint4* __restrict__ out, size_t n16) {
  for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n16; i += size_t(gridDim.x) * blockDim.x) {
    const uint4 v = __ldg(in + i);
    const uint4 a = widen(v.x, v.y), b = widen(v.z, v.w);
    if (kStreaming) {
      __stcs(out + 2 * i, a);
      __stcs(out + 2 * i + 1, b);
    } else {
      out[2 * i] = a;
      out[2 * i + 1] = b;
    }
  }
}

// The same through shared memory: each block iteration widens blockDim.x vectors into one of two
// stages and one thread stores the stage with one bulk copy (n16 a multiple of blockDim.x).
__global__ void expand_bulk(const uint4* __restrict__ in, uint4* __restrict__ out, size_t n16) {
  extern __shared__ __align__(128) uint4 stage_mem[];
  const int t = threadIdx.x, T = blockDim.x;
  int stage = 0;
  for (size_t base = size_t(blockIdx.x) * T; base < n16; base += size_t(gridDim.x) * T) {
    const uint4 v = __ldg(in + base + t);
    // the bulk store that last read this stage (two iterations ago) must be done with it
    if (t == 0) asm volatile("cp.async.bulk.wait_group.read 1;" ::: "memory");
    __syncthreads();
    uint4* s = stage_mem + stage * 2 * T;
    s[2 * t] = widen(v.x, v.y);
    s[2 * t + 1] = widen(v.z, v.w);
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");  // visible to the bulk copy
    __syncthreads();
    if (t == 0) {
      const uint32_t src = uint32_t(__cvta_generic_to_shared(s));
      asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;" ::"l"(out + 2 * base), "r"(src),
                   "r"(T * 32)
                   : "memory");
      asm volatile("cp.async.bulk.commit_group;" ::: "memory");
    }
    stage ^= 1;
  }
  if (t == 0) asm volatile("cp.async.bulk.wait_group 0;" ::: "memory");
}

__global__ void fill_pattern(uint32_t* p, size_t n) {
  for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
    p[i] = uint32_t(i) * 2654435761u;
}

// 2 x n16 vectors of bf16 in, n16 vectors of their high bytes out.
template <bool kStreaming>
__global__ void shrink(const uint4* __restrict__ in, uint4* __restrict__ out, size_t n16) {
  for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n16; i += size_t(gridDim.x) * blockDim.x) {
    const uint4 a = __ldg(in + 2 * i), b = __ldg(in + 2 * i + 1);
    const uint4 o = make_uint4(__byte_perm(a.x, a.y, 0x7531), __byte_perm(a.z, a.w, 0x7531),
                               __byte_perm(b.x, b.y, 0x7531), __byte_perm(b.z, b.w, 0x7531));
    if (kStreaming) __stcs(out + i, o);
    else out[i] = o;
  }
}

[[noreturn]] void usage_error(const std::string& msg) {
  std::fprintf(stderr, "taco_stream_shapes: %s\nusage: taco_stream_shapes [--sizes 256M,1G] [--samples N] [--device N]\n",
               msg.c_str());
  std::exit(2);
}

// "256M", "1G", "65536": bytes of bf16 input (binary K/M/G), a positive multiple of 16 KiB (whole
// stages of the bulk kernel).
size_t parse_size(const std::string& s) {
  char* end = nullptr;
  const unsigned long long v = std::strtoull(s.c_str(), &end, 10);
  size_t mul = 1;
  const std::string unit(end);
  if (unit == "K") mul = size_t(1) << 10;
  else if (unit == "M") mul = size_t(1) << 20;
  else if (unit == "G") mul = size_t(1) << 30;
  else if (!unit.empty()) usage_error("bad size '" + s + "'");
  const size_t bytes = size_t(v) * mul;
  if (end == s.c_str() || bytes == 0 || bytes % 16384 != 0 || bytes > (size_t(16) << 30))
    usage_error("size '" + s + "' must be a multiple of 16K up to 16G");
  return bytes;
}

int parse_int(const std::string& s, const char* what, int lo, int hi) {
  char* end = nullptr;
  const long v = std::strtol(s.c_str(), &end, 10);
  if (end == s.c_str() || *end != '\0' || v < lo || v > hi) usage_error(std::string("bad ") + what + " '" + s + "'");
  return int(v);
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<size_t> sizes = {size_t(256) << 20, size_t(1) << 30};
  int samples = 25, device = 0;
  for (int a = 1; a < argc; ++a) {
    const std::string arg = argv[a];
    if (a + 1 >= argc) usage_error("missing value after '" + arg + "'");
    const std::string val = argv[++a];
    if (arg == "--sizes") {
      sizes.clear();
      for (size_t p = 0; p <= val.size();) {
        const size_t q = std::min(val.find(',', p), val.size());
        sizes.push_back(parse_size(val.substr(p, q - p)));
        p = q + 1;
      }
    } else if (arg == "--samples") {
      samples = parse_int(val, "sample count", 5, 1000);
    } else if (arg == "--device") {
      device = parse_int(val, "device", 0, 63);
    } else {
      usage_error("unknown option '" + arg + "'");
    }
  }
  check(cudaSetDevice(device), "cudaSetDevice");
  cudaDeviceProp prop{};
  check(cudaGetDeviceProperties(&prop, device), "cudaGetDeviceProperties");
  const int sms = prop.multiProcessorCount;
  const size_t flush_bytes = std::max(size_t(2) * size_t(prop.l2CacheSize), size_t(128) << 20);
  void* flush = nullptr;
  check(cudaMalloc(&flush, flush_bytes), "cudaMalloc(flush)");
  cudaEvent_t e0, e1;
  check(cudaEventCreate(&e0), "cudaEventCreate");
  check(cudaEventCreate(&e1), "cudaEventCreate");
  std::printf("# taco_stream_shapes: %s (%d SMs, L2 %d MiB); cold (L2 flushed), median of %d samples\n",
              prop.name, sms, prop.l2CacheSize >> 20, samples);
  std::printf("| bf16 size | shape | kernel | threads x blocks/SM | median us | GB/s | %% memcpy |\n");
  std::printf("|---:|---|---|---|---:|---:|---:|\n");

  for (const size_t bytes : sizes) {
    const size_t elems = bytes / 2, n16 = elems / 16;
    void *src = nullptr, *dst = nullptr;
    check(cudaMalloc(&src, bytes), "cudaMalloc(src)");
    check(cudaMalloc(&dst, bytes), "cudaMalloc(dst)");
    fill_pattern<<<unsigned(sms * 4), 256>>>(static_cast<uint32_t*>(src), bytes / 4);
    check(cudaGetLastError(), "fill_pattern");
    auto median_ms = [&](auto&& launch, const char* what) {
      std::vector<float> t;
      for (int s = 0; s < samples + 3; ++s) {
        check(cudaMemsetAsync(flush, s & 0xff, flush_bytes), "cudaMemsetAsync(flush)");
        check(cudaEventRecord(e0), "cudaEventRecord");
        launch();
        check(cudaGetLastError(), what);
        check(cudaEventRecord(e1), "cudaEventRecord");
        check(cudaEventSynchronize(e1), what);
        float ms = 0;
        check(cudaEventElapsedTime(&ms, e0, e1), "cudaEventElapsedTime");
        if (s >= 3) t.push_back(ms);
      }
      std::sort(t.begin(), t.end());
      return double(t[t.size() / 2]);
    };
    const double copy_ms = median_ms([&] { check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice), "cudaMemcpyAsync"); },
                                     "memcpy");
    const double copy_gbs = 2.0 * double(bytes) / copy_ms / 1e6;
    auto row = [&](const char* shape, const char* kernel, const std::string& grid, double logical, double ms) {
      const double gbs = logical / ms / 1e6;
      std::printf("| %zu MiB | %s | %s | %s | %.1f | %.0f | %.1f |\n", bytes >> 20, shape, kernel, grid.c_str(),
                  ms * 1e3, gbs, 100.0 * gbs / copy_gbs);
    };
    row("copy 2:2", "cudaMemcpy D2D", "-", 2.0 * double(bytes), copy_ms);
    const auto* in = static_cast<const uint4*>(src);
    auto* out = static_cast<uint4*>(dst);
    struct Shape {
      int threads, bpsm;
      std::string name() const { return std::to_string(threads) + " x " + std::to_string(bpsm); }
    };
    for (const Shape c : {Shape{128, 4}, Shape{128, 6}, Shape{128, 8}, Shape{256, 3}, Shape{256, 4}}) {
      const unsigned grid = unsigned(sms * c.bpsm);
      row("expand 1:2", "16-B stores", c.name(), 3.0 * double(elems),
          median_ms([&] { expand<false><<<grid, c.threads>>>(in, out, n16); }, "expand"));
      row("expand 1:2", "streaming stores", c.name(), 3.0 * double(elems),
          median_ms([&] { expand<true><<<grid, c.threads>>>(in, out, n16); }, "expand"));
      row("shrink 2:1", "16-B stores", c.name(), 3.0 * double(elems),
          median_ms([&] { shrink<false><<<grid, c.threads>>>(in, out, n16); }, "shrink"));
    }
    for (const Shape c : {Shape{256, 4}, Shape{256, 6}, Shape{256, 8}, Shape{512, 3}, Shape{512, 4}}) {
      const int smem = 2 * c.threads * 32;
      check(cudaFuncSetAttribute(expand_bulk, cudaFuncAttributeMaxDynamicSharedMemorySize, smem), "cudaFuncSetAttribute");
      row("expand 1:2", "bulk (TMA) stores", c.name(), 3.0 * double(elems),
          median_ms([&] { expand_bulk<<<unsigned(sms * c.bpsm), c.threads, smem>>>(in, out, n16); }, "expand_bulk"));
    }
    // The bulk path writes what the plain one does.
    std::vector<unsigned char> plain(bytes), bulk(bytes);
    expand<false><<<unsigned(sms * 4), 128>>>(in, out, n16);
    check(cudaMemcpy(plain.data(), dst, bytes, cudaMemcpyDeviceToHost), "expand");
    check(cudaMemset(dst, 0, bytes), "cudaMemset");
    expand_bulk<<<unsigned(sms * 4), 256, 2 * 256 * 32>>>(in, out, n16);
    check(cudaMemcpy(bulk.data(), dst, bytes, cudaMemcpyDeviceToHost), "expand_bulk");
    if (plain != bulk) {
      std::fprintf(stderr, "taco_stream_shapes: the bulk expand wrote other bytes than the plain one\n");
      return 1;
    }
    check(cudaFree(src), "cudaFree");
    check(cudaFree(dst), "cudaFree");
  }
  return 0;
}
