// The host/device number formats of the GPU kernels (formats/hd_formats.hpp), run on the host
// against the CPU reference: E2M1 and INT4 element codes over dense float sweeps, every UE4M3
// code, NVFP4's two-level scale rule against QuantCodec's wire bytes, and a host model of the
// GPU kernels' per-group 4-bit encode (scale, division through the reciprocal, codes, nibble
// packing) against QuantCodec on inputs of every kind. The kernels compile the same functions
// for the device, so this is what CI can check of their arithmetic without a GPU.
#include "catch.hpp"
#include "codecs/codec.hpp"
#include "codecs/quant_codec.hpp"
#include "core/dtype.hpp"
#include "formats/e8m0.hpp"
#include "formats/fp8.hpp"
#include "formats/hd_formats.hpp"
#include "formats/intq.hpp"
#include "formats/minifloat.hpp"
#include "formats/scale.hpp"
#include "formats/scale_division.hpp"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

using namespace taco;

namespace {

const float kNaN = std::numeric_limits<float>::quiet_NaN();
const float kInf = std::numeric_limits<float>::infinity();

// Calls fn(bits) for every float pattern whose magnitude lies in [lo, hi] (both signs), and for a
// sparse sweep (one pattern in `stride`, plus the patterns next to every binade edge) of all the
// others, NaN and Inf patterns included.
template <class Fn>
int64_t sweep_floats(float lo, float hi, uint32_t stride, Fn&& fn) {
  const uint32_t a0 = float_bits(lo), a1 = float_bits(hi);
  int64_t n = 0;
  for (uint32_t sign = 0; sign < 2; ++sign) {
    const uint32_t s = sign << 31;
    for (uint32_t a = a0; a <= a1; ++a, ++n) fn(s | a);
    for (uint64_t a = 0; a <= 0x7fffffffu; a += stride, ++n) fn(s | uint32_t(a));
    for (uint32_t e = 0; e < 256; ++e)
      for (uint32_t m : {0u, 1u, 2u, 0x3fffffu, 0x400000u, 0x400001u, 0x7ffffeu, 0x7fffffu}) {
        fn(s | (e << 23) | m);
        ++n;
      }
  }
  return n;
}

}  // namespace

TEST_CASE("hd E2M1 codes equal the CPU encoder over float bit patterns", "[formats][hd]") {
  int64_t bad = 0;
  // Every pattern from 2^-4 to 16 (the codes' range and its rounding edges), a sweep of the rest.
  const int64_t n = sweep_floats(0.0625f, 16.0f, 4099, [&](uint32_t b) {
    const float x = bits_float(b);
    if (gpu::e2m1_code(x) != encode_minifloat<E2M1Traits>(x, true)) ++bad;
  });
  CAPTURE(n);
  REQUIRE(bad == 0);
  REQUIRE(n > (int64_t(1) << 27));
  for (uint32_t c = 0; c < 16; ++c) {
    const float want = fp4_e2m1_to_float(uint8_t(c));
    CAPTURE(c, want);
    REQUIRE(float_bits(gpu::e2m1_value(c)) == float_bits(want));
    REQUIRE(gpu::e2m1_code(want) == c);  // every code round-trips (-0 included)
  }
  REQUIRE(gpu::e2m1_code(kNaN) == 0u);
  REQUIRE(gpu::e2m1_code(-kInf) == 0xfu);
  REQUIRE(gpu::e2m1_code(0.25f) == 0u);    // tie: to the even 0
  REQUIRE(gpu::e2m1_code(0.75f) == 2u);    // tie: to the even 1.0
  REQUIRE(gpu::e2m1_code(5.0f) == 6u);     // tie: to the even 4
  REQUIRE(gpu::e2m1_code(-7.0f) == 0xfu);  // saturates
}

