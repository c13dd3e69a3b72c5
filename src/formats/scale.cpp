#include "formats/scale.hpp"

#include "core/error.hpp"

namespace taco {

std::string_view scale_format_name(ScaleFormat f) {
  switch (f) {
    case ScaleFormat::F32:
      return "fp32";
    case ScaleFormat::BF16:
      return "bf16";
    case ScaleFormat::F16:
      return "fp16";
    case ScaleFormat::E8M0:
      return "e8m0";
    case ScaleFormat::UE4M3:
      return "ue4m3";
  }
  throw_error("unknown scale format {}", int(f));
}

ScaleFormat parse_scale_format(std::string_view s) {
  if (s == "fp32" || s == "f32") return ScaleFormat::F32;
  if (s == "bf16") return ScaleFormat::BF16;
  if (s == "fp16" || s == "f16") return ScaleFormat::F16;
  if (s == "e8m0" || s == "ue8m0") return ScaleFormat::E8M0;
  if (s == "ue4m3") return ScaleFormat::UE4M3;
  throw_input_error("unknown scale format '{}' (fp32, bf16, fp16, e8m0, ue4m3)", s);
}

std::string_view scale_round_name(ScaleRound r) {
  switch (r) {
    case ScaleRound::Exact:
      return "exact";
    case ScaleRound::Up:
      return "up";
    case ScaleRound::Nearest:
      return "rne";
    case ScaleRound::OcpFloor:
      return "ocp";
  }
  throw_error("unknown scale rounding {}", int(r));
}

ScaleRound parse_scale_round(std::string_view s) {
  if (s == "up") return ScaleRound::Up;
  if (s == "rne") return ScaleRound::Nearest;
  if (s == "ocp") return ScaleRound::OcpFloor;
  throw_input_error("unknown scale rounding '{}' (up, rne, ocp)", s);
}

ScaleRound default_scale_round(ScaleFormat f) {
  switch (f) {
    case ScaleFormat::F32:
      return ScaleRound::Exact;
    case ScaleFormat::BF16:
    case ScaleFormat::F16:
    case ScaleFormat::E8M0:
      return ScaleRound::Up;
    case ScaleFormat::UE4M3:
      return ScaleRound::Nearest;
  }
  throw_error("unknown scale format {}", int(f));
}

int scale_format_bytes(ScaleFormat f) {
  switch (f) {
    case ScaleFormat::F32:
      return 4;
    case ScaleFormat::BF16:
    case ScaleFormat::F16:
      return 2;
    case ScaleFormat::E8M0:
    case ScaleFormat::UE4M3:
      return 1;
  }
  throw_error("unknown scale format {}", int(f));
}

}  // namespace taco
