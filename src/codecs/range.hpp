#pragma once
// The magnitudes a codec represents (docs/variants.md, "Range"). A block (the values that share
// one scale: a group, row, column, tile, tensor; TAH-Quant's tile; bf16's single element) whose
// largest finite magnitude lies in [lo, hi] is encoded with scales that follow it, so it decodes
// with the codec's normal precision. Outside, a scale sits at a clamp of its format (TACO's
// s_q at 1e-12 or 1e6, an fp16 scale at 65504, ...) or a transform overflows: the block is
// clipped or flushed to (almost) zero, without an error or a warning. The codecs keep those
// clamps bit for bit (they are TACO's); this is how taco tells the user instead: the study
// counts such blocks per tensor (results.csv out_of_range_groups), and taco.codec checks them
// on request.
//
// The bounds hold for any data in the block. With a transform (had/rht; TAH-Quant's Hadamard
// tiles) the scale follows the transformed values, whose largest magnitude lies within a factor
// sqrt(n) of the block's own: the bounds are taken at the worst case (a constant block at hi, a
// single nonzero value at lo), so some blocks just outside them still decode well.
#include "codecs/variant.hpp"

#include <cstdint>

namespace taco {

struct CodecRange {
  double lo = 0, hi = 0;  // bounds on a block's largest finite magnitude
  // Two-level scales (sue4m3, NVFP4): a block is also out of range below rel_lo times the
  // largest block magnitude of its chunk (its scale code bottoms out at UE4M3's smallest value).
  double rel_lo = 0;
};

// Derived from the spec's formats and clamps (quant_codec.hpp, formats/scale.hpp).
CodecRange codec_range(const VariantSpec& spec);

// Blocks of the [rows, cols] chunk x (as one encode() call sees it) that hold a finite nonzero
// value and whose largest finite magnitude lies outside codec_range(spec). InputError when the
// shape does not suit the codec's blocks.
int64_t out_of_range_blocks(const VariantSpec& spec, const float* x, int64_t rows, int64_t cols);

}  // namespace taco
