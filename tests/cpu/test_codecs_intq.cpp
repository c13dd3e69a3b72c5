// 3- and 2-bit integer codecs (int3, int2: the int4 path with b-bit codes): the code range, RNE
// ties and the packed bit layout written out by hand; packing against a bit-by-bit writer for
// every bit offset, tail and block kind; wire sizes; Hadamard / RHT groups whose codes are known
// exactly; saturation counts; asymmetric codes; error feedback over the Hadamard codecs, step by
// step against the recursion written out here; the grammar and variant facts. The NumPy oracle of
// the same codecs is tests/python/test_oracles_ints.py.
#include "catch.hpp"
#include "codecs/codec.hpp"
#include "codecs/hadamard.hpp"
#include "codecs/quant_codec.hpp"
#include "codecs/structured/structured.hpp"
#include "codecs/variant.hpp"
#include "codecs/variant_facts.hpp"
#include "core/dtype.hpp"
#include "core/error.hpp"
#include "study/error_feedback.hpp"

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

using namespace taco;

namespace {

std::vector<float> decode_all(const Codec& c, const std::vector<uint8_t>& w, int64_t rows,
                              int64_t cols) {
  std::vector<float> y(size_t(rows * cols));
  c.decode(w.data(), w.size(), rows, cols, y.data());
  return y;
}

// The codes section as the docs define it, one bit at a time: code i's bit j is stream bit
// bits * i + j, stream bit k is bit k % 8 of byte k / 8.
std::vector<uint8_t> pack_bitwise(const std::vector<int>& codes, int bits) {
  std::vector<uint8_t> out((codes.size() * size_t(bits) + 7) / 8, 0);
  size_t k = 0;
  for (int c : codes)
    for (int j = 0; j < bits; ++j, ++k)
      if ((unsigned(c) >> j) & 1u) out[k / 8] = uint8_t(out[k / 8] | (1u << (k % 8)));
  return out;
}

std::vector<uint8_t> f32_bytes(float f) {
  const uint32_t u = float_bits(f);
  return {uint8_t(u), uint8_t(u >> 8), uint8_t(u >> 16), uint8_t(u >> 24)};
}

double rel_l2(const std::vector<float>& x, const std::vector<float>& y, size_t b = 0,
              size_t e = SIZE_MAX) {
  double num = 0, den = 0;
  for (size_t i = b; i < std::min(e, x.size()); ++i) {
    num += (double(x[i]) - y[i]) * (double(x[i]) - y[i]);
    den += double(x[i]) * x[i];
  }
  return std::sqrt(num / den);
}

}  // namespace

