// GPU codecs against the CPU reference: wire buffers (codes and scales) must be byte-identical,
// decodes bit-identical, decode-reduce equal to the CPU sum of CPU decodes in the same order.
// Seeds are fixed and printed in failure messages (CAPTURE).
#include "catch.hpp"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "codecs/codec.hpp"
#include "codecs/quant_codec.hpp"
#include "codecs/structured/structured.hpp"
#include "collectives/sim_collectives.hpp"
#include "core/dtype.hpp"
#include "core/error.hpp"
#include "cuda/codecs/device_codec.hpp"
#include "cuda/codecs/gpu_codec.hpp"
#include "cuda/codecs/gpu_quant.hpp"
#include "cuda/codecs/unfused_taco.hpp"
#include "cuda/runtime/cuda_check.hpp"
#include "cuda/runtime/device.hpp"
#include "formats/e8m0.hpp"
#include "formats/fp8.hpp"
#include "formats/intq.hpp"
#include "formats/minifloat.hpp"
#include "gpu/format_kernels.hpp"
#include "gpu/gpu_test_util.hpp"
#include "io/tensor_source.hpp"
#include "study/error_feedback.hpp"

using namespace taco;
using taco::gpu::DeviceBuffer;
using taco::test::copy_to_device;
using taco::test::fill_device;

namespace {

// ---- inputs ------------------------------------------------------------------------------------
enum class Dist { Normal, Laplace, Tiny, Huge, Subnormal, Zeros, NonFinite, Outliers, Mixed };
const char* dist_name(Dist d) {
  switch (d) {
    case Dist::Normal:
      return "normal";
    case Dist::Laplace:
      return "laplace";
    case Dist::Tiny:
      return "tiny(1e-30)";
    case Dist::Huge:
      return "huge(1e30)";
    case Dist::Subnormal:
      return "subnormal";
    case Dist::Zeros:
      return "zeros";
    case Dist::NonFinite:
      return "nan/inf";
    case Dist::Outliers:
      return "outlier-channels";
    case Dist::Mixed:
      return "mixed-scales";
  }
  return "?";
}
const Dist kDists[] = {Dist::Normal, Dist::Laplace,   Dist::Tiny,     Dist::Huge, Dist::Subnormal,
                       Dist::Zeros,  Dist::NonFinite, Dist::Outliers, Dist::Mixed};

// Values of a [rows, cols] tensor; bf16 = round to bf16 (so a bf16 device copy is exact).
std::vector<float> make_input(Dist d, int64_t rows, int64_t cols, uint64_t seed, bool bf16) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::exponential_distribution<float> ed(1.0f);
  std::uniform_real_distribution<float> ud(0.0f, 1.0f);
  const int64_t n = rows * cols;
  std::vector<float> x(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    float v = 0;
    switch (d) {
      case Dist::Normal:
        v = nd(rng);
        break;
      case Dist::Laplace:
        v = (ud(rng) < 0.5f ? -1.0f : 1.0f) * ed(rng) * 0.01f;
        break;
      case Dist::Tiny:
        v = nd(rng) * 1e-30f;
        break;
      case Dist::Huge:
        v = nd(rng) * 1e30f;
        break;
      case Dist::Subnormal:
        v = nd(rng) * 1e-39f;
        break;
      case Dist::Zeros:
        v = (i % 7 == 3) ? -0.0f : 0.0f;
        break;
      case Dist::NonFinite: {
        const float u = ud(rng);
        v = u < 0.02f   ? std::numeric_limits<float>::quiet_NaN()
            : u < 0.04f ? std::numeric_limits<float>::infinity()
            : u < 0.06f ? -std::numeric_limits<float>::infinity()
                        : nd(rng);
        break;
      }
      case Dist::Outliers:
        v = nd(rng) * 1e-3f * ((i % cols) % 97 == 5 ? 1e4f : 1.0f);
        break;
      case Dist::Mixed:
        v = nd(rng) * std::ldexp(1.0f, int(ud(rng) * 80.0f) - 40);
        break;
    }
    if (bf16) v = bf16_to_float(float_to_bf16(v));
    x[size_t(i)] = v;
  }
  // A whole NaN group and an all-Inf group in the non-finite case (TACO's NaN-max rule).
  if (d == Dist::NonFinite && n >= 256) {
    for (int i = 0; i < 128; ++i) x[size_t(i)] = std::numeric_limits<float>::quiet_NaN();
    for (int i = 128; i < 256; ++i) x[size_t(i)] = (i % 2) ? INFINITY : -INFINITY;
  }
  return x;
}

std::vector<uint16_t> to_bf16_bits(const std::vector<float>& x) {
  std::vector<uint16_t> h(x.size());
  for (size_t i = 0; i < x.size(); ++i) h[i] = float_to_bf16(x[i]);
  return h;
}

// ---- comparisons -------------------------------------------------------------------------------
std::string describe_offset(const gpu::ChunkGeometry& g, int64_t off) {
  const int64_t c = off / g.total, o = off % g.total;
  std::string where = o < g.scale_off ? "code " + std::to_string(o)
                      : o < g.aux_off ? "scale byte " + std::to_string(o - g.scale_off)
                                      : "aux byte " + std::to_string(o - g.aux_off);
  return "chunk " + std::to_string(c) + ", " + where;
}

// Index of the first differing byte, -1 if equal.
int64_t first_diff(const uint8_t* a, const uint8_t* b, size_t n) {
  if (std::memcmp(a, b, n) == 0) return -1;
  for (size_t i = 0; i < n; ++i)
    if (a[i] != b[i]) return int64_t(i);
  return -1;
}

// Floats equal bit for bit, NaNs (any payload) equal to each other.
int64_t first_float_diff(const float* a, const float* b, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    if (std::isnan(a[i]) && std::isnan(b[i])) continue;
    if (float_bits(a[i]) != float_bits(b[i])) return int64_t(i);
  }
  return -1;
}

// First bf16 element (little-endian pairs) that differs, NaN equal to NaN; -1 if none.
int64_t first_bf16_diff(const std::vector<uint8_t>& a, const std::vector<uint8_t>& b) {
  if (a.size() != b.size()) return 0;
  for (size_t i = 0; i + 1 < a.size(); i += 2) {
    const float x = bf16_to_float(uint16_t(a[i] | (a[i + 1] << 8)));
    const float y = bf16_to_float(uint16_t(b[i] | (b[i + 1] << 8)));
    if (std::isnan(x) && std::isnan(y)) continue;
    if (float_bits(x) != float_bits(y)) return int64_t(i / 2);
  }
  return -1;
}

template <typename T>
void upload(DeviceBuffer& d, const std::vector<T>& h) {
  copy_to_device(d.get(), h.data(), h.size() * sizeof(T));
}
template <typename T>
std::vector<T> download(const DeviceBuffer& d, size_t n) {
  std::vector<T> h(n);
  TACO_CUDA_CHECK(cudaMemcpy(h.data(), d.get(), n * sizeof(T), cudaMemcpyDeviceToHost));
  return h;
}

// Variants every quantization test runs: every GPU quantization preset plus grammar forms that
// exercise other paths (bf16 and TAH-Quant, the other device codecs, have tests of their own).
std::vector<std::string> test_variants() {
  std::vector<std::string> v;
  for (const std::string& p : gpu::gpu_presets())
    if (parse_variant(p).family == VariantSpec::Family::Quant) v.push_back(p);
  for (const char* s :
       {"e4m3:g128:had:sbf16", "e5m2:g64:se8m0", "e4m3:g256:sf16:sround=rne", "int8:row",
        "e5m2:tensor:nosat", "e4m3:g128:had:nosat:dual", "e4m3:g32:rht:seed=7", "int8:g16:had",
        "e4m3:g1024:had:dual", "e4m3:g512:dual", "e5m2:row:sbf16", "e4m3:g128:se8m0:sround=rne",
        "e4m3:g64:dual:T=300", "int8:tensor",
        // TACO targets outside [2^-39, 2^40]: s_q's division with its range test
        "e4m3:g128:had:dual:T=1e-20", "e4m3:g128:had:taco:T=1e30",
        // 4-bit codes: every group size's layout, transforms, every scale format,
        // NVFP4's two-level scale with both roundings, targets off the default
        "e2m1:g32:had", "int4:g64:rht:seed=3", "e2m1:g16:sue4m3:sround=up", "int4:g16:sue4m3",
        "e2m1:g16:sue4m3:had", "e2m1:g128:sbf16", "int4:g1024:had", "int4:g256:se8m0",
        "e2m1:g64:sf16:sround=rne", "e2m1:g512:se8m0", "e2m1:g32:T=3", "int4:g32:T=1e30",
        // 3- and 2-bit codes (the presets come with gpu_presets()): every group size's layout
        // (runs of 8, 16 and 32 codes: bytes, 16-bit and 32-bit words), transforms, scale formats,
        // targets above qmax (clipped codes)
        "int3:g16:had", "int2:g16", "int3:g64", "int2:g128", "int2:g256:rht", "int3:g256:had",
        "int3:g512:rht:seed=5", "int2:g512:had", "int3:g1024", "int2:g1024:had", "int3:g32:sbf16",
        "int2:g64:se8m0", "int3:g128:sf16:sround=rne", "int3:g128:had:T=4", "int2:g128:had:T=2",
        // rows, columns, tensors
        "e4m3:col", "int8:col:sbf16", "e5m2:col:se8m0", "e4m3:row:nosat", "e5m2:tensor:sf16",
        "e4m3:col:nosat"})
    v.emplace_back(s);
  return v;
}

// The variants whose kernels this change added, for the tests that take a shorter list.
const char* const kNewVariants[] = {"nvfp4",        "mxfp4",   "int4-g32",   "int4-g32-had",
                                    "fp8-row",      "fp8-col", "fp8-tensor", "e2m1:g16:sue4m3:had",
                                    "int4:g128:rht"};
// 3- and 2-bit codes for the tests that take a shorter list: every preset and a few grammar forms
// (runs of 8, 16 and 32 codes per lane, a randomized transform, a non-fp32 scale).
const char* const kLowBitVariants[] = {
    "int3-g32",     "int3-g32-had", "int3-g64-had",  "int3-g128-had", "int2-g32",
    "int2-g32-had", "int2-g64-had", "int2-g128-had", "int3:g16:had",  "int2:g256:rht",
    "int3:g1024",   "int2:g16",     "int3:g64:sbf16"};

struct Shape {
  int64_t rows, cols;
};
// (the row codecs' four row shapes: cols up to 1024, 2048, 4096 and beyond, two slabs at 8200)
const Shape kShapes[] = {{4, 1024}, {3, 1000},  {1, 37},   {7, 513},  {2, 16},
                         {1, 1},    {33, 4096}, {5, 2048}, {3, 1500}, {2, 8200}};

}  // namespace

