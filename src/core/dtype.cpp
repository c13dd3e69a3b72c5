#include "core/dtype.hpp"

#include "core/error.hpp"

#include <cmath>

namespace taco {

std::string_view dtype_name(DType t) {
  switch (t) {
    case DType::F32:
      return "f32";
    case DType::F16:
      return "f16";
    case DType::BF16:
      return "bf16";
    case DType::F8E4M3:
      return "f8e4m3";
    case DType::F8E5M2:
      return "f8e5m2";
    case DType::F64:
      return "f64";
    case DType::I8:
      return "i8";
    case DType::U8:
      return "u8";
    case DType::I16:
      return "i16";
    case DType::I32:
      return "i32";
    case DType::I64:
      return "i64";
  }
  throw_error("unknown dtype code {}", int(t));
}

DType parse_dtype(std::string_view n) {
  if (n == "f32" || n == "fp32" || n == "float32" || n == "F32" || n == "float") return DType::F32;
  if (n == "f16" || n == "fp16" || n == "float16" || n == "F16" || n == "half") return DType::F16;
  if (n == "bf16" || n == "bfloat16" || n == "BF16") return DType::BF16;
  if (n == "f8e4m3" || n == "e4m3" || n == "F8_E4M3" || n == "float8_e4m3fn") return DType::F8E4M3;
  if (n == "f8e5m2" || n == "e5m2" || n == "F8_E5M2" || n == "float8_e5m2") return DType::F8E5M2;
  if (n == "f64" || n == "float64" || n == "F64") return DType::F64;
  if (n == "i8" || n == "int8" || n == "I8") return DType::I8;
  if (n == "u8" || n == "uint8" || n == "U8") return DType::U8;
  if (n == "i16" || n == "int16" || n == "I16") return DType::I16;
  if (n == "i32" || n == "int32" || n == "I32") return DType::I32;
  if (n == "i64" || n == "int64" || n == "I64") return DType::I64;
  throw_input_error("unknown dtype '{}'", n);
}

size_t dtype_size(DType t) {
  switch (t) {
    case DType::F32:
    case DType::I32:
      return 4;
    case DType::F16:
    case DType::BF16:
    case DType::I16:
      return 2;
    case DType::F8E4M3:
    case DType::F8E5M2:
    case DType::I8:
    case DType::U8:
      return 1;
    case DType::F64:
    case DType::I64:
      return 8;
  }
  throw_error("unknown dtype code {}", int(t));
}

bool dtype_is_float(DType t) {
  switch (t) {
    case DType::F32:
    case DType::F16:
    case DType::BF16:
    case DType::F8E4M3:
    case DType::F8E5M2:
    case DType::F64:
      return true;
    default:
      return false;
  }
}

float fp16_to_float(uint16_t h) {
  const uint32_t sign = uint32_t(h >> 15) << 31;
  const uint32_t exp = (h >> 10) & 0x1f, man = h & 0x3ff;
  if (exp == 0) {  // zero or subnormal: man * 2^-24, exact in float
    const float v = std::ldexp(float(man), -24);
    return sign ? -v : v;
  }
  if (exp == 31) return bits_float(sign | 0x7f800000u | (man << 13) | (man ? 0x400000u : 0));
  return bits_float(sign | ((exp + 112) << 23) | (man << 13));
}

uint16_t float_to_fp16(float f) {
  const uint32_t u = float_bits(f);
  const uint16_t sign = uint16_t((u >> 16) & 0x8000u);
  const uint32_t a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return uint16_t(sign | 0x7e00u);   // NaN
  if (a >= 0x477ff000u) return uint16_t(sign | 0x7c00u);  // rounds to >= 65536: inf
  if (a < 0x38800000u) {                                  // below 2^-14: subnormal or zero
    // value / 2^-24 rounded to nearest even; exact in double.
    const double q = std::nearbyint(double(bits_float(a)) * 16777216.0);
    return uint16_t(sign | uint16_t(q));
  }
  uint32_t r = a + 0xfffu + ((a >> 13) & 1u);  // RNE on the 13 dropped bits
  return uint16_t(sign | uint16_t((r - (112u << 23)) >> 13));
}

}  // namespace taco