TEST_CASE("int3 / int2: code range, ties to even and the packed layout, by hand",
          "[codecs][intq]") {
  // One group of 16 with amax 3: s = 3 / 3 = 1, so the codes are rne(clamp(x, -3, 3)).
  const std::vector<float> x3 = {0,   1,   2,   3,    -3,   -2, -1, 0,
                                 0.5, 1.5, 2.5, -0.5, -2.5, 3,  -3, 1.49f};
  const auto c3 = make_codec("int3:g16");
  const std::vector<uint8_t> w3 = c3->encode(x3.data(), 1, 16);
  // codes 0 1 2 3 -3 -2 -1 0 | 0 2 2 0 -2 3 -3 1 as 3-bit two's complement, 8 per 3 bytes:
  // sum c_k << 3k = 0x1f5688 and 0x35e090, little-endian; then the fp32 scale 1.0.
  const std::vector<uint8_t> want3 = {0x88, 0x56, 0x1f, 0x90, 0xe0, 0x35, 0x00, 0x00, 0x80, 0x3f};
  REQUIRE(w3 == want3);
  const std::vector<float> d3 = {0, 1, 2, 3, -3, -2, -1, 0, 0, 2, 2, 0, -2, 3, -3, 1};
  REQUIRE(decode_all(*c3, w3, 1, 16) == d3);

  // INT2 is ternary: s = amax, |x| / amax <= 0.5 gives 0 (0.5 is a tie, to even), above it +-1.
  std::vector<float> x2(16, 0.0f);
  const float in2[8] = {1, -1, 0.5f, -0.5f, 0.51f, -0.49f, 0, 1};
  for (int i = 0; i < 8; ++i) x2[size_t(i)] = 4.0f * in2[i];  // amax 4: s = 4
  const auto c2 = make_codec("int2:g16");
  const std::vector<uint8_t> w2 = c2->encode(x2.data(), 1, 16);
  // codes 1 -1 0 0 | 1 0 0 1 | 0 ... : code k of a byte at bit 2k, -1 = 0b11.
  const std::vector<uint8_t> want2 = {0x0d, 0x41, 0x00, 0x00, 0x00, 0x00, 0x80, 0x40};
  REQUIRE(w2 == want2);
  const std::vector<float> d2 = decode_all(*c2, w2, 1, 16);
  REQUIRE(d2[0] == 4.0f);
  REQUIRE(d2[1] == -4.0f);
  REQUIRE(d2[2] == 0.0f);
  REQUIRE(d2[4] == 4.0f);
  REQUIRE(d2[5] == 0.0f);

  // The most negative codes (-4, -2) are never produced, but decode as two's complement.
  std::vector<uint8_t> neg = want3;
  neg[0] = 0x04;  // code 0 = 0b100
  REQUIRE(decode_all(*c3, neg, 1, 16)[0] == -4.0f);
  std::vector<uint8_t> neg2 = want2;
  neg2[0] = 0x02;  // code 0 = 0b10
  REQUIRE(decode_all(*c2, neg2, 1, 16)[0] == -8.0f);

  const auto p = c3->params();
  REQUIRE(p.at("elem_format") == "int3");
  REQUIRE(p.at("elem_bits") == 3);
  REQUIRE(p.at("target_range") == 3.0f);
  REQUIRE(c2->params().at("target_range") == 1.0f);
  REQUIRE(elem_max(ElemFormat::INT3, true) == 7.0f);
  REQUIRE(elem_max(ElemFormat::INT2, true) == 3.0f);
}

TEST_CASE("int3 / int2 / int4 packing equals a bit-by-bit writer at every offset and tail",
          "[codecs][intq]") {
  // Integer data whose every block holds +-qmax: every scale is exactly 1, so the codes are the
  // data and decode is exact. Shapes give every numel from 1 to 50 (every position of a code in
  // its 3-byte unit and partial last units) and blocks of each kind.
  std::mt19937 rng(17);
  for (int bits : {2, 3, 4}) {
    const int qmax = (1 << (bits - 1)) - 1;
    std::uniform_int_distribution<int> code(-qmax, qmax);
    const std::string e = "int" + std::to_string(bits);
    struct Form {
      std::string variant;
      int64_t rows, cols;
    };
    std::vector<Form> forms;
    for (int64_t n = 1; n <= 50; ++n) forms.push_back({e + ":g16", 1, n});
    forms.push_back({e + ":g16", 7, 37});  // groups straddle rows
    forms.push_back({e + ":row", 5, 13});
    forms.push_back({e + ":col", 9, 11});
    forms.push_back({e + ":tensor", 3, 29});
    forms.push_back({e + ":tile16", 32, 48});
    for (const Form& f : forms) {
      CAPTURE(f.variant, f.rows, f.cols);
      const auto c = make_codec(f.variant);
      const auto* q = dynamic_cast<const QuantCodec*>(c.get());
      REQUIRE(q != nullptr);
      const QuantLayout L = q->layout(f.rows, f.cols);
      const int64_t n = f.rows * f.cols;
      std::vector<int> codes(static_cast<size_t>(n));
      for (int& v : codes) v = code(rng);
      // +-qmax in every block, at its first element.
      for (int64_t i = 0; i < n; ++i) {
        const int64_t r = i / f.cols, col = i % f.cols;
        bool first = false;
        switch (q->spec().gran) {
          case Granularity::Group:
            first = i % 16 == 0;
            break;
          case Granularity::Row:
            first = col == 0;
            break;
          case Granularity::Col:
            first = r == 0;
            break;
          case Granularity::Tile:
            first = r % 16 == 0 && col % 16 == 0;
            break;
          case Granularity::Tensor:
            first = i == 0;
            break;
        }
        if (first) codes[size_t(i)] = (i & 1) ? -qmax : qmax;
      }
      std::vector<float> x(codes.begin(), codes.end());
      const std::vector<uint8_t> w = c->encode(x.data(), f.rows, f.cols);
      REQUIRE(int64_t(w.size()) == L.total);
      REQUIRE(L.code_bytes == (n * bits + 7) / 8);
      const std::vector<uint8_t> want = pack_bitwise(codes, bits);
      REQUIRE(std::vector<uint8_t>(w.begin(), w.begin() + L.code_bytes) == want);
      for (int64_t b = 0; b < L.blocks; ++b)
        REQUIRE(std::vector<uint8_t>(w.begin() + L.scale_off + 4 * b,
                                     w.begin() + L.scale_off + 4 * b + 4) == f32_bytes(1.0f));
      REQUIRE(decode_all(*c, w, f.rows, f.cols) == x);
    }
  }
}

