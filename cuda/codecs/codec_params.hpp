#pragma once
// The one host -> device contract of the quantization kernels: a POD struct passed by value.
// A "chunk" is what one CPU QuantCodec::encode() call of a [rows, cols] block produces; the
// kernels process `chunks` of them side by side (a collective's per-peer chunks), each chunk's
// wire buffer laid out exactly as the CPU reference lays it out (codecs/quant_codec.hpp):
//   [codes][scales: blocks x scale_bytes][aux: TACO s_a, blocks x fp32][tensor: UE4M3's fp32 S_t]
// Codes are bytes, or for b-bit elements (E2M1, INT4, INT3, INT2) one little-endian bit stream,
// code i in bits [b i, b i + b) (element 2i in the low nibble of 4-bit codes). The GPU
// runs no asymmetric codec, so UE4M3 codecs have no aux bytes and S_t sits at aux_off.
// Offsets are bytes within a chunk; strides are elements (inputs, outputs) or bytes (wire).
// The enums are the CPU library's (formats/kinds.hpp, codecs/block_kinds.hpp, core/dtype.hpp):
// one set for both backends. Tensors on the device are DType::F32 or DType::BF16 (the host
// checks, GpuQuant).
#include <cstdint>

#include "codecs/block_kinds.hpp"
#include "core/dtype.hpp"
#include "formats/kinds.hpp"

namespace taco::gpu {

inline constexpr int kMaxSources = 16;  // decode-reduce inputs per launch
inline constexpr int kMaxGroupSize = 1024;

// What the variant does (fixed per codec).
struct QuantRules {
  ElemFormat elem;
  int32_t saturate;  // 1: SATFINITE element encode; 0: overflow -> NaN / Inf
  ScaleFormat scale;
  ScaleRound sround;
  int32_t scale_bytes;  // 4, 2 or 1
  int32_t emax;         // OCP MX: exponent of the element's largest power of two
  Granularity blocks;
  int32_t group;            // G (Group); 0 otherwise
  int32_t taco;             // TACO scale rules (methods.md 1.4)
  int32_t dual;             // + adaptive scale s_a
  int32_t transform;        // Hadamard of size G
  int32_t rht;              // randomized: negate the inputs of rht_neg before the transform
  float target;             // T
  float lambda;             // dual only
  float fmax;               // F in s_a (448 / 57344)
  float hconst;             // float(1 / sqrt(G))
  float qmax;               // integers: 127, 7, 3, 1 (INT8, INT4, INT3, INT2)
  int32_t fast_div;         // 1: per-group scale divisions may use the reciprocal + FMA correction
                            // (exact for every quotient that matters, see codec_formats.cuh); 0
                            // when the target range is so large that quotients could overflow
  int32_t target_in_range;  // TACO: T in [2^-39, 2^40], so s_q = max(M, 1e-12) / T may skip the
                            // division's range test wherever the clamp to [1e-12, 1e6] lets it
                            // through (codec_group.cuh encode_group)
  uint32_t rht_neg[kMaxGroupSize / 32];  // bit i of word i/32: element i is negated
  uint32_t sat_code[8];                  // bit c: code c counts as saturated (EncodeStats)
};

// Where the values an encode quantizes come from, for the kernels that take several sources
// (the statistics pass of two-level scales): the input (in, in_type), the input plus the
// error-feedback residual, the sum of decoded wires (src[0..nsrc)), or one decoded wire plus
// the input (a ring all-reduce hop).
enum class ValueSource : int32_t { Input = 0, InputFeedback = 1, DecodeSum = 2, DecodeAdd = 3 };

// Geometry of one chunk (the CPU QuantLayout for [rows, cols]).
struct ChunkGeometry {
  int64_t rows, cols, numel;
  int64_t nblocks;     // scale blocks per chunk
  int64_t block_len;   // G, cols (row), rows (col) or numel (tensor)
  int64_t code_bytes;  // 8-bit codes: numel, or nblocks * G when groups are transformed;
                       // b-bit codes: b / 8 of that, rounded up
  int64_t scale_off, aux_off, total;
};

struct KernelParams {
  QuantRules rules;
  ChunkGeometry geo;
  int64_t chunks;
  // Group kernels: the chunk of a flat group index g < chunks * nblocks (below 2^31, the host
  // splits larger launches) without a division: c = (umulhi(g, nb_magic) + g) >> nb_shift
  // (Granlund-Montgomery).
  uint32_t nb_magic;
  int32_t nb_shift;

  // encode input (also the re-encode target of decode-reduce-encode: wire_out)
  const void* in;  // [chunks][in_stride] elements of in_type
  DType in_type;
  int64_t in_stride;  // elements between chunks
  uint8_t* wire_out;  // [chunks][wire_stride] bytes
  int64_t wire_out_stride;

  // decode input: `nsrc` wire buffers (1 for a plain decode), each [chunks][wire_in_stride]
  const uint8_t* src[kMaxSources];
  int32_t nsrc;
  int64_t wire_in_stride;
  void* out;  // [chunks][out_stride] elements of out_type
  DType out_type;
  int64_t out_stride;
  int32_t round_sum_bf16;  // decode-reduce-encode: round the fp32 sum to bf16 before encoding

  // per-block scratch of the column kernels: amax bits, the scale in use
  uint32_t* block_amax;  // [chunks * nblocks]
  float* block_scale;    // [chunks * nblocks]
  // The largest finite |value| of each chunk, as float bits (atomicMax; zeroed by the host before
  // the pass that fills it): the statistic of UE4M3's tensor scale S_t (group codecs) and of
  // tensor scales. [chunks]
  uint32_t* chunk_amax;

  unsigned long long* stats;  // optional: [0] saturated codes, [1] non-finite inputs

  // vector-access permissions (alignment of pointers and strides checked on the host)
  int32_t in_vec16;    // input rows of a full group may be read with 16-byte loads
  int32_t code_vec;    // code runs may be accessed with their natural vector width
  int32_t scale_vec4;  // fp32 scales are 4-byte aligned
  int32_t out_vec16;   // output runs may be written with vector stores

  ValueSource value_source;  // what the statistics pass reads
  // Error feedback: the caller's fp32 residual e, [chunks][in_stride] like the input, read and
  // rewritten in place (e' = v - decode(encode(v)), v = x + e; GpuQuant::encode_ef).
  float* residual;
  int32_t residual_vec16;  // the residual may be accessed with 16-byte vectors
  int32_t tile_rows;  // column codecs: rows of the tiles a thread walks (codec_kernels_strided.cu)
};

}  // namespace taco::gpu
