#pragma once
// Small vectors (GCC/Clang vector extensions, 16 bytes: one SSE2/NEON register) for the study's
// hot loops. Every operation is lane-wise IEEE arithmetic, so results do not depend on how the
// compiler maps them to instructions; only the fixed lane structure sets the summation order.
#include <cstdint>
#include <cstring>

// Hot kernels are compiled twice on x86-64, for AVX2 and for the baseline, and the loader picks
// one (GCC/Clang function multiversioning). The code is the same lane-wise arithmetic, so both
// give identical results; AVX2 only does more lanes per instruction.
#if defined(__x86_64__) && defined(__linux__) && \
    ((defined(__GNUC__) && !defined(__clang__)) || (defined(__clang__) && __clang_major__ >= 14))
#define TACO_SIMD_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define TACO_SIMD_CLONES
#endif

namespace taco::simd {

typedef float f4 __attribute__((vector_size(16)));
typedef int32_t i4 __attribute__((vector_size(16)));
typedef float f2 __attribute__((vector_size(8)));
typedef double d2 __attribute__((vector_size(16)));
typedef int64_t l2 __attribute__((vector_size(16)));
typedef uint64_t u2 __attribute__((vector_size(16)));

template <typename V, typename T>
inline V load(const T* p) {
  V v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
// Loads n < 4 floats, zero-filling the rest.
inline f4 load_partial(const float* p, int64_t n) {
  float t[4] = {0, 0, 0, 0};
  for (int64_t i = 0; i < n; ++i) t[i] = p[i];
  return load<f4>(t);
}
inline d2 splat(double v) {
  return d2{v, v};
}
inline f4 splat(float v) {
  return f4{v, v, v, v};
}
inline l2 splat(int64_t v) {
  return l2{v, v};
}
// Lanes 0-1 and 2-3 of a float vector, widened to double.
inline d2 widen_lo(f4 v) {
  return d2{double(v[0]), double(v[1])};
}
inline d2 widen_hi(f4 v) {
  return d2{double(v[2]), double(v[3])};
}
inline d2 abs(d2 v) {
  return (d2)((l2)v & l2{INT64_MAX, INT64_MAX});
}
inline f4 abs(f4 v) {
  return (f4)((i4)v & i4{INT32_MAX, INT32_MAX, INT32_MAX, INT32_MAX});
}
// mask ? a : b, with mask lanes all-ones or zero (as comparisons produce).
inline d2 select(l2 mask, d2 a, d2 b) {
  return (d2)(((l2)a & mask) | ((l2)b & ~mask));
}
inline f4 select(i4 mask, f4 a, f4 b) {
  return (f4)(((i4)a & mask) | ((i4)b & ~mask));
}
inline l2 select(l2 mask, l2 a, l2 b) {
  return (a & mask) | (b & ~mask);
}

}  // namespace taco::simd