TEST_CASE("device fp8 conversions equal the CPU encoder over float bit patterns",
          "[gpu][formats]") {
  // Every float whose magnitude is in [2^-40, 2^20], both signs, plus all NaN/Inf patterns at
  // the ends; the hardware SATFINITE path and the non-saturating software path.
  constexpr uint32_t kChunk = 1u << 24;
  DeviceBuffer d_out(kChunk, "test buffer");
  std::vector<uint8_t> h(kChunk);
  struct Range {
    uint32_t first, last;  // inclusive bit patterns
  };
  const uint32_t lo = float_bits(std::ldexp(1.0f, -40)), hi = float_bits(std::ldexp(1.0f, 20));
  const Range ranges[] = {{0u, 0x00100000u},
                          {lo, hi},
                          {0x7f000000u, 0x7fffffffu},
                          {0x80000000u, 0x80100000u},
                          {lo | 0x80000000u, hi | 0x80000000u},
                          {0xff000000u, 0xffffffffu}};
  for (int format = 0; format < 2; ++format) {
    for (int hw = 0; hw < 2; ++hw) {
      int64_t checked = 0;
      for (const Range& r : ranges) {
        for (uint64_t first = r.first; first <= r.last; first += kChunk) {
          const uint32_t n = uint32_t(std::min<uint64_t>(kChunk, uint64_t(r.last) - first + 1));
          gpu::test::fp8_encode_range_gpu(uint32_t(first), n, format, hw != 0, d_out.as<uint8_t>());
          TACO_CUDA_CHECK(cudaMemcpy(h.data(), d_out.get(), n, cudaMemcpyDeviceToHost));
          int64_t bad = -1;
#pragma omp parallel for reduction(max : bad)
          for (int64_t i = 0; i < int64_t(n); ++i) {
            const float x = bits_float(uint32_t(first + uint64_t(i)));
            const uint8_t want =
                format == 0 ? float_to_fp8_e4m3(x, hw != 0) : float_to_fp8_e5m2(x, hw != 0);
            if (h[size_t(i)] != want) bad = std::max(bad, i);
          }
          CAPTURE(format, hw, first);
          if (bad >= 0) {
            const uint32_t bits = uint32_t(first + uint64_t(bad));
            const float x = bits_float(bits);
            const uint8_t want =
                format == 0 ? float_to_fp8_e4m3(x, hw != 0) : float_to_fp8_e5m2(x, hw != 0);
            CAPTURE(bits, x, int(h[size_t(bad)]), int(want));
            FAIL("device FP8 code differs from the CPU encoder");
          }
          checked += n;
        }
      }
      CHECK(checked > (int64_t(1) << 28));
    }
  }
  // The packed pair conversion keeps a in the low byte.
  DeviceBuffer d_word(4, "test word");
  CHECK(gpu::test::fp8_pair_gpu(1.0f, -2.0f, 0, d_word.as<uint32_t>()) ==
        (uint32_t(float_to_fp8_e4m3(1.0f)) | (uint32_t(float_to_fp8_e4m3(-2.0f)) << 8)));
  // Decoding all 256 codes.
  DeviceBuffer d_dec(256 * 4, "test decode");
  for (int format = 0; format < 2; ++format) {
    gpu::test::fp8_decode_all_gpu(format, d_dec.as<float>());
    const auto dec = download<float>(d_dec, 256);
    for (int c = 0; c < 256; ++c) {
      const float want =
          format == 0 ? fp8_e4m3_to_float(uint8_t(c)) : fp8_e5m2_to_float(uint8_t(c));
      CAPTURE(format, c, dec[size_t(c)], want);
      CHECK((float_bits(dec[size_t(c)]) == float_bits(want) ||
             (std::isnan(want) && std::isnan(dec[size_t(c)]))));
    }
  }
}

TEST_CASE("device e8m0 rounding equals the CPU over positive floats", "[gpu][formats]") {
  constexpr uint32_t kChunk = 1u << 24;
  DeviceBuffer d_c(kChunk, "test"), d_n(kChunk, "test");
  std::vector<uint8_t> hc(kChunk), hn(kChunk);
  for (uint64_t first = 1; first < 0x7f800000u; first += uint64_t(kChunk) * 7) {  // a sparse sweep
    const uint32_t n = uint32_t(std::min<uint64_t>(kChunk, 0x7f800000u - first));
    gpu::test::e8m0_range_gpu(uint32_t(first), n, d_c.as<uint8_t>(), d_n.as<uint8_t>());
    TACO_CUDA_CHECK(cudaMemcpy(hc.data(), d_c.get(), n, cudaMemcpyDeviceToHost));
    TACO_CUDA_CHECK(cudaMemcpy(hn.data(), d_n.get(), n, cudaMemcpyDeviceToHost));
    int64_t bad = -1;
#pragma omp parallel for reduction(max : bad)
    for (int64_t i = 0; i < int64_t(n); ++i) {
      const float x = bits_float(uint32_t(first + uint64_t(i)));
      if (hc[size_t(i)] != e8m0_ceil(x) || hn[size_t(i)] != float_to_e8m0(x, true))
        bad = std::max(bad, i);
    }
    CAPTURE(first, bad);
    REQUIRE(bad < 0);
  }
}

TEST_CASE("device E2M1 / INT4 / UE4M3 codes equal the CPU encoders over float bit patterns",
          "[gpu][formats]") {
  // Every float from 2^-12 to 2^5 (the codes' range and rounding edges, UE4M3's too) and a sparse
  // sweep of the rest, both signs; NaN is outside the word encodes' contract (the kernels zero
  // NaN first) but not UE4M3's.
  constexpr uint32_t kChunk = 1u << 24;
  DeviceBuffer d_e(kChunk, "test"), d_i(kChunk, "test"), d_u(kChunk, "test");
  std::vector<uint8_t> he(kChunk), hi(kChunk), hu(kChunk);
  const uint32_t lo = float_bits(std::ldexp(1.0f, -12)), hi_bits = float_bits(32.0f);
  int64_t checked = 0;
  auto check_range = [&](uint64_t first, uint64_t last, uint64_t step) {
    for (uint64_t f = first; f <= last; f += uint64_t(kChunk) * step) {
      const uint32_t n = uint32_t(std::min<uint64_t>(kChunk, last - f + 1));
      gpu::test::nibble_range_gpu(uint32_t(f), n, d_e.as<uint8_t>(), d_i.as<uint8_t>(),
                                  d_u.as<uint8_t>());
      TACO_CUDA_CHECK(cudaMemcpy(he.data(), d_e.get(), n, cudaMemcpyDeviceToHost));
      TACO_CUDA_CHECK(cudaMemcpy(hi.data(), d_i.get(), n, cudaMemcpyDeviceToHost));
      TACO_CUDA_CHECK(cudaMemcpy(hu.data(), d_u.get(), n, cudaMemcpyDeviceToHost));
      int64_t bad = -1;
#pragma omp parallel for reduction(max : bad)
      for (int64_t i = 0; i < int64_t(n); ++i) {
        const float t = bits_float(uint32_t(f + uint64_t(i)));
        if (hu[size_t(i)] != float_to_ue4m3(t, true)) bad = std::max(bad, i);
        if (std::isnan(t)) continue;
        if (hi[size_t(i)] != (uint32_t(quantize_int_sym(t, 7.0f)) & 0xfu)) bad = std::max(bad, i);
        if (std::fabs(t) >= std::ldexp(1.0f, -100) &&
            he[size_t(i)] != encode_minifloat<E2M1Traits>(t, true))
          bad = std::max(bad, i);
      }
      if (bad >= 0) {
        const float t = bits_float(uint32_t(f + uint64_t(bad)));
        CAPTURE(t, int(he[size_t(bad)]), int(hi[size_t(bad)]), int(hu[size_t(bad)]));
        FAIL("device 4-bit / UE4M3 code differs from the CPU encoder");
      }
      checked += n;
    }
  };
  for (const uint32_t sign : {0u, 0x80000000u}) {
    check_range(sign | lo, sign | hi_bits, 1);
    check_range(sign, sign | 0x7fffffffu, 61);  // sparse: every 61st chunk of 2^24 patterns
  }
  CHECK(checked > (int64_t(1) << 28));
}

TEST_CASE("GPU codecs reproduce the CPU wire bytes and decodes (host float API)", "[gpu][codec]") {
  uint64_t seed = 1234;
  int compared = 0;
  for (const std::string& variant : test_variants()) {
    const auto cpu = make_codec(variant);
    const auto gpu_codec = gpu::make_gpu_codec(variant);
    REQUIRE(gpu_codec->name() == cpu->name());
    for (const Shape& s : kShapes) {
      for (Dist d : kDists) {
        ++seed;
        const auto x = make_input(d, s.rows, s.cols, seed, false);
        CAPTURE(variant, s.rows, s.cols, dist_name(d), seed);
        EncodeStats cs, gs;
        const auto want = cpu->encode(x.data(), s.rows, s.cols, &cs);
        const auto got = gpu_codec->encode(x.data(), s.rows, s.cols, &gs);
        REQUIRE(got.size() == want.size());
        const int64_t bad = first_diff(got.data(), want.data(), want.size());
        if (bad >= 0) {
          const gpu::GpuQuant q(parse_variant(variant));
          const std::string where = describe_offset(q.geometry(s.rows, s.cols), bad);
          CAPTURE(bad, where, int(got[size_t(bad)]), int(want[size_t(bad)]));
          FAIL("GPU wire differs from the CPU wire");
        }
        CHECK(gs.saturated == cs.saturated);
        CHECK(gs.nonfinite == cs.nonfinite);
        // Without counters (the reference-rules kernel where the variant has TACO's reference
        // rules; GpuQuant::reference_encode): the same bytes.
        const auto got_plain = gpu_codec->encode(x.data(), s.rows, s.cols, nullptr);
        const int64_t bad_plain = first_diff(got_plain.data(), want.data(), want.size());
        CAPTURE(bad_plain);
        REQUIRE(bad_plain < 0);
        std::vector<float> dw(x.size()), dg(x.size());
        cpu->decode(want.data(), want.size(), s.rows, s.cols, dw.data());
        gpu_codec->decode(want.data(), want.size(), s.rows, s.cols, dg.data());
        const int64_t bd = first_float_diff(dg.data(), dw.data(), dw.size());
        if (bd >= 0) {
          CAPTURE(bd, dg[size_t(bd)], dw[size_t(bd)]);
          FAIL("GPU decode differs from the CPU decode");
        }
        ++compared;
      }
    }
  }
  CHECK(compared > 500);
}

// The bit stream of docs/variants.md with codes known by hand (amax = qmax: s = 1, codes = values):
// 8 INT3 codes in 3 bytes (0 1 2 3 -3 -2 -1 0 -> 88 56 1f), 4 INT2 codes per byte (0 1 -1 0 -> 34),
// a tail of 5 INT3 codes in 2 bytes, fp32 scales after the codes.
TEST_CASE("GPU INT3 / INT2 codes form the documented bit stream", "[gpu][codec][lowbit]") {
  struct Case {
    const char* variant;
    std::vector<float> x;
    std::vector<uint8_t> codes;
  };
  const std::vector<float> int3_unit = {0, 1, 2, 3, -3, -2, -1, 0};
  std::vector<float> int3_tail = int3_unit;
  int3_tail.insert(int3_tail.end(), int3_unit.begin(), int3_unit.end());
  for (const float v : {3.0f, -3.0f, 1.0f, 0.0f, 2.0f}) int3_tail.push_back(v);
  std::vector<float> int2_group;
  for (int i = 0; i < 4; ++i) int2_group.insert(int2_group.end(), {0.0f, 1.0f, -1.0f, 0.0f});
  const Case cases[] = {{"int3:g16",
                         std::vector<float>(int3_tail.begin(), int3_tail.begin() + 16),
                         {0x88, 0x56, 0x1f, 0x88, 0x56, 0x1f}},
                        {"int3:g16",
                         int3_tail,
                         {0x88, 0x56, 0x1f, 0x88, 0x56, 0x1f, 0x6b, 0x20}},  // 3|5<<3|1<<6|2<<12
                        {"int2:g16", int2_group, {0x34, 0x34, 0x34, 0x34}}};
  for (const Case& c : cases) {
    CAPTURE(c.variant, c.x.size());
    const auto cpu = make_codec(c.variant);
    const auto gc = gpu::make_gpu_codec(c.variant);
    const int64_t n = int64_t(c.x.size());
    const auto got = gc->encode(c.x.data(), 1, n);
    REQUIRE(got == cpu->encode(c.x.data(), 1, n));
    const size_t groups = (c.x.size() + 15) / 16;
    REQUIRE(got.size() == c.codes.size() + 4 * groups);
    CHECK(std::vector<uint8_t>(got.begin(), got.begin() + int64_t(c.codes.size())) == c.codes);
    for (size_t g = 0; g < groups; ++g) {
      float sc = 0;
      std::memcpy(&sc, got.data() + c.codes.size() + 4 * g, 4);
      CHECK(sc == 1.0f);
    }
    std::vector<float> y(c.x.size());
    gc->decode(got.data(), got.size(), 1, n, y.data());
    CHECK(y == c.x);
  }
}

