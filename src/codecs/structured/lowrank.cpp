// lowrank: truncated SVD x ~ A B^T with the factors on the wire (structured.hpp).
#include "codecs/structured/linalg.hpp"
#include "codecs/structured/specs.hpp"
#include "codecs/structured/structured.hpp"

#include <algorithm>
#include <cmath>

namespace taco::structured {

int64_t lowrank_wire_bytes(int64_t rows, int64_t cols, int64_t rank, NumFormat factors) {
  return int64_t(kHeaderBytes) + (rows + cols) * rank * num_format_bytes(factors) +
         (factors == NumFormat::E4M3 ? 8 * rank : 0);
}

namespace {

using RowMajorF = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using ColMajorF = Eigen::MatrixXf;

std::string mode_name(LowRankSpec::Mode m) {
  switch (m) {
    case LowRankSpec::Mode::Rank:
      return "rank";
    case LowRankSpec::Mode::Energy:
      return "energy";
    case LowRankSpec::Mode::Bpe:
      return "bpe";
  }
  throw_error("unknown low-rank mode {}", int(m));
}

class LowRankCodec final : public Codec {
 public:
  LowRankCodec(const LowRankSpec& s, std::string name, std::string definition)
      : s_(s), name_(std::move(name)), definition_(std::move(definition)) {}

  const std::string& name() const override { return name_; }

  nlohmann::json params() const override {
    nlohmann::json p = {{"variant", name_},
                        {"definition", definition_},
                        {"family", "lowrank"},
                        {"elem_format", std::string(num_format_name(s_.factors))},
                        {"scale_format", s_.factors == NumFormat::E4M3 ? "f32" : "none"},
                        {"granularity", s_.factors == NumFormat::E4M3 ? "col" : "none"},
                        {"group_size", nullptr},
                        {"transform", "svd"},
                        {"rank_rule", mode_name(s_.mode)},
                        {"svd", s_.rsvd ? "randomized" : "exact"},
                        {"factors", std::string(num_format_name(s_.factors))}};
    switch (s_.mode) {
      case LowRankSpec::Mode::Rank:
        p["rank"] = s_.rank;
        break;
      case LowRankSpec::Mode::Energy:
        p["energy"] = s_.energy;
        break;
      case LowRankSpec::Mode::Bpe:
        p["bpe"] = s_.bpe;
        break;
    }
    if (s_.rsvd) {
      p["power"] = s_.power;
      p["seed"] = s_.seed;
      p["oversample"] = LowRankSpec::kOversample;
    }
    return p;
  }

  // The rank the budget allows: the largest r <= min(rows, cols) with wire <= bpe * numel.
  int64_t budget_rank(int64_t rows, int64_t cols) const {
    const double budget = s_.bpe * double(rows) * double(cols);
    const int64_t per_rank =
        (rows + cols) * num_format_bytes(s_.factors) + (s_.factors == NumFormat::E4M3 ? 8 : 0);
    const double avail = budget - double(kHeaderBytes);
    int64_t r = avail <= 0 ? 0 : int64_t(std::floor(avail / double(per_rank)));
    r = std::min(r, std::min(rows, cols));
    while (r > 0 && double(lowrank_wire_bytes(rows, cols, r, s_.factors)) > budget) --r;
    TACO_REQUIRE_INPUT(
        r >= 1, "codec {}: {} bytes/elem cannot hold rank 1 of [{}, {}] ({} bytes/elem)", name_,
        s_.bpe, rows, cols,
        double(lowrank_wire_bytes(rows, cols, 1, s_.factors)) / (double(rows) * double(cols)));
    return r;
  }