TEST_CASE("hd INT4 codes equal the CPU's symmetric quantizer", "[formats][hd]") {
  int64_t bad = 0;
  const int64_t n = sweep_floats(0.0625f, 16.0f, 4099, [&](uint32_t b) {
    const float x = bits_float(b);
    const uint32_t want = uint32_t(quantize_int_sym(x, 7.0f)) & 0xfu;
    if (gpu::int4_code(x) != want) ++bad;
  });
  CAPTURE(n);
  REQUIRE(bad == 0);
  for (uint32_t c = 0; c < 16; ++c) {
    CAPTURE(c);
    REQUIRE(float_bits(gpu::int4_value(c)) == float_bits(float(int_from_code(c, 4))));
  }
  REQUIRE(gpu::int4_code(kNaN) == 0u);
  REQUIRE(gpu::int4_code(-kInf) == 9u);  // -7
  REQUIRE(gpu::int4_code(2.5f) == 2u);   // ties to even
  REQUIRE(gpu::int4_code(-3.5f) == 0xcu);
}

TEST_CASE("hd UE4M3 codes and values equal the CPU's", "[formats][hd]") {
  int64_t bad = 0;
  const int64_t n = sweep_floats(std::ldexp(1.0f, -12), 512.0f, 1021, [&](uint32_t b) {
    const float x = bits_float(b);
    if (gpu::ue4m3_code(x) != float_to_ue4m3(x, true)) ++bad;
    if (gpu::e4m3_code_sw(x, false) != float_to_fp8_e4m3(x, false)) ++bad;
  });
  CAPTURE(n);
  REQUIRE(bad == 0);
  for (uint32_t c = 0; c < 256; ++c) {
    const float want = ue4m3_to_float(uint8_t(c)), got = gpu::ue4m3_value(c);
    CAPTURE(c, want, got);
    REQUIRE((float_bits(got) == float_bits(want) || (std::isnan(got) && std::isnan(want))));
  }
}

TEST_CASE("hd two-level scale rule equals QuantCodec's NVFP4 bytes, edge cases included",
          "[formats][hd]") {
  // Groups of 16 whose amax is chosen: zero, tiny (subnormal), huge, around the UE4M3 edges.
  const std::vector<std::vector<float>> cases = {
      {1.0f, 0.1f, 10.0f, 0.0f},      // an all-zero block
      {0.0f, 0.0f},                   // S_t from an all-zero chunk
      {3.0e38f, 1.0f, 1e-30f, 0.0f},  // huge: ratio rounds to 0 -> code 1
      {1e-40f, 3e-42f, 1e-45f},       // subnormal amaxes
      {448.0f * 6.0f, 6.0f * 0.001953125f,
       6.0f * 0.0009765625f},                          // ratios 448, 2^-9, 2^-10 (tie to 0)
      {1.0f, 1.0f + 1e-7f, 0.999f, 5.0e-4f, 7.0e-4f},  // rounding near codes
      {kInf, 2.0f, kNaN, -3.0f},                       // non-finite values are 0
  };
  for (const char* variant : {"nvfp4", "e2m1:g16:sue4m3:sround=up", "int4:g32:sue4m3"}) {
    const auto codec = make_codec(variant);
    const auto& q = dynamic_cast<const QuantCodec&>(*codec);
    const int G = q.spec().block;
    const bool up = q.spec().sround == ScaleRound::Up;
    for (const auto& amaxes : cases) {
      const int64_t nb = int64_t(amaxes.size()), n = nb * G;
      std::vector<float> x(static_cast<size_t>(n), 0.0f);
      std::vector<float> finite_amax(static_cast<size_t>(nb), 0.0f);
      for (int64_t b = 0; b < nb; ++b) {
        const float a = amaxes[size_t(b)];
        x[size_t(b * G + 3)] = -a;  // the block's amax (or non-finite)
        x[size_t(b * G + 5)] = std::isfinite(a) ? a * 0.37f : 0.0f;
        finite_amax[size_t(b)] = std::isfinite(a) ? std::fabs(a) : 0.0f;
      }
      CAPTURE(variant, amaxes);
      const std::vector<uint8_t> w = codec->encode(x.data(), 1, n);
      const QuantLayout L = q.layout(1, n);
      float st;
      std::memcpy(&st, w.data() + L.tensor_off, 4);
      const float chunk_amax = *std::max_element(finite_amax.begin(), finite_amax.end());
      REQUIRE(float_bits(gpu::two_level_tensor_scale(chunk_amax, q.spec().target)) ==
              float_bits(st));
      REQUIRE(L.tensor_off == L.aux_off);  // no aux bytes with ue4m3 scales: S_t sits at aux_off
      for (int64_t b = 0; b < nb; ++b) {
        const gpu::HdScale hs =
            gpu::two_level_block_scale(finite_amax[size_t(b)], q.spec().target, st, up);
        CAPTURE(b);
        REQUIRE(hs.code == w[size_t(L.scale_off + b)]);
        REQUIRE(float_bits(hs.s) == float_bits(ue4m3_to_float(uint8_t(hs.code)) * st));
      }
    }
  }
}