TEST_CASE(
    "GPU codecs implement the collective operations of the Codec contract with the CPU's bytes",
    "[gpu][codec][contract]") {
  uint64_t seed = 777;
  int compared = 0;
  for (const std::string& variant : test_variants()) {
    const auto cpu = make_codec(variant);
    const auto gpu_codec = gpu::make_gpu_codec(variant);
    REQUIRE(gpu_codec->variant_spec() != nullptr);
    REQUIRE(*gpu_codec->variant_spec() == *cpu->variant_spec());  // the same one parse
    for (const Shape& s : {Shape{4, 1024}, Shape{3, 1000}, Shape{5, 2048}}) {
      for (int nsrc : {1, 3, 17}) {  // 17: more sources than one fused launch takes
        CAPTURE(variant, s.rows, s.cols, nsrc);
        std::vector<std::vector<uint8_t>> wires;
        std::vector<WireView> views;
        for (int i = 0; i < nsrc; ++i) {
          const auto x =
              make_input(kDists[size_t(i) % std::size(kDists)], s.rows, s.cols, ++seed, false);
          wires.push_back(cpu->encode(x.data(), s.rows, s.cols));
        }
        for (const auto& w : wires) views.push_back({w.data(), w.size()});
        const size_t n = size_t(s.rows * s.cols);
        std::vector<float> sum_cpu(n), sum_gpu(n);
        cpu->decode_reduce(views, s.rows, s.cols, sum_cpu.data());
        gpu_codec->decode_reduce(views, s.rows, s.cols, sum_gpu.data());
        REQUIRE(first_float_diff(sum_gpu.data(), sum_cpu.data(), n) < 0);
        for (bool round_bf16 : {false, true}) {
          CAPTURE(round_bf16);
          std::vector<uint8_t> w_cpu, w_gpu;
          EncodeStats cs, gs;
          cpu->decode_reduce_encode(views, s.rows, s.cols, round_bf16, w_cpu, &cs);
          gpu_codec->decode_reduce_encode(views, s.rows, s.cols, round_bf16, w_gpu, &gs);
          REQUIRE(w_gpu.size() == w_cpu.size());
          REQUIRE(first_diff(w_gpu.data(), w_cpu.data(), w_cpu.size()) < 0);
          CHECK(gs.saturated == cs.saturated);
          CHECK(gs.nonfinite == cs.nonfinite);
        }
        const auto own = make_input(Dist::Laplace, s.rows, s.cols, ++seed, false);
        std::vector<uint8_t> h_cpu, h_gpu;
        cpu->decode_add_encode(views[0], own.data(), s.rows, s.cols, h_cpu);
        gpu_codec->decode_add_encode(views[0], own.data(), s.rows, s.cols, h_gpu);
        REQUIRE(h_gpu.size() == h_cpu.size());
        REQUIRE(first_diff(h_gpu.data(), h_cpu.data(), h_cpu.size()) < 0);
        ++compared;
      }
    }
  }
  CHECK(compared > 50);
}

TEST_CASE("a GPU codec shared by threads (the study's simulated collectives) equals the CPU",
          "[gpu][codec][contract]") {
  // The simulation runs ranks and chunks on several threads through one codec; the GPU codec's
  // calls take turns on its one stream and buffers, so the results are the CPU codec's bits.
  uint64_t seed = 91;
  for (const char* variant : {"taco", "fp8-row", "fp8-col", "nvfp4", "int4-g32"}) {
    const auto cpu = make_codec(variant);
    const auto gpu_codec = gpu::make_gpu_codec(variant);
    for (int N : {2, 4}) {
      const int64_t rows = 48, cols = 1024;
      std::vector<std::vector<float>> in;
      std::vector<const float*> ptrs;
      for (int r = 0; r < N; ++r)
        in.push_back(make_input(Dist::Laplace, rows, cols, ++seed, false));
      for (const auto& x : in) ptrs.push_back(x.data());
      for (const Collective c : sim::kSimulated) {
        CAPTURE(variant, N, collective_name(c));
        const auto want = sim::SimulatedCommunicator(N, *cpu, 1).run(c, ptrs, rows, cols);
        const auto got = sim::SimulatedCommunicator(N, *gpu_codec, 8).run(c, ptrs, rows, cols);
        REQUIRE(got.bytes_sent == want.bytes_sent);
        REQUIRE(got.outputs.size() == want.outputs.size());
        for (size_t r = 0; r < want.outputs.size(); ++r) {
          REQUIRE(got.outputs[r].size() == want.outputs[r].size());
          REQUIRE(first_float_diff(got.outputs[r].data(), want.outputs[r].data(),
                                   want.outputs[r].size()) < 0);
        }
      }
    }
  }
}

TEST_CASE(
    "the reference-rules encode kernel is taken exactly for TACO's reference rules without "
    "counters",
    "[gpu][codec]") {
  unsigned long long* counters =
      reinterpret_cast<unsigned long long*>(uintptr_t(256));  // never dereferenced
  CHECK(gpu::GpuQuant(parse_variant("taco")).reference_encode(nullptr));
  CHECK(gpu::GpuQuant(parse_variant("e4m3:g128:had:dual")).reference_encode(nullptr));
  CHECK_FALSE(gpu::GpuQuant(parse_variant("taco")).reference_encode(counters));
  for (const char* v : {"taco-nosa", "taco-rht", "taco-e5m2", "e4m3:g128:had:nosat:dual",
                        "e4m3:g128:had:dual:T=1e-20", "fp8-g128", "e4m3:g64:had:dual"}) {
    CAPTURE(v);
    CHECK_FALSE(gpu::GpuQuant(parse_variant(v)).reference_encode(nullptr));
  }
}

TEST_CASE("GPU codecs: bf16 input, several chunks, decode-reduce and re-encode", "[gpu][codec]") {
  uint64_t seed = 777;
  gpu::CudaStream stream;
  for (const std::string& variant : test_variants()) {
    const auto cpu = make_codec(variant);
    gpu::GpuQuant q(parse_variant(variant));
    for (const Shape& s : {Shape{5, 256}, Shape{3, 1000}, Shape{1, 4224}, Shape{2, 130}}) {
      const int64_t chunks = 3, nsrc = 3;
      const int64_t n = s.rows * s.cols;
      const gpu::ChunkGeometry g = q.geometry(s.rows, s.cols);
      CAPTURE(variant, s.rows, s.cols);
      // nsrc inputs of `chunks` chunks each, bf16-valued
      std::vector<std::vector<float>> xs;
      std::vector<std::vector<uint8_t>> cpu_wires;  // per source: chunks concatenated
      DeviceBuffer d_in(size_t(chunks * n) * 2, "test input");
      std::vector<DeviceBuffer> d_wires;
      for (int64_t src = 0; src < nsrc; ++src) {
        ++seed;
        const Dist d = kDists[seed % 9];
        CAPTURE(seed, dist_name(d));
        const auto x = make_input(d, chunks * s.rows, s.cols, seed, true);
        std::vector<uint8_t> wire;
        for (int64_t c = 0; c < chunks; ++c) {
          const auto w = cpu->encode(x.data() + c * n, s.rows, s.cols);
          wire.insert(wire.end(), w.begin(), w.end());
        }
        upload(d_in, to_bf16_bits(x));
        d_wires.emplace_back(wire.size(), "test wire");
        q.encode(d_in.get(), DType::BF16, chunks, s.rows, s.cols, d_wires.back().as<uint8_t>(),
                 stream.get());
        stream.synchronize();
        const auto got = download<uint8_t>(d_wires.back(), wire.size());
        const int64_t bad = first_diff(got.data(), wire.data(), wire.size());
        if (bad >= 0) {
          const std::string where = describe_offset(g, bad);
          CAPTURE(bad, where, int(got[size_t(bad)]), int(wire[size_t(bad)]));
          FAIL("bf16-input multi-chunk GPU wire differs from the CPU wires");
        }
        xs.push_back(x);
        cpu_wires.push_back(wire);
      }
      // CPU: decode every chunk of every source, sum in source order.
      const size_t un = size_t(std::max<int64_t>(n, 0));  // (a sign GCC can see: no size warning)
      std::vector<float> sum(size_t(chunks) * un);
      std::vector<float> dec(un);
      for (int64_t src = 0; src < nsrc; ++src)
        for (int64_t c = 0; c < chunks; ++c) {
          cpu->decode(cpu_wires[size_t(src)].data() + c * g.total, size_t(g.total), s.rows, s.cols,
                      dec.data());
          for (int64_t i = 0; i < n; ++i) {
            float& a = sum[size_t(c * n + i)];
            a = src == 0 ? dec[size_t(i)] : a + dec[size_t(i)];
          }
        }
      std::vector<const uint8_t*> srcs;
      for (auto& w : d_wires) srcs.push_back(w.as<uint8_t>());
      // decode-reduce (f32 and bf16 out) and decode, through the small-launch kernel and the other
      for (const int64_t small : {int64_t(0), std::numeric_limits<int64_t>::max()}) {
        q.set_small_decode_elems(small);
        CAPTURE(small);
        // decode-reduce, f32 and bf16 out
        DeviceBuffer d_out(size_t(chunks * n) * 4, "test out");
        q.decode_reduce(srcs, chunks, s.rows, s.cols, d_out.get(), DType::F32, stream.get());
        stream.synchronize();
        auto got = download<float>(d_out, size_t(chunks * n));
        int64_t bd = first_float_diff(got.data(), sum.data(), sum.size());
        if (bd >= 0) {
          CAPTURE(bd, got[size_t(bd)], sum[size_t(bd)]);
          FAIL("GPU decode-reduce (f32) differs from the CPU sum of CPU decodes");
        }
        q.decode_reduce(srcs, chunks, s.rows, s.cols, d_out.get(), DType::BF16, stream.get());
        stream.synchronize();
        const auto got16 = download<uint16_t>(d_out, size_t(chunks * n));
        for (size_t i = 0; i < sum.size(); ++i) {
          if (got16[i] != float_to_bf16(sum[i]) && !std::isnan(sum[i])) {
            CAPTURE(i, got16[i], float_to_bf16(sum[i]));
            FAIL("GPU decode-reduce (bf16) differs from the rounded CPU sum");
          }
        }
        // single-source decode, bf16 out
        q.decode(srcs[0], chunks, s.rows, s.cols, d_out.get(), DType::BF16, stream.get());
        stream.synchronize();
        const auto g16 = download<uint16_t>(d_out, size_t(chunks * n));
        for (int64_t c = 0; c < chunks; ++c) {
          cpu->decode(cpu_wires[0].data() + c * g.total, size_t(g.total), s.rows, s.cols,
                      dec.data());
          for (int64_t i = 0; i < n; ++i)
            if (g16[size_t(c * n + i)] != float_to_bf16(dec[size_t(i)]) &&
                !std::isnan(dec[size_t(i)])) {
              CAPTURE(c, i);
              FAIL("GPU decode (bf16 out) differs from the rounded CPU decode");
            }
        }
      }
      // decode-reduce-encode: the CPU encode of the sums (as fp32, and rounded to bf16)
      for (int rb = 0; rb < 2; ++rb) {
        std::vector<uint8_t> want;
        for (int64_t c = 0; c < chunks; ++c) {
          std::vector<float> part(sum.begin() + c * n, sum.begin() + (c + 1) * n);
          if (rb)
            for (float& v : part) v = bf16_to_float(float_to_bf16(v));
          const auto w = cpu->encode(part.data(), s.rows, s.cols);
          want.insert(want.end(), w.begin(), w.end());
        }
        DeviceBuffer d_re(want.size(), "test re-encode");
        q.decode_reduce_encode(srcs, chunks, s.rows, s.cols, d_re.as<uint8_t>(), rb != 0,
                               stream.get());
        stream.synchronize();
        const auto gw = download<uint8_t>(d_re, want.size());
        const int64_t bad = first_diff(gw.data(), want.data(), want.size());
        if (bad >= 0) {
          const std::string where = describe_offset(g, bad);
          CAPTURE(rb, bad, where, int(gw[size_t(bad)]), int(want[size_t(bad)]));
          FAIL("GPU decode-reduce-encode differs from the CPU encode of the CPU sums");
        }
      }
    }
  }
}

