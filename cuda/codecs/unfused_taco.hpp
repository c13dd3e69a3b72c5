#pragma once
// The TACO codec as an unfused multi-kernel pipeline, shaped like the authors' first version
// (methods.md 1.5, v1): separate kernels for the cast to fp32, the group mean square, the
// adaptive scale, a shared-memory Hadamard (one block per group), the group max and scales,
// the quantization, and copies of the scales into the wire. It exists to be
// benchmarked against the fused kernels (`taco bench --impl unfused`); its bytes are the CPU
// reference's too (every step does the same float operations), which the tests check.
// Unlike v1 it allocates its workspace once (not per call) and does not synchronise.
#include <cuda_runtime_api.h>

#include <cstdint>
#include <string>
#include <vector>

#include "cuda/codecs/codec_params.hpp"
#include "cuda/codecs/gpu_quant.hpp"
#include "cuda/runtime/device.hpp"

namespace taco::gpu {

class UnfusedTaco {
 public:
  // Variants with TACO dual-scale rules (taco, taco-noh, taco-e5m2, taco-g<G>); InputError
  // otherwise.
  explicit UnfusedTaco(const VariantSpec& spec);
  static bool supports(const VariantSpec& spec);
  const std::string& name() const { return q_.name(); }

  void encode(const void* in, DType in_type, int64_t chunks, int64_t rows, int64_t cols,
              uint8_t* wire, cudaStream_t stream) const;
  void decode_reduce(const std::vector<const uint8_t*>& srcs, int64_t chunks, int64_t rows,
                     int64_t cols, void* out, DType out_type, cudaStream_t stream) const;
  // Kernel launches and copies per call (for reports).
  int encode_launches() const { return (q_.spec().transform != Transform::None ? 6 : 5) + 2; }
  int decode_launches(int nsrc) const {
    return (q_.spec().transform != Transform::None ? 3 : 2) * nsrc + 1;
  }

 private:
  KernelParams params(int64_t chunks, int64_t rows, int64_t cols) const;
  void ensure(int64_t chunks, const ChunkGeometry& g) const;

  GpuQuant q_;  // spec, rules and geometry (its fused kernels are not used)
  int sm_count_ = 0;
  mutable DeviceBuffer y_, acc_, group_;  // fp32 padded groups, sums, per-group scalars
};

}  // namespace taco::gpu
