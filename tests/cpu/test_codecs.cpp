// Codecs: the variant grammar and presets, wire sizes against the documented formulas, error
// bounds implied by the formats, statistics, shapes, determinism, and the block-scale rules
// (MX, E8M0, NVFP4, asymmetric ints). TACO-specific properties are in test_codecs_taco.cpp.
#include "catch.hpp"
#include "codecs/codec.hpp"
#include "codecs/quant_codec.hpp"
#include "codecs/variant.hpp"
#include "core/dtype.hpp"
#include "core/error.hpp"
#include "formats/e8m0.hpp"
#include "formats/fp8.hpp"

#include <omp.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <random>
#include <set>

using namespace taco;

namespace {

std::vector<float> gaussian(int64_t n, uint32_t seed, float sigma = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> g(0.0f, sigma);
  std::vector<float> x(static_cast<size_t>(n));
  for (auto& v : x) v = g(rng);
  return x;
}

double rel_l2(const std::vector<float>& x, const std::vector<float>& y) {
  double num = 0, den = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    num += (double(x[i]) - y[i]) * (double(x[i]) - y[i]);
    den += double(x[i]) * x[i];
  }
  return std::sqrt(num / den);
}

std::vector<float> roundtrip(const Codec& c, const std::vector<float>& x, int64_t rows,
                             int64_t cols, EncodeStats* st = nullptr, size_t* bytes = nullptr) {
  const std::vector<uint8_t> w = c.encode(x.data(), rows, cols, st);
  if (bytes) *bytes = w.size();
  std::vector<float> y(x.size());
  c.decode(w.data(), w.size(), rows, cols, y.data());
  return y;
}

float le_f32(const std::vector<uint8_t>& w, size_t off) {
  uint32_t u;
  std::memcpy(&u, w.data() + off, 4);
  return bits_float(u);
}

}  // namespace

TEST_CASE("every preset rebuilds itself from name() with the same parameters", "[codecs]") {
  const auto presets = codec_presets();
  REQUIRE(presets.size() >= 25);
  std::set<std::string> names;
  for (const auto& [name, desc] : presets) {
    CAPTURE(name);
    REQUIRE(!desc.empty());
    REQUIRE(names.insert(name).second);
    const auto c = make_codec(name);
    REQUIRE(c->name() == name);
    const auto again = make_codec(c->name());
    REQUIRE(again->name() == name);
    REQUIRE(again->params() == c->params());
    // The grammar definition builds the same codec, named by the preset.
    const auto def = make_codec(c->params().at("definition").get<std::string>());
    REQUIRE(def->name() == name);
    REQUIRE(def->params() == c->params());
    for (const char* key :
         {"family", "elem_format", "scale_format", "granularity", "transform", "group_size"})
      REQUIRE(c->params().contains(key));
  }
  for (const char* required :
       {"fp8-tensor",     "fp8-row",      "fp8-col",      "fp8-g128",      "fp8-g32",
        "fp8-1x128-e8m0", "taco",         "taco-noh",     "taco-nosa",     "taco-e5m2",
        "taco-g32",       "taco-g64",     "taco-g256",    "taco-g512",     "taco-rht",
        "mxfp8",          "mxfp8-e5m2",   "mxfp4",        "nvfp4",         "int8-g128",
        "int8-g128-had",  "int4-g32",     "int4-g32-had", "tahquant",      "bf16",
        "int3-g32",       "int3-g32-had", "int3-g64-had", "int3-g128-had", "int2-g32",
        "int2-g32-had",   "int2-g64-had", "int2-g128-had"})
    REQUIRE(names.count(required));
}

TEST_CASE("variant grammar: canonical names, any order, case-insensitive", "[codecs]") {
  const std::map<std::string, std::string> expect = {
      {"E4M3:G64:HAD:DUAL", "taco-g64"},
      {"dual:had:g128:e4m3", "taco"},
      {"e4m3:g128:had:dual:T=448", "taco"},
      {"e4m3:g128:had:dual:lambda=1e-6", "taco"},
      {"fp8:g128", "fp8-g128"},
      {"int8:row:asym", "int8:asym:row"},
      {"e5m2:tile32:se8m0", "e5m2:tile32:se8m0"},
      {"e4m3:g64:had:dual:lambda=0.001", "e4m3:g64:had:dual:lambda=0.001"},
      {"e4m3:g128:rht:seed=7:dual", "e4m3:g128:rht:seed=7:dual"},
      {"e4m3:g128:rht:seed=0:dual", "taco-rht"},
      {"e4m3:g32:se8m0:sround=ocp", "mxfp8"},
      {"e2m1:g16:sue4m3:sround=rne", "nvfp4"},
      {"e4m3:g128:sbf16", "e4m3:g128:sbf16"},
      {"e4m3:g128:sbf16:sround=up", "e4m3:g128:sbf16"},
      {"e4m3:row:T=240:nosat", "e4m3:row:T=240:nosat"},
      {"tahquant:tile=32:hi=6:lo=6", "tahquant:tile=32:hi=6:lo=6"},
      {"tahquant:tile=64", "tahquant"},
  };
  for (const auto& [in, out] : expect) {
    CAPTURE(in);
    const auto c = make_codec(in);
    REQUIRE(c->name() == out);
    REQUIRE(make_codec(c->name())->params() == c->params());
  }
}

