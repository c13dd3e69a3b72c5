#pragma once
// Elementwise device kernels composed around the codec kernels: dtype conversions (fp16 has no
// codec kernels of its own), the bf16 passthrough codec (GpuBf16), and the fp32 arithmetic of
// error feedback and of unfused ring hops. Every function enqueues on `stream`
// and checks the launch. Types: DType::F32, BF16 or F16 (the caller checks).
#include <cuda_runtime_api.h>

#include <cstdint>

#include "core/dtype.hpp"

namespace taco::gpu::ew {

// out[i] = in[i] converted (exact widening, round-to-nearest-even narrowing; to bf16 exactly as
// the CPU's float_to_bf16, NaN payloads included).
void convert(const void* in, DType in_type, void* out, DType out_type, int64_t n,
             cudaStream_t stream);
// *counter += the number of non-finite in[i].
void count_nonfinite(const void* in, DType type, int64_t n, unsigned long long* counter,
                     cudaStream_t stream);
// out[i] = sum over s of bf16 srcs[s][i], in fp32 in source order, then out_type.
void sum_bf16(const uint16_t* const* srcs, int nsrc, int64_t n, void* out, DType out_type,
              cudaStream_t stream);
// out[i] = float(a[i]) + b[i] in fp32 (a of a_type); zero_nonfinite: a non-finite a[i] counts as 0
// (error feedback's rule).
void add_f32(const void* a, DType a_type, const float* b, float* out, int64_t n,
             bool zero_nonfinite, cudaStream_t stream);
// out[i] = a[i] - b[i] in fp32; zero_nonfinite: a non-finite b[i] counts as 0.
void sub_f32(const float* a, const float* b, float* out, int64_t n, bool zero_nonfinite,
             cudaStream_t stream);

}  // namespace taco::gpu::ew
