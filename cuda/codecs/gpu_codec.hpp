#pragma once
// The GPU backend behind the one Codec interface (codecs/codec.hpp): encode(), decode() and the
// collective operations (decode_reduce, decode_reduce_encode, decode_add_encode) take and return
// host buffers, like the CPU codecs, and run the spec's DeviceCodec (device_codec.hpp) on the
// current CUDA device (copies included). The bytes are the CPU reference's, bit for bit, so `taco
// study --gpu` gives the same results as the CPU path.
#include <memory>
#include <string>
#include <vector>

#include "codecs/codec.hpp"
#include "codecs/variant.hpp"

namespace taco::gpu {

// Throws InputError naming the variant and the supported list when the variant has no GPU
// kernels (device_unsupported_reason); Error when no CUDA device is usable. The string is parsed
// once (ef: and aqsgd: wrappers run their inner codec on the GPU); the spec form takes the caller's
// parse.
std::unique_ptr<taco::Codec> make_gpu_codec(const std::string& variant);
std::unique_ptr<taco::Codec> make_gpu_codec(const VariantSpec& spec);

// True when a CUDA device is visible and usable (never throws).
bool gpu_available();

// Preset names with GPU kernels.
std::vector<std::string> gpu_presets();

}  // namespace taco::gpu
