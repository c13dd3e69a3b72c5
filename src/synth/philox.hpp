#pragma once
// Counter-based random numbers: Philox4x32-10 (Salmon et al., "Parallel random numbers: as
// easy as 1, 2, 3", SC'11). A block of 4 random 32-bit words is a pure function of a 128-bit
// counter and a 64-bit key, so any element of a synthetic tensor can be drawn independently,
// in any order, on any thread, and always gets the same bits.
#include <array>
#include <cstddef>
#include <cstdint>

#include "core/splitmix64.hpp"

namespace taco::synth {

using PhiloxCounter = std::array<uint32_t, 4>;
using PhiloxKey = std::array<uint32_t, 2>;

inline PhiloxCounter philox4x32_10(PhiloxCounter c, PhiloxKey k) {
  constexpr uint32_t kM0 = 0xD2511F53u, kM1 = 0xCD9E8D57u;  // round multipliers
  constexpr uint32_t kW0 = 0x9E3779B9u, kW1 = 0xBB67AE85u;  // Weyl key increments
  for (int round = 0; round < 10; ++round) {
    if (round > 0) {
      k[0] += kW0;
      k[1] += kW1;
    }
    const uint64_t p0 = uint64_t(kM0) * c[0];
    const uint64_t p1 = uint64_t(kM1) * c[2];
    c = {uint32_t(p1 >> 32) ^ c[1] ^ k[0], uint32_t(p1), uint32_t(p0 >> 32) ^ c[3] ^ k[1],
         uint32_t(p0)};
  }
  return c;
}

// FNV-1a over bytes: names streams by readable strings ("values/step=0/layer=1/...").
inline uint64_t fnv1a64(const void* data, size_t n, uint64_t h = 0xcbf29ce484222325ULL) {
  const auto* p = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < n; ++i) {
    h ^= p[i];
    h *= 0x100000001b3ULL;
  }
  return h;
}

// Uniform double in the open interval (0, 1): the top 52 bits of two words plus half a step,
// (k + 1/2) 2^-52, exact in double. (With 53 bits the top value 1 - 2^-54 would round to 1.)
inline double uniform_open01(uint32_t hi, uint32_t lo) {
  const uint64_t k = ((uint64_t(hi) << 32) | lo) >> 12;
  return (double(k) + 0.5) * 0x1p-52;
}

// A random stream: a key (from seed and stream name) and a purpose tag; draw(i, attempt) is
// the Philox block for element i, attempt `attempt` (rejection samplers use several).
class Stream {
 public:
  Stream(uint64_t seed, uint64_t stream_id, uint32_t tag) : tag_(tag) {
    const uint64_t k = mix64(seed ^ mix64(stream_id));
    key_ = {uint32_t(k), uint32_t(k >> 32)};
  }
  PhiloxCounter draw(uint64_t index, uint32_t attempt = 0) const {
    return philox4x32_10({uint32_t(index), uint32_t(index >> 32), attempt, tag_}, key_);
  }
  double uniform(uint64_t index) const {
    const PhiloxCounter r = draw(index);
    return uniform_open01(r[0], r[1]);
  }

 private:
  PhiloxKey key_{};
  uint32_t tag_;
};

}  // namespace taco::synth
