#include "codecs/tahquant.hpp"

#include "codecs/hadamard.hpp"
#include "core/dtype.hpp"
#include "core/error.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace taco {

namespace {

struct BitWriter {
  uint8_t* p;
  void put(int64_t bit, uint32_t value, int nbits) {
    for (int i = 0; i < nbits; ++i, ++bit)
      if ((value >> i) & 1u) p[bit >> 3] = uint8_t(p[bit >> 3] | (1u << (bit & 7)));
  }
};

int64_t bytes_for_bits(int64_t bits) {
  return (bits + 7) / 8;
}

}  // namespace

TahQuantCodec::TahQuantCodec(const TahSpec& spec, std::string name)
    : t_(spec), name_(std::move(name)) {
  variant_.family = VariantSpec::Family::TahQuant;
  variant_.tah = t_;
  TACO_REQUIRE_INPUT(t_.tile >= 8 && t_.tile <= 1024 && (t_.tile & (t_.tile - 1)) == 0,
                     "tahquant: tile {} is not a power of two in [8, 1024]", t_.tile);
  TACO_REQUIRE_INPUT(t_.hi_bits >= 1 && t_.hi_bits <= 8 && t_.lo_bits >= 1 && t_.lo_bits <= 8,
                     "tahquant: bits must be in [1, 8]");
  TACO_REQUIRE_INPUT(t_.hi_pct >= 0 && t_.hi_pct <= 100, "tahquant: pct must be in [0, 100]");
  pivot_bits_ = 0;
  while ((1 << pivot_bits_) < t_.tile) ++pivot_bits_;
}

nlohmann::json TahQuantCodec::params() const {
  return {
      {"variant", name_},
      {"definition", grammar_string(VariantSpec{VariantSpec::Family::TahQuant, QuantSpec{}, t_})},
      {"family", "tahquant"},
      {"elem_format", fmt::format("uint{}/uint{}", t_.hi_bits, t_.lo_bits)},
      {"hi_bits", t_.hi_bits},
      {"lo_bits", t_.lo_bits},
      {"hi_pct", t_.hi_pct},
      {"scale_format", "fp16"},
      {"granularity", "tile"},
      {"group_size", t_.tile},
      {"transform", "pivot+hadamard (flagged tiles)"},
      {"pivot_rule", "first >= 2 * second"},
      {"token_rule", "lowest entropy -> lo bits"}};
}

tah::Layout TahQuantCodec::layout(int64_t rows, int64_t cols) const {
  TACO_REQUIRE_INPUT(rows > 0 && cols > 0 && rows <= (int64_t(1) << 40) / cols,
                     "codec {}: unusable shape [{}, {}]", name_, rows, cols);
  TACO_REQUIRE_INPUT(cols % t_.tile == 0, "codec {}: cols {} is not a multiple of the tile {}",
                     name_, cols, t_.tile);
  tah::Layout L;
  L.rows = rows;
  L.cols = cols;
  L.tile = t_.tile;
  L.tiles_per_row = cols / t_.tile;
  L.tiles = rows * L.tiles_per_row;
  L.n_lo = low_tokens(rows);
  L.lo_bits = t_.lo_bits;
  L.hi_bits = t_.hi_bits;
  L.pivot_bits = pivot_bits_;
  L.hscale = hadamard_scale(t_.tile);
  L.token_map = 0;
  L.tile_map = bytes_for_bits(rows);
  L.codes = L.tile_map + bytes_for_bits(L.tiles);
  L.zeros =
      L.codes + bytes_for_bits(L.n_lo * cols * t_.lo_bits + (rows - L.n_lo) * cols * t_.hi_bits);
  L.scales = L.zeros + 2 * L.tiles;
  L.pivots = L.scales + 2 * L.tiles;
  L.bound = L.bytes(L.tiles);
  return L;
}

int64_t TahQuantCodec::encoded_bytes(const uint8_t* wire, int64_t rows, int64_t cols) const {
  const tah::Layout L = layout(rows, cols);
  int64_t flagged = 0;
  for (int64_t t = 0; t < L.tiles; ++t) flagged += tah::get_bits(wire + L.tile_map, t, 1);
  return L.bytes(flagged);
}

std::vector<uint8_t> TahQuantCodec::encode(const float* x, int64_t rows, int64_t cols,
                                           EncodeStats* stats) const {
  const tah::Layout L = layout(rows, cols);
  const bool par = rows * cols >= (1 << 15);

  // 1. entropy per token, in the lane order of the GPU's warp per token
  std::vector<double> H(static_cast<size_t>(rows));
  int64_t nonfin = 0;
#pragma omp parallel for schedule(static) reduction(+ : nonfin) if (par)
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * cols;
    for (int64_t c = 0; c < cols; ++c) nonfin += (float_bits(xr[c]) & 0x7f800000u) == 0x7f800000u;
    double part[tah::kLanes];
    for (int l = 0; l < tah::kLanes; ++l) part[l] = tah::lane_abs_sum(xr, cols, l);
    const double denom = tah::add_rn(tah::combine_lanes(part), tah::kEps);
    for (int l = 0; l < tah::kLanes; ++l) part[l] = tah::lane_neg_plogp(xr, cols, l, denom);
    H[size_t(r)] = tah::combine_lanes(part);
  }
  // 2. token order
  const int64_t n_lo = L.n_lo;
  std::vector<int64_t> by_entropy(static_cast<size_t>(rows));
  std::iota(by_entropy.begin(), by_entropy.end(), 0);
  std::stable_sort(by_entropy.begin(), by_entropy.end(),
                   [&](int64_t a, int64_t b) { return H[size_t(a)] < H[size_t(b)]; });
  std::vector<uint8_t> is_lo(size_t(rows), 0);
  for (int64_t i = 0; i < n_lo; ++i) is_lo[size_t(by_entropy[size_t(i)])] = 1;
  std::vector<int64_t> order;
  order.reserve(size_t(rows));
  for (uint8_t pass : {uint8_t(1), uint8_t(0)})
    for (int64_t r = 0; r < rows; ++r)
      if (is_lo[size_t(r)] == pass) order.push_back(r);

  // 3-4. tiles in sent order, codes written straight into place
  std::vector<uint8_t> wire(size_t(L.bound), 0);
  std::vector<uint8_t> flag(size_t(L.tiles), 0), pivot(size_t(L.tiles), 0);
  int64_t sat = 0;
