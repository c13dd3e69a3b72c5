#pragma once
// How a quantization codec cuts a chunk into scale blocks and what it does to a block before
// scaling, as plain enums with no other dependency: the variant grammar (codecs/variant.hpp) and
// the GPU kernels (cuda/codecs/codec_params.hpp) use the same ones (32-bit: formats/kinds.hpp).
#include <cstdint>

namespace taco {

enum class Granularity : int32_t { Tensor, Row, Col, Group, Tile };
enum class Transform : int32_t { None, Hadamard, RandHadamard };

}  // namespace taco