// Large enough that every warp of the resident grid runs several iterations (the decode
// kernels load the next iteration's codes ahead); both decode kernels are forced in turn.
TEST_CASE("GPU codecs: large inputs (several iterations per warp) equal the CPU",
          "[gpu][codec][large]") {
  gpu::CudaStream stream;
  const int64_t rows = 4096, cols = 2048, n = rows * cols;  // 8 M elements
  uint64_t seed = 31337;
  for (const char* variant :
       {"taco", "fp8-g128", "mxfp8", "int8-g128-had", "mxfp4", "nvfp4", "int4-g32-had", "fp8-row",
        "fp8-col", "fp8-tensor", "int3-g128-had", "int2-g64-had", "int3-g32", "int2:g16"}) {
    const auto cpu = make_codec(variant);
    gpu::GpuQuant q(parse_variant(variant));
    CAPTURE(variant);
    std::vector<std::vector<uint8_t>> wires;
    std::vector<DeviceBuffer> d_wires;
    DeviceBuffer d_in(size_t(n) * 2, "test input");
    for (int src = 0; src < 2; ++src) {
      const auto x = make_input(src ? Dist::Outliers : Dist::Normal, rows, cols, ++seed, true);
      wires.push_back(cpu->encode(x.data(), rows, cols));
      upload(d_in, to_bf16_bits(x));
      d_wires.emplace_back(wires.back().size(), "test wire");
      q.encode(d_in.get(), DType::BF16, 1, rows, cols, d_wires.back().as<uint8_t>(), stream.get());
      stream.synchronize();
      const auto got = download<uint8_t>(d_wires.back(), wires.back().size());
      const int64_t bad = first_diff(got.data(), wires.back().data(), got.size());
      CAPTURE(src, bad);
      REQUIRE(bad < 0);
    }
    std::vector<float> d0(static_cast<size_t>(n)), sum(static_cast<size_t>(n));
    cpu->decode(wires[0].data(), wires[0].size(), rows, cols, d0.data());
    cpu->decode(wires[1].data(), wires[1].size(), rows, cols, sum.data());
    for (size_t i = 0; i < sum.size(); ++i) sum[i] = d0[i] + sum[i];
    DeviceBuffer d_out(size_t(n) * 4, "test out");
    for (const int64_t small : {int64_t(0), std::numeric_limits<int64_t>::max()}) {
      q.set_small_decode_elems(small);
      CAPTURE(small);
      q.decode(d_wires[0].as<uint8_t>(), 1, rows, cols, d_out.get(), DType::F32, stream.get());
      stream.synchronize();
      auto got = download<float>(d_out, size_t(n));
      int64_t bd = first_float_diff(got.data(), d0.data(), d0.size());
      CAPTURE(bd);
      CHECK(bd < 0);
      q.decode_reduce({d_wires[0].as<uint8_t>(), d_wires[1].as<uint8_t>()}, 1, rows, cols,
                      d_out.get(), DType::F32, stream.get());
      stream.synchronize();
      got = download<float>(d_out, size_t(n));
      bd = first_float_diff(got.data(), sum.data(), sum.size());
      CHECK(bd < 0);
    }
  }
}

// The streaming decode (bulk copies through each warp's ring of shared-memory stages) against
// the CPU: enough tiles that every warp's ring wraps several times, a group count that leaves a
// tail shorter than any tile (4 more than a multiple of 64 groups), bf16 and f32 out, the
// distributions' extremes (NaN / Inf codes, zero groups); and that these calls do take it
// (streams_decode), while an output off the 16-byte grid takes another kernel, also exact. The
// encodes of the same inputs (the whole-group walk, with a short last warp iteration) too.
TEST_CASE("GPU codecs: the streaming decode equals the CPU", "[gpu][codec][large]") {
  gpu::CudaStream stream;
  uint64_t seed = 5150;
  for (const char* variant : {"taco", "taco-nosa", "taco-rht", "taco-e5m2", "taco-g32"}) {
    const auto cpu = make_codec(variant);
    gpu::GpuQuant q(parse_variant(variant));
    const int64_t G = std::string(variant) == "taco-g32" ? 32 : 128;
    q.set_small_decode_elems(0);
    q.set_stream_decode_elems(0);
    for (const int64_t groups : {int64_t(65536), int64_t(64 * 50 + 4)}) {
      const int64_t rows = groups == 65536 ? 64 : 1, cols = groups * G / rows, n = rows * cols;
      const Dist d = kDists[seed % 9];
      CAPTURE(variant, rows, cols, dist_name(d));
      const auto x = make_input(d, rows, cols, ++seed, true);
      const auto wire = cpu->encode(x.data(), rows, cols);
      std::vector<float> want(static_cast<size_t>(n));
      cpu->decode(wire.data(), wire.size(), rows, cols, want.data());
      DeviceBuffer d_in(size_t(n) * 2, "test input"), d_wire(wire.size(), "test wire"),
          d_out(size_t(n) * 4 + 16, "test out");
      // the encode of the same (bf16 in, whole groups, one chunk: the whole-group walk)
      upload(d_in, to_bf16_bits(x));
      TACO_CUDA_CHECK(cudaMemsetAsync(d_wire.get(), 0xa5, wire.size(), stream.get()));
      q.encode(d_in.get(), DType::BF16, 1, rows, cols, d_wire.as<uint8_t>(), stream.get());
      stream.synchronize();
      const auto got_wire = download<uint8_t>(d_wire, wire.size());
      const int64_t bad_byte = first_diff(got_wire.data(), wire.data(), wire.size());
      CAPTURE(bad_byte);
      CHECK(bad_byte < 0);
      upload(d_wire, wire);  // the decodes below read the CPU's wire
      for (const DType out_type : {DType::BF16, DType::F32}) {
        for (const size_t shift : {size_t(0), size_t(4)}) {  // bytes off the output buffer's start
          CAPTURE(out_type == DType::BF16 ? "bf16" : "f32", shift);
          uint8_t* out = d_out.as<uint8_t>() + shift;
          CHECK(q.streams_decode(d_wire.as<uint8_t>(), 1, rows, cols, out, out_type) ==
                (shift == 0));
          TACO_CUDA_CHECK(cudaMemsetAsync(d_out.get(), 0xff, size_t(n) * 4 + 16, stream.get()));
          q.decode(d_wire.as<uint8_t>(), 1, rows, cols, out, out_type, stream.get());
          stream.synchronize();
          const auto all = download<uint8_t>(d_out, size_t(n) * 4 + 16);
          int64_t bad = -1;
          for (int64_t i = 0; i < n && bad < 0; ++i) {
            const uint8_t* at = all.data() + shift + size_t(i) * (out_type == DType::BF16 ? 2 : 4);
            if (out_type == DType::BF16) {
              uint16_t h;
              std::memcpy(&h, at, 2);
              if (h != float_to_bf16(want[size_t(i)]) && !std::isnan(want[size_t(i)])) bad = i;
            } else {
              float f;
              std::memcpy(&f, at, 4);
              if (first_float_diff(&f, &want[size_t(i)], 1) >= 0) bad = i;
            }
          }
          CAPTURE(bad);
          CHECK(bad < 0);
        }
      }
    }
  }
}

// The group kernels walk their items by adding a step inside a chunk and dividing only when a
// step leaves it; calls with more groups than a launch takes are split over consecutive chunks.
// Both are checked against the CPU: chunks much longer than the grid's step (most steps stay in
// the chunk, some lanes cross mid-walk), and a call forced into launches of two chunks and one.
TEST_CASE("GPU codecs: chunk-crossing walks and calls split over launches equal the CPU",
          "[gpu][codec][large]") {
  gpu::CudaStream stream;
  uint64_t seed = 4242;
  struct Case {
    int64_t chunks, rows, cols;
    bool split;  // launches of at most two chunks' groups
  };
  for (const char* variant : {"taco", "fp8-g128", "int8-g128-had", "e4m3:g32:dual", "nvfp4",
                              "int4-g32", "int3-g32-had", "int2:g16", "int3:g16"}) {
    const auto cpu = make_codec(variant);
    gpu::GpuQuant q(parse_variant(variant));
    const int64_t G = q.spec().block;
    for (const Case& k :
         {Case{3, 1024, 4100, false}, Case{5, 7, 1000, false}, Case{5, 7, 1000, true}}) {
      const int64_t n = k.rows * k.cols;
      const gpu::ChunkGeometry g = q.geometry(k.rows, k.cols);
      // launches of two chunks, two and one (the last limit is below three chunks' groups)
      q.set_max_launch_groups(k.split ? 3 * g.nblocks - 1 : gpu::kMaxLaunchGroups);
      CAPTURE(variant, k.chunks, k.rows, k.cols, k.split, G);
      std::vector<std::vector<uint8_t>> wires;
      std::vector<DeviceBuffer> d_wires;
      DeviceBuffer d_in(size_t(k.chunks * n) * 2, "test input");
      for (int src = 0; src < 2; ++src) {
        const auto x = make_input(src ? Dist::Outliers : Dist::Laplace, k.chunks * k.rows, k.cols,
                                  ++seed, true);
        std::vector<uint8_t> wire;
        for (int64_t c = 0; c < k.chunks; ++c) {
          const auto w = cpu->encode(x.data() + c * n, k.rows, k.cols);
          wire.insert(wire.end(), w.begin(), w.end());
        }
        upload(d_in, to_bf16_bits(x));
        d_wires.emplace_back(wire.size(), "test wire");
        q.encode(d_in.get(), DType::BF16, k.chunks, k.rows, k.cols, d_wires.back().as<uint8_t>(),
                 stream.get());
        stream.synchronize();
        const auto got = download<uint8_t>(d_wires.back(), wire.size());
        const int64_t bad = first_diff(got.data(), wire.data(), wire.size());
        if (bad >= 0) {
          const std::string where = describe_offset(g, bad);
          CAPTURE(src, bad, where);
          FAIL("GPU encode differs from the CPU wires");
        }
        wires.push_back(std::move(wire));
      }
      std::vector<float> sum(static_cast<size_t>(k.chunks * n)), dec(static_cast<size_t>(n));
      for (int src = 0; src < 2; ++src)
        for (int64_t c = 0; c < k.chunks; ++c) {
          cpu->decode(wires[size_t(src)].data() + c * g.total, size_t(g.total), k.rows, k.cols,
                      dec.data());
          for (int64_t i = 0; i < n; ++i) {
            float& a = sum[size_t(c * n + i)];
            a = src ? a + dec[size_t(i)] : dec[size_t(i)];
          }
        }
      const std::vector<const uint8_t*> srcs = {d_wires[0].as<uint8_t>(), d_wires[1].as<uint8_t>()};
      DeviceBuffer d_out(size_t(k.chunks * n) * 4, "test out");
      q.decode_reduce(srcs, k.chunks, k.rows, k.cols, d_out.get(), DType::F32, stream.get());
      stream.synchronize();
      const auto got = download<float>(d_out, sum.size());
      const int64_t bd = first_float_diff(got.data(), sum.data(), sum.size());
      CAPTURE(bd);
      CHECK(bd < 0);
      std::vector<uint8_t> want;
      for (int64_t c = 0; c < k.chunks; ++c) {
        const auto w = cpu->encode(sum.data() + c * n, k.rows, k.cols);
        want.insert(want.end(), w.begin(), w.end());
      }
      DeviceBuffer d_re(want.size(), "test re-encode");
      q.decode_reduce_encode(srcs, k.chunks, k.rows, k.cols, d_re.as<uint8_t>(), false,
                             stream.get());
      stream.synchronize();
      const auto gw = download<uint8_t>(d_re, want.size());
      const int64_t br = first_diff(gw.data(), want.data(), want.size());
      CAPTURE(br);
      CHECK(br < 0);
    }
    // A chunk with more groups than a launch takes is an input error, not a wrong result.
    q.set_max_launch_groups(10);
    DeviceBuffer d_in(size_t(4 * 1024) * 2, "test input"),
        d_wire(size_t(q.chunk_bytes(4, 1024)), "test wire");
    CHECK_THROWS_AS(
        q.encode(d_in.get(), DType::BF16, 1, 4, 1024, d_wire.as<uint8_t>(), stream.get()),
        InputError);
  }
}