TEST_CASE("bad variants are InputErrors that name the problem", "[codecs]") {
  const std::map<std::string, std::string> bad = {
      {"", "empty"},
      {"bogus", "unknown token 'bogus'"},
      {"e4m3", "no granularity"},
      {"g128", "no element format"},
      {"e4m3:g100", "power of two"},
      {"e4m3:g2048", "power of two"},
      {"e4m3:g128:g64", "given twice"},
      {"int8:g128:nosat", "nosat"},
      {"e2m1:g32:nosat", "nosat"},
      {"e4m3:row:had", "had/rht need"},
      {"e2m1:g32:dual", "FP8"},
      {"e4m3:tile128:dual", "g<G>"},
      {"e4m3:g128:se8m0:dual", "fp32"},
      {"e4m3:g128:sround=ocp", "exact"},
      {"int8:g32:se8m0:sround=ocp", "float element"},
      {"e4m3:g32:se8m0:sround=ocp:T=100", "no effect"},
      {"e4m3:g128:lambda=1", "needs dual"},
      {"e4m3:g128:had:seed=3", "needs rht"},
      {"e4m3:g128:T=-1", "positive"},
      {"e4m3:g128:T=abc", "finite number"},
      {"e4m3:asym:g128", "asym"},
      {"tahquant:tile=48", "power of two"},
      {"tahquant:bits=4", "unknown tahquant token"},
      {"bf16:g128", "no options"},
  };
  for (const auto& [variant, msg] : bad) {
    CAPTURE(variant);
    try {
      make_codec(variant);
      FAIL("no exception");
    } catch (const InputError& e) {
      REQUIRE(std::string(e.what()).find(msg) != std::string::npos);
      REQUIRE(std::string(e.what()).find('\n') == std::string::npos);
    }
  }
}

TEST_CASE("wire sizes follow the documented layout", "[codecs]") {
  // Independent formula per preset for [128, 1024] (n = 131072): codes + scales + aux (+4).
  const double n = 128.0 * 1024;
  const std::map<std::string, double> bpe = {
      {"bf16", 2.0},
      {"fp8-tensor", 1 + 4 / n},
      {"fp8-row", 1 + 4.0 * 128 / n},
      {"fp8-col", 1 + 4.0 * 1024 / n},
      {"fp8-g128", 1.03125},
      {"fp8-g32", 1.125},
      {"fp8-g128-had", 1.03125},
      {"fp8-1x128-e8m0", 1 + 1.0 / 128},
      {"fp8-tile128", 1 + 4.0 * 8 / n},
      {"taco", 1.0625},
      {"taco-noh", 1.0625},
      {"taco-nosa", 1.03125},
      {"taco-e5m2", 1.0625},
      {"taco-g32", 1.25},
      {"taco-g64", 1.125},
      {"taco-g256", 1.03125},
      {"taco-g512", 1.015625},
      {"taco-rht", 1.0625},
      {"mxfp8", 1.03125},
      {"mxfp8-e5m2", 1.03125},
      {"mxfp4", 0.53125},
      {"nvfp4", 0.5625 + 4 / n},
      {"int8-g128", 1.03125},
      {"int8-g128-had", 1.03125},
      {"int8-g128-asym", 1 + 5.0 / 128},
      {"int4-g32", 0.625},
      {"int4-g32-had", 0.625},
      {"int3-g32", 3.0 / 8 + 4.0 / 32},
      {"int3-g32-had", 0.5},
      {"int3-g64-had", 3.0 / 8 + 4.0 / 64},
      {"int3-g128-had", 3.0 / 8 + 4.0 / 128},
      {"int2-g32", 2.0 / 8 + 4.0 / 32},
      {"int2-g32-had", 0.375},
      {"int2-g64-had", 2.0 / 8 + 4.0 / 64},
      {"int2-g128-had", 2.0 / 8 + 4.0 / 128},
  };
  const std::vector<float> x = gaussian(128 * 1024, 1);
  for (const auto& [name, expected] : bpe) {
    CAPTURE(name);
    const auto c = make_codec(name);
    const std::vector<uint8_t> w = c->encode(x.data(), 128, 1024);
    REQUIRE(double(w.size()) / n == expected);
    const auto* q = dynamic_cast<const QuantCodec*>(c.get());
    if (q) REQUIRE(q->layout(128, 1024).total == int64_t(w.size()));
  }
  // Tails: numel = 1000 in flat groups of 128 -> 8 groups; padded codes only with a transform.
  const std::vector<float> t = gaussian(1000, 2);
  REQUIRE(make_codec("taco")->encode(t.data(), 1, 1000).size() == 8 * 128 + 8 * 8);
  REQUIRE(make_codec("taco-noh")->encode(t.data(), 1, 1000).size() == 1000 + 8 * 8);
  REQUIRE(make_codec("fp8-g128")->encode(t.data(), 1, 1000).size() == 1000 + 4 * 8);
  REQUIRE(make_codec("int4-g32")->encode(t.data(), 1, 1000).size() == 500 + 4 * 32);
  REQUIRE(make_codec("int4-g32")->encode(t.data(), 1, 999).size() ==
          500 + 4 * 32);  // odd: half a byte
  REQUIRE(make_codec("fp8-g128")->encode(t.data(), 8, 125).size() ==
          1000 + 4 * 8);  // groups straddle rows
}

