// topk and randk: sparsification (Rudakov et al., methods.md 7a). structured.hpp has the wire.
#include "codecs/structured/rng.hpp"
#include "codecs/structured/specs.hpp"
#include "codecs/structured/structured.hpp"
#include "core/dtype.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>

namespace taco::structured {

int64_t topk_count(int64_t numel, double frac) {
  const double k = std::floor(frac * double(numel) + 0.5);
  return std::clamp<int64_t>(int64_t(k), 1, numel);
}

int64_t topk_wire_bytes(int64_t numel, int64_t k, bool bitmap) {
  return bitmap ? (numel + 7) / 8 + 2 * k : 6 * k;
}

int64_t randk_wire_bytes(int64_t k) {
  return 8 + 2 * k;
}

namespace {

void put_bf16(uint8_t* p, float v) {
  const uint16_t h = float_to_bf16(v);
  p[0] = uint8_t(h);
  p[1] = uint8_t(h >> 8);
}
float get_bf16(const uint8_t* p) {
  return bf16_to_float(uint16_t(p[0] | (p[1] << 8)));
}

class TopKCodec final : public Codec {
 public:
  TopKCodec(const TopKSpec& s, std::string name, std::string definition)
      : s_(s), name_(std::move(name)), definition_(std::move(definition)) {}
  const std::string& name() const override { return name_; }
  nlohmann::json params() const override {
    return {{"variant", name_},
            {"definition", definition_},
            {"family", "topk"},
            {"elem_format", "bf16"},
            {"scale_format", "none"},
            {"granularity", "none"},
            {"group_size", nullptr},
            {"transform", "none"},
            {"frac", s_.frac},
            {"index", s_.bitmap ? "bitmap" : "i32"},
            {"ties", "lower flat index first"}};
  }

  // The K kept indices, ascending: every |x| above the K-th largest magnitude, then equal
  // magnitudes by ascending index until K.
  static std::vector<int64_t> select(const std::vector<float>& xs, int64_t k) {
    const int64_t n = int64_t(xs.size());
    std::vector<float> mag(xs.size());
    for (size_t i = 0; i < xs.size(); ++i) mag[i] = std::fabs(xs[i]);
    std::nth_element(mag.begin(), mag.begin() + (k - 1), mag.end(), std::greater<float>());
    const float thr = mag[size_t(k - 1)];
    int64_t above = 0;
    for (size_t i = 0; i < xs.size(); ++i) above += std::fabs(xs[i]) > thr;
    int64_t equal_left = k - above;
    std::vector<int64_t> idx;
    idx.reserve(size_t(k));
    for (int64_t i = 0; i < n; ++i) {
      const float a = std::fabs(xs[size_t(i)]);
      if (a > thr || (a == thr && equal_left > 0)) {
        if (a == thr) --equal_left;
        idx.push_back(i);
      }
    }
    TACO_ASSERT(int64_t(idx.size()) == k, "topk selected {} of {}", idx.size(), k);
    return idx;
  }

  std::vector<uint8_t> encode(const float* x, int64_t rows, int64_t cols,
                              EncodeStats* stats) const override {
    const int64_t n = checked_numel(name_, rows, cols);
    TACO_REQUIRE_INPUT(s_.bitmap || n <= int64_t(INT32_MAX),
                       "codec {}: {} elements do not fit i32 indices (use index=bitmap)", name_, n);
    std::vector<float> xs;
    const int64_t bad = sanitize(x, n, xs);
    if (stats) stats->nonfinite += bad;
    const int64_t k = topk_count(n, s_.frac);
    const std::vector<int64_t> idx = select(xs, k);
    std::vector<uint8_t> wire(size_t(topk_wire_bytes(n, k, s_.bitmap)), 0);
    if (s_.bitmap) {
      const size_t vals = size_t((n + 7) / 8);
      for (size_t j = 0; j < idx.size(); ++j) {
        wire[size_t(idx[j] >> 3)] |= uint8_t(1u << (idx[j] & 7));
        put_bf16(&wire[vals + 2 * j], xs[size_t(idx[j])]);
      }
    } else {
      for (size_t j = 0; j < idx.size(); ++j) {
        put_bf16(&wire[2 * j], xs[size_t(idx[j])]);
        const uint32_t u = uint32_t(idx[j]);
        uint8_t* p = &wire[size_t(2 * k) + 4 * j];
        p[0] = uint8_t(u);
        p[1] = uint8_t(u >> 8);
        p[2] = uint8_t(u >> 16);
        p[3] = uint8_t(u >> 24);
      }
    }
    return wire;
  }

  WireSize wire_size(int64_t rows, int64_t cols) const override {
    const int64_t n = checked_numel(name_, rows, cols);
    TACO_REQUIRE_INPUT(s_.bitmap || n <= int64_t(INT32_MAX),
                       "codec {}: {} elements do not fit i32 indices (use index=bitmap)", name_, n);
    return {topk_wire_bytes(n, topk_count(n, s_.frac), s_.bitmap), true};
  }