#pragma omp parallel for schedule(static) reduction(+ : sat) if (par)
  for (int64_t p = 0; p < rows; ++p) {
    const int bits = L.bits_of(p);
    uint8_t* codes = wire.data() + L.codes + L.code_byte(p);
    const float* xr = x + order[size_t(p)] * cols;
    float v[1024];
    for (int64_t j = 0; j < L.tiles_per_row; ++j) {
      const int64_t ti = p * L.tiles_per_row + j;
      for (int i = 0; i < L.tile; ++i) v[i] = tah::finite_or_zero(xr[j * L.tile + i]);
      const tah::TileCode t =
          tah::encode_tile(v, L.tile, bits, L.hscale, codes + j * L.tile * bits / 8);
      flag[size_t(ti)] = t.flagged;
      pivot[size_t(ti)] = uint8_t(t.pivot);
      uint8_t* z = wire.data() + L.zeros + 2 * ti;
      uint8_t* s = wire.data() + L.scales + 2 * ti;
      z[0] = uint8_t(t.zero);
      z[1] = uint8_t(t.zero >> 8);
      s[0] = uint8_t(t.scale);
      s[1] = uint8_t(t.scale >> 8);
      sat += t.saturated;
    }
  }

  BitWriter w{wire.data() + L.token_map};
  for (int64_t r = 0; r < rows; ++r) w.put(r, is_lo[size_t(r)], 1);
  w.p = wire.data() + L.tile_map;
  int64_t flagged = 0;
  for (int64_t t = 0; t < L.tiles; ++t) {
    w.put(t, flag[size_t(t)], 1);
    flagged += flag[size_t(t)];
  }
  w.p = wire.data() + L.pivots;
  int64_t k = 0;
  for (int64_t t = 0; t < L.tiles; ++t)
    if (flag[size_t(t)]) w.put(L.pivot_bits * k++, pivot[size_t(t)], L.pivot_bits);
  wire.resize(size_t(L.bytes(flagged)));
  if (stats) {
    stats->saturated += sat;
    stats->nonfinite += nonfin;
  }
  return wire;
}

void TahQuantCodec::decode(const uint8_t* wire, size_t nbytes, int64_t rows, int64_t cols,
                           float* out) const {
  const tah::Layout L = layout(rows, cols);
  TACO_REQUIRE_INPUT(int64_t(nbytes) >= L.codes,
                     "codec {}: wire buffer of {} bytes is too short for [{}, {}]", name_, nbytes,
                     rows, cols);
  const uint8_t* tile_map = wire + L.tile_map;
  int64_t lo_seen = 0;
  for (int64_t r = 0; r < rows; ++r) lo_seen += tah::get_bits(wire, r, 1);
  check_wire_bytes(name_, wire, nbytes, encoded_bytes(wire, rows, cols), wire_size(rows, cols));
  TACO_REQUIRE_INPUT(lo_seen == L.n_lo,
                     "codec {}: token bitmap marks {} low-precision tokens, expected {}", name_,
                     lo_seen, L.n_lo);
  std::vector<int64_t> order;
  order.reserve(size_t(rows));
  for (uint32_t pass : {1u, 0u})
    for (int64_t r = 0; r < rows; ++r)
      if (tah::get_bits(wire, r, 1) == pass) order.push_back(r);
  // Pivot k belongs to the k-th flagged tile: prefix counts per token make rows independent.
  std::vector<int64_t> first_pivot(size_t(rows) + 1, 0);
  for (int64_t p = 0; p < rows; ++p) {
    int64_t n = 0;
    for (int64_t j = 0; j < L.tiles_per_row; ++j)
      n += tah::get_bits(tile_map, p * L.tiles_per_row + j, 1);
    first_pivot[size_t(p) + 1] = first_pivot[size_t(p)] + n;
  }
#pragma omp parallel for schedule(static) if (rows * cols >= (1 << 15))
  for (int64_t p = 0; p < rows; ++p) {
    const int bits = L.bits_of(p);
    const uint8_t* codes = wire + L.codes + L.code_byte(p);
    float* orow = out + order[size_t(p)] * cols;
    int64_t k = first_pivot[size_t(p)];
    for (int64_t j = 0; j < L.tiles_per_row; ++j) {
      const int64_t ti = p * L.tiles_per_row + j;
      const uint8_t* z = wire + L.zeros + 2 * ti;
      const uint8_t* s = wire + L.scales + 2 * ti;
      const bool flagged = tah::get_bits(tile_map, ti, 1) != 0;
      const int piv =
          flagged ? int(tah::get_bits(wire + L.pivots, L.pivot_bits * k++, L.pivot_bits)) : 0;
      tah::decode_tile(codes + j * L.tile * bits / 8, L.tile, bits, uint16_t(z[0] | (z[1] << 8)),
                       uint16_t(s[0] | (s[1] << 8)), flagged, piv, L.hscale, orow + j * L.tile);
    }
  }
}

}  // namespace taco