TEST_CASE("decode(encode(x)) error is bounded by the format's precision", "[codecs]") {
  // Per element: FP8 E4M3 relative half-ulp 2^-4 plus half a subnormal step of the scale; ints
  // half a step of the scale. Data spans several decades so subnormals and ties occur.
  std::mt19937 rng(5);
  std::normal_distribution<float> g(0.0f, 1.0f);
  const int64_t rows = 64, cols = 1024;
  std::vector<float> x(static_cast<size_t>(rows * cols));
  for (auto& v : x) v = g(rng) * std::ldexp(1.0f, int(rng() % 24) - 12);
  struct Case {
    const char* variant;
    double rel;        // relative half-ulp of the element format
    double abs_steps;  // absolute error in units of the scale
  };
  for (const Case& cs :
       {Case{"fp8-g128", 1.0 / 16, 1.0 / 1024}, Case{"fp8-g32", 1.0 / 16, 1.0 / 1024},
        Case{"fp8-row", 1.0 / 16, 1.0 / 1024}, Case{"e5m2:g128", 1.0 / 8, 1.0 / 131072},
        Case{"int8-g128", 0, 0.5}, Case{"int4-g32", 0, 0.5},
        Case{"fp8-1x128-e8m0", 1.0 / 16, 1.0 / 1024},
        Case{"e4m3:g64:sbf16", 1.0 / 16, 1.0 / 1024}}) {
    CAPTURE(cs.variant);
    const auto c = make_codec(cs.variant);
    const std::vector<uint8_t> w = c->encode(x.data(), rows, cols);
    std::vector<float> y(x.size());
    c->decode(w.data(), w.size(), rows, cols, y.data());
    const auto* q = dynamic_cast<const QuantCodec*>(c.get());
    REQUIRE(q != nullptr);
    const QuantSpec& s = q->spec();
    const int64_t len = s.gran == Granularity::Row ? cols : s.block;
    int64_t checked = 0;
    for (int64_t b = 0; b < int64_t(x.size()) / len; ++b) {
      double amax = 0;
      for (int64_t i = 0; i < len; ++i)
        amax = std::max(amax, std::fabs(double(x[size_t(b * len + i)])));
      const double scale = amax / s.target;  // the exact ideal scale (rounded scales are >= it)
      const double sc = s.scale == ScaleFormat::F32 ? scale : 2 * scale;
      for (int64_t i = 0; i < len; ++i) {
        const size_t k = size_t(b * len + i);
        const double err = std::fabs(double(y[k]) - x[k]);
        const double bound = cs.rel * std::fabs(double(x[k])) + cs.abs_steps * sc;
        REQUIRE(err <= bound * (1 + 1e-5) + 1e-30);
        ++checked;
      }
    }
    REQUIRE(checked == rows * cols);
    REQUIRE(rel_l2(x, y) > 0);  // lossy: the comparison above compared something
  }
}

TEST_CASE("every preset round-trips random data with a plausible error", "[codecs]") {
  const std::vector<float> x = gaussian(256 * 1024, 9, 0.02f);
  const std::map<std::string, double> max_err = {
      {"bf16", 0.005},         {"fp8-tensor", 0.05},     {"fp8-row", 0.05},
      {"fp8-col", 0.05},       {"fp8-g128", 0.05},       {"fp8-g32", 0.05},
      {"fp8-g128-had", 0.05},  {"fp8-1x128-e8m0", 0.05}, {"fp8-tile128", 0.05},
      {"taco", 0.05},          {"taco-noh", 0.05},       {"taco-nosa", 0.05},
      {"taco-e5m2", 0.1},      {"taco-g32", 0.05},       {"taco-g64", 0.05},
      {"taco-g256", 0.05},     {"taco-g512", 0.05},      {"taco-rht", 0.05},
      {"taco-noh-g32", 0.05},  {"taco-noh-g64", 0.05},   {"taco-noh-g256", 0.05},
      {"taco-noh-g512", 0.05}, {"mxfp8", 0.05},          {"mxfp8-e5m2", 0.1},
      {"mxfp4", 0.25},         {"nvfp4", 0.2},           {"int8-g128", 0.02},
      {"int8-g128-had", 0.02}, {"int8-g128-asym", 0.02}, {"int4-g32", 0.2},
      {"int4-g32-had", 0.2},   {"tahquant", 0.3},        {"int3-g32", 0.24},
      {"int3-g32-had", 0.24},  {"int3-g64-had", 0.27},   {"int3-g128-had", 0.29},
      {"int2-g32", 0.7},       {"int2-g32-had", 0.7},    {"int2-g64-had", 0.75},
      {"int2-g128-had", 0.8}};
  for (const auto& [name, desc] : codec_presets()) {
    CAPTURE(name);
    REQUIRE(max_err.count(name));
    const auto c = make_codec(name);
    const std::vector<float> y = roundtrip(*c, x, 256, 1024);
    for (float v : y) REQUIRE(std::isfinite(v));
    const double e = rel_l2(x, y);
    REQUIRE(e > 0);
    REQUIRE(e < max_err.at(name));
  }
}

