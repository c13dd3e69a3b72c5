#pragma once
// The element and scale formats of the block-scaled codecs as plain enums, with no other
// dependency, so that the CPU reference and the GPU kernels (cuda/codecs/codec_params.hpp) use
// the same ones. Names, parsing and arithmetic: formats/elem.hpp, formats/scale.hpp. 32-bit, as
// the kernels read them from their parameters: byte-sized fields made the row decode 3% slower
// (it extracted bytes and lost the jump table of its scale-format switch).
#include <cstdint>

namespace taco {

enum class ElemFormat : int32_t { E4M3, E5M2, E2M1, INT8, INT4, INT3, INT2 };
enum class ScaleFormat : int32_t { F32, BF16, F16, E8M0, UE4M3 };
enum class ScaleRound : int32_t { Exact, Up, Nearest, OcpFloor };

}  // namespace taco
