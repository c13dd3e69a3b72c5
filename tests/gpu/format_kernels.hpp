#pragma once
// Host wrappers of the format test kernels (format_kernels.cu). Device pointers; synchronous
// enough for tests (a later cudaMemcpy waits for them).
#include <cstdint>

namespace taco::gpu::test {

// out[i] = code of the float with bits first + i; format 0 = E4M3, 1 = E5M2; hardware = the
// SATFINITE conversion the kernels use, else the non-saturating software encoder.
void fp8_encode_range_gpu(uint32_t first, uint32_t n, int format, bool hardware, uint8_t* d_out);
// The packed pair conversion (low byte must be a's code).
uint32_t fp8_pair_gpu(float a, float b, int format, uint32_t* d_word);
// All 256 codes decoded.
void fp8_decode_all_gpu(int format, float* d_out);
// The 4-bit kernels' codes of the floats first .. first + n - 1: E2M1 (e2m1_word_scaled of the
// float times 2^-14), INT4 (int4_word), UE4M3 (ue4m3_code); 0xff where the eight positions of a
// word disagree.
void nibble_range_gpu(uint32_t first, uint32_t n, uint8_t* d_e2m1, uint8_t* d_int4,
                      uint8_t* d_ue4m3);
// e8m0_ceil and float_to_e8m0 (saturating) of the floats first .. first + n - 1.
void e8m0_range_gpu(uint32_t first, uint32_t n, uint8_t* d_ceil, uint8_t* d_near);

}  // namespace taco::gpu::test