TEST_CASE("encode stats count non-finite inputs and saturated codes", "[codecs]") {
  // Each group of 128: one value at 1.0 (maps to 448 exactly), the rest in [-0.9, 0.9], whose
  // codes stay below 448 (0.9 * 448 = 403.2 -> 416). So exactly one saturated code per group.
  std::mt19937 rng(2);
  std::uniform_real_distribution<float> u(-0.9f, 0.9f);
  const int64_t groups = 64;
  std::vector<float> x(static_cast<size_t>(groups * 128));
  for (int64_t g = 0; g < groups; ++g)
    for (int64_t i = 0; i < 128; ++i) x[size_t(g * 128 + i)] = i == g % 128 ? 1.0f : u(rng);
  for (const char* v : {"fp8-g128", "taco-noh", "int8-g128"}) {
    CAPTURE(v);
    EncodeStats st;
    make_codec(v)->encode(x.data(), groups, 128, &st);
    REQUIRE(st.saturated == groups);
    REQUIRE(st.nonfinite == 0);
  }
  // Non-finite inputs are counted and encode as 0 (without a transform the rest is intact).
  std::vector<float> z = x;
  z[3] = std::numeric_limits<float>::quiet_NaN();
  z[200] = std::numeric_limits<float>::infinity();
  z[1000] = -std::numeric_limits<float>::infinity();
  EncodeStats st;
  const auto c = make_codec("fp8-g128");
  const std::vector<float> y = roundtrip(*c, z, groups, 128, &st);
  REQUIRE(st.nonfinite == 3);
  REQUIRE(y[3] == 0.0f);
  REQUIRE(y[200] == 0.0f);
  REQUIRE(y[1000] == 0.0f);
  REQUIRE(y[4] == Approx(x[4]).epsilon(0.07));
  // Stats accumulate across calls and are optional.
  c->encode(z.data(), groups, 128, &st);
  REQUIRE(st.nonfinite == 6);
  REQUIRE_NOTHROW(c->encode(z.data(), groups, 128, nullptr));
  // Overflowing codes in non-saturating mode are counted too: T = 470 puts each group max
  // above 464 (NaN code); the rest stay <= 0.9 * 470 = 423 -> 416.
  EncodeStats so;
  make_codec("e4m3:g128:T=470:nosat")->encode(x.data(), groups, 128, &so);
  REQUIRE(so.saturated == groups);
}

TEST_CASE("shapes the codec cannot take and wrong wire sizes are InputErrors", "[codecs]") {
  const std::vector<float> x = gaussian(100 * 100, 3);
  REQUIRE_THROWS_AS(make_codec("fp8-tile128")->encode(x.data(), 100, 100), InputError);
  REQUIRE_THROWS_AS(make_codec("tahquant")->encode(x.data(), 100, 100), InputError);
  REQUIRE_THROWS_AS(make_codec("fp8-g128")->encode(x.data(), 0, 100), InputError);
  for (const char* v : {"taco", "fp8-g128", "nvfp4", "bf16", "tahquant", "fp8-col"}) {
    CAPTURE(v);
    const auto c = make_codec(v);
    const std::vector<float> y = gaussian(64 * 128, 4);
    std::vector<uint8_t> w = c->encode(y.data(), 64, 128);
    std::vector<float> out(y.size());
    REQUIRE_THROWS_AS(c->decode(w.data(), w.size() - 1, 64, 128, out.data()), InputError);
    w.push_back(0);
    REQUIRE_THROWS_AS(c->decode(w.data(), w.size(), 64, 128, out.data()), InputError);
  }
}