// Decoding takes no valid wire for granted: NaN and infinite codes, and scales that are zero,
// negative, subnormal, huge or not numbers, must decode as the CPU decodes them. The TACO
// kernels decide per group between a fast path and the IEEE one (codec_group.cuh, decode_codes);
// groups of every kind sit next to each other here, so that both paths and the decision run.
TEST_CASE("GPU decodes of arbitrary wires (NaN and infinite codes, odd scales) equal the CPU",
          "[gpu][codec]") {
  std::mt19937_64 rng(99);
  std::uniform_int_distribution<int> byte(0, 255), pick(0, 15), expo(-70, 70);
  std::uniform_real_distribution<float> frac(1.0f, 2.0f);
  auto scale = [&]() -> float {
    switch (pick(rng)) {
      case 0:
        return 0.0f;
      case 1:
        return -frac(rng);
      case 2:
        return std::numeric_limits<float>::quiet_NaN();
      case 3:
        return std::numeric_limits<float>::infinity();
      case 4:
        return 1e-40f * frac(rng);  // subnormal
      case 5:
        return bits_float(uint32_t(rng()));
      default:
        return std::ldexp(frac(rng), expo(rng));
    }
  };
  for (const char* variant : {"taco", "taco-noh", "taco-nosa", "taco-e5m2", "taco-rht", "taco-g32",
                              "e4m3:g128:had:nosat:dual"}) {
    const auto cpu = make_codec(variant);
    const auto gpu_codec = gpu::make_gpu_codec(variant);
    const gpu::GpuQuant q(parse_variant(variant));
    for (const Shape& sh : {Shape{64, 1024}, Shape{3, 1000}}) {
      const gpu::ChunkGeometry g = q.geometry(sh.rows, sh.cols);
      const int64_t G = q.spec().block;
      CAPTURE(variant, sh.rows, sh.cols);
      std::vector<uint8_t> wire(size_t(g.total), 0);
      const uint8_t nan_code = q.rules().elem == ElemFormat::E4M3 ? 0x7f : 0x7e;
      const uint8_t inf_code = q.rules().elem == ElemFormat::E4M3 ? 0x7f : 0x7c;  // E4M3 has no Inf
      for (int64_t b = 0; b < g.nblocks; ++b) {
        const int kind = int(b % 4);  // 0, 1: finite codes; 2: one NaN code; 3: one Inf code
        for (int64_t i = 0; i < G && b * G + i < g.code_bytes; ++i) {
          uint8_t c = uint8_t(byte(rng));
          if ((c & 0x7f) >= inf_code) c = uint8_t(c & 0xbf);  // keep the code finite
          wire[size_t(b * G + i)] = c;
        }
        const int64_t at = b * G + int64_t(rng() % uint64_t(G));
        if (kind == 2 && at < g.code_bytes) wire[size_t(at)] = uint8_t(nan_code | (rng() & 0x80));
        if (kind == 3 && at < g.code_bytes) wire[size_t(at)] = uint8_t(inf_code | (rng() & 0x80));
        const float s = kind < 2 && b % 8 < 4 ? std::ldexp(frac(rng), expo(rng) / 2) : scale();
        std::memcpy(wire.data() + g.scale_off + 4 * b, &s, 4);
        if (g.aux_off < g.total) {
          const float a = kind < 2 && b % 8 < 4 ? std::ldexp(frac(rng), expo(rng) / 4) : scale();
          std::memcpy(wire.data() + g.aux_off + 4 * b, &a, 4);
        }
      }
      const int64_t n = sh.rows * sh.cols;
      std::vector<float> dw(static_cast<size_t>(n)), dg(static_cast<size_t>(n));
      cpu->decode(wire.data(), wire.size(), sh.rows, sh.cols, dw.data());
      gpu_codec->decode(wire.data(), wire.size(), sh.rows, sh.cols, dg.data());
      const int64_t bd = first_float_diff(dg.data(), dw.data(), dw.size());
      if (bd >= 0) {
        CAPTURE(bd, bd / G, dg[size_t(bd)], dw[size_t(bd)]);
        FAIL("GPU decode of an arbitrary wire differs from the CPU decode");
      }
      // Both kinds of group were there: zeroed ones (a NaN or infinite code) and decoded ones.
      int64_t zero_groups = 0, value_groups = 0;
      for (int64_t b = 0; b * G < n; ++b) {
        const int64_t e = std::min(n, (b + 1) * G);
        const bool all_zero =
            std::all_of(dw.begin() + b * G, dw.begin() + e, [](float x) { return x == 0.0f; });
        const bool finite_nonzero = std::any_of(dw.begin() + b * G, dw.begin() + e, [](float x) {
          return x != 0.0f && std::isfinite(x);
        });
        zero_groups += all_zero ? 1 : 0;
        value_groups += finite_nonzero ? 1 : 0;
      }
      CHECK(zero_groups > 0);
      CHECK(value_groups > 0);
    }
  }
}

TEST_CASE("GPU codecs: unaligned device pointers take the scalar paths and stay exact",
          "[gpu][codec]") {
  gpu::CudaStream stream;
  for (const char* variant :
       {"taco", "fp8-g128", "mxfp8", "fp8-row", "nvfp4", "mxfp4", "int4-g32", "fp8-col",
        "fp8-tensor", "int3-g32", "int3:g16", "int2-g128-had", "int3-g64-had"}) {
    const gpu::GpuQuant q(parse_variant(variant));
    const auto cpu = make_codec(variant);
    const int64_t rows = 4, cols = 512, n = rows * cols;
    const auto x = make_input(Dist::Normal, rows, cols, 99, true);
    const auto want = cpu->encode(x.data(), rows, cols);
    DeviceBuffer d_in(size_t(n) * 2 + 64, "test"), d_w(want.size() + 64, "test"),
        d_o(size_t(n) * 4 + 64, "test");
    const auto h = to_bf16_bits(x);
    copy_to_device(d_in.as<uint8_t>() + 2, h.data(), h.size() * 2);
    q.encode(d_in.as<uint8_t>() + 2, DType::BF16, 1, rows, cols, d_w.as<uint8_t>() + 1,
             stream.get());
    stream.synchronize();
    std::vector<uint8_t> got(want.size());
    TACO_CUDA_CHECK(
        cudaMemcpy(got.data(), d_w.as<uint8_t>() + 1, got.size(), cudaMemcpyDeviceToHost));
    CAPTURE(variant);
    CHECK(first_diff(got.data(), want.data(), want.size()) < 0);
    q.decode(d_w.as<uint8_t>() + 1, 1, rows, cols, d_o.as<uint8_t>() + 4, DType::F32, stream.get());
    stream.synchronize();
    std::vector<float> dg(static_cast<size_t>(n)), dw(static_cast<size_t>(n));
    TACO_CUDA_CHECK(
        cudaMemcpy(dg.data(), d_o.as<uint8_t>() + 4, size_t(n) * 4, cudaMemcpyDeviceToHost));
    cpu->decode(want.data(), want.size(), rows, cols, dw.data());
    CHECK(first_float_diff(dg.data(), dw.data(), dw.size()) < 0);
  }
}

TEST_CASE("the unfused TACO pipeline reproduces the CPU bytes too", "[gpu][codec][unfused]") {
  gpu::CudaStream stream;
  uint64_t seed = 4242;
  for (const char* variant :
       {"taco", "taco-noh", "taco-e5m2", "taco-g32", "taco-g512", "e4m3:g1024:had:dual"}) {
    const auto cpu = make_codec(variant);
    const gpu::UnfusedTaco u(parse_variant(variant));
    const gpu::GpuQuant q(parse_variant(variant));
    for (const Shape& s : {Shape{5, 256}, Shape{3, 1000}}) {
      const int64_t chunks = 2, n = s.rows * s.cols;
      const gpu::ChunkGeometry g = q.geometry(s.rows, s.cols);
      CAPTURE(variant, s.rows, s.cols, seed);
      const auto x = make_input(Dist::Mixed, chunks * s.rows, s.cols, ++seed, true);
      std::vector<uint8_t> want;
      for (int64_t c = 0; c < chunks; ++c) {
        const auto w = cpu->encode(x.data() + c * n, s.rows, s.cols);
        want.insert(want.end(), w.begin(), w.end());
      }
      DeviceBuffer d_in(size_t(chunks * n) * 2, "test"), d_w(want.size(), "test"),
          d_o(size_t(chunks * n) * 4, "test");
      upload(d_in, to_bf16_bits(x));
      u.encode(d_in.get(), DType::BF16, chunks, s.rows, s.cols, d_w.as<uint8_t>(), stream.get());
      stream.synchronize();
      const auto got = download<uint8_t>(d_w, want.size());
      const int64_t bad = first_diff(got.data(), want.data(), want.size());
      if (bad >= 0) {
        const std::string where = describe_offset(g, bad);
        CAPTURE(bad, where, int(got[size_t(bad)]), int(want[size_t(bad)]));
        FAIL("unfused encode differs from the CPU wire");
      }
      // decode-reduce of the two chunks as two sources of one chunk each
      const std::vector<const uint8_t*> srcs = {d_w.as<uint8_t>(), d_w.as<uint8_t>() + g.total};
      u.decode_reduce(srcs, 1, s.rows, s.cols, d_o.get(), DType::F32, stream.get());
      stream.synchronize();
      const auto sum = download<float>(d_o, size_t(n));
      std::vector<float> d0(static_cast<size_t>(n)), d1(static_cast<size_t>(n));
      cpu->decode(want.data(), size_t(g.total), s.rows, s.cols, d0.data());
      cpu->decode(want.data() + g.total, size_t(g.total), s.rows, s.cols, d1.data());
      for (int64_t i = 0; i < n; ++i) d0[size_t(i)] = d0[size_t(i)] + d1[size_t(i)];
      const int64_t bd = first_float_diff(sum.data(), d0.data(), d0.size());
      if (bd >= 0) {
        CAPTURE(bd, sum[size_t(bd)], d0[size_t(bd)]);
        FAIL("unfused decode-reduce differs from the CPU sum");
      }
    }
  }
}

