#include "formats/elem.hpp"

#include "core/dtype.hpp"
#include "core/error.hpp"
#include "formats/e8m0.hpp"
#include "formats/fp8.hpp"
#include "formats/intq.hpp"

#include <cmath>
#include <limits>

namespace taco {

std::string_view elem_format_name(ElemFormat f) {
  switch (f) {
    case ElemFormat::E4M3:
      return "e4m3";
    case ElemFormat::E5M2:
      return "e5m2";
    case ElemFormat::E2M1:
      return "e2m1";
    case ElemFormat::INT8:
      return "int8";
    case ElemFormat::INT4:
      return "int4";
    case ElemFormat::INT3:
      return "int3";
    case ElemFormat::INT2:
      return "int2";
  }
  throw_error("unknown element format {}", int(f));
}

ElemFormat parse_elem_format(std::string_view s) {
  if (s == "e4m3" || s == "fp8") return ElemFormat::E4M3;
  if (s == "e5m2") return ElemFormat::E5M2;
  if (s == "e2m1" || s == "fp4") return ElemFormat::E2M1;
  if (s == "int8") return ElemFormat::INT8;
  if (s == "int4") return ElemFormat::INT4;
  if (s == "int3") return ElemFormat::INT3;
  if (s == "int2") return ElemFormat::INT2;
  throw_input_error("unknown element format '{}' (e4m3, e5m2, e2m1, int8, int4, int3, int2)", s);
}

int elem_bits(ElemFormat f) {
  switch (f) {
    case ElemFormat::E4M3:
    case ElemFormat::E5M2:
    case ElemFormat::INT8:
      return 8;
    case ElemFormat::E2M1:
    case ElemFormat::INT4:
      return 4;
    case ElemFormat::INT3:
      return 3;
    case ElemFormat::INT2:
      return 2;
  }
  throw_error("unknown element format {}", int(f));
}

bool elem_is_float(ElemFormat f) {
  switch (f) {
    case ElemFormat::E4M3:
    case ElemFormat::E5M2:
    case ElemFormat::E2M1:
      return true;
    case ElemFormat::INT8:
    case ElemFormat::INT4:
    case ElemFormat::INT3:
    case ElemFormat::INT2:
      return false;
  }
  throw_error("unknown element format {}", int(f));
}

float elem_max(ElemFormat f, bool asym) {
  switch (f) {
    case ElemFormat::E4M3:
      return 448.0f;
    case ElemFormat::E5M2:
      return 57344.0f;
    case ElemFormat::E2M1:
      return 6.0f;
    case ElemFormat::INT8:
    case ElemFormat::INT4:
    case ElemFormat::INT3:
    case ElemFormat::INT2: {
      const int bits = elem_bits(f);
      return float(asym ? int_asym_qmax(bits) : int_sym_qmax(bits));
    }
  }
  throw_error("unknown element format {}", int(f));
}

int elem_emax(ElemFormat f) {
  switch (f) {
    case ElemFormat::E4M3:
      return 8;
    case ElemFormat::E5M2:
      return 15;
    case ElemFormat::E2M1:
      return 2;
    case ElemFormat::INT8:
    case ElemFormat::INT4:
    case ElemFormat::INT3:
    case ElemFormat::INT2:
      throw_input_error("OCP MX scales need a float element format, not {}", elem_format_name(f));
  }
  throw_error("unknown element format {}", int(f));
}

// ---- element-wise casts ------------------------------------------------------------------------

std::string_view cast_format_name(CastFormat f) {
  switch (f) {
    case CastFormat::E4M3:
      return "e4m3";
    case CastFormat::E5M2:
      return "e5m2";
    case CastFormat::E2M1:
      return "e2m1";
    case CastFormat::E8M0:
      return "e8m0";
    case CastFormat::UE4M3:
      return "ue4m3";
    case CastFormat::INT8:
      return "int8";
    case CastFormat::INT4:
      return "int4";
    case CastFormat::INT3:
      return "int3";
    case CastFormat::INT2:
      return "int2";
    case CastFormat::UINT8:
      return "uint8";
    case CastFormat::UINT4:
      return "uint4";
    case CastFormat::UINT3:
      return "uint3";
    case CastFormat::UINT2:
      return "uint2";
    case CastFormat::BF16:
      return "bf16";
  }
  throw_error("unknown cast format {}", int(f));
}

CastFormat parse_cast_format(std::string_view s) {
  for (CastFormat f :
       {CastFormat::E4M3, CastFormat::E5M2, CastFormat::E2M1, CastFormat::E8M0, CastFormat::UE4M3,
        CastFormat::INT8, CastFormat::INT4, CastFormat::INT3, CastFormat::INT2, CastFormat::UINT8,
        CastFormat::UINT4, CastFormat::UINT3, CastFormat::UINT2, CastFormat::BF16})
    if (s == cast_format_name(f)) return f;
  throw_input_error(
      "--format: unknown format '{}' (e4m3, e5m2, e2m1, e8m0, ue4m3, int8, int4, int3, int2, "
      "uint8, uint4, uint3, uint2, bf16)",
      s);
}

int cast_code_bits(CastFormat f) {
  return f == CastFormat::BF16 ? 16 : 8;
}

bool cast_has_nosat(CastFormat f) {
  switch (f) {
    case CastFormat::E4M3:
    case CastFormat::E5M2:
    case CastFormat::E8M0:
    case CastFormat::UE4M3:
    case CastFormat::BF16:
      return true;
    case CastFormat::E2M1:
    case CastFormat::INT8:
    case CastFormat::INT4:
    case CastFormat::INT3:
    case CastFormat::INT2:
    case CastFormat::UINT8:
    case CastFormat::UINT4:
    case CastFormat::UINT3:
    case CastFormat::UINT2:
      return false;
  }
  throw_error("unknown cast format {}", int(f));
}

namespace {

uint16_t bf16_encode(float x, bool saturate) {
  const uint16_t b = float_to_bf16(x);
  const bool overflowed = (b & 0x7fffu) == 0x7f80u;  // +-Inf: from overflow or an Inf input
  return saturate && overflowed ? uint16_t((b & 0x8000u) | 0x7f7fu) : b;
}

// Bits of an integer cast format.
int int_cast_bits(CastFormat f) {
  switch (f) {
    case CastFormat::INT8:
    case CastFormat::UINT8:
      return 8;
    case CastFormat::INT4:
    case CastFormat::UINT4:
      return 4;
    case CastFormat::INT3:
    case CastFormat::UINT3:
      return 3;
    case CastFormat::INT2:
    case CastFormat::UINT2:
      return 2;
    default:
      throw_error("{} is not an integer cast format", cast_format_name(f));
  }
}

}  // namespace

uint16_t cast_encode_one(CastFormat f, float x, bool saturate) {
  switch (f) {
    case CastFormat::E4M3:
      return float_to_fp8_e4m3(x, saturate);
    case CastFormat::E5M2:
      return float_to_fp8_e5m2(x, saturate);
    case CastFormat::E2M1:
      return float_to_fp4_e2m1(x);
    case CastFormat::E8M0:
      return float_to_e8m0(x, saturate);
    case CastFormat::UE4M3:
      return float_to_ue4m3(x, saturate);
    case CastFormat::INT8:
    case CastFormat::INT4:
    case CastFormat::INT3:
    case CastFormat::INT2: {
      const int bits = int_cast_bits(f);
      const uint32_t q = uint32_t(quantize_int_sym(x, float(int_sym_qmax(bits))));
      return uint16_t(q & ((1u << bits) - 1));  // b-bit two's complement
    }
    case CastFormat::UINT8:
    case CastFormat::UINT4:
    case CastFormat::UINT3:
    case CastFormat::UINT2:
      return uint16_t(quantize_int_asym(x, 0, int_asym_qmax(int_cast_bits(f))));
    case CastFormat::BF16:
      return bf16_encode(x, saturate);
  }
  throw_error("unknown cast format {}", int(f));
}

float cast_decode_one(CastFormat f, uint16_t code) {
  switch (f) {
    case CastFormat::E4M3:
      return fp8_e4m3_to_float(uint8_t(code));
    case CastFormat::E5M2:
      return fp8_e5m2_to_float(uint8_t(code));
    case CastFormat::E2M1:
      return fp4_e2m1_to_float(uint8_t(code));
    case CastFormat::E8M0:
      return e8m0_to_float(uint8_t(code));
    case CastFormat::UE4M3:
      return ue4m3_to_float(uint8_t(code));
    case CastFormat::INT8:
    case CastFormat::INT4:
    case CastFormat::INT3:
    case CastFormat::INT2:
      return float(int_from_code(code, int_cast_bits(f)));
    case CastFormat::UINT8:
    case CastFormat::UINT4:
    case CastFormat::UINT3:
    case CastFormat::UINT2:
      return float(code & uint32_t(int_asym_qmax(int_cast_bits(f))));
    case CastFormat::BF16:
      return bf16_to_float(code);
  }
  throw_error("unknown cast format {}", int(f));
}

std::vector<uint16_t> cast_encode(CastFormat f, const float* x, size_t n, bool saturate) {
  TACO_REQUIRE_INPUT(saturate || cast_has_nosat(f),
                     "--nosat: {} has no Inf/NaN to overflow to; it always saturates",
                     cast_format_name(f));
  std::vector<uint16_t> out(n);
  for (size_t i = 0; i < n; ++i) out[i] = cast_encode_one(f, x[i], saturate);
  return out;
}

std::vector<float> cast_decode(CastFormat f, const uint16_t* codes, size_t n) {
  std::vector<float> out(n);
  for (size_t i = 0; i < n; ++i) out[i] = cast_decode_one(f, codes[i]);
  return out;
}

}  // namespace taco
