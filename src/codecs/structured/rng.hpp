#pragma once
// The random numbers of the structured codecs (the subspace basis, randomized-SVD sketches,
// random-K index sets): xoshiro256** (Blackman & Vigna, 2018) seeded through splitmix64, plus
// Gaussians by Marsaglia's polar method. Every step is integer arithmetic or IEEE-exact double
// operations (+ - * / sqrt) and detmath::log (a fixed recipe, not libm), so a seed gives the
// same numbers on every machine, compiler and thread count: all TP ranks build the same basis
// without sending it.
#include "core/splitmix64.hpp"
#include "synth/det_math.hpp"

#include <cmath>
#include <cstdint>

namespace taco::structured {

// Stream ids keep the uses of one seed apart (the subspace basis and an RSVD sketch with the
// same seed are unrelated draws).
enum class RngStream : uint64_t {
  SubspaceBasis = 0x5355425350414345ULL,  // "SUBSPACE"
  RsvdSketch = 0x52535644534b4554ULL,     // "RSVDSKET"
  RandK = 0x52414e444b494458ULL,          // "RANDKIDX"
};

class Rng {
 public:
  Rng(uint64_t seed, RngStream stream) {
    uint64_t sm = seed ^ static_cast<uint64_t>(stream);
    for (uint64_t& w : s_) w = splitmix64_next(sm);
  }

  uint64_t next() {
    const uint64_t result = rotl(s_[1] * 5, 7) * 9;
    const uint64_t t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = rotl(s_[3], 45);
    return result;
  }

  // Uniform in [0, 1): the top 53 bits times 2^-53 (exact).
  double uniform() { return double(next() >> 11) * 0x1p-53; }

  // Standard normal, Marsaglia's polar method; the second value of each accepted pair is kept
  // for the next call, so the sequence depends only on the seed and the number of draws.
  double gaussian() {
    if (has_spare_) {
      has_spare_ = false;
      return spare_;
    }
    for (;;) {
      const double u = 2.0 * uniform() - 1.0;
      const double v = 2.0 * uniform() - 1.0;
      const double s = u * u + v * v;
      if (s >= 1.0 || s == 0.0) continue;
      const double f = std::sqrt(-2.0 * detmath::log(s) / s);
      spare_ = v * f;
      has_spare_ = true;
      return u * f;
    }
  }

 private:
  static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  uint64_t s_[4];
  double spare_ = 0;
  bool has_spare_ = false;
};

}  // namespace taco::structured