TEST_CASE("GPU codecs on the sample traces", "[gpu][codec][traces]") {
  namespace fs = std::filesystem;
  const fs::path dir = fs::path(TACO_SOURCE_DIR) / "traces";
  int tensors = 0;
  if (fs::is_directory(dir)) {
    for (const auto& e : fs::recursive_directory_iterator(dir)) {
      const std::string ext = e.path().extension().string();
      if (!e.is_regular_file() ||
          (ext != ".h5" && ext != ".safetensors" && ext != ".npy" && ext != ".npz"))
        continue;
      auto src = open_tensor_file(e.path().string());
      for (size_t i = 0; i < src->size() && i < 8; ++i) {
        const Tensor t = src->read(i);
        if (t.numel() == 0 || t.numel() > (int64_t(1) << 24)) continue;
        for (const char* variant : {"taco", "taco-noh", "fp8-g128", "mxfp8", "int8-g128-had",
                                    "fp8-row", "fp8-tensor", "fp8-col", "mxfp4", "nvfp4",
                                    "int4-g32", "int4-g32-had", "int3-g128-had", "int2-g64-had"}) {
          const auto cpu = make_codec(variant);
          const auto gc = gpu::make_gpu_codec(variant);
          CAPTURE(e.path().string(), t.name, variant);
          const auto want = cpu->encode(t.values.data(), t.rows(), t.cols());
          const auto got = gc->encode(t.values.data(), t.rows(), t.cols());
          REQUIRE(got.size() == want.size());
          CHECK(first_diff(got.data(), want.data(), want.size()) < 0);
          std::vector<float> dw(t.values.size()), dg(t.values.size());
          cpu->decode(want.data(), want.size(), t.rows(), t.cols(), dw.data());
          gc->decode(want.data(), want.size(), t.rows(), t.cols(), dg.data());
          CHECK(first_float_diff(dg.data(), dw.data(), dw.size()) < 0);
        }
        ++tensors;
      }
    }
  }
  if (tensors == 0) WARN("no sample traces under " << dir.string() << " (nothing compared)");
  SUCCEED();
}

TEST_CASE("unsupported variants are InputErrors naming the variant", "[gpu][codec]") {
  for (const char* v : {"int8-g128-asym", "fp8-tile128", "e2m1:row", "int4:tensor",
                        "e4m3:g16:sue4m3", "e4m3:col:sue4m3"}) {
    CAPTURE(v);
    try {
      (void)gpu::make_gpu_codec(v);
      FAIL("expected InputError");
    } catch (const InputError& e) {
      CHECK(std::string(e.what()).find(v) != std::string::npos);
      CHECK(std::string(e.what()).find("taco") != std::string::npos);  // the supported list
    }
  }
  // 3- and 2-bit codes run in symmetric g<G> forms (every preset, ef: around them too); the other
  // forms get one reason each from the one dispatch point.
  struct Refused {
    const char* variant;
    const char* reason;
  };
  for (const Refused& r :
       {Refused{"int3:asym:g32", "asymmetric integer codes"},
        Refused{"int2:row", "row blocks of int2 elements"},
        Refused{"int3:tensor", "tensor blocks of int3 elements"},
        Refused{"int2:tile32", "tile blocks"}, Refused{"int3:g32:sue4m3", "ue4m3 scales with int3"},
        Refused{"ef:int3:asym:g64", "asymmetric integer codes"}}) {
    CAPTURE(r.variant);
    try {
      (void)gpu::make_gpu_codec(r.variant);
      FAIL("expected InputError");
    } catch (const InputError& e) {
      CHECK(std::string(e.what()).find(r.reason) != std::string::npos);
    }
  }
  int lowbit_presets = 0;
  for (const std::string& p : gpu::gpu_presets())
    lowbit_presets += (p.rfind("int3", 0) == 0 || p.rfind("int2", 0) == 0) ? 1 : 0;
  CHECK(lowbit_presets == 8);
  for (const char* v : {"ef:int3-g32-had", "ef:int2-g128-had", "int3:g16:had", "int2:g1024:rht"}) {
    CAPTURE(v);
    CHECK(gpu::make_gpu_codec(v)->name() == make_codec(v)->name());
  }
  CHECK(gpu::gpu_available());
  // ef: and aqsgd: wrap the GPU codec (the study keeps their state); other structured codecs do not
  // run
  const auto ef = gpu::make_gpu_codec("ef:nvfp4");
  REQUIRE(ef->wrapped().has_value());
  CHECK(ef->wrapped()->inner->params().value("backend", "") == "cuda");
  CHECK(ef->name() == make_codec("ef:nvfp4")->name());
  CHECK_THROWS_AS(gpu::make_gpu_codec("topk:frac=0.1"), InputError);
}

// Decoding takes no 4-bit (or 3- / 2-bit) wire for granted either: every code byte (the most
// negative INT3 / INT2 codes and a tail's unused bits too), scale bytes of every value
// (UE4M3's NaN codes 0x7f..0xff, E8M0's 0xff, fp32 NaN / Inf / zero / negative), and for UE4M3 a
// tensor scale S_t that is 0, negative, NaN, infinite, subnormal or huge.
TEST_CASE("GPU decodes of arbitrary 4-bit, 3-bit, 2-bit and two-level wires equal the CPU",
          "[gpu][codec][nibble]") {
  std::mt19937_64 rng(4096);
  const float st_cases[] = {0.0f,
                            -0.0f,
                            -1.0f,
                            std::numeric_limits<float>::quiet_NaN(),
                            std::numeric_limits<float>::infinity(),
                            1e-45f,
                            3e38f,
                            0.0123f};
  for (const char* variant :
       {"nvfp4", "mxfp4", "int4-g32", "int4-g32-had", "e2m1:g16:sue4m3:had", "e2m1:g128:sbf16",
        "int4:g64:sf16:sround=rne", "int3-g32", "int3-g128-had", "int2-g64-had", "int3:g16",
        "int2:g256:rht", "int3:g64:sbf16"}) {
    const auto cpu = make_codec(variant);
    const auto gpu_codec = gpu::make_gpu_codec(variant);
    const gpu::GpuQuant q(parse_variant(variant));
    for (const Shape& sh : {Shape{64, 1024}, Shape{3, 1000}, Shape{1, 37}}) {
      const gpu::ChunkGeometry g = q.geometry(sh.rows, sh.cols);
      for (const float st : st_cases) {
        CAPTURE(variant, sh.rows, sh.cols, st);
        std::vector<uint8_t> wire(size_t(g.total));
        for (auto& b : wire) b = uint8_t(rng());
        // fp32 scales: finite most of the time, then the odd ones
        if (q.rules().scale == ScaleFormat::F32)
          for (int64_t b = 0; b < g.nblocks; ++b) {
            const int k = int(rng() % 8);
            const float sc = k == 0   ? 0.0f
                             : k == 1 ? -2.0f
                             : k == 2 ? std::numeric_limits<float>::infinity()
                             : k == 3 ? std::numeric_limits<float>::quiet_NaN()
                                      : std::ldexp(1.0f + float(k), int(rng() % 60) - 30);
            std::memcpy(wire.data() + g.scale_off + 4 * b, &sc, 4);
          }
        if (q.rules().scale == ScaleFormat::UE4M3) std::memcpy(wire.data() + g.aux_off, &st, 4);
        const int64_t n = sh.rows * sh.cols;
        std::vector<float> dw(static_cast<size_t>(n)), dg(static_cast<size_t>(n));
        cpu->decode(wire.data(), wire.size(), sh.rows, sh.cols, dw.data());
        gpu_codec->decode(wire.data(), wire.size(), sh.rows, sh.cols, dg.data());
        const int64_t bd = first_float_diff(dg.data(), dw.data(), dw.size());
        if (bd >= 0) {
          CAPTURE(bd, dg[size_t(bd)], dw[size_t(bd)]);
          FAIL("GPU decode of an arbitrary 4/3/2-bit wire differs from the CPU decode");
        }
        if (q.rules().scale != ScaleFormat::UE4M3) break;  // S_t only matters for UE4M3
      }
    }
  }
}

namespace {

// A chunk of [rows, cols] floats whose groups of 16 have chosen magnitudes: the two-level scale's
// edge cases (NVFP4: S_t from the chunk's largest group, each group's UE4M3 code relative to it).
std::vector<float> two_level_chunk(int kind, int64_t rows, int64_t cols, std::mt19937_64& rng) {
  std::normal_distribution<float> nd(0.0f, 1.0f);
  const int64_t n = rows * cols;
  std::vector<float> x(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    const int64_t g = i / 16;
    float v = nd(rng);
    switch (kind) {
      case 0:
        v = (i % 3 == 0) ? -0.0f : 0.0f;
        break;  // all zero: S_t from amax 0
      case 1:
        v *= 1e-42f;
        break;  // subnormal amax
      case 2:
        v = g == 0 ? 3.0e38f * (i % 2 ? 1.0f : -0.5f) : v * 1e-20f;
        break;  // huge and tiny groups
      case 3:
        v = g % 4 == 0 ? v * 1e6f : v * 1e-3f;
        break;  // ratios that round to 0
      case 4:
        v = g % 5 == 1   ? std::numeric_limits<float>::quiet_NaN()
            : g % 5 == 2 ? (i % 2 ? INFINITY : -INFINITY)
                         : v;
        break;  // non-finite groups
      case 5:
        v = float(int(i % 16) - 8) * std::ldexp(6.0f, int(g % 9) * 2);
        break;  // exact UE4M3 steps
      case 6:
        v *= std::ldexp(1.0f, int(rng() % 80) - 40);
        break;  // 80 binades
      case 7:
        v = g % 7 == 3 ? 0.0f : v * 448.0f * 6.0f;
        break;  // zero groups among others
      default:
        break;
    }
    x[size_t(i)] = v;
  }
  return x;
}

}  // namespace