  std::vector<uint8_t> encode(const float* x, int64_t rows, int64_t cols,
                              EncodeStats* stats) const override {
    const int64_t n = checked_numel(name_, rows, cols);
    std::vector<float> xs;
    const int64_t bad = sanitize(x, n, xs);
    if (stats) stats->nonfinite += bad;
    const int64_t full = std::min(rows, cols);

    Svd svd;
    int64_t r = 0;
    switch (s_.mode) {
      case LowRankSpec::Mode::Rank:
      case LowRankSpec::Mode::Bpe:
        r = s_.mode == LowRankSpec::Mode::Rank ? std::min(s_.rank, full) : budget_rank(rows, cols);
        svd = (s_.rsvd && r + LowRankSpec::kOversample < full)
                  ? randomized_svd(xs.data(), rows, cols, r + LowRankSpec::kOversample, s_.power,
                                   s_.seed)
                  : exact_svd(xs.data(), rows, cols);
        break;
      case LowRankSpec::Mode::Energy: {
        // Randomized: grow the sketch until its spectrum reaches the energy (or fall back to
        // the exact SVD once the sketch would not be smaller than the matrix).
        bool done = false;
        for (int64_t l = 16; s_.rsvd && l + LowRankSpec::kOversample < full; l *= 2) {
          svd = randomized_svd(xs.data(), rows, cols, l + LowRankSpec::kOversample, s_.power,
                               s_.seed);
          const VectorD e = svd.s.array().square();
          r = rank_for_energy(e, svd.total_energy, s_.energy);
          if (r <= l) {
            done = true;
            break;
          }
        }
        if (!done) {
          svd = exact_svd(xs.data(), rows, cols);
          r = rank_for_energy(VectorD(svd.s.array().square()), svd.total_energy, s_.energy);
        }
        r = std::clamp<int64_t>(r, 1, full);
        break;
      }
    }
    r = std::min<int64_t>(r, svd.s.size());
    TACO_ASSERT(r >= 1, "low-rank: rank {}", r);

    // A = U_r diag(s_r) (rows x r), B = V_r (cols x r), in float, column-major.
    ColMajorF a(rows, r), b(cols, r);
    for (int64_t j = 0; j < r; ++j) {
      for (int64_t i = 0; i < rows; ++i) a(i, j) = float(svd.u(i, j) * svd.s[j]);
      for (int64_t i = 0; i < cols; ++i) b(i, j) = float(svd.v(i, j));
    }
    const int eb = num_format_bytes(s_.factors);
    ByteWriter w(size_t(lowrank_wire_bytes(rows, cols, r, s_.factors)));
    write_header(w, {kMagicLowRank, s_.factors, 0, uint32_t(r)});
    std::vector<float> scales;
    int64_t sat = 0;
    uint8_t* pa = w.extend(size_t(rows * r * eb));
    for (int64_t j = 0; j < r; ++j)
      scales.push_back(encode_values(a.col(j).data(), rows, s_.factors, pa + j * rows * eb, &sat));
    uint8_t* pb = w.extend(size_t(cols * r * eb));
    for (int64_t j = 0; j < r; ++j)
      scales.push_back(encode_values(b.col(j).data(), cols, s_.factors, pb + j * cols * eb, &sat));
    if (s_.factors == NumFormat::E4M3)
      for (float sc : scales) w.f32(sc);
    if (stats) stats->saturated += sat;
    TACO_ASSERT(int64_t(w.size()) == lowrank_wire_bytes(rows, cols, r, s_.factors),
                "low-rank wire size");
    return w.take();
  }

  // Rank and budget modes fix the rank by the shape; by energy it depends on the spectrum (at most
  // full rank).
  WireSize wire_size(int64_t rows, int64_t cols) const override {
    checked_numel(name_, rows, cols);
    const int64_t full = std::min(rows, cols);
    switch (s_.mode) {
      case LowRankSpec::Mode::Rank:
        return {lowrank_wire_bytes(rows, cols, std::min(s_.rank, full), s_.factors), true};
      case LowRankSpec::Mode::Bpe:
        return {lowrank_wire_bytes(rows, cols, budget_rank(rows, cols), s_.factors), true};
      case LowRankSpec::Mode::Energy:
        break;
    }
    return {lowrank_wire_bytes(rows, cols, full, s_.factors), false};
  }

  void decode(const uint8_t* wire, size_t nbytes, int64_t rows, int64_t cols,
              float* out) const override {
    checked_numel(name_, rows, cols);
    ByteReader rd(wire, nbytes, name_);
    const Header h = read_header(rd, kMagicLowRank, name_);
    const int64_t r = h.b;
    TACO_REQUIRE_INPUT(
        h.format == s_.factors && h.a == 0 && r >= 1 && r <= std::min(rows, cols),
        "codec {}: header says rank {} in {}; [{}, {}] with factors {} allows ranks 1..{}", name_,
        r, num_format_name(h.format), rows, cols, num_format_name(s_.factors),
        std::min(rows, cols));
    check_wire_bytes(name_, wire, nbytes, lowrank_wire_bytes(rows, cols, r, s_.factors),
                     wire_size(rows, cols));
    const int eb = num_format_bytes(s_.factors);
    const uint8_t* pa = rd.bytes(size_t(rows * r * eb));
    const uint8_t* pb = rd.bytes(size_t(cols * r * eb));
    std::vector<float> scales(size_t(2 * r), 1.0f);
    if (s_.factors == NumFormat::E4M3)
      for (float& sc : scales) sc = rd.f32();
    ColMajorF a(rows, r), b(cols, r);
    for (int64_t j = 0; j < r; ++j) {
      decode_values(pa + j * rows * eb, rows, s_.factors, scales[size_t(j)], a.col(j).data());
      decode_values(pb + j * cols * eb, cols, s_.factors, scales[size_t(r + j)], b.col(j).data());
    }
    SerialEigen serial;
    Eigen::Map<RowMajorF> om(out, rows, cols);
    om.noalias() = a * b.transpose();
  }

 private:
  LowRankSpec s_;
  std::string name_, definition_;
};

}  // namespace

std::unique_ptr<Codec> make_lowrank_codec(const LowRankSpec& s, std::string name,
                                          std::string definition) {
  return std::make_unique<LowRankCodec>(s, std::move(name), std::move(definition));
}

}  // namespace taco::structured