TEST_CASE("results do not depend on the number of threads", "[codecs]") {
  const std::vector<float> x = gaussian(512 * 1024, 8, 0.01f);
  const int saved = omp_get_max_threads();
  for (const char* v : {"taco", "fp8-g128", "fp8-tensor", "fp8-col", "fp8-tile128", "nvfp4",
                        "mxfp4", "int8-g128-asym", "tahquant", "e4m3:tile32:had:se8m0",
                        "int3-g128-had", "int2:col", "int3:asym:tile32"}) {
    CAPTURE(v);
    const auto c = make_codec(v);
    omp_set_num_threads(1);
    const std::vector<uint8_t> a = c->encode(x.data(), 512, 1024);
    std::vector<float> da(x.size()), db(x.size());
    c->decode(a.data(), a.size(), 512, 1024, da.data());
    omp_set_num_threads(4);
    const std::vector<uint8_t> b = c->encode(x.data(), 512, 1024);
    c->decode(b.data(), b.size(), 512, 1024, db.data());
    REQUIRE(a == b);
    REQUIRE(std::memcmp(da.data(), db.data(), da.size() * 4) == 0);
  }
  omp_set_num_threads(saved);
}

TEST_CASE("encode_into a reused, dirty buffer gives the same bytes as encode", "[codecs]") {
  const std::vector<float> x = gaussian(3 * 1000, 13, 0.5f);
  for (const auto& [name, desc] : codec_presets()) {
    CAPTURE(name);
    const auto c = make_codec(name);
    const int64_t cols = name == "fp8-tile128" || name == "tahquant" ? 128 : 1000;
    const int64_t rows = name == "fp8-tile128" ? 128 : 3;
    std::vector<float> xx(size_t(rows * cols));
    for (size_t i = 0; i < xx.size(); ++i) xx[i] = x[i % x.size()];
    const std::vector<uint8_t> ref = c->encode(xx.data(), rows, cols);
    std::vector<uint8_t> buf(ref.size() + 17, 0xa5);
    c->encode_into(xx.data(), rows, cols, buf);
    REQUIRE(buf == ref);
    std::fill(buf.begin(), buf.end(), 0x5a);
    c->encode_into(xx.data(), rows, cols, buf);
    REQUIRE(buf == ref);
  }
}

TEST_CASE("the AVX2 and baseline kernels give identical bytes and values", "[codecs]") {
  std::vector<std::string> variants;
  for (const auto& [name, desc] : codec_presets())
    if (name != "bf16" && name != "tahquant") variants.push_back(name);
  for (const char* v :
       {"int8:asym:col", "int4:asym:tile32:had", "e2m1:g16:sue4m3:had", "e4m3:tile32:had:se8m0",
        "e5m2:tensor:nosat", "e4m3:row:sbf16", "int8:asym:tensor", "e4m3:g64:had:dual:lambda=0.01",
        "int3:asym:tile32:had", "int2:row:sbf16", "int3:col", "int2:asym:tensor",
        "int3:g16:sue4m3:rht:seed=3", "int2:asym:g64:had"})
    variants.push_back(v);
  std::vector<float> x = gaussian(256 * 384, 31, 0.3f);
  for (size_t i = 0; i < x.size(); i += 997) x[i] *= 1e4f;
  x[5] = std::numeric_limits<float>::quiet_NaN();
  x[70000] = -std::numeric_limits<float>::infinity();
  for (const std::string& v : variants) {
    for (const auto& [rows, cols] : {std::pair<int64_t, int64_t>{256, 384}, {3, 1000}}) {
      CAPTURE(v, rows, cols);
      const VariantSpec spec = parse_variant(v);
      if (spec.quant.gran == Granularity::Tile &&
          (rows % spec.quant.block || cols % spec.quant.block))
        continue;
      const QuantCodec simd(spec.quant, v, true), base(spec.quant, v, false);
      EncodeStats s1, s2;
      const std::vector<uint8_t> a = simd.encode(x.data(), rows, cols, &s1);
      const std::vector<uint8_t> b = base.encode(x.data(), rows, cols, &s2);
      REQUIRE(a == b);
      REQUIRE(s1.saturated == s2.saturated);
      REQUIRE(s1.nonfinite == s2.nonfinite);
      std::vector<float> da(size_t(rows * cols)), db(size_t(rows * cols));
      simd.decode(a.data(), a.size(), rows, cols, da.data());
      base.decode(b.data(), b.size(), rows, cols, db.data());
      REQUIRE(std::memcmp(da.data(), db.data(), da.size() * 4) == 0);
    }
  }
}