TEST_CASE("hd E2M1 words (the kernels' encode of eight scaled quotients) equal e2m1_code",
          "[formats][hd]") {
  // Every t in the sweep with |t| >= 2^-100 (where t * 2^-14 is exact), eight at a time, so each
  // position of the word sees every kind of value; NaN is outside the contract.
  int64_t bad = 0, n = 0;
  float ts[8], x[8];
  int fill = 0;
  sweep_floats(0.0625f, 16.0f, 4099, [&](uint32_t b) {
    const float t = bits_float(b);
    if (std::isnan(t) || std::fabs(t) < std::ldexp(1.0f, -100)) return;
    ts[fill] = t;
    x[fill] = t * gpu::kE2M1Shift;
    if (++fill < 8) return;
    fill = 0;
    const uint32_t w = gpu::e2m1_word_scaled(x);
    for (int k = 0; k < 8; ++k)
      bad += ((w >> (4 * k)) & 0xfu) != encode_minifloat<E2M1Traits>(ts[k], true);
    n += 8;
  });
  CAPTURE(n);
  REQUIRE(bad == 0);
  REQUIRE(n > (int64_t(1) << 27));
  // Signed zeros and ties, and quotients too small for the scaling to be exact: the signed zero
  // code, like every |t| <= 0.25.
  const float fixed[8] = {0.0f, -0.0f, 1.0f, -6.0f, 0.5f, 3.0f, -0.25f, 5.0f};
  for (int k = 0; k < 8; ++k) x[k] = fixed[k] * gpu::kE2M1Shift;
  const uint32_t w = gpu::e2m1_word_scaled(x);
  for (int k = 0; k < 8; ++k)
    REQUIRE(((w >> (4 * k)) & 0xfu) == encode_minifloat<E2M1Traits>(fixed[k], true));
  std::mt19937_64 rng(5);
  for (int i = 0; i < 100000; ++i) {
    const float tiny = bits_float(uint32_t(rng() % float_bits(std::ldexp(1.0f, -16))) |
                                  (uint32_t(rng() & 1) << 31));
    x[i % 8] = tiny;
    const uint32_t c = (gpu::e2m1_word_scaled(x) >> (4 * (i % 8))) & 0xfu;
    REQUIRE(c == (std::signbit(tiny) ? 8u : 0u));
    x[i % 8] = 0.0f;
  }
}

TEST_CASE("hd INT4 words equal the CPU's symmetric quantizer", "[formats][hd]") {
  int64_t bad = 0, n = 0;
  float ts[8];
  int fill = 0;
  sweep_floats(0.0625f, 16.0f, 4099, [&](uint32_t b) {
    const float t = bits_float(b);
    if (std::isnan(t)) return;
    ts[fill] = t;
    if (++fill < 8) return;
    fill = 0;
    const uint32_t w = gpu::int4_word(ts);
    for (int k = 0; k < 8; ++k)
      bad += ((w >> (4 * k)) & 0xfu) != (uint32_t(quantize_int_sym(ts[k], 7.0f)) & 0xfu);
    n += 8;
  });
  CAPTURE(n);
  REQUIRE(bad == 0);
  REQUIRE(n > (int64_t(1) << 27));
  const float fixed[8] = {0.0f, -0.0f, 7.5f, -7.5f, 0.5f, 2.5f, -3.5f, -100.0f};
  const uint32_t w = gpu::int4_word(fixed);
  for (int k = 0; k < 8; ++k)
    REQUIRE(((w >> (4 * k)) & 0xfu) == (uint32_t(quantize_int_sym(fixed[k], 7.0f)) & 0xfu));
}