// NVFP4's two-level scale on the GPU (a statistics pass, then the encode) against the CPU: chunks
// of every edge case side by side (each with its own S_t), f32 and bf16 input, the decodes and
// the re-encoding forms (whose statistics pass decodes the sources too).
TEST_CASE("GPU two-level (NVFP4) scales: edge cases, chunks, re-encodes equal the CPU",
          "[gpu][codec][nibble]") {
  gpu::CudaStream stream;
  std::mt19937_64 rng(1616);
  for (const char* variant : {"nvfp4", "e2m1:g16:sue4m3:sround=up", "int4:g16:sue4m3",
                              "e2m1:g16:sue4m3:had", "e2m1:g64:sue4m3"}) {
    const auto cpu = make_codec(variant);
    gpu::GpuQuant q(parse_variant(variant));
    for (const Shape& s : {Shape{4, 64}, Shape{3, 1000}}) {
      const int64_t chunks = 8, n = s.rows * s.cols;
      const gpu::ChunkGeometry g = q.geometry(s.rows, s.cols);
      for (const bool bf16 : {false, true}) {
        CAPTURE(variant, s.rows, s.cols, bf16);
        std::vector<float> x;
        for (int64_t c = 0; c < chunks; ++c) {
          auto part = two_level_chunk(int(c), s.rows, s.cols, rng);
          if (bf16)
            for (float& v : part) v = bf16_to_float(float_to_bf16(v));
          x.insert(x.end(), part.begin(), part.end());
        }
        std::vector<uint8_t> want;
        for (int64_t c = 0; c < chunks; ++c) {
          const auto w = cpu->encode(x.data() + c * n, s.rows, s.cols);
          want.insert(want.end(), w.begin(), w.end());
        }
        DeviceBuffer d_in(size_t(chunks * n) * 4, "test"), d_wire(want.size(), "test"),
            d_w2(want.size(), "test"), d_out(size_t(chunks * n) * 4, "test");
        if (bf16)
          upload(d_in, to_bf16_bits(x));
        else
          upload(d_in, x);
        const DType in_type = bf16 ? DType::BF16 : DType::F32;
        q.encode(d_in.get(), in_type, chunks, s.rows, s.cols, d_wire.as<uint8_t>(), stream.get());
        stream.synchronize();
        const auto got = download<uint8_t>(d_wire, want.size());
        const int64_t bad = first_diff(got.data(), want.data(), want.size());
        if (bad >= 0) {
          const std::string where = describe_offset(g, bad);
          CAPTURE(bad, where, int(got[size_t(bad)]), int(want[size_t(bad)]));
          FAIL("GPU two-level encode differs from the CPU");
        }
        // decode
        std::vector<float> dec(static_cast<size_t>(chunks * n));
        for (int64_t c = 0; c < chunks; ++c)
          cpu->decode(want.data() + c * g.total, size_t(g.total), s.rows, s.cols,
                      dec.data() + c * n);
        q.decode(d_wire.as<uint8_t>(), chunks, s.rows, s.cols, d_out.get(), DType::F32,
                 stream.get());
        stream.synchronize();
        const auto gd = download<float>(d_out, dec.size());
        CHECK(first_float_diff(gd.data(), dec.data(), dec.size()) < 0);
        // decode-reduce-encode of two sources (the wire and itself shifted by a chunk), sums as
        // fp32 and rounded to bf16
        std::vector<uint8_t> rot(want.begin() + g.total, want.end());
        rot.insert(rot.end(), want.begin(), want.begin() + g.total);
        upload(d_w2, rot);
        for (const bool rb : {false, true}) {
          std::vector<uint8_t> want_re;
          for (int64_t c = 0; c < chunks; ++c) {
            std::vector<float> sum(static_cast<size_t>(n));
            const int64_t c2 = (c + 1) % chunks;
            for (int64_t i = 0; i < n; ++i) {
              float v = dec[size_t(c * n + i)] + dec[size_t(c2 * n + i)];
              sum[size_t(i)] = rb ? bf16_to_float(float_to_bf16(v)) : v;
            }
            const auto w = cpu->encode(sum.data(), s.rows, s.cols);
            want_re.insert(want_re.end(), w.begin(), w.end());
          }
          DeviceBuffer d_re(want_re.size(), "test");
          q.decode_reduce_encode({d_wire.as<uint8_t>(), d_w2.as<uint8_t>()}, chunks, s.rows, s.cols,
                                 d_re.as<uint8_t>(), rb, stream.get());
          stream.synchronize();
          const auto gre = download<uint8_t>(d_re, want_re.size());
          const int64_t br = first_diff(gre.data(), want_re.data(), want_re.size());
          CAPTURE(rb, br);
          CHECK(br < 0);
        }
        // decode-add-encode (one chunk): encode(decode(chunk 3) + own), own = chunk 6's input
        {
          std::vector<float> sum(static_cast<size_t>(n));
          for (int64_t i = 0; i < n; ++i)
            sum[size_t(i)] = dec[size_t(3 * n + i)] + x[size_t(6 * n + i)];
          const auto w = cpu->encode(sum.data(), s.rows, s.cols);
          DeviceBuffer d_dae(w.size(), "test");
          const uint8_t* own = d_in.as<uint8_t>() + size_t(6 * n) * (bf16 ? 2 : 4);
          q.decode_add_encode(d_wire.as<uint8_t>() + 3 * g.total, own, in_type, s.rows, s.cols,
                              d_dae.as<uint8_t>(), nullptr, stream.get());  // fused: no scratch
          stream.synchronize();
          const auto gw = download<uint8_t>(d_dae, w.size());
          const int64_t bd = first_diff(gw.data(), w.data(), w.size());
          CAPTURE(bd);
          CHECK(bd < 0);
        }
      }
    }
  }
}