TEST_CASE("int3 / int2 wire sizes: ceil(b codes / 8) + scales, the padded tail with a transform",
          "[codecs][intq]") {
  std::mt19937 rng(3);
  std::normal_distribution<float> g;
  for (int64_t n : {1, 7, 8, 9, 15, 16, 17, 31, 33, 999, 1000, 1001}) {
    std::vector<float> x(static_cast<size_t>(n));
    for (float& v : x) v = g(rng);
    for (int bits : {3, 2}) {
      for (int G : {16, 32, 128}) {
        const int64_t groups = (n + G - 1) / G;
        const std::string base = "int" + std::to_string(bits) + ":g" + std::to_string(G);
        CAPTURE(n, base);
        REQUIRE(int64_t(make_codec(base)->encode(x.data(), 1, n).size()) ==
                (n * bits + 7) / 8 + 4 * groups);
        // A transform stores all G codes of the zero-padded tail group.
        REQUIRE(int64_t(make_codec(base + ":had")->encode(x.data(), 1, n).size()) ==
                (groups * G * bits + 7) / 8 + 4 * groups);
        // asym: one zero-point byte per group; sbf16: 2-byte scales.
        REQUIRE(int64_t(make_codec(base + ":asym")->encode(x.data(), 1, n).size()) ==
                (n * bits + 7) / 8 + 5 * groups);
        REQUIRE(int64_t(make_codec(base + ":sbf16")->encode(x.data(), 1, n).size()) ==
                (n * bits + 7) / 8 + 2 * groups);
      }
    }
  }
  // Wrong wire sizes are InputErrors.
  std::vector<float> x(1000, 1.0f);
  const auto c = make_codec("int3-g32-had");
  std::vector<uint8_t> w = c->encode(x.data(), 8, 125);
  std::vector<float> y(x.size());
  REQUIRE_THROWS_AS(c->decode(w.data(), w.size() - 1, 8, 125, y.data()), InputError);
  w.push_back(0);
  REQUIRE_THROWS_AS(c->decode(w.data(), w.size(), 8, 125, y.data()), InputError);
}