TEST_CASE("MXFP8 uses the OCP floor rule and saturates; 1x128-e8m0 rounds the scale up",
          "[codecs]") {
  // One block of 32: amax = 1.9 * 2^3 -> X = 2^(3 - 8); 1.9 * 2^8 = 486.4 > 464 saturates to 448.
  std::vector<float> x(32, 0.5f);
  x[7] = 1.9f * 8.0f;
  x[8] = -1.9f * 8.0f;
  const auto mx = make_codec("mxfp8");
  const std::vector<uint8_t> w = mx->encode(x.data(), 1, 32);
  REQUIRE(w.size() == 33);
  REQUIRE(w[32] == 127 + 3 - 8);
  REQUIRE(w[7] == 0x7e);
  REQUIRE(w[8] == 0xfe);
  REQUIRE(w[0] == float_to_fp8_e4m3(0.5f * 32.0f));
  // MXFP4: emax 2: X = 2^(3 - 2); 15.2 / 2 = 7.6 -> 6 (saturated), 0.5 / 2 = 0.25 -> 0 (tie to
  // even)
  const std::vector<uint8_t> w4 = make_codec("mxfp4")->encode(x.data(), 1, 32);
  REQUIRE(w4.size() == 17);
  REQUIRE(w4[16] == 127 + 3 - 2);
  REQUIRE((w4[3] >> 4) == 0x7);   // element 7: high nibble of byte 3
  REQUIRE((w4[4] & 0xf) == 0xf);  // element 8: -6
  REQUIRE((w4[0] & 0xf) == 0x0);
  // DeepSeek-style: scale = 2^ceil(log2(amax / 448)) >= amax / 448, so nothing saturates except
  // when amax / scale hits 448 exactly.
  std::vector<float> y(128, 0.25f);
  y[5] = 100.0f;
  const std::vector<uint8_t> w8 = make_codec("fp8-1x128-e8m0")->encode(y.data(), 1, 128);
  REQUIRE(w8[128] == e8m0_ceil(100.0f / 448.0f));
  REQUIRE(e8m0_to_float(w8[128]) == 0.25f);
  REQUIRE(w8[5] == float_to_fp8_e4m3(400.0f));
}

TEST_CASE("NVFP4: two-level scale, per-tensor fp32 then UE4M3 per 16", "[codecs]") {
  std::vector<float> x(64);
  for (int i = 0; i < 64; ++i)
    x[size_t(i)] = float(i % 16) * (i < 16 ? 1.0f : i < 32 ? 0.1f : i < 48 ? 10.0f : 0.0f);
  const auto c = make_codec("nvfp4");
  const std::vector<uint8_t> w = c->encode(x.data(), 1, 64);
  REQUIRE(w.size() == 32 + 4 + 4);
  const float St = le_f32(w, 36);
  REQUIRE(St == (150.0f / 6.0f) / 448.0f);  // tensor amax 150 -> its block scale is 448 * St
  REQUIRE(w[32 + 2] == 0x7e);               // block 2 (amax 150): ue4m3 448
  REQUIRE(w[32 + 3] == 0x01);               // all-zero block: smallest scale, not 0
  std::vector<float> y(64);
  c->decode(w.data(), w.size(), 1, 64, y.data());
  for (int i = 48; i < 64; ++i) REQUIRE(y[size_t(i)] == 0.0f);
  REQUIRE(y[47] ==
          Approx(150.0f).epsilon(0.17));  // 150 / s = 6 exactly representable -> small error
}

TEST_CASE("asymmetric ints keep zero exact and use the whole code range", "[codecs]") {
  std::vector<float> x(128);
  for (int i = 0; i < 128; ++i) x[size_t(i)] = i == 0 ? 0.0f : 0.1f + 0.01f * float(i);  // all >= 0
  const auto c = make_codec("int8-g128-asym");
  const std::vector<uint8_t> w = c->encode(x.data(), 1, 128);
  REQUIRE(w.size() == 128 + 4 + 1);
  REQUIRE(w[132] == 0);  // zero point: the range [0, max] starts at 0
  REQUIRE(w[0] == 0);
  REQUIRE(w[127] == 255);
  std::vector<float> y(128);
  c->decode(w.data(), w.size(), 1, 128, y.data());
  REQUIRE(y[0] == 0.0f);
  for (int i = 0; i < 128; ++i)
    REQUIRE(std::fabs(y[size_t(i)] - x[size_t(i)]) <= (1.37f / 255) * 0.5001f);
  // A range straddling zero: zero point inside, 0 still exact.
  std::vector<float> z = gaussian(128, 12);
  z[9] = 0.0f;
  std::vector<float> zy = roundtrip(*make_codec("int4:asym:g32"), z, 4, 32);
  REQUIRE(zy[9] == 0.0f);
}

