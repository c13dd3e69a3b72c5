#pragma once
// The element and scale formats of the block-scaled codecs as plain enums, with no other
// dependency, so that the CPU reference and the GPU kernels (cuda/codecs/codec_params.hpp) use
// the same ones. Names, parsing and arithmetic: formats/elem.hpp, formats/scale.hpp.
#include <cstdint>

namespace taco {

enum class ElemFormat : uint8_t { E4M3, E5M2, E2M1, INT8, INT4 };
enum class ScaleFormat : uint8_t { F32, BF16, F16, E8M0, UE4M3 };
enum class ScaleRound : uint8_t { Exact, Up, Nearest, OcpFloor };

}  // namespace taco
