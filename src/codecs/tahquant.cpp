#include "codecs/tahquant.hpp"

#include "codecs/hadamard.hpp"
#include "core/dtype.hpp"
#include "core/error.hpp"
#include "formats/intq.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace taco {

namespace {

constexpr float kFp16Max = 65504.0f;

inline float finite_or_zero(float x) {
  return (float_bits(x) & 0x7f800000u) == 0x7f800000u ? 0.0f : x;
}

// Largest fp16 <= v (v finite), clamped to [-65504, 65504].
uint16_t fp16_round_down(float v) {
  v = v > kFp16Max ? kFp16Max : (v < -kFp16Max ? -kFp16Max : v);
  uint16_t h = float_to_fp16(v);
  if (fp16_to_float(h) > v) {
    // One step toward -inf: magnitude up for negatives, down for positives (+0 -> -2^-24).
    if (h == 0)
      h = 0x8001;
    else if (h & 0x8000)
      ++h;
    else
      --h;
  }
  return h;
}

// Smallest fp16 >= v for v >= 0, at least 2^-24 and at most 65504.
uint16_t fp16_round_up_pos(float v) {
  uint16_t h = float_to_fp16(v > kFp16Max ? kFp16Max : v);
  if (fp16_to_float(h) < v && h < 0x7bff) ++h;
  return h == 0 ? uint16_t(1) : h;
}

struct BitWriter {
  uint8_t* p;
  void put(int64_t bit, uint32_t value, int nbits) {
    for (int i = 0; i < nbits; ++i, ++bit)
      if ((value >> i) & 1u) p[bit >> 3] = uint8_t(p[bit >> 3] | (1u << (bit & 7)));
  }
};
inline uint32_t get_bits(const uint8_t* p, int64_t bit, int nbits) {
  uint32_t v = 0;
  for (int i = 0; i < nbits; ++i, ++bit) v |= uint32_t((p[bit >> 3] >> (bit & 7)) & 1u) << i;
  return v;
}

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

void TahQuantCodec::check_shape(int64_t rows, int64_t cols) const {
  TACO_REQUIRE_INPUT(rows > 0 && cols > 0 && rows <= (int64_t(1) << 40) / cols,
                     "codec {}: unusable shape [{}, {}]", name_, rows, cols);
  TACO_REQUIRE_INPUT(cols % t_.tile == 0, "codec {}: cols {} is not a multiple of the tile {}",
                     name_, cols, t_.tile);
}

int64_t TahQuantCodec::wire_bytes(int64_t rows, int64_t cols, int64_t flagged) const {
  const int64_t tiles = rows * cols / t_.tile, lo = low_tokens(rows);
  return bytes_for_bits(rows) + bytes_for_bits(tiles) +
         bytes_for_bits(lo * cols * t_.lo_bits + (rows - lo) * cols * t_.hi_bits) + 4 * tiles +
         bytes_for_bits(flagged * pivot_bits_);
}

std::vector<uint8_t> TahQuantCodec::encode(const float* x, int64_t rows, int64_t cols,
                                           EncodeStats* stats) const {
  check_shape(rows, cols);
  const int tile = t_.tile;
  const int64_t tiles_per_row = cols / tile, tiles = rows * tiles_per_row;
  const bool par = rows * cols >= (1 << 15);

  // 1. entropy per token
  std::vector<double> H(static_cast<size_t>(rows));
  int64_t nonfin = 0;
#pragma omp parallel for schedule(static) reduction(+ : nonfin) if (par)
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * cols;
    double sum = 0;
    for (int64_t c = 0; c < cols; ++c) {
      sum += std::fabs(double(finite_or_zero(xr[c])));
      nonfin += (float_bits(xr[c]) & 0x7f800000u) == 0x7f800000u;
    }
    const double denom = sum + 1e-30;
    double h = 0;
    for (int64_t c = 0; c < cols; ++c) {
      const double p = std::fabs(double(finite_or_zero(xr[c]))) / denom;
      h -= p * std::log(p + 1e-30);
    }
    H[size_t(r)] = h;
  }
  // 2. token order
  const int64_t n_lo = low_tokens(rows);
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