namespace {

// Host model of the GPU kernels' encode of one untransformed 4-bit group
// (cuda/codecs/codec_group.cuh, encode_group's 4-bit path), on either of its paths: `fast` (taken
// when the group's NaN-propagating amax is finite): an E8M0 scale multiplies by its exact
// reciprocal, others divide through the reciprocal (div_by_scale) when in range; the general path
// zeroes NaN/Inf and divides by IEEE division. E2M1 quotients are scaled by 2^-14 on either path.
// Returns the codes (past m: the codes of the zero padding) and the scale code.
std::vector<uint32_t> model_group_codes(const QuantSpec& s, const float* v, int m, int G,
                                        float tensor_scale, bool fast, uint32_t* scale_code) {
  float amax = 0.0f;
  bool finite_group = true;
  for (int i = 0; i < m; ++i) {
    if (std::isfinite(v[i]))
      amax = std::max(amax, std::fabs(v[i]));
    else
      finite_group = false;
  }
  float sc;
  if (s.sround == ScaleRound::OcpFloor) {
    *scale_code = amax > 0 ? e8m0_from_exp(floor_log2(amax) - elem_emax(s.elem)) : 0u;
    sc = e8m0_to_float(uint8_t(*scale_code));
  } else if (s.scale == ScaleFormat::UE4M3) {
    const gpu::HdScale hs =
        gpu::two_level_block_scale(amax, s.target, tensor_scale, s.sround == ScaleRound::Up);
    *scale_code = hs.code;
    sc = hs.s;
  } else {
    float ideal = amax / s.target;
    ideal = ideal < FLT_MIN ? FLT_MIN : (ideal > FLT_MAX ? FLT_MAX : ideal);
    const ScaleCode c = encode_scale(ideal, s.scale, s.sround);
    *scale_code = c.code;
    sc = c.value;
  }
  const bool e2m1 = s.elem == ElemFormat::E2M1;
  const float shift = e2m1 ? gpu::kE2M1Shift : 1.0f;
  std::vector<float> t(static_cast<size_t>(G), 0.0f);
  const float s_div = sc * (e2m1 ? 16384.0f : 1.0f);
  for (int i = 0; i < m; ++i) {
    if (fast && finite_group && s.scale == ScaleFormat::E8M0) {
      t[size_t(i)] = v[i] * (shift / sc);
    } else if (fast && finite_group && s.target <= 1e20f && gpu::code_divisor_ok(s_div)) {
      t[size_t(i)] = gpu::div_by_scale(v[i], gpu::scale_divisor(s_div));
    } else {
      const float z = std::isfinite(v[i]) ? v[i] : 0.0f;
      t[size_t(i)] = (z / sc) * shift;
    }
  }
  std::vector<uint32_t> codes(static_cast<size_t>(G));
  for (int i = 0; i < G; i += 8) {
    float x[8];
    for (int k = 0; k < 8; ++k) x[k] = t[size_t(i + k)];
    const uint32_t w = e2m1 ? gpu::e2m1_word_scaled(x) : gpu::int4_word(x);
    for (int k = 0; k < 8; ++k) codes[size_t(i + k)] = (w >> (4 * k)) & 0xfu;
  }
  return codes;
}

}  // namespace

