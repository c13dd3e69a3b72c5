#pragma once
// Division by a per-group scale b > 0 through its reciprocal: what the GPU kernels use in place
// of IEEE division, which the CPU reference codecs use and this must reproduce. Host and device;
// tests/cpu/test_scale_division.cpp checks it against IEEE division.
//
// q = a / b correctly rounded, from y = RN(1/b) computed once per group: q0 = RN(a * y), the
// remainder r = a - b * q0 is exact (FMA), q1 = RN(q0 + r * y) (Markstein). The remainder is
// formed negated, n = q0 * b - a = -r, and q1 = RN(q0 - n * y): the same value, and the sign of
// a zero quotient comes out right without a copysign (a = -0: n = +0, q1 = -0 + -0 = -0).
// With b in [2^-80, 2^120] and |a / b| < 2^100 this equals the IEEE quotient whenever
// |a / b| >= 2^-20, which is every quotient an 8-bit code can tell apart (E5M2's smallest
// subnormal is 2^-16; smaller quotients encode as a signed zero either way). With b in
// [2^-20, 2^20] and a == 0 or |a| in [2^-100, 2^100] it equals the IEEE quotient always.
#include <cmath>

#if defined(__CUDACC__)
#define TACO_HD __host__ __device__ __forceinline__
#else
#define TACO_HD inline
#endif

namespace taco::gpu {

struct ScaleDivisor {
  float b, y;
};

TACO_HD float fma_rn(float a, float b, float c) {
#if defined(__CUDA_ARCH__)
  return __fmaf_rn(a, b, c);
#else
  return std::fma(a, b, c);
#endif
}

TACO_HD ScaleDivisor scale_divisor(float b) {
#if defined(__CUDA_ARCH__)
  return {b, __frcp_rn(b)};
#else
  return {b, 1.0f / b};
#endif
}

TACO_HD float div_by_scale(float a, const ScaleDivisor& d) {
#if defined(__CUDA_ARCH__)
  const float q0 = __fmul_rn(a, d.y);
#else
  const float q0 = a * d.y;  // the project builds with -ffp-contract=off
#endif
  const float n = fma_rn(q0, d.b, -a);
  return fma_rn(-n, d.y, q0);
}

// b inside the range where div_by_scale is exact for codes.
TACO_HD bool code_divisor_ok(float b) {
  return b >= 8.27180613e-25f /* 2^-80 */ && b <= 1.32922800e+36f /* 2^120 */;
}

}  // namespace taco::gpu