TEST_CASE("col, tile and tensor blocks take their scales from the right elements", "[codecs]") {
  // Column c has magnitude 2^(c % 8): per-column scales make every column equally accurate;
  // a per-tensor scale underflows the small columns.
  const int64_t rows = 128, cols = 256;
  std::vector<float> x = gaussian(rows * cols, 21);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c)
      x[size_t(r * cols + c)] *= std::ldexp(1.0f, int(c % 8) * 4 - 20);
  auto col_err = [&](const char* v) {
    const std::vector<float> y = roundtrip(*make_codec(v), x, rows, cols);
    double worst = 0;
    for (int64_t c = 0; c < cols; ++c) {
      double num = 0, den = 0;
      for (int64_t r = 0; r < rows; ++r) {
        const size_t k = size_t(r * cols + c);
        num += (double(y[k]) - x[k]) * (double(y[k]) - x[k]);
        den += double(x[k]) * x[k];
      }
      worst = std::max(worst, std::sqrt(num / den));
    }
    return worst;
  };
  REQUIRE(col_err("fp8-col") < 0.05);
  REQUIRE(col_err("fp8-tensor") > 0.3);
  REQUIRE(col_err("e4m3:tile16") > col_err("fp8-col"));
  // Tiles: scale bytes are per 32x32 tile in tile-row-major order.
  const std::vector<uint8_t> w = make_codec("e4m3:tile32")->encode(x.data(), rows, cols);
  REQUIRE(w.size() == size_t(rows * cols + 4 * (rows / 32) * (cols / 32)));
  float amax = 0;  // tile (1, 2): rows 32..63, cols 64..95
  for (int r = 32; r < 64; ++r)
    for (int c = 64; c < 96; ++c) amax = std::max(amax, std::fabs(x[size_t(r * cols + c)]));
  REQUIRE(le_f32(w, size_t(rows * cols + 4 * (1 * 8 + 2))) == amax / 448.0f);
}

TEST_CASE("the collective operations of the Codec contract are decode, fp32 sums in order, encode",
          "[codecs]") {
  // The oracle: separate decode() calls, fp32 sums written out left to right,
  // bf16 rounding by bit manipulation (round to nearest even), then encode().
  auto to_bf16 = [](float v) {
    uint32_t b;
    std::memcpy(&b, &v, 4);
    b = (b + 0x7fffu + ((b >> 16) & 1u)) & 0xffff0000u;
    float r;
    std::memcpy(&r, &b, 4);
    return r;
  };
  std::mt19937 rng(99);
  std::normal_distribution<float> nd(0.0f, 3.0f);
  const int64_t rows = 6, cols = 256, n = rows * cols;
  for (const char* variant :
       {"taco", "fp8-row", "fp8-col", "nvfp4", "int4-g32", "bf16", "tahquant", "mxfp8"}) {
    CAPTURE(variant);
    const auto codec = make_codec(variant);
    std::vector<std::vector<uint8_t>> wires;
    std::vector<WireView> views;
    for (int i = 0; i < 3; ++i) {
      std::vector<float> x(static_cast<size_t>(n));
      for (float& v : x) v = nd(rng);
      wires.push_back(codec->encode(x.data(), rows, cols));
    }
    for (const auto& w : wires) views.push_back({w.data(), w.size()});
    std::vector<std::vector<float>> d(3, std::vector<float>(static_cast<size_t>(n)));
    for (int i = 0; i < 3; ++i)
      codec->decode(wires[size_t(i)].data(), wires[size_t(i)].size(), rows, cols,
                    d[size_t(i)].data());
    std::vector<float> want(static_cast<size_t>(n)), got(static_cast<size_t>(n));
    for (size_t k = 0; k < size_t(n); ++k) want[k] = (d[0][k] + d[1][k]) + d[2][k];
    codec->decode_reduce(views, rows, cols, got.data());
    REQUIRE(std::memcmp(got.data(), want.data(), size_t(n) * 4) == 0);

    std::vector<float> rounded(want);
    for (float& v : rounded) v = to_bf16(v);
    REQUIRE(rounded != want);  // the rounding is exercised
    for (bool round_bf16 : {false, true}) {
      std::vector<uint8_t> w;
      codec->decode_reduce_encode(views, rows, cols, round_bf16, w);
      REQUIRE(w == codec->encode((round_bf16 ? rounded : want).data(), rows, cols));
    }
    std::vector<float> own(static_cast<size_t>(n)), hop(static_cast<size_t>(n));
    for (float& v : own) v = nd(rng);
    for (size_t k = 0; k < size_t(n); ++k) hop[k] = d[1][k] + own[k];
    std::vector<uint8_t> w;
    codec->decode_add_encode(views[1], own.data(), rows, cols, w);
    REQUIRE(w == codec->encode(hop.data(), rows, cols));
  }
}