TEST_CASE("int3 / int2 with had / rht: groups built as H c have exactly the codes c",
          "[codecs][intq]") {
  // For G = 16, 64, 256, 1024 the factor 1/sqrt(G) is a power of two, so with integer codes c
  // (|c| <= qmax, +-qmax present) x = H_G c / sqrt(G) is exact in float, the encoder's transform
  // H_G x / sqrt(G) = c exactly (H H = G I), the scale is 1 and the codes are c; the decoder's
  // inverse gives x back bit for bit. RHT: x = D H c / sqrt(G) with D the sign flips.
  std::mt19937 rng(23);
  for (int bits : {3, 2}) {
    const int qmax = (1 << (bits - 1)) - 1;
    std::uniform_int_distribution<int> code(-qmax, qmax);
    for (int G : {16, 64, 256, 1024}) {
      for (const char* t : {"had", "rht:seed=9"}) {
        const std::string v = "int" + std::to_string(bits) + ":g" + std::to_string(G) + ":" + t;
        CAPTURE(v);
        const auto c = make_codec(v);
        const int64_t groups = 3;
        std::vector<int> codes(size_t(groups * G));
        std::vector<float> x(codes.size());
        const std::vector<uint32_t> signs =
            t[0] == 'r' ? rht_sign_masks(G, 9) : std::vector<uint32_t>(size_t(G), 0u);
        for (int64_t b = 0; b < groups; ++b) {
          for (int i = 0; i < G; ++i) codes[size_t(b * G + i)] = code(rng);
          codes[size_t(b * G + int(rng() % uint32_t(G)))] = qmax;
          for (int i = 0; i < G; ++i) {  // x = D H c / sqrt(G), summed directly
            double s = 0;
            for (int j = 0; j < G; ++j)
              s +=
                  (__builtin_popcount(unsigned(i & j)) & 1 ? -1.0 : 1.0) * codes[size_t(b * G + j)];
            x[size_t(b * G + i)] =
                bits_float(float_bits(float(s / std::sqrt(double(G)))) ^ signs[size_t(i)]);
          }
        }
        const std::vector<uint8_t> w = c->encode(x.data(), groups, G);
        const int64_t cb = groups * G * bits / 8;
        REQUIRE(std::vector<uint8_t>(w.begin(), w.begin() + cb) == pack_bitwise(codes, bits));
        for (int64_t b = 0; b < groups; ++b)
          REQUIRE(std::vector<uint8_t>(w.begin() + cb + 4 * b, w.begin() + cb + 4 * b + 4) ==
                  f32_bytes(1.0f));
        REQUIRE(decode_all(*c, w, groups, G) == x);
      }
    }
  }
}

TEST_CASE(
    "int3 / int2 with had: what the rotation does to outliers; the tail decodes like a "
    "full group",
    "[codecs][intq]") {
  // Laplace data with one 30x outlier per group of 32. Without the transform the outlier sets
  // the scale and most of its group rounds to 0. The Hadamard spreads it over the group: that
  // helps INT4 and INT3 on the other elements, but INT2's three levels cannot resolve the spread
  // values and the error grows (docs/variants.md).
  std::mt19937 rng(41);
  std::exponential_distribution<float> ex(1.0f);
  std::vector<float> x(64 * 1024);
  std::vector<char> outlier(x.size(), 0);
  for (size_t i = 0; i < x.size(); ++i) x[i] = (rng() & 1 ? 1.0f : -1.0f) * ex(rng);
  for (size_t i = 0; i < x.size(); i += 32) {
    const size_t k = i + rng() % 32;
    x[k] *= 30.0f;
    outlier[k] = 1;
  }
  auto errors = [&](const std::string& v) {  // {all elements, the non-outliers}
    const auto c = make_codec(v);
    const std::vector<float> y = decode_all(*c, c->encode(x.data(), 64, 1024), 64, 1024);
    std::vector<float> xs, ys;
    for (size_t i = 0; i < x.size(); ++i)
      if (!outlier[i]) {
        xs.push_back(x[i]);
        ys.push_back(y[i]);
      }
    return std::pair<double, double>{rel_l2(x, y), rel_l2(xs, ys)};
  };
  for (const char* e : {"int4", "int3"}) {
    CAPTURE(e);
    const auto plain = errors(std::string(e) + ":g32"), had = errors(std::string(e) + ":g32:had");
    REQUIRE(had.second < 0.9 * plain.second);
    REQUIRE(had.first < plain.first);
  }
  const auto plain2 = errors("int2:g32"), had2 = errors("int2:g32:had");
  REQUIRE(had2.second > plain2.second);
  REQUIRE(had2.first > 1.5 * plain2.first);

  // 1000 elements in groups of 128: 7 full groups and a 104-element tail, padded to 128 codes.
  std::normal_distribution<float> g;
  std::vector<float> t(1000);
  for (float& v : t) v = g(rng);
  for (const char* v : {"int3-g128-had", "int2-g128-had"}) {
    CAPTURE(v);
    const auto c = make_codec(v);
    const std::vector<float> y = decode_all(*c, c->encode(t.data(), 1, 1000), 1, 1000);
    const double full = rel_l2(t, y, 0, 896), tail = rel_l2(t, y, 896);
    REQUIRE(tail < 1.3 * full);
    REQUIRE(tail > 0.7 * full);
  }
}

