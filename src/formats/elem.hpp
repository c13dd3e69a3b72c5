#pragma once
// Element formats of the block-scaled codecs, and element-wise casts of whole arrays (the
// `taco codec cast` tool and the Python oracle tests use these).
#include "formats/kinds.hpp"

#include <cstdint>
#include <string_view>
#include <vector>

namespace taco {

// "e4m3", "e5m2", "e2m1", "int8", "int4", "int3", "int2"
std::string_view elem_format_name(ElemFormat f);
ElemFormat parse_elem_format(std::string_view s);  // also "fp8" (e4m3), "fp4" (e2m1); InputError
int elem_bits(ElemFormat f);                       // 8, 4, 3 or 2
bool elem_is_float(ElemFormat f);
// Largest magnitude a code can have: 448, 57344, 6, 127, 7, 3, 1; asymmetric ints 255, 15, 7, 3
// (the largest code).
float elem_max(ElemFormat f, bool asym);
// OCP MX emax of a float element format (8, 15, 2): the exponent of its largest power of two.
int elem_emax(ElemFormat f);

// Every format an element-wise cast can produce. Codes are returned as uint16 (bf16) or in the
// low 8/4/3/2 bits (the others); the ints in b-bit two's complement.
enum class CastFormat : uint8_t {
  E4M3,
  E5M2,
  E2M1,
  E8M0,
  UE4M3,
  INT8,
  INT4,
  INT3,
  INT2,
  UINT8,
  UINT4,
  UINT3,
  UINT2,
  BF16
};

std::string_view cast_format_name(CastFormat f);
CastFormat parse_cast_format(std::string_view s);  // InputError naming the format
int cast_code_bits(CastFormat f);                  // 16 for bf16, else 8 (narrower codes widened)
// Whether the format has a non-saturating mode (e2m1 and the ints always saturate).
bool cast_has_nosat(CastFormat f);

// saturate = false asks for non-saturating overflow (InputError where the format has none).
// Ints: round to nearest even and clamp; bf16: round to nearest even (saturating clamps finite
// overflow and +-Inf to +-max finite, 0x7f7f).
std::vector<uint16_t> cast_encode(CastFormat f, const float* x, size_t n, bool saturate);
std::vector<float> cast_decode(CastFormat f, const uint16_t* codes, size_t n);
uint16_t cast_encode_one(CastFormat f, float x, bool saturate);
float cast_decode_one(CastFormat f, uint16_t code);

}  // namespace taco
