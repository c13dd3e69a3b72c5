// make_codec() and codec_presets(): from a variant string to a Codec.
#include "codecs/codec.hpp"
#include "codecs/quant_codec.hpp"
#include "codecs/structured/structured.hpp"
#include "codecs/tahquant.hpp"
#include "codecs/variant.hpp"
#include "core/dtype.hpp"
#include "core/error.hpp"

namespace taco {

namespace {

// No compression: every value rounded to bf16 (RNE), 2 bytes per element, little-endian. Exact
// for inputs that were bf16; NaN stays NaN (it is not zeroed), and is counted as non-finite.
class Bf16Codec final : public Codec {
 public:
  const std::string& name() const override { return name_; }
  const VariantSpec* variant_spec() const override { return &variant_; }
  nlohmann::json params() const override {
    return {{"variant", name_},      {"definition", name_},   {"family", "quant"},
            {"elem_format", "bf16"}, {"elem_bits", 16},       {"scale_format", "none"},
            {"granularity", "none"}, {"group_size", nullptr}, {"transform", "none"}};
  }
  std::vector<uint8_t> encode(const float* x, int64_t rows, int64_t cols,
                              EncodeStats* stats) const override {
    std::vector<uint8_t> wire;
    encode_into(x, rows, cols, wire, stats);
    return wire;
  }
  void encode_into(const float* x, int64_t rows, int64_t cols, std::vector<uint8_t>& wire,
                   EncodeStats* stats) const override {
    const int64_t n = checked_numel(rows, cols);
    wire.resize(size_t(2 * n));  // every byte is written below
    int64_t nonfin = 0;
#pragma omp parallel for schedule(static) reduction(+ : nonfin) if (n >= (1 << 15))
    for (int64_t i = 0; i < n; ++i) {
      const uint16_t h = float_to_bf16(x[i]);
      wire[size_t(2 * i)] = uint8_t(h);
      wire[size_t(2 * i + 1)] = uint8_t(h >> 8);
      nonfin += (float_bits(x[i]) & 0x7f800000u) == 0x7f800000u;
    }
    if (stats) stats->nonfinite += nonfin;
  }
  WireSize wire_size(int64_t rows, int64_t cols) const override {
    return {2 * checked_numel(rows, cols), true};
  }
  void decode(const uint8_t* wire, size_t nbytes, int64_t rows, int64_t cols,
              float* out) const override {
    const int64_t n = checked_numel(rows, cols);
    TACO_REQUIRE_INPUT(int64_t(nbytes) == 2 * n,
                       "codec bf16: wire buffer has {} bytes, but [{}, {}] encodes to {}", nbytes,
                       rows, cols, 2 * n);
#pragma omp parallel for schedule(static) if (n >= (1 << 15))
    for (int64_t i = 0; i < n; ++i)
      out[i] = bf16_to_float(uint16_t(wire[size_t(2 * i)] | (wire[size_t(2 * i + 1)] << 8)));
  }

 private:
  static int64_t checked_numel(int64_t rows, int64_t cols) {
    TACO_REQUIRE_INPUT(rows > 0 && cols > 0 && rows <= (int64_t(1) << 40) / cols,
                       "codec bf16: unusable shape [{}, {}]", rows, cols);
    return rows * cols;
  }
  std::string name_ = "bf16";
  VariantSpec variant_ = bf16_variant();
  static VariantSpec bf16_variant() {
    VariantSpec v;
    v.family = VariantSpec::Family::Bf16;
    return v;
  }
};

}  // namespace

std::unique_ptr<Codec> make_codec(const std::string& variant) {
  // subspace, lowrank, tt, topk, randk, ef:, aqsgd: (docs/structured.md)
  if (auto c = structured::make_structured_codec(variant)) return c;
  return make_codec(parse_variant(variant));
}

std::unique_ptr<Codec> make_codec(const VariantSpec& spec) {
  std::string name = canonical_variant(spec);
  switch (spec.family) {
    case VariantSpec::Family::Bf16:
      return std::make_unique<Bf16Codec>();
    case VariantSpec::Family::Quant:
      return std::make_unique<QuantCodec>(spec.quant, std::move(name));
    case VariantSpec::Family::TahQuant:
      return std::make_unique<TahQuantCodec>(spec.tah, std::move(name));
  }
  throw_error("unknown codec family {}", int(spec.family));
}

std::vector<std::pair<std::string, std::string>> codec_presets() {
  std::vector<std::pair<std::string, std::string>> out;
  for (const Preset& p : preset_table()) out.emplace_back(p.name, p.description);
  return out;
}

}  // namespace taco
