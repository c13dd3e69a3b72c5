#pragma once
// Parsed structured variants (structured.hpp has the grammar) and the per-family factories.
#include "codecs/codec.hpp"
#include "codecs/structured/wire.hpp"

#include <cstdint>
#include <memory>
#include <string>

namespace taco::structured {

struct SubspaceSpec {
  int64_t k = 0;    // > 0: fixed k
  double frac = 0;  // > 0: k = max(1, floor(frac * cols + 1/2))
  uint64_t seed = 0;
  NumFormat coef = NumFormat::BF16;
  int64_t k_for(int64_t cols) const;
};

struct LowRankSpec {
  enum class Mode : uint8_t { Rank, Energy, Bpe };
  Mode mode = Mode::Rank;
  int64_t rank = 0;
  double energy = 0, bpe = 0;
  bool rsvd = false;
  int power = 2;      // rsvd power iterations
  uint64_t seed = 0;  // rsvd sketch
  NumFormat factors = NumFormat::BF16;
  static constexpr int64_t kOversample = 10;
};

struct TtSpec {
  int order = 0;
  int64_t rank = 0;  // > 0: cap every rank
  double eps = 0.1;  // used when rank == 0
  NumFormat cores = NumFormat::BF16;
  static constexpr int kMaxOrder = 32;
};

struct TopKSpec {
  double frac = 0;
  bool bitmap = false;
};

struct RandKSpec {
  double frac = 0;
  uint64_t seed = 0;
  bool unbiased = false;
};

std::unique_ptr<Codec> make_subspace_codec(const SubspaceSpec& s, std::string name,
                                           std::string definition);
std::unique_ptr<Codec> make_lowrank_codec(const LowRankSpec& s, std::string name,
                                          std::string definition);
std::unique_ptr<Codec> make_tt_codec(const TtSpec& s, std::string name, std::string definition);
std::unique_ptr<Codec> make_topk_codec(const TopKSpec& s, std::string name, std::string definition);
std::unique_ptr<Codec> make_randk_codec(const RandKSpec& s, std::string name,
                                        std::string definition);

}  // namespace taco::structured