// A transport of fixed-size slots (taco.codec) pads a data-dependent wire with zeros to
// wire_size()'s bound; decode() takes that (Codec::decode, check_wire_bytes), and nothing else.
TEST_CASE("data-dependent wires decode padded to their bound, and only zero-padded",
          "[codecs][wire_size]") {
  const int64_t rows = 64, cols = 256;
  std::vector<float> x = gaussian(rows * cols, 9);
  x[5] = 300.0f;  // a flagged TAH-Quant tile
  for (const char* v : {"tahquant", "tahquant:tile=32", "lowrank:energy=0.5", "tt:order=3"}) {
    CAPTURE(v);
    const auto c = make_codec(v);
    const std::vector<uint8_t> w = c->encode(x.data(), rows, cols);
    const WireSize bound = c->wire_size(rows, cols);
    REQUIRE_FALSE(bound.exact);
    REQUIRE(int64_t(w.size()) < bound.bytes);
    std::vector<uint8_t> padded = w;
    padded.resize(size_t(bound.bytes), 0);
    std::vector<float> a(x.size()), b(x.size());
    c->decode(w.data(), w.size(), rows, cols, a.data());
    c->decode(padded.data(), padded.size(), rows, cols, b.data());
    REQUIRE(std::memcmp(a.data(), b.data(), a.size() * 4) == 0);
    padded.back() = 1;
    REQUIRE_THROWS_AS(c->decode(padded.data(), padded.size(), rows, cols, b.data()), InputError);
    padded.back() = 0;
    padded.push_back(0);  // neither the exact size nor the bound
    REQUIRE_THROWS_AS(c->decode(padded.data(), padded.size(), rows, cols, b.data()), InputError);
  }
  // A fixed-size wire takes no padding.
  const auto taco_codec = make_codec("taco");
  std::vector<uint8_t> w = taco_codec->encode(x.data(), rows, cols);
  w.resize(w.size() + 16, 0);
  std::vector<float> out(x.size());
  REQUIRE_THROWS_AS(taco_codec->decode(w.data(), w.size(), rows, cols, out.data()), InputError);
}

TEST_CASE("wire_size is what encode writes, without encoding", "[codecs][wire_size]") {
  // Every preset, every structured family and the ef: wrapper, on shapes that need padding and
  // on ones that do not: a fixed size equals the encoded bytes; a data-dependent one bounds them,
  // and an input that takes the most (every TAH-Quant tile flagged, a full-rank Gaussian for low
  // rank by energy and TT by tolerance) reaches the bound.
  std::vector<std::string> variants;
  for (const auto& [name, desc] : codec_presets()) variants.push_back(name);
  for (const char* v :
       {"subspace:k=16", "subspace:frac=0.25:coef=e4m3", "lowrank:rank=8", "lowrank:rank=500",
        "lowrank:bpe=0.5:rsvd", "lowrank:factors=e4m3:rank=4", "tt:order=3:rank=16",
        "tt:order=4:rank=3", "topk:frac=0.1", "topk:frac=0.05:index=bitmap", "randk:frac=0.1",
        "ef:int4-g32-had", "ef:lowrank:rank=4", "lowrank:energy=0.999999", "tt:order=3:eps=1e-9"})
    variants.push_back(v);
  for (const std::string& v : variants) {
    const auto c = make_codec(v);
    for (const auto& [rows, cols] : std::vector<std::pair<int64_t, int64_t>>{{64, 256}, {8, 192}}) {
      CAPTURE(v, rows, cols);
      WireSize ws;
      try {
        ws = c->wire_size(rows, cols);
      } catch (const InputError&) {  // the shape does not suit the codec: encode says the same
        const std::vector<float> x = gaussian(rows * cols, 5);
        REQUIRE_THROWS_AS(c->encode(x.data(), rows, cols), InputError);
        continue;
      }
      const std::vector<float> x = gaussian(rows * cols, 7);
      const int64_t got = int64_t(c->encode(x.data(), rows, cols).size());
      if (ws.exact) {
        REQUIRE(got == ws.bytes);
        continue;
      }
      REQUIRE(got <= ws.bytes);
      if (v == "tahquant") {  // one spike per 64-channel tile: first >= 2 * second everywhere
        std::vector<float> spiky(size_t(rows * cols), 0.01f);
        for (int64_t i = 0; i < rows * cols; i += 64) spiky[size_t(i)] = 5.0f;
        REQUIRE(int64_t(c->encode(spiky.data(), rows, cols).size()) == ws.bytes);
      } else {
        REQUIRE(got == ws.bytes);  // full-rank Gaussian: every rank at its bound
      }
    }
  }
  // TAH-Quant's bound by hand (tahquant.hpp's wire): [64, 256], tile 64, 80% of the tokens at 4
  // bits and 12 at 3: token map 8 B, 256 tiles (map 32 B, fp16 zero and scale 4 B each, a 6-bit
  // pivot each when all are flagged), codes 7808 B.
  const auto tah = make_codec("tahquant");
  const WireSize tw = tah->wire_size(64, 256);
  REQUIRE_FALSE(tw.exact);
  const int64_t tiles = 64 * 256 / 64, lo = 64 * 20 / 100;
  REQUIRE(tw.bytes == 8 + tiles / 8 + (lo * 256 * 3 + (64 - lo) * 256 * 4) / 8 + 4 * tiles +
                          (tiles * 6 + 7) / 8);
  REQUIRE(make_codec("lowrank:rank=8")->wire_size(64, 256).exact);
  REQUIRE_FALSE(make_codec("tt:order=3")->wire_size(64, 256).exact);  // eps = 0.1 by default
  REQUIRE_THROWS_AS(tah->wire_size(4, 100), InputError);              // cols not a multiple of 64
}