  // 3-4. tiles (in sent order), codes written straight into the byte-aligned per-token ranges
  const int64_t lo_bits_total = n_lo * cols * t_.lo_bits;
  const int64_t code_bytes = bytes_for_bits(lo_bits_total + (rows - n_lo) * cols * t_.hi_bits);
  std::vector<uint8_t> codes(size_t(code_bytes), 0);
  std::vector<uint8_t> flag(size_t(tiles), 0), pivot(size_t(tiles), 0);
  std::vector<uint16_t> z16(static_cast<size_t>(tiles)), s16(static_cast<size_t>(tiles));
  int64_t sat = 0;
#pragma omp parallel for schedule(static) reduction(+ : sat) if (par)
  for (int64_t p = 0; p < rows; ++p) {
    const int bits = p < n_lo ? t_.lo_bits : t_.hi_bits;
    const int32_t qmax = (1 << bits) - 1;
    // cols is a multiple of tile >= 8, so every token's codes start on a byte boundary.
    const int64_t bit0 =
        p < n_lo ? p * cols * t_.lo_bits : lo_bits_total + (p - n_lo) * cols * t_.hi_bits;
    BitWriter w{codes.data()};
    const float* xr = x + order[size_t(p)] * cols;
    float v[1024];
    for (int64_t j = 0; j < tiles_per_row; ++j) {
      const int64_t ti = p * tiles_per_row + j;
      for (int i = 0; i < tile; ++i) v[i] = finite_or_zero(xr[j * tile + i]);
      float first = 0, second = 0;
      int piv = 0;
      for (int i = 0; i < tile; ++i) {
        const float a = std::fabs(v[i]);
        if (a > first) {
          second = first;
          first = a;
          piv = i;
        } else if (a > second) {
          second = a;
        }
      }
      if (first >= 2.0f * second) {
        flag[size_t(ti)] = 1;
        pivot[size_t(ti)] = uint8_t(piv);
        std::swap(v[0], v[piv]);
        fwht(v, tile);
      }
      float mn = v[0];
      for (int i = 1; i < tile; ++i) mn = v[i] < mn ? v[i] : mn;
      const uint16_t zh = fp16_round_down(mn);
      const float z = fp16_to_float(zh);
      float span = 0;
      for (int i = 0; i < tile; ++i) span = std::max(span, v[i] - z);
      const uint16_t sh = fp16_round_up_pos(span / float(qmax));
      const float s = fp16_to_float(sh);
      z16[size_t(ti)] = zh;
      s16[size_t(ti)] = sh;
      for (int i = 0; i < tile; ++i) {
        const int32_t q = quantize_int_asym((v[i] - z) / s, 0, qmax);
        sat += q == 0 || q == qmax;
        w.put(bit0 + (j * tile + i) * bits, uint32_t(q), bits);
      }
    }
  }

  int64_t flagged = 0;
  for (uint8_t f : flag) flagged += f;
  std::vector<uint8_t> wire(size_t(wire_bytes(rows, cols, flagged)), 0);
  int64_t pos = 0;
  BitWriter w{wire.data()};
  for (int64_t r = 0; r < rows; ++r) w.put(r, is_lo[size_t(r)], 1);
  pos += bytes_for_bits(rows);
  w.p = wire.data() + pos;
  for (int64_t t = 0; t < tiles; ++t) w.put(t, flag[size_t(t)], 1);
  pos += bytes_for_bits(tiles);
  std::copy(codes.begin(), codes.end(), wire.begin() + pos);
  pos += code_bytes;
  for (int64_t t = 0; t < tiles; ++t) {
    wire[size_t(pos + 2 * t)] = uint8_t(z16[size_t(t)]);
    wire[size_t(pos + 2 * t + 1)] = uint8_t(z16[size_t(t)] >> 8);
    wire[size_t(pos + 2 * tiles + 2 * t)] = uint8_t(s16[size_t(t)]);
    wire[size_t(pos + 2 * tiles + 2 * t + 1)] = uint8_t(s16[size_t(t)] >> 8);
  }
  pos += 4 * tiles;
  w.p = wire.data() + pos;
  int64_t k = 0;
  for (int64_t t = 0; t < tiles; ++t)
    if (flag[size_t(t)]) w.put(pivot_bits_ * k++, pivot[size_t(t)], pivot_bits_);
  if (stats) {
    stats->saturated += sat;
    stats->nonfinite += nonfin;
  }
  return wire;
}