TEST_CASE("int3 / int2: saturation counts the codes at +-qmax; asym keeps zero exact",
          "[codecs][intq]") {
  // Per group of 32: one value at amax (code +-qmax), the rest below (qmax - 0.5) / qmax of it.
  std::mt19937 rng(5);
  const int64_t groups = 40;
  for (const char* v : {"int3-g32", "int2-g32", "int3:g32:sbf16"}) {
    CAPTURE(v);
    const float qmax = make_codec(v)->params().at("target_range").get<float>();
    std::uniform_real_distribution<float> u(-(qmax - 0.5f) / qmax * 0.99f,
                                            (qmax - 0.5f) / qmax * 0.99f);
    std::vector<float> x(size_t(groups * 32));
    for (int64_t i = 0; i < groups * 32; ++i)
      x[size_t(i)] = i % 32 == (i / 32) % 32 ? -1.0f : u(rng);
    EncodeStats st;
    make_codec(v)->encode(x.data(), groups, 32, &st);
    REQUIRE(st.saturated == groups);
  }
  // Asymmetric: codes [0, 2^b - 1] with a zero point; 0 decodes to exactly 0, both ends used.
  for (const char* v : {"int3:asym:g32", "int2:asym:g32"}) {
    CAPTURE(v);
    const auto c = make_codec(v);
    std::vector<float> x(32);
    for (int i = 0; i < 32; ++i) x[size_t(i)] = 0.3f * float(i) - 2.0f;
    x[7] = 0.0f;
    const std::vector<uint8_t> w = c->encode(x.data(), 1, 32);
    const int bits = v[3] == '3' ? 3 : 2;
    REQUIRE(int64_t(w.size()) == 32 * bits / 8 + 4 + 1);
    const std::vector<float> y = decode_all(*c, w, 1, 32);
    REQUIRE(y[7] == 0.0f);
    const int top = (1 << bits) - 1;
    REQUIRE((w[0] & top) == 0);                                               // the minimum: code 0
    REQUIRE(((w[size_t(31 * bits / 8)] >> ((31 * bits) % 8)) & top) == top);  // the maximum
  }
}

TEST_CASE("ef: over int3 / int2 / int4 Hadamard codecs is e' = v - D(C(v)), bit for bit",
          "[codecs][intq][ef]") {
  const int64_t rows = 16, cols = 96, n = rows * cols;  // 1536: int3 groups of 128 end mid-row
  std::mt19937 rng(8);
  std::normal_distribution<float> g;
  std::vector<float> base(static_cast<size_t>(n));
  for (float& v : base) v = g(rng);
  for (const char* inner : {"int3-g32-had", "int4-g32-had", "int2-g64-had", "int3:g128:rht"}) {
    CAPTURE(inner);
    const std::string name = std::string("ef:") + inner;
    const auto c = make_codec(name);
    const std::optional<Wrapped> wr = c->wrapped();
    REQUIRE(wr.has_value());
    REQUIRE(wr->kind == FeedbackKind::ErrorFeedback);
    REQUIRE(wr->inner->name() == make_codec(inner)->name());
    REQUIRE(c->name() == "ef:" + wr->inner->name());
    REQUIRE(make_codec(c->name())->name() == c->name());
    // Stateless use is the first step: the inner codec's bytes.
    REQUIRE(c->encode(base.data(), rows, cols) == wr->inner->encode(base.data(), rows, cols));

    study::FeedbackState st(*c);
    std::vector<float> e(static_cast<size_t>(n), 0.0f), xhat(e.size()), v(e.size());
    std::vector<float> x(static_cast<size_t>(n));
    double max_first = 0, max_last = 0;
    const int steps = 60;
    for (int t = 1; t <= steps; ++t) {
      for (size_t i = 0; i < x.size(); ++i) x[i] = base[i] + 0.1f * g(rng);
      const study::FeedbackStep s = st.step("k", x.data(), rows, cols, xhat.data());
      // The recursion written out: v = x + e, wire = C(v), e' = v - D(wire).
      for (size_t i = 0; i < v.size(); ++i) v[i] = x[i] + e[i];
      const std::vector<uint8_t> w = wr->inner->encode(v.data(), rows, cols);
      const std::vector<float> d = decode_all(*wr->inner, w, rows, cols);
      for (size_t i = 0; i < e.size(); ++i) e[i] = v[i] - d[i];
      REQUIRE(s.wire_bytes == int64_t(w.size()));
      REQUIRE(std::memcmp(xhat.data(), d.data(), d.size() * 4) == 0);
      REQUIRE(std::memcmp(st.state("k")->data(), e.data(), e.size() * 4) == 0);
      double& m = t <= steps / 2 ? max_first : max_last;
      m = std::max(m, std::sqrt(s.state_norm2));
    }
    // The codec contracts, so the residual stays bounded: no growth over the second half.
    REQUIRE(max_last <= 1.2 * max_first);
  }
}

