#pragma once
// The GPU backend behind the one Codec interface (codecs/codec.hpp): encode() and decode() take
// and return host buffers, like the CPU codecs, and run on the current CUDA device (copies
// included). The bytes are the CPU reference's, bit for bit, so `taco study --gpu` gives the same
// results as the CPU path.
#include <memory>
#include <string>
#include <vector>

#include "codecs/codec.hpp"

namespace taco::gpu {

// Throws InputError naming the variant and the supported list when the variant has no GPU
// kernels; Error when no CUDA device is usable.
std::unique_ptr<taco::Codec> make_gpu_codec(const std::string& variant);

// True when a CUDA device is visible and usable (never throws).
bool gpu_available();

// Preset names with GPU kernels.
std::vector<std::string> gpu_presets();

}  // namespace taco::gpu
