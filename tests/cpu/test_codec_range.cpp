// The range each codec represents (codecs/range.hpp, docs/variants.md "Range"): blocks whose
// largest magnitude lies at either bound decode with the precision they have mid-range, and blocks
// far outside decode clipped or to (almost) zero, which out_of_range_blocks counts. Every preset
// and the scale formats, granularities and transforms of the grammar.
#include "catch.hpp"
#include "codecs/codec.hpp"
#include "codecs/range.hpp"
#include "codecs/variant.hpp"

#include <cfloat>
#include <cmath>
#include <random>
#include <string>
#include <vector>

using namespace taco;

namespace {

constexpr int64_t kRows = 128, kCols = 256;

double rel_l2(const std::vector<float>& x, const std::vector<float>& y) {
  double num = 0, den = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    const double d = double(x[i]) - double(y[i]);
    num += d * d;
    den += double(x[i]) * double(x[i]);
  }
  return std::sqrt(num / den);
}

double round_trip_error(const Codec& codec, const std::vector<float>& x) {
  const std::vector<uint8_t> wire = codec.encode(x.data(), kRows, kCols);
  std::vector<float> y(x.size());
  codec.decode(wire.data(), wire.size(), kRows, kCols, y.data());
  return rel_l2(x, y);
}

// Tensors whose every nonzero block has largest magnitude a, whatever the codec's blocks: the
// worst cases of a transform (constant: the transform gathers a block into one value; a single
// nonzero value: it spreads it thinnest) and random signs.
std::vector<std::vector<float>> patterns(double a) {
  const float v = float(a);
  std::vector<float> constant(size_t(kRows * kCols), v), single(size_t(kRows * kCols), 0.0f),
      signs(size_t(kRows * kCols));
  single[size_t(kCols + 3)] = v;
  std::mt19937 rng(5);
  for (float& s : signs) s = (rng() & 1) ? v : -v;
  return {constant, single, signs};
}

const std::vector<std::string> kVariants = {
    // every scale format, granularity, transform and element format
    "e4m3:g128:sbf16",    "e4m3:g128:sf16",  "e5m2:g64:sf16:sround=rne",
    "int8:asym:g128",     "int4:asym:row",   "e4m3:g32:se8m0:sround=rne",
    "e4m3:col",           "int8:tile32:had", "e2m1:g32:had",
    "e4m3:g128:rht:taco", "e5m2:g128:dual",  "tahquant:tile=32:hi=6:lo=6"};

std::vector<std::string> all_variants() {
  std::vector<std::string> v = kVariants;
  for (const Preset& p : preset_table()) v.emplace_back(p.name);
  return v;
}

}  // namespace

TEST_CASE("codec range: blocks at the bounds keep their precision, far outside they are lost",
          "[codecs][range]") {
  for (const std::string& name : all_variants()) {
    const auto codec = make_codec(name);
    const VariantSpec& spec = *codec->variant_spec();
    const CodecRange r = codec_range(spec);
    INFO(name << ": range [" << r.lo << ", " << r.hi << "]");
    REQUIRE(r.lo > 0);
    REQUIRE(r.lo < 1e-2);
    REQUIRE(r.hi > 1e3);
    // TAH-Quant's fp16 scale may be up to 1 / qmax coarser than its ideal at the lower bound.
    const double slack = spec.family == VariantSpec::Family::TahQuant
                             ? 1.0 / (std::ldexp(1.0, spec.tah.hi_bits) - 1)
                             : 1e-3;
    for (double a : {r.lo * (1 + 1e-6), r.hi * (1 - 1e-6)}) {  // inside, after float rounding
      // Mid-range: the same values times a power of two (the same rounding wherever the
      // scales follow the block).
      const std::vector<std::vector<float>> at = patterns(a),
                                            mid = patterns(std::ldexp(a, -std::ilogb(a)));
      for (size_t p = 0; p < at.size(); ++p) {
        INFO("pattern " << p << " at " << a);
        CHECK(out_of_range_blocks(spec, at[p].data(), kRows, kCols) == 0);
        CHECK(round_trip_error(*codec, at[p]) <= 1.5 * round_trip_error(*codec, mid[p]) + slack);
      }
    }
    // Far below: a single nonzero value (the transform's worst case) decodes to (almost) zero.
    const double below = std::max(r.lo * 0x1p-24, double(FLT_TRUE_MIN) * 16);
    const std::vector<float> tiny = patterns(below)[1];
    CHECK(out_of_range_blocks(spec, tiny.data(), kRows, kCols) == 1);
    CHECK(round_trip_error(*codec, tiny) >= 0.5);
    // Far above (where the bound is not float's own): a constant tensor is clipped, or its
    // transform overflows.
    if (r.hi * 1024 <= FLT_MAX) {
      const std::vector<float> huge = patterns(r.hi * 1024)[0];
      CHECK(out_of_range_blocks(spec, huge.data(), kRows, kCols) > 0);
      CHECK(round_trip_error(*codec, huge) >= 0.5);
    }
  }
}