void TahQuantCodec::decode(const uint8_t* wire, size_t nbytes, int64_t rows, int64_t cols,
                           float* out) const {
  check_shape(rows, cols);
  const int tile = t_.tile;
  const int64_t tiles_per_row = cols / tile, tiles = rows * tiles_per_row;
  const int64_t n_lo = low_tokens(rows);
  const int64_t map_bytes = bytes_for_bits(rows) + bytes_for_bits(tiles);
  TACO_REQUIRE_INPUT(int64_t(nbytes) >= map_bytes,
                     "codec {}: wire buffer of {} bytes is too short for [{}, {}]", name_, nbytes,
                     rows, cols);
  const uint8_t* tile_map = wire + bytes_for_bits(rows);
  int64_t flagged = 0, lo_seen = 0;
  for (int64_t r = 0; r < rows; ++r) lo_seen += get_bits(wire, r, 1);
  for (int64_t t = 0; t < tiles; ++t) flagged += get_bits(tile_map, t, 1);
  check_wire_bytes(name_, wire, nbytes, wire_bytes(rows, cols, flagged), wire_size(rows, cols));
  TACO_REQUIRE_INPUT(lo_seen == n_lo,
                     "codec {}: token bitmap marks {} low-precision tokens, expected {}", name_,
                     lo_seen, n_lo);
  std::vector<int64_t> order;
  order.reserve(size_t(rows));
  for (uint32_t pass : {1u, 0u})
    for (int64_t r = 0; r < rows; ++r)
      if (get_bits(wire, r, 1) == pass) order.push_back(r);
  const uint8_t* codes = tile_map + bytes_for_bits(tiles);
  const int64_t lo_bits_total = n_lo * cols * t_.lo_bits;
  const uint8_t* zeros = codes + bytes_for_bits(lo_bits_total + (rows - n_lo) * cols * t_.hi_bits);
  const uint8_t* scales = zeros + 2 * tiles;
  const uint8_t* pivots = scales + 2 * tiles;
  // Pivot k belongs to the k-th flagged tile: prefix counts per token make rows independent.
  std::vector<int64_t> first_pivot(size_t(rows) + 1, 0);
  for (int64_t p = 0; p < rows; ++p) {
    int64_t n = 0;
    for (int64_t j = 0; j < tiles_per_row; ++j) n += get_bits(tile_map, p * tiles_per_row + j, 1);
    first_pivot[size_t(p) + 1] = first_pivot[size_t(p)] + n;
  }
#pragma omp parallel for schedule(static) if (rows * cols >= (1 << 15))
  for (int64_t p = 0; p < rows; ++p) {
    const int bits = p < n_lo ? t_.lo_bits : t_.hi_bits;
    const int64_t bit0 =
        p < n_lo ? p * cols * t_.lo_bits : lo_bits_total + (p - n_lo) * cols * t_.hi_bits;
    float* orow = out + order[size_t(p)] * cols;
    int64_t k = first_pivot[size_t(p)];
    float v[1024];
    for (int64_t j = 0; j < tiles_per_row; ++j) {
      const int64_t ti = p * tiles_per_row + j;
      const float z = fp16_to_float(uint16_t(zeros[2 * ti] | (zeros[2 * ti + 1] << 8)));
      const float s = fp16_to_float(uint16_t(scales[2 * ti] | (scales[2 * ti + 1] << 8)));
      for (int i = 0; i < tile; ++i)
        v[i] = float(get_bits(codes, bit0 + (j * tile + i) * bits, bits)) * s + z;
      if (get_bits(tile_map, ti, 1)) {
        fwht(v, tile);
        const uint32_t piv = get_bits(pivots, pivot_bits_ * k++, pivot_bits_);
        std::swap(v[0], v[piv]);
      }
      std::copy(v, v + tile, orow + j * tile);
    }
  }
}

}  // namespace taco
