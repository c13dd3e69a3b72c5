#pragma once
// Every shape and threshold the codec kernels are compiled and launched with, in one place: the
// kernels (group_kernels.cuh, codec_kernels_strided.cu) and GpuQuant read them from here. Each
// entry says why it has its value; the measurements behind them are in docs/performance.md and
// bench/records. The values are tuned for the H200 (sm_90, 132 SMs); every choice gives the
// same bytes, so changing one changes speed only (the GPU tests compare every kernel with the CPU).
//
// clang-format off
// group codecs (G = 2^LG)  elems/lane     min blocks/SM  layout          runs for
// encode                   32 (G16: 16)   5, 6 or 7      sector if had   every encode
// encode, TACO ref. rules  as encode      5              as encode       TACO, had, G = 128
// decode, decode-reduce    16; 32 if had  ptxas          lane-to-sector  > kSmallDecodeElems
//                          or G = 1024                   (had, G = 128)
// decode, small launches   16 (G1024: 32) ptxas          as encode       <= kSmallDecodeElems
// streaming decode         as decode      2 (smem)       as decode       G 128: >= 2^26 outputs
// re-encodes (dre, hop)    as decode      ptxas          as decode       every re-encode
// strided codecs           elems/thread   min blocks/SM  threads         runs for
// row encode               32 (4 x 8)     3 (2 with ef)  32..256 / row   row_shape(cols)
// tensor, column quantize  32 (4 x 8)     3 / 2          256             every encode
// clang-format on
#include <cstdint>

namespace taco::gpu {

// ---- group codecs ---------------------------------------------------------------------------
// Threads per block of every group kernel: four warps, each walking its own groups.
inline constexpr int kGroupThreads = 128;

namespace tuning {

// log2 of the elements per lane (2^R). More per lane: fewer warp shuffles in the transform and
// the per-group scalar work shared by more elements, but more registers and fewer warps to hide
// memory latency. 32 per lane was fastest for every encode at G = 128; G = 16 has only 16.
constexpr int encode_lane_log2(int lg) {
  return lg >= 5 ? 5 : 4;
}
// Transformed decodes as the encode; plain decodes were fastest at 16 per lane, except G = 1024,
// which needs 32 (a group spans at most one warp).
constexpr int decode_lane_log2(int lg, bool had) {
  return had ? encode_lane_log2(lg) : (lg >= 10 ? 5 : 4);
}
// Small decode launches (<= kSmallDecodeElems outputs): 16 per lane fills more warps.
constexpr int small_decode_lane_log2(int lg) {
  return lg >= 10 ? 5 : 4;
}

// Layouts: sector (runs of 8 elements, lanes next) speeds up the transformed kernels and slows
// the rest; transformed decodes of 128 load codes lane by lane and regroup inside the transform.
// Codes below 8 bits take the same shapes (measured for 4-bit codes; INT3 / INT2 not yet): a run
// of 8 INT3 codes is 3 bytes, so the transformed encodes of G = 64..256 and decodes of 64 and 256
// move their INT3 codes as single bytes (codec_group.cuh store_packed), runs of 32 as words.
constexpr bool sector_layout(bool had) {
  return had;
}
constexpr bool regroup_decode(bool had, int lg) {
  return had && lg == 7;
}

// Blocks per SM the encode asks of ptxas. bf16 untransformed block-scaled encodes wait on memory
// and gain from warps: 7 (72 registers; 8 spills). Transformed TACO: 6, except G = 64, whose
// larger stack then costs more than the warps give. The bf16 reference-rules encode is faster
// with fewer warps: 5. The rest: 5 (ptxas alone takes more registers and runs 4).
constexpr int encode_min_blocks(bool ref, bool had, bool taco, int lg, int in_bytes) {
  return (ref && in_bytes == 2)             ? 5
         : (!had && !taco && in_bytes == 2) ? 7
         : (taco && had && lg != 6)         ? 6
                                            : 5;
}

// Encodes that wait on their loads (TACO's, and every transformed one: the Hadamard needs the
// whole group before any code) walk a single chunk of whole groups by index alone and prefetch
// the next iteration's input into L2; the untransformed block-scaled encodes run near copy speed
// without either.
constexpr bool encode_prefetches(bool taco, bool had) {
  return taco || had;
}

// The encode with TACO's reference rules as constants pays only for transformed groups of 128
// (the reference variant); in other TACO encodes it did not.
constexpr bool has_reference_encode(bool taco, bool had, int lg) {
  return taco && had && lg == 7;
}
// A one-source decode kernel beats the decode-reduce kernel for transformed TACO groups of 128
// and 32 only; the streaming decode exists for the same two.
constexpr bool has_one_source_decode(bool taco, bool had, int lg) {
  return taco && had && (lg == 5 || lg == 7);
}

// The streaming decode: rings of 4 tiles of two warp iterations, two output stages (2 blocks of
// 4 warps per SM by shared memory): the fastest of the shapes tried.
inline constexpr int kStreamStages = 4, kStreamTileIters = 2, kStreamOutStages = 2;
// Outputs from which it runs: G = 128 from 64 M (below, the general kernel is faster); G = 32
// wherever the small-launch kernel does not (the general kernel's lanes each store a whole
// group, 64 bytes apart).
constexpr int64_t stream_min_elems(int lg) {
  return lg == 7 ? int64_t(1) << 26 : 0;
}

}  // namespace tuning

// Decode launches of at most this many output elements (2 MiB of bf16) take the small-launch
// kernel: from 2 M outputs on the general kernel is faster, for decodes and decode-reduces.
inline constexpr int64_t kSmallDecodeElems = int64_t(1) << 20;

// ---- row / column / tensor codecs -----------------------------------------------------------
inline constexpr int kStridedThreads = 256;  // threads per block of every strided kernel
// Row elements a thread holds in registers (4 runs of 8): four 16-byte loads in flight.
inline constexpr int kRowThreadElems = 32;
// Threads per row of the row kernel's shapes (one, two, four warps, the block): the fewest whose
// slab holds the row, so that no thread past the row idles (row_shape()).
inline constexpr int kRowShapes[4] = {32, 64, 128, 256};
inline constexpr int kNumRowShapes = 4;

namespace tuning {
// Blocks per SM the quantizing strided kernels ask of ptxas (at most 85 registers): with four
// runs of 16 bytes in flight per thread, 768 threads keep ~48 KiB of loads in flight per SM,
// what the group kernels keep; left alone ptxas took 106-117 registers (two blocks). With error
// feedback the residual's loads are in flight too, and at 85 registers they spilled: 2.
inline constexpr int kStridedMinBlocks = 3;
constexpr int quant_min_blocks(bool feedback) {
  return feedback ? kStridedMinBlocks - 1 : kStridedMinBlocks;
}
// The column quantize: 2, since its columns' scales and reciprocals take 24 registers more.
inline constexpr int kColQuantMinBlocks = kStridedMinBlocks - 1;
}  // namespace tuning

}  // namespace taco::gpu