TEST_CASE("codec range: TACO's, from its clamps", "[codecs][range]") {
  // Codes are v * s_a / s_q on the orthonormal transform of a group of 128: s_q in [1e-12, 1e6]
  // and s_a in [1e-3, 1e3] (dual). Above, the +-448 codes clip; below, the largest code stays
  // an E4M3 normal (2^-6) down to 2^-6 times the smallest s_q / s_a.
  const CodecRange taco = codec_range(parse_variant("taco"));
  CHECK(taco.lo == Approx(0x1p-6 * 1e-15 * std::sqrt(128.0)));
  CHECK(taco.hi == Approx(448e9 / std::sqrt(128.0)));
  const CodecRange noh = codec_range(parse_variant("taco-noh"));
  CHECK(noh.lo == Approx(0x1p-6 * 1e-15));
  CHECK(noh.hi == Approx(448e9));
  const CodecRange nosa = codec_range(parse_variant("e4m3:g128:taco"));
  CHECK(nosa.lo == Approx(0x1p-6 * 1e-12));
  CHECK(nosa.hi == Approx(448e6));
  // fp32 scales without a transform: up to FLT_MAX.
  CHECK(codec_range(parse_variant("fp8-g128")).hi == Approx(double(FLT_MAX)));
  // fp16 scales: [2^-24, 65504]: blocks up to 448 * 65504, down to 2^-6 * 2^-24.
  const CodecRange f16 = codec_range(parse_variant("e4m3:g128:sf16"));
  CHECK(f16.lo == Approx(0x1p-30));
  CHECK(f16.hi == Approx(448 * 65504.0));
  // ints need their largest code: 127 * the smallest scale.
  CHECK(codec_range(parse_variant("int8-g128")).lo == Approx(127 * double(FLT_MIN)));
}

TEST_CASE("codec range: the issue's silent zeros are counted", "[codecs][range]") {
  // Groups of absmax 1e15 or 1e-18 decode to almost zero under taco and taco-noh; a 3e38 tensor
  // under int8-g128-had overflows its Hadamard transform; fp8-g128 holds all of them.
  auto count = [](const char* variant, float a) {
    const std::vector<float> x = patterns(a)[2];
    return out_of_range_blocks(parse_variant(variant), x.data(), kRows, kCols);
  };
  const int64_t groups = kRows * kCols / 128;
  for (const char* v : {"taco", "taco-noh"}) {
    CHECK(count(v, 1e15f) == groups);
    CHECK(count(v, 1e-18f) == groups);
    CHECK(count(v, 1.0f) == 0);
  }
  CHECK(count("int8-g128-had", 3e38f) == groups);
  CHECK(count("fp8-g128", 3e38f) == 0);
  CHECK(count("fp8-g128", 1e-18f) == 0);
  // NVFP4: a block below 2^-9 / 448 of the tensor's largest one.
  std::vector<float> x(size_t(kRows * kCols), 1.0f);
  for (int i = 0; i < 16; ++i) x[size_t(i)] = 1e-7f;
  CHECK(out_of_range_blocks(parse_variant("nvfp4"), x.data(), kRows, kCols) == 1);
  // Non-finite values and zero blocks are never counted.
  std::vector<float> z(size_t(kRows * kCols), 0.0f);
  z[0] = std::numeric_limits<float>::infinity();
  CHECK(out_of_range_blocks(parse_variant("taco"), z.data(), kRows, kCols) == 0);
}