namespace {

// The CPU reference of one error-feedback step on one chunk (GpuQuant::encode_ef's contract):
// v = finite(x) + e; wire = encode(v); e' = v - finite(decode(wire)).
std::vector<uint8_t> cpu_feedback_step(const Codec& cpu, const float* x, float* e, int64_t rows,
                                       int64_t cols, EncodeStats* stats) {
  const int64_t n = rows * cols;
  std::vector<float> v(static_cast<size_t>(n)), d(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[size_t(i)] = (std::isfinite(x[i]) ? x[i] : 0.0f) + e[i];
  std::vector<uint8_t> wire = cpu.encode(v.data(), rows, cols, stats);
  cpu.decode(wire.data(), wire.size(), rows, cols, d.data());
  for (int64_t i = 0; i < n; ++i)
    e[i] = v[size_t(i)] - (std::isfinite(d[size_t(i)]) ? d[size_t(i)] : 0.0f);
  return wire;
}

}  // namespace

TEST_CASE("GPU error feedback (encode_ef) equals the CPU step bit for bit",
          "[gpu][codec][feedback]") {
  gpu::CudaStream stream;
  uint64_t seed = 9090;
  std::vector<std::string> variants = {"taco",
                                       "taco-rht",
                                       "taco-noh",
                                       "fp8-g128",
                                       "mxfp8",
                                       "int8-g128-had",
                                       "e4m3:g128:had:nosat:dual",
                                       "e4m3:row:nosat",
                                       "int8:col",
                                       "e5m2:tensor"};
  for (const char* v : kNewVariants) variants.emplace_back(v);
  for (const char* v : kLowBitVariants) variants.emplace_back(v);
  DeviceBuffer d_stats(16, "test counters");
  for (const std::string& variant : variants) {
    const auto cpu = make_codec(variant);
    const gpu::GpuQuant q(parse_variant(variant));
    for (const Shape& s : {Shape{3, 1000}, Shape{4, 1024}, Shape{1, 37}, Shape{600, 16}}) {
      for (const int64_t chunks : {int64_t(1), int64_t(3)}) {
        for (const bool bf16 : {false, true}) {
          const int64_t n = s.rows * s.cols, total = chunks * n;
          const gpu::ChunkGeometry g = q.geometry(s.rows, s.cols);
          // a residual one float off the 16-byte grid for three chunks: the scalar paths
          const int64_t off = chunks == 3 ? 1 : 0;
          DeviceBuffer d_x(size_t(total) * 4, "test"), d_e(size_t(total + 4) * 4, "test"),
              d_wire(size_t(chunks * g.total), "test");
          float* d_res = d_e.as<float>() + off;
          fill_device(d_e.get(), 0, size_t(total + 4) * 4);
          std::vector<float> e(static_cast<size_t>(total), 0.0f);
          for (int step = 0; step < 3; ++step) {
            ++seed;
            const Dist d = kDists[seed % 9];
            CAPTURE(variant, s.rows, s.cols, chunks, bf16, step, dist_name(d), seed);
            const auto x = make_input(d, chunks * s.rows, s.cols, seed, bf16);
            if (bf16)
              upload(d_x, to_bf16_bits(x));
            else
              upload(d_x, x);
            fill_device(d_stats.get(), 0, 16);
            q.encode_ef(d_x.get(), bf16 ? DType::BF16 : DType::F32, d_res, chunks, s.rows, s.cols,
                        d_wire.as<uint8_t>(), stream.get(), d_stats.as<unsigned long long>());
            stream.synchronize();
            std::vector<uint8_t> want;
            EncodeStats cs;
            for (int64_t c = 0; c < chunks; ++c) {
              const auto w =
                  cpu_feedback_step(*cpu, x.data() + c * n, e.data() + c * n, s.rows, s.cols, &cs);
              want.insert(want.end(), w.begin(), w.end());
            }
            const auto got = download<uint8_t>(d_wire, want.size());
            const int64_t bad = first_diff(got.data(), want.data(), want.size());
            if (bad >= 0) {
              const std::string where = describe_offset(g, bad);
              CAPTURE(bad, where, int(got[size_t(bad)]), int(want[size_t(bad)]));
              FAIL("GPU error-feedback wire differs from the CPU encode of v = x + e");
            }
            std::vector<float> ge(static_cast<size_t>(total));
            TACO_CUDA_CHECK(
                cudaMemcpy(ge.data(), d_res, size_t(total) * 4, cudaMemcpyDeviceToHost));
            const int64_t be = first_float_diff(ge.data(), e.data(), e.size());
            if (be >= 0) {
              CAPTURE(be, ge[size_t(be)], e[size_t(be)]);
              FAIL("GPU residual differs from the CPU's e' = v - decode(encode(v))");
            }
            const auto counters = download<unsigned long long>(d_stats, 2);
            CHECK(int64_t(counters[0]) == cs.saturated);
            CHECK(int64_t(counters[1]) == cs.nonfinite);
          }
        }
      }
    }
  }
}

// The study's error feedback (FeedbackState, `ef:<variant>`) and the GPU's keep the same residual.
TEST_CASE("GPU error feedback keeps the study's residual (ef:<variant>)",
          "[gpu][codec][feedback]") {
  gpu::CudaStream stream;
  for (const char* inner : {"nvfp4", "int4-g32", "taco", "fp8-row", "int2-g128-had", "int3-g32"}) {
    const std::string variant = std::string("ef:") + inner;
    const auto wrapped = make_codec(variant);
    REQUIRE(wrapped->wrapped().has_value());
    study::FeedbackState state(*wrapped);
    const gpu::GpuQuant q(parse_variant(inner));
    const int64_t rows = 8, cols = 512, n = rows * cols;
    DeviceBuffer d_x(size_t(n) * 4, "test"), d_e(size_t(n) * 4, "test"),
        d_wire(size_t(q.chunk_bytes(rows, cols)), "test");
    fill_device(d_e.get(), 0, size_t(n) * 4);
    std::vector<float> xhat(static_cast<size_t>(n));
    for (int step = 0; step < 4; ++step) {
      CAPTURE(variant, step);
      const auto x = make_input(step == 2 ? Dist::NonFinite : Dist::Laplace, rows, cols,
                                31 + uint64_t(step), false);
      upload(d_x, x);
      q.encode_ef(d_x.get(), DType::F32, d_e.as<float>(), 1, rows, cols, d_wire.as<uint8_t>(),
                  stream.get());
      stream.synchronize();
      state.step("seq", x.data(), rows, cols, xhat.data());
      const std::vector<float>& e = *state.state("seq");
      const auto ge = download<float>(d_e, size_t(n));
      const int64_t be = first_float_diff(ge.data(), e.data(), e.size());
      CAPTURE(be);
      REQUIRE(be < 0);
      // what the receiver uses: the decode of the GPU's wire
      std::vector<float> dg(static_cast<size_t>(n));
      const auto wire = download<uint8_t>(d_wire, size_t(q.chunk_bytes(rows, cols)));
      wrapped->wrapped()->inner->decode(wire.data(), wire.size(), rows, cols, dg.data());
      CHECK(first_float_diff(dg.data(), xhat.data(), xhat.size()) < 0);
    }
  }
}

TEST_CASE("the bf16 device codec reproduces the CPU's bf16 codec through every entry point",
          "[gpu][codec][bf16]") {
  // GpuBf16 behind make_device_codec: the study's host-buffer codec, the device operations the
  // collectives and the binding call, error feedback, NaN payloads and the non-finite counter.
  const auto cpu = make_codec("bf16");
  const auto gpu_codec = gpu::make_gpu_codec("bf16");
  CHECK(gpu_codec->params().value("backend", "") == "cuda");
  uint64_t seed = 4242;
  for (const Shape& s : {Shape{4, 1024}, Shape{3, 1000}, Shape{1, 4224}}) {
    for (Dist d : kDists) {
      const auto x = make_input(d, s.rows, s.cols, ++seed, false);
      CAPTURE(s.rows, s.cols, dist_name(d));
      EncodeStats cs, gs;
      const auto want = cpu->encode(x.data(), s.rows, s.cols, &cs);
      const auto got = gpu_codec->encode(x.data(), s.rows, s.cols, &gs);
      REQUIRE(got == want);
      CHECK(gs.nonfinite == cs.nonfinite);
      CHECK(gs.saturated == cs.saturated);
      // Sums of three wires, re-encoded, and a ring hop: the CPU's bits.
      const auto y = make_input(d, s.rows, s.cols, ++seed, false);
      const auto wy = cpu->encode(y.data(), s.rows, s.cols);
      const std::vector<WireView> srcs = {
          {want.data(), want.size()}, {wy.data(), wy.size()}, {want.data(), want.size()}};
      // Sums of NaNs are NaNs whose payload is the adder's (x86 keeps an operand's, the GPU
      // writes its canonical NaN): outside the contract (codecs/codec.hpp), so NaN equals NaN.
      std::vector<float> sc(x.size()), sg(x.size());
      cpu->decode_reduce(srcs, s.rows, s.cols, sc.data());
      gpu_codec->decode_reduce(srcs, s.rows, s.cols, sg.data());
      REQUIRE(first_float_diff(sg.data(), sc.data(), sc.size()) < 0);
      std::vector<uint8_t> rc, rg, hc, hg;
      cpu->decode_reduce_encode(srcs, s.rows, s.cols, false, rc);
      gpu_codec->decode_reduce_encode(srcs, s.rows, s.cols, false, rg);
      REQUIRE(first_bf16_diff(rg, rc) < 0);
      cpu->decode_add_encode({wy.data(), wy.size()}, x.data(), s.rows, s.cols, hc);
      gpu_codec->decode_add_encode({wy.data(), wy.size()}, x.data(), s.rows, s.cols, hg);
      REQUIRE(first_bf16_diff(hg, hc) < 0);
    }
  }
  // Error feedback on the device equals the CPU formula (FeedbackState::step), residual included.
  const auto dc = gpu::make_device_codec(parse_variant("bf16"));
  const int64_t rows = 8, cols = 512, n = rows * cols;
  const auto x = make_input(Dist::Mixed, rows, cols, 99, false);
  std::vector<float> e(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) e[size_t(i)] = 1e-3f * float(i % 7 - 3);
  DeviceBuffer dx(size_t(n) * 4, "x"), de(size_t(n) * 4, "e"), dw(size_t(n) * 2, "w");
  copy_to_device(dx.get(), x.data(), size_t(n) * 4);
  copy_to_device(de.get(), e.data(), size_t(n) * 4);
  dc->encode_ef(dx.get(), DType::F32, de.as<float>(), 1, rows, cols, dw.as<uint8_t>(), nullptr);
  TACO_CUDA_CHECK(cudaDeviceSynchronize());
  auto fin = [](float f) { return std::isfinite(f) ? f : 0.0f; };
  std::vector<float> v(static_cast<size_t>(n)), dec(v.size()), e2(v.size());
  for (int64_t i = 0; i < n; ++i) v[size_t(i)] = fin(x[size_t(i)]) + e[size_t(i)];
  const auto wv = cpu->encode(v.data(), rows, cols);
  cpu->decode(wv.data(), wv.size(), rows, cols, dec.data());
  for (int64_t i = 0; i < n; ++i) e2[size_t(i)] = v[size_t(i)] - fin(dec[size_t(i)]);
  REQUIRE(download<uint8_t>(dw, size_t(n) * 2) == wv);
  const auto got_e = download<float>(de, size_t(n));
  REQUIRE(std::memcmp(got_e.data(), e2.data(), size_t(n) * 4) == 0);
}

TEST_CASE("the TAH-Quant device codec reproduces the CPU's wire through every entry point",
          "[gpu][codec][tahquant]") {
  // GpuTahQuant behind make_device_codec: entropy ranks (ties included: repeated tokens), the
  // pivot rule, tile sizes 8..1024, bit widths 1..8, the host-buffer codec (the study), the device
  // operations (several chunks in bound-sized slots, bf16 input), decode-reduce, re-encodes, the
  // ring hop and error feedback, each against the CPU reference bit for bit.
  uint64_t seed = 777;
  struct Case {
    const char* variant;
    Shape shape;
  };
  for (const Case& k : {Case{"tahquant", {37, 256}}, Case{"tahquant", {1, 64}},
                        Case{"tahquant", {300, 512}}, Case{"tahquant:tile=8:hi=2:lo=1", {19, 40}},
                        Case{"tahquant:tile=1024:hi=8:lo=5:pct=50", {6, 2048}},
                        Case{"tahquant:tile=32:hi=6:lo=3:pct=100", {9, 96}},
                        Case{"tahquant:tile=16:hi=3:lo=2:pct=0", {10, 48}}}) {
    const auto cpu = make_codec(k.variant);
    const auto gc = gpu::make_gpu_codec(k.variant);
    const int64_t rows = k.shape.rows, cols = k.shape.cols, n = rows * cols;
    for (Dist d : kDists) {
      auto x = make_input(d, rows, cols, ++seed, false);
      // Repeated tokens: equal entropies, ranked by token index on both sides.
      for (int64_t r = 2; r < rows; r += 3)
        std::copy(x.begin(), x.begin() + cols, x.begin() + r * cols);
      CAPTURE(k.variant, rows, cols, dist_name(d));
      EncodeStats cs, gs;
      const auto want = cpu->encode(x.data(), rows, cols, &cs);
      const auto got = gc->encode(x.data(), rows, cols, &gs);
      REQUIRE(got.size() == want.size());
      REQUIRE(first_diff(got.data(), want.data(), want.size()) < 0);
      CHECK(gs.nonfinite == cs.nonfinite);
      CHECK(gs.saturated == cs.saturated);
      std::vector<float> dc(x.size()), dg(x.size());
      cpu->decode(want.data(), want.size(), rows, cols, dc.data());
      gc->decode(want.data(), want.size(), rows, cols, dg.data());
      REQUIRE(first_float_diff(dg.data(), dc.data(), dc.size()) < 0);
      const auto y = make_input(Dist::Normal, rows, cols, ++seed, false);
      const auto wy = cpu->encode(y.data(), rows, cols);
      const std::vector<WireView> srcs = {
          {want.data(), want.size()}, {wy.data(), wy.size()}, {want.data(), want.size()}};
      std::vector<float> sc(x.size()), sg(x.size());
      cpu->decode_reduce(srcs, rows, cols, sc.data());
      gc->decode_reduce(srcs, rows, cols, sg.data());
      REQUIRE(std::memcmp(sc.data(), sg.data(), sc.size() * 4) == 0);
      for (bool round_bf16 : {false, true}) {
        std::vector<uint8_t> rc, rg;
        cpu->decode_reduce_encode(srcs, rows, cols, round_bf16, rc);
        gc->decode_reduce_encode(srcs, rows, cols, round_bf16, rg);
        REQUIRE(rc == rg);
      }
      std::vector<uint8_t> hc, hg;
      cpu->decode_add_encode({wy.data(), wy.size()}, x.data(), rows, cols, hc);
      gc->decode_add_encode({wy.data(), wy.size()}, x.data(), rows, cols, hg);
      REQUIRE(hc == hg);
    }

    // The device API: three chunks of bf16 values side by side, each wire in a slot of the bound
    // with zeros after the encoded bytes; decoded to bf16 after an fp32 sum.
    const auto dc = gpu::make_device_codec(parse_variant(k.variant));
    const int64_t slot = dc->chunk_bytes(rows, cols), chunks = 3;
    REQUIRE(slot == cpu->wire_size(rows, cols).bytes);
    std::vector<float> xb(size_t(chunks * n));
    std::vector<uint16_t> hb(xb.size());
    const auto src = make_input(Dist::Laplace, chunks * rows, cols, ++seed, true);
    for (size_t i = 0; i < xb.size(); ++i) {
      hb[i] = float_to_bf16(src[i]);
      xb[i] = bf16_to_float(hb[i]);
    }
    std::vector<uint8_t> want_slots;
    for (int64_t c = 0; c < chunks; ++c) {
      const auto w = cpu->encode(xb.data() + c * n, rows, cols);
      want_slots.insert(want_slots.end(), w.begin(), w.end());
      want_slots.resize(size_t((c + 1) * slot), 0);
    }
    DeviceBuffer dx(xb.size() * 2, "x"), dw(size_t(chunks * slot), "w"), dout(xb.size() * 2, "out");
    copy_to_device(dx.get(), hb.data(), hb.size() * 2);
    fill_device(dw.get(), 0xab, size_t(chunks * slot));  // every byte written
    dc->encode(dx.get(), DType::BF16, chunks, rows, cols, dw.as<uint8_t>(), nullptr);
    TACO_CUDA_CHECK(cudaDeviceSynchronize());
    REQUIRE(download<uint8_t>(dw, size_t(chunks * slot)) == want_slots);
    dc->decode(dw.as<uint8_t>(), chunks, rows, cols, dout.get(), DType::BF16, nullptr);
    TACO_CUDA_CHECK(cudaDeviceSynchronize());
    std::vector<float> dec(xb.size());
    for (int64_t c = 0; c < chunks; ++c)
      cpu->decode(want_slots.data() + c * slot, size_t(slot), rows, cols, dec.data() + c * n);
    const auto got_b = download<uint16_t>(dout, xb.size());
    for (size_t i = 0; i < xb.size(); ++i) {
      CAPTURE(i);
      REQUIRE(got_b[i] == float_to_bf16(dec[i]));
    }

    // Error feedback: the CPU formula (FeedbackState::step), residual included.
    const auto xe = make_input(Dist::Mixed, rows, cols, ++seed, false);
    std::vector<float> e(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) e[size_t(i)] = 1e-3f * float(i % 7 - 3);
    DeviceBuffer ex(size_t(n) * 4, "x"), ee(size_t(n) * 4, "e"), ew(size_t(slot), "w");
    copy_to_device(ex.get(), xe.data(), size_t(n) * 4);
    copy_to_device(ee.get(), e.data(), size_t(n) * 4);
    dc->encode_ef(ex.get(), DType::F32, ee.as<float>(), 1, rows, cols, ew.as<uint8_t>(), nullptr);
    TACO_CUDA_CHECK(cudaDeviceSynchronize());
    auto fin = [](float f) { return std::isfinite(f) ? f : 0.0f; };
    std::vector<float> v(static_cast<size_t>(n)), vd(v.size()), e2(v.size());
    for (int64_t i = 0; i < n; ++i) v[size_t(i)] = fin(xe[size_t(i)]) + e[size_t(i)];
    auto wv = cpu->encode(v.data(), rows, cols);
    cpu->decode(wv.data(), wv.size(), rows, cols, vd.data());
    for (int64_t i = 0; i < n; ++i) e2[size_t(i)] = v[size_t(i)] - fin(vd[size_t(i)]);
    wv.resize(size_t(slot), 0);
    REQUIRE(download<uint8_t>(ew, size_t(slot)) == wv);
    const auto got_e = download<float>(ee, size_t(n));
    REQUIRE(std::memcmp(got_e.data(), e2.data(), size_t(n) * 4) == 0);

    // Arbitrary bytes (a bitmap marking the wrong number of tokens, pivots anywhere): the CPU
    // refuses them; the device decodes them inside its buffers.
    std::mt19937_64 rng(seed);
    std::vector<uint8_t> junk(static_cast<size_t>(slot));
    for (auto& b : junk) b = uint8_t(rng());
    DeviceBuffer dj(size_t(slot), "junk"), dd(size_t(n) * 4, "out");
    copy_to_device(dj.get(), junk.data(), junk.size());
    dc->decode(dj.as<uint8_t>(), 1, rows, cols, dd.get(), DType::F32, nullptr);
    TACO_CUDA_CHECK(cudaDeviceSynchronize());
  }
}
