#pragma once
// Orthonormal fast Walsh-Hadamard transform (Sylvester order, H_1 = [1],
// H_2m = [[H_m, H_m], [H_m, -H_m]]), the randomized variant's sign vector, and the fixed-order
// group sum. Bit-exactness rules (codecs/codec.hpp), mirrored by the GPU kernels:
//  * butterfly stages (a, b) -> (a + b, a - b) with strides 1, 2, 4, ..., n/2 in that order;
//    within a stage every butterfly is independent, so any execution order gives the same bits;
//  * then every element is multiplied by the float hadamard_scale(n) = float(1 / sqrt(double n)).
// H_n / sqrt(n) is symmetric and orthonormal, so the same routine inverts it.
//
// Randomized Hadamard (RHT) = H_n diag(s) / sqrt(n): flip the signs of the inputs whose sign bit
// is set, then transform; the inverse transforms, then flips the same signs. The n signs are the
// same for every group. They come from SplitMix64 seeded with `seed`: word k = the k-th output
// (k = 0, 1, ...; state += 0x9E3779B97F4A7C15, then the standard xor-shift-multiply finalizer),
// and element i is negated iff bit (i % 64) of word (i / 64) is 1.
#include <cmath>
#include <cstdint>
#include <vector>

#include "core/splitmix64.hpp"

namespace taco {

inline float hadamard_scale(int n) {
  return float(1.0 / std::sqrt(double(n)));
}

namespace detail {
// Stages h = 1 and 2 together: per quad the same four adds/subtracts in the same order as two
// separate stages (so the same bits), in one pass that the compiler vectorizes.
inline void fwht_first_two_stages(float* v, int n) {
  for (int i = 0; i < n; i += 4) {
    const float a = v[i], b = v[i + 1], c = v[i + 2], d = v[i + 3];
    const float s0 = a + b, s1 = a - b, s2 = c + d, s3 = c - d;
    v[i] = s0 + s2;
    v[i + 1] = s1 + s3;
    v[i + 2] = s0 - s2;
    v[i + 3] = s1 - s3;
  }
}
inline void fwht_stage(float* v, int n, int h) {
  for (int i = 0; i < n; i += 2 * h) {
    float* lo = v + i;
    float* hi = v + i + h;
    for (int j = 0; j < h; ++j) {
      const float a = lo[j], b = hi[j];
      lo[j] = a + b;
      hi[j] = a - b;
    }
  }
}
}  // namespace detail

// Butterflies only (unnormalized H_n v), n a power of two >= 4.
inline void fwht_butterflies(float* v, int n) {
  detail::fwht_first_two_stages(v, n);
  for (int h = 4; h < n; h <<= 1) detail::fwht_stage(v, n, h);
}

// Orthonormal transform in place: butterflies, then every element times 1/sqrt(n). The last
// stage and the multiply share a pass (fl(fl(a + b) * c) either way). n a power of two >= 8.
inline void fwht(float* v, int n) {
  const float c = hadamard_scale(n);
  const int h = n / 2;
  detail::fwht_first_two_stages(v, n);
  for (int s = 4; s < h; s <<= 1) detail::fwht_stage(v, n, s);
  float* lo = v;
  float* hi = v + h;
  for (int j = 0; j < h; ++j) {
    const float a = lo[j], b = hi[j];
    lo[j] = (a + b) * c;
    hi[j] = (a - b) * c;
  }
}

// Per element 0x80000000 (negate) or 0, to be xor-ed into the float bits.
inline std::vector<uint32_t> rht_sign_masks(int n, uint64_t seed) {
  std::vector<uint32_t> m(size_t(n), 0u);
  uint64_t state = seed, word = 0;
  for (int i = 0; i < n; ++i) {
    if (i % 64 == 0) word = splitmix64_next(state);
    m[size_t(i)] = ((word >> (i % 64)) & 1u) ? 0x80000000u : 0u;
  }
  return m;
}

// The L lane partials p[0, L) combined as the warp does: an xor butterfly of strides L/2, ..., 1.
// p[l] + p[l ^ s] equals p[l ^ s] + p[l], so the lower half holds every lane's value.
inline float combine_lane_partials(float* p, int L) {
  for (int s = L / 2; s >= 1; s >>= 1)
    for (int l = 0; l < s; ++l) p[l] = p[l] + p[l + s];
  return p[0];
}

// Sum of v[0, n) in the order of a warp that owns the group (codecs/codec.hpp): L = min(32, n)
// lanes, lane l adds its S = n / L consecutive elements left to right, then the lane partials
// are combined with an xor butterfly of strides L/2, ..., 1. n is a power of two <= 4096.
inline float lane_tree_sum(const float* v, int n) {
  const int L = n < 32 ? n : 32, S = n / L;
  float p[32];
  for (int l = 0; l < L; ++l) p[l] = v[l * S];
  for (int j = 1; j < S; ++j)
    for (int l = 0; l < L; ++l) p[l] = p[l] + v[l * S + j];
  return combine_lane_partials(p, L);
}

// Sum of v[i]^2 over v[0, n) in the same lane order, each lane's squares accumulated with fused
// multiply-adds: p = v[first]^2, then p = fma(v[next], v[next], p); the lane partials then add
// as above. One rounding per element instead of two (and one GPU instruction instead of two).
inline float lane_tree_sum_squares(const float* v, int n) {
  const int L = n < 32 ? n : 32, S = n / L;
  float p[32];
  for (int l = 0; l < L; ++l) p[l] = v[l * S] * v[l * S];
  for (int j = 1; j < S; ++j)
    for (int l = 0; l < L; ++l) p[l] = std::fma(v[l * S + j], v[l * S + j], p[l]);
  return combine_lane_partials(p, L);
}

}  // namespace taco
