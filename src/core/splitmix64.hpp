#pragma once
// SplitMix64 (Steele, Lea and Flood, 2014), the one copy: the CPU codecs (random Hadamard signs,
// the structured codecs' seeds), the study's stand-in ranks, the synthesizer's key derivation and
// the GPU benchmarks' data all draw from it. Callable from CUDA device code.
#include <cstdint>

#if defined(__CUDACC__)
#define TACO_HOST_DEVICE __host__ __device__ __forceinline__
#else
#define TACO_HOST_DEVICE inline
#endif

namespace taco {

inline constexpr uint64_t kSplitMix64Gamma = 0x9E3779B97F4A7C15ull;

// The output function: a bijective 64-bit mixer of the state after its increment.
TACO_HOST_DEVICE uint64_t splitmix64_mix(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// Advances `state` and returns the next word of the sequence.
TACO_HOST_DEVICE uint64_t splitmix64_next(uint64_t& state) {
  state += kSplitMix64Gamma;
  return splitmix64_mix(state);
}

// The word splitmix64_next() returns from state z (z unchanged): a hash of z, to derive keys.
TACO_HOST_DEVICE uint64_t mix64(uint64_t z) {
  return splitmix64_mix(z + kSplitMix64Gamma);
}

}  // namespace taco

#undef TACO_HOST_DEVICE