  void decode(const uint8_t* wire, size_t nbytes, int64_t rows, int64_t cols,
              float* out) const override {
    const int64_t n = checked_numel(name_, rows, cols);
    const int64_t k = topk_count(n, s_.frac);
    const int64_t want = topk_wire_bytes(n, k, s_.bitmap);
    TACO_REQUIRE_INPUT(int64_t(nbytes) == want,
                       "codec {}: wire buffer has {} bytes, but [{}, {}] encodes to {}", name_,
                       nbytes, rows, cols, want);
    std::fill(out, out + n, 0.0f);
    if (s_.bitmap) {
      const int64_t vals = (n + 7) / 8;
      int64_t j = 0;
      for (int64_t i = 0; i < n; ++i) {
        if (!((wire[i >> 3] >> (i & 7)) & 1)) continue;
        TACO_REQUIRE_INPUT(j < k, "codec {}: bitmap has more than {} bits set", name_, k);
        out[i] = get_bf16(wire + vals + 2 * j);
        ++j;
      }
      TACO_REQUIRE_INPUT(j == k, "codec {}: bitmap has {} bits set, expected {}", name_, j, k);
      for (int64_t i = n; i < vals * 8; ++i)
        TACO_REQUIRE_INPUT(!((wire[i >> 3] >> (i & 7)) & 1),
                           "codec {}: bitmap bit {} is beyond the tensor", name_, i);
    } else {
      int64_t prev = -1;
      for (int64_t j = 0; j < k; ++j) {
        const uint8_t* p = wire + 2 * k + 4 * j;
        const int64_t i = int64_t(uint32_t(p[0]) | (uint32_t(p[1]) << 8) | (uint32_t(p[2]) << 16) |
                                  (uint32_t(p[3]) << 24));
        TACO_REQUIRE_INPUT(i > prev && i < n,
                           "codec {}: index {} at position {} is not ascending within [0, {})",
                           name_, i, j, n);
        out[i] = get_bf16(wire + 2 * j);
        prev = i;
      }
    }
  }

 private:
  TopKSpec s_;
  std::string name_, definition_;
};

class RandKCodec final : public Codec {
 public:
  RandKCodec(const RandKSpec& s, std::string name, std::string definition)
      : s_(s), name_(std::move(name)), definition_(std::move(definition)) {}
  const std::string& name() const override { return name_; }
  nlohmann::json params() const override {
    return {{"variant", name_},        {"definition", definition_},
            {"family", "randk"},       {"elem_format", "bf16"},
            {"scale_format", "none"},  {"granularity", "none"},
            {"group_size", nullptr},   {"transform", "none"},
            {"frac", s_.frac},         {"seed", s_.seed},
            {"unbiased", s_.unbiased}, {"indices", "regenerated from the u64 key on the wire"}};
  }

  // Knuth's selection sampling (TAOCP vol. 2, 3.4.2, algorithm S): exactly k ascending indices,
  // each k-subset equally likely.
  static std::vector<int64_t> indices(uint64_t key, int64_t n, int64_t k) {
    Rng rng(key, RngStream::RandK);
    std::vector<int64_t> idx;
    idx.reserve(size_t(k));
    for (int64_t i = 0; i < n && int64_t(idx.size()) < k; ++i)
      if (rng.uniform() * double(n - i) < double(k - int64_t(idx.size()))) idx.push_back(i);
    TACO_ASSERT(int64_t(idx.size()) == k, "randk drew {} of {}", idx.size(), k);
    return idx;
  }

  std::vector<uint8_t> encode(const float* x, int64_t rows, int64_t cols,
                              EncodeStats* stats) const override {
    const int64_t n = checked_numel(name_, rows, cols);
    std::vector<float> xs;
    const int64_t bad = sanitize(x, n, xs);
    if (stats) stats->nonfinite += bad;
    const int64_t k = topk_count(n, s_.frac);
    // The key: the seed mixed with a hash of the input bits (stands in for a per-step seed
    // both sides would share), so the kept set differs between steps.
    uint64_t h = 0xcbf29ce484222325ULL;
    for (float v : xs) h = (h ^ float_bits(v)) * 0x100000001b3ULL;
    uint64_t sm = s_.seed ^ h;
    const uint64_t key = splitmix64_next(sm);
    const std::vector<int64_t> idx = indices(key, n, k);
    const float scale = s_.unbiased ? float(double(n) / double(k)) : 1.0f;
    ByteWriter w(size_t(randk_wire_bytes(k)));
    w.u64(key);
    uint8_t* p = w.extend(size_t(2 * k));
    for (size_t j = 0; j < idx.size(); ++j) put_bf16(p + 2 * j, xs[size_t(idx[j])] * scale);
    return w.take();
  }

  WireSize wire_size(int64_t rows, int64_t cols) const override {
    return {randk_wire_bytes(topk_count(checked_numel(name_, rows, cols), s_.frac)), true};
  }

  void decode(const uint8_t* wire, size_t nbytes, int64_t rows, int64_t cols,
              float* out) const override {
    const int64_t n = checked_numel(name_, rows, cols);
    const int64_t k = topk_count(n, s_.frac);
    TACO_REQUIRE_INPUT(int64_t(nbytes) == randk_wire_bytes(k),
                       "codec {}: wire buffer has {} bytes, but [{}, {}] encodes to {}", name_,
                       nbytes, rows, cols, randk_wire_bytes(k));
    ByteReader rd(wire, nbytes, name_);
    const uint64_t key = rd.u64();
    const uint8_t* p = rd.bytes(size_t(2 * k));
    std::fill(out, out + n, 0.0f);
    const std::vector<int64_t> idx = indices(key, n, k);
    for (size_t j = 0; j < idx.size(); ++j) out[idx[j]] = get_bf16(p + 2 * j);
  }

 private:
  RandKSpec s_;
  std::string name_, definition_;
};

}  // namespace

std::unique_ptr<Codec> make_topk_codec(const TopKSpec& s, std::string name,
                                       std::string definition) {
  return std::make_unique<TopKCodec>(s, std::move(name), std::move(definition));
}
std::unique_ptr<Codec> make_randk_codec(const RandKSpec& s, std::string name,
                                        std::string definition) {
  return std::make_unique<RandKCodec>(s, std::move(name), std::move(definition));
}

}  // namespace taco::structured
