#pragma once
// Element types of tensors as stored in files, and exact conversions of the 16-bit
// floating-point types to and from float. FP8 codecs live in formats/.
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

namespace taco {

// 32-bit: the GPU kernels take it in their parameters (formats/kinds.hpp says why).
enum class DType : int32_t { F32, F16, BF16, F8E4M3, F8E5M2, F64, I8, U8, I16, I32, I64 };

std::string_view dtype_name(DType t);  // "f32", "bf16", ...
DType parse_dtype(
    std::string_view name);  // accepts taco, numpy and safetensors spellings; InputError otherwise
size_t dtype_size(DType t);
bool dtype_is_float(DType t);

inline uint32_t float_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
inline float bits_float(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// bf16 -> float is exact (bf16 is the top half of a float).
inline float bf16_to_float(uint16_t h) {
  return bits_float(uint32_t(h) << 16);
}
// float -> bf16 with round-to-nearest-even; NaN stays a (quiet) NaN.
inline uint16_t float_to_bf16(float f) {
  uint32_t u = float_bits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return uint16_t((u >> 16) | 0x0040u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return uint16_t(u >> 16);
}
float fp16_to_float(uint16_t h);  // exact
uint16_t float_to_fp16(float f);  // round-to-nearest-even, overflow -> inf

}  // namespace taco