TEST_CASE("int3 / int2 in the grammar: presets, canonical names, refusals, variant facts",
          "[codecs][intq]") {
  for (const auto& [in, out] : std::vector<std::pair<std::string, std::string>>{
           {"INT3:G32:HAD", "int3-g32-had"},
           {"had:g128:int2", "int2-g128-had"},
           {"int3:g32:T=3", "int3-g32"},
           {"int2:g64", "int2:g64"},
           {"int3:g64:asym", "int3:asym:g64"},
           {"int2:g32:T=1.5", "int2:g32:T=1.5"},
           {"int3:g16:rht:seed=4", "int3:g16:rht:seed=4"},
           {"int2:tile32:sbf16", "int2:tile32:sbf16"}}) {
    CAPTURE(in);
    const auto c = make_codec(in);
    REQUIRE(c->name() == out);
    REQUIRE(make_codec(c->params().at("definition").get<std::string>())->params() == c->params());
  }
  for (const auto& [v, msg] : std::vector<std::pair<std::string, std::string>>{
           {"int3:g32:nosat", "nosat"},
           {"int2:g32:se8m0:sround=ocp", "float element"},
           {"int3:g32:dual", "FP8"},
           {"int3:int2:g32", "given twice"},
           {"int5:g32", "unknown token 'int5'"},
           {"int2:row:had", "had/rht need"}}) {
    CAPTURE(v);
    try {
      make_codec(v);
      FAIL("no exception");
    } catch (const InputError& err) {
      REQUIRE(std::string(err.what()).find(msg) != std::string::npos);
    }
  }
  struct Facts {
    const char* variant;
    const char* twin;
    int64_t group;
    const char* series;
    const char* nearest;
  };
  for (const Facts& f : {Facts{"int3-g128-had", "int3:g128", 128, "int3-g32-had", "int3-g32-had"},
                         Facts{"int2:g256:had", "int2:g256", 256, "int2-g32-had", "int2-g32-had"},
                         Facts{"int2:g64", nullptr, 64, "int2-g32", "int2-g32"},
                         Facts{"int3:asym:g32", nullptr, 32, "int3:asym:g128", "int3-g32"}}) {
    CAPTURE(f.variant);
    const VariantFacts vf = variant_facts(*make_codec(f.variant));
    REQUIRE(vf.twin == (f.twin ? std::optional<std::string>(f.twin) : std::nullopt));
    REQUIRE(vf.group_size == f.group);
    REQUIRE(vf.group_series == std::string(f.series));
    REQUIRE(vf.nearest_preset == std::string(f.nearest));
  }
  const VariantFacts ef = variant_facts(*make_codec("ef:int3-g64-had"));
  REQUIRE(ef.twin == std::string("ef:int3:g64"));
  REQUIRE(ef.group_series == std::string("ef:int3-g32-had"));
}
