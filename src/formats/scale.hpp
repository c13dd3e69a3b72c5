#pragma once
// Scale formats for block-scaled quantization and how an ideal scale is rounded into them.
// A scale s divides the values (code = enc(x / s)) and multiplies the decoded codes (x = dec * s).
//
//  format  bytes  values                         rounding of the ideal scale (ScaleRound)
//  fp32      4    any positive float             exact
//  bf16      2    bfloat16                       up (default) or nearest-even
//  fp16      2    IEEE half, [2^-24, 65504]      up (default) or nearest-even
//  e8m0      1    2^-127 .. 2^127                up (default), nearest (ties up) or ocp (floor,
//                                                OCP MX: computed from amax, see e8m0.hpp)
//  ue4m3     1    unsigned E4M3, relative to a   nearest-even (default, as NVFP4) or up
//                 per-tensor fp32 scale
//
// "up" rounds to the smallest representable scale >= the ideal one, so no element clips because
// of scale rounding. Scales never round to zero or to a non-finite value: results are clamped
// to the smallest positive / largest finite value of the format.
#include "core/dtype.hpp"
#include "core/error.hpp"
#include "formats/e8m0.hpp"
#include "formats/kinds.hpp"
#include "formats/minifloat.hpp"

#include <cstdint>
#include <string_view>

namespace taco {

std::string_view scale_format_name(ScaleFormat f);  // "fp32", "bf16", "fp16", "e8m0", "ue4m3"
ScaleFormat parse_scale_format(
    std::string_view s);                           // accepts the names above; InputError otherwise
std::string_view scale_round_name(ScaleRound r);   // "exact", "up", "rne", "ocp"
ScaleRound parse_scale_round(std::string_view s);  // "up", "rne", "ocp"; InputError otherwise
ScaleRound default_scale_round(ScaleFormat f);
int scale_format_bytes(ScaleFormat f);

struct ScaleCode {
  uint32_t code;  // the bytes stored (little-endian, scale_format_bytes wide)
  float value;    // the scale the code decodes to
};

// Encodes ideal (> 0, finite) with the given rounding. OcpFloor is not handled here (it needs
// amax and the element's emax: e8m0_floor). For UE4M3 `ideal` is relative to the tensor scale.
inline ScaleCode encode_scale(float ideal, ScaleFormat f, ScaleRound r) {
  const bool up = r == ScaleRound::Up;
  switch (f) {
    case ScaleFormat::F32:
      return {float_bits(ideal), ideal};
    case ScaleFormat::BF16: {
      uint32_t b = float_to_bf16(ideal);
      if (up && bf16_to_float(uint16_t(b)) < ideal) ++b;
      b = b >= 0x7f80u ? 0x7f7fu : (b == 0 ? 1u : b);
      return {b, bf16_to_float(uint16_t(b))};
    }
    case ScaleFormat::F16: {
      uint32_t h = float_to_fp16(ideal);
      if (up && h < 0x7c00u && fp16_to_float(uint16_t(h)) < ideal) ++h;
      h = h >= 0x7c00u ? 0x7bffu : (h == 0 ? 1u : h);
      return {h, fp16_to_float(uint16_t(h))};
    }
    case ScaleFormat::E8M0: {
      const uint8_t c = up ? e8m0_ceil(ideal) : float_to_e8m0(ideal, true);
      return {c, e8m0_to_float(c)};
    }
    case ScaleFormat::UE4M3: {
      uint32_t c = float_to_ue4m3(ideal, true);
      if (up && c < 0x7eu && ue4m3_to_float(uint8_t(c)) < ideal) ++c;
      c = c == 0 ? 1u : c;
      return {c, ue4m3_to_float(uint8_t(c))};
    }
  }
  throw_error("encode_scale: unknown scale format {}", int(f));
}

// The scale a stored code means (UE4M3: relative to the tensor scale).
inline float decode_scale(uint32_t code, ScaleFormat f) {
  switch (f) {
    case ScaleFormat::F32:
      return bits_float(code);
    case ScaleFormat::BF16:
      return bf16_to_float(uint16_t(code));
    case ScaleFormat::F16:
      return fp16_to_float(uint16_t(code));
    case ScaleFormat::E8M0:
      return e8m0_to_float(uint8_t(code));
    case ScaleFormat::UE4M3:
      return ue4m3_to_float(uint8_t(code));
  }
  throw_error("decode_scale: unknown scale format {}", int(f));
}

}  // namespace taco