TEST_CASE("host model of the GPU 4-bit group encode equals QuantCodec's bytes", "[formats][hd]") {
  std::mt19937_64 rng(2027);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::uniform_real_distribution<float> ud(0.0f, 1.0f);
  int64_t groups = 0;
  for (const char* variant :
       {"mxfp4", "nvfp4", "int4-g32", "e2m1:g32:sbf16", "int4:g16:se8m0",
        "e2m1:g64:sf16:sround=rne", "int4:g16:sue4m3:sround=up", "e2m1:g16:T=1e-3"}) {
    const auto codec = make_codec(variant);
    const auto& q = dynamic_cast<const QuantCodec&>(*codec);
    const QuantSpec& s = q.spec();
    for (int kind = 0; kind < 10; ++kind) {
      const int64_t n = 37 * 64 + (kind % 3) * 7;  // tails of 0, 7 and 14 elements
      std::vector<float> x(static_cast<size_t>(n));
      for (int64_t i = 0; i < n; ++i) {
        float v = nd(rng);
        switch (kind) {
          case 1:
            v *= 1e-30f;
            break;
          case 2:
            v *= 1e30f;
            break;
          case 3:
            v *= 1e-39f;
            break;  // subnormal
          case 4:
            v = (i % 5 == 0) ? -0.0f : 0.0f;
            break;
          case 5:
            v = ud(rng) < 0.03f ? kNaN : ud(rng) < 0.03f ? (ud(rng) < 0.5f ? kInf : -kInf) : v;
            break;
          case 6:
            v *= std::ldexp(1.0f, int(ud(rng) * 80.0f) - 40);
            break;
          case 7:
            v = (i / 16) % 3 == 0 ? 0.0f : v * 3.0e38f;
            break;  // zero groups next to huge ones
          case 8:
            v = std::round(v * 8.0f) / 16.0f;
            break;  // many exact ties
          case 9:
            v = i % 16 == 0 ? 1e30f : v * 1e-12f;
            break;  // quotients below 2^-20
          default:
            break;
        }
        x[size_t(i)] = v;
      }
      CAPTURE(variant, kind);
      const std::vector<uint8_t> w = codec->encode(x.data(), 1, n);
      const QuantLayout L = q.layout(1, n);
      float st = 1.0f;
      if (s.scale == ScaleFormat::UE4M3) {
        float chunk_amax = 0.0f;
        for (float v : x)
          chunk_amax = std::isfinite(v) ? std::max(chunk_amax, std::fabs(v)) : chunk_amax;
        st = gpu::two_level_tensor_scale(chunk_amax, s.target);
      }
      const int G = s.block, sb = scale_format_bytes(s.scale);
      std::vector<uint8_t> model(static_cast<size_t>(L.total), 0);
      for (const bool fast : {true, false}) {
        std::fill(model.begin(), model.end(), uint8_t(0));
        for (int64_t b = 0; b < L.blocks; ++b) {
          const int m = int(std::min<int64_t>(G, n - b * G));
          uint32_t sc = 0;
          const std::vector<uint32_t> codes =
              model_group_codes(s, x.data() + b * G, m, G, st, fast, &sc);
          // the tail's last byte, when m is odd, carries the padding zero's code: 0
          for (int i = 0; i < m + (m % 2); ++i)
            model[size_t((b * G + i) / 2)] |= uint8_t(codes[size_t(i)] << (4 * ((b * G + i) % 2)));
          for (int k = 0; k < sb; ++k)
            model[size_t(L.scale_off + b * sb + k)] = uint8_t(sc >> (8 * k));
          ++groups;
        }
        if (s.scale == ScaleFormat::UE4M3) std::memcpy(model.data() + L.tensor_off, &st, 4);
        for (size_t i = 0; i < w.size(); ++i) {
          if (model[i] != w[i]) {
            CAPTURE(fast, i, int(model[i]), int(w[i]));
            FAIL("model of the GPU encode differs from QuantCodec");
          }
        }
      }
      // Decoding through the hd values equals QuantCodec::decode (code value times the scale).
      std::vector<float> y(static_cast<size_t>(n));
      codec->decode(w.data(), w.size(), 1, n, y.data());
      for (int64_t i = 0; i < n; ++i) {
        const int64_t b = i / G;
        const uint32_t code = (w[size_t(i / 2)] >> (4 * (i % 2))) & 0xfu;
        uint32_t sc = 0;
        for (int k = 0; k < sb; ++k) sc |= uint32_t(w[size_t(L.scale_off + b * sb + k)]) << (8 * k);
        const float s_dec =
            s.scale == ScaleFormat::UE4M3 ? gpu::ue4m3_value(sc) * st : decode_scale(sc, s.scale);
        const float val =
            s.elem == ElemFormat::E2M1 ? gpu::e2m1_value(code) : gpu::int4_value(code);
        const float got = val * s_dec;
        if (float_bits(got) != float_bits(y[size_t(i)]) &&
            !(std::isnan(got) && std::isnan(y[size_t(i)]))) {
          CAPTURE(i, got, y[size_t(i)]);
          FAIL("hd decode differs from QuantCodec::decode");
        }
      }
    }
  }
  REQUIRE(groups > 1000);
}
