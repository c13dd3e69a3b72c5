#include "cuda/codecs/gpu_quant.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>

#include "codecs/hadamard.hpp"
#include "codecs/quant_codec.hpp"
#include "core/error.hpp"
#include "cuda/runtime/cuda_check.hpp"
#include "formats/elem.hpp"
#include "formats/fp8.hpp"
#include "formats/intq.hpp"

namespace taco::gpu {

namespace {

bool aligned(const void* p, size_t a) {
  return reinterpret_cast<uintptr_t>(p) % a == 0;
}

// Device tensors are fp32 or bf16: the kernels read and write nothing else.
void require_kernel_type(DType t, const std::string& codec, const char* what) {
  TACO_REQUIRE_INPUT(t == DType::F32 || t == DType::BF16,
                     "GPU codec {}: {} must be f32 or bf16, not {}", codec, what, dtype_name(t));
}

size_t dtype_bytes(DType t) {
  return dtype_size(t);
}

// The rule of QuantCodec's is_sat_ table: codes at the largest magnitude the codec emits.
bool saturated_code(const QuantSpec& s, int c) {
  switch (s.elem) {
    case ElemFormat::E4M3:
      return s.taco ? (c & 0x7f) == int(float_to_fp8_e4m3(448.0f)) : (c & 0x7f) >= 0x7e;
    case ElemFormat::E5M2:
      return s.taco ? (c & 0x7f) == int(float_to_fp8_e5m2(448.0f)) : (c & 0x7f) >= 0x7b;
    case ElemFormat::E2M1:
      return c < 16 && (c & 0x7) == 0x7;
    case ElemFormat::INT8:
    case ElemFormat::INT4:
    case ElemFormat::INT3:
    case ElemFormat::INT2: {  // +-qmax (INT4: codes 0x7, 0x9)
      const int bits = elem_bits(s.elem);
      const int v = int_from_code(uint32_t(c), bits);
      return c < (1 << bits) && (v == int_sym_qmax(bits) || v == -int_sym_qmax(bits));
    }
    default:
      return false;
  }
}

// Division of n < 2^31 by d >= 1 as (umulhi(n, magic) + n) >> shift (round-up method of
// Granlund and Montgomery, 1994): shift = ceil(log2 d), magic = floor(2^32 (2^shift - d) / d) + 1.
struct DivMagic {
  uint32_t magic;
  int32_t shift;
};
DivMagic div_magic(uint32_t d) {
  int32_t l = 0;
  while ((uint64_t(1) << l) < d) ++l;
  const uint64_t m = ((uint64_t(1) << 32) * ((uint64_t(1) << l) - d)) / d + 1;
  return {uint32_t(m), l};
}

int occupancy(KernelFn fn, int threads, size_t shared_bytes = 0) {
  int n = 0;
  TACO_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(
      &n, reinterpret_cast<const void*>(fn), threads, shared_bytes));
  return std::max(n, 1);
}

}  // namespace

std::string GpuQuant::unsupported_reason(const VariantSpec& v) {
  if (v.family != VariantSpec::Family::Quant)
    return "only block-scaled quantization codecs run on the GPU";
  const QuantSpec& s = v.quant;
  if (s.asym) return "asymmetric integer codes";
  if (s.gran == Granularity::Tile) return "tile blocks (GPU: g<G>, row, col, tensor)";
  const int bits = elem_bits(s.elem);
  if (s.gran == Granularity::Group) {
    if (s.block < 16 || s.block > kMaxGroupSize)
      return fmt::format("group size {} (GPU: 16..1024)", s.block);
    if (s.scale == ScaleFormat::UE4M3 && bits != 4)
      return fmt::format("ue4m3 scales with {} elements (GPU: with e2m1 or int4)",
                         elem_format_name(s.elem));
    return "";
  }
  // row, col, tensor
  if (bits < 8)
    return fmt::format(
        "{} blocks of {} elements (GPU: e4m3, e5m2, int8; elements below 8 bits take g<G>)",
        granularity_name(s.gran), elem_format_name(s.elem));
  if (s.scale == ScaleFormat::UE4M3)
    return fmt::format("ue4m3 scales on {} blocks (GPU: g<G> with e2m1 or int4)",
                       granularity_name(s.gran));
  return "";
}

GpuQuant::GpuQuant(const VariantSpec& v) {
  const std::string why = unsupported_reason(v);
  if (!why.empty())
    throw_input_error("variant '{}' has no GPU implementation ({})", canonical_variant(v), why);
  name_ = canonical_variant(v);
  spec_ = v.quant;
  const QuantSpec& s = spec_;
  QuantRules& q = rules_;
  std::memset(&q, 0, sizeof q);
  q.elem = s.elem;
  q.saturate = s.saturate ? 1 : 0;
  q.scale = s.scale;
  q.sround = s.sround;
  q.scale_bytes = scale_format_bytes(s.scale);
  q.emax = elem_is_float(s.elem) ? elem_emax(s.elem) : 0;
  q.blocks = s.gran;
  q.group = s.gran == Granularity::Group ? s.block : 0;
  q.taco = s.taco ? 1 : 0;
  q.dual = s.dual ? 1 : 0;
  q.transform = s.transform != Transform::None ? 1 : 0;
  q.rht = s.transform == Transform::RandHadamard ? 1 : 0;
  q.target = s.target;
  q.lambda = s.lambda;
  q.fmax = elem_max(s.elem, false);
  q.hconst = q.transform ? hadamard_scale(s.block) : 1.0f;
  q.qmax = elem_is_float(s.elem) ? 0.0f : elem_max(s.elem, false);
  // Quotients stay below ~2 T (TACO: below T or v / 1e6), far from overflow, for T <= 1e20.
  q.fast_div = s.target <= 1e20f ? 1 : 0;
  q.target_in_range = s.target >= 0x1p-39f && s.target <= 0x1p40f ? 1 : 0;
  if (q.rht) {
    const std::vector<uint32_t> m = rht_sign_masks(s.block, s.seed);
    for (int i = 0; i < s.block; ++i)
      if (m[size_t(i)]) q.rht_neg[i >> 5] |= 1u << (i & 31);
  }
  for (int c = 0; c < 256; ++c)
    if (saturated_code(s, c)) q.sat_code[c >> 5] |= 1u << (c & 31);

  int dev = 0;
  TACO_CUDA_CHECK(cudaGetDevice(&dev));
  TACO_CUDA_CHECK(cudaDeviceGetAttribute(&sm_count_, cudaDevAttrMultiProcessorCount, dev));
  group_ = s.gran == Granularity::Group;
  two_level_ = s.scale == ScaleFormat::UE4M3;
  if (group_) {
    gk_ = select_group_kernels(s.block, q.transform != 0, q.taco != 0, elem_bits(s.elem));
    TACO_ASSERT(!two_level_ || gk_.chunk_amax.fn,
                "GPU codec {}: no statistics pass for two-level scales", name_);
    occ_encode_ = occupancy(gk_.encode_bf16.fn, kGroupThreads);
    occ_encode_f32_ = occupancy(gk_.encode_f32.fn, kGroupThreads);
    reference_rules_ = gk_.encode_ref_bf16.fn && gk_.encode_ref_f32.fn && taco_reference_rules(q);
    if (reference_rules_) {
      occ_encode_ref_ = occupancy(gk_.encode_ref_bf16.fn, kGroupThreads);
      occ_encode_ref_f32_ = occupancy(gk_.encode_ref_f32.fn, kGroupThreads);
    }
    occ_decode_ = occupancy(gk_.decode.fn, kGroupThreads);
    occ_decode_reduce_ = occupancy(gk_.decode_reduce.fn, kGroupThreads);
    occ_decode_small_ = occupancy(gk_.decode_reduce_small.fn, kGroupThreads);
    occ_dre_ = occupancy(gk_.decode_reduce_encode.fn, kGroupThreads);
    occ_dae_ = occupancy(gk_.decode_add_encode.fn, kGroupThreads);
    occ_feedback_bf16_ = occupancy(gk_.encode_feedback_bf16.fn, kGroupThreads);
    occ_feedback_f32_ = occupancy(gk_.encode_feedback_f32.fn, kGroupThreads);
    if (gk_.chunk_amax.fn) occ_chunk_amax_ = occupancy(gk_.chunk_amax.fn, kGroupThreads);
    if (gk_.decode_stream.fn) {
      stream_decode_elems_ = gk_.decode_stream.stream_min_elems;
      const auto fn = reinterpret_cast<const void*>(gk_.decode_stream.fn);
      const size_t most =
          std::max(stream_shared_bytes(DType::BF16), stream_shared_bytes(DType::F32));
      TACO_CUDA_CHECK(
          cudaFuncSetAttribute(fn, cudaFuncAttributeMaxDynamicSharedMemorySize, int(most)));
      occ_stream_bf16_ =
          occupancy(gk_.decode_stream.fn, kGroupThreads, stream_shared_bytes(DType::BF16));
      occ_stream_f32_ =
          occupancy(gk_.decode_stream.fn, kGroupThreads, stream_shared_bytes(DType::F32));
    }
  }
}

int GpuQuant::strided_occupancy(KernelFn fn) const {
  for (const auto& [f, n] : occ_strided_)
    if (f == fn) return n;
  const int n = occupancy(fn, kStridedThreads);
  occ_strided_.emplace_back(fn, n);
  return n;
}

int GpuQuant::encode_launches() const {
  if (group_) return two_level_ ? 3 : 1;  // memset, statistics, encode
  switch (spec_.gran) {
    case Granularity::Row:
      return 1;
    case Granularity::Tensor:
      return 3;  // memset, amax, codes
    default:
      return 4;  // memset, amax, scales, codes
  }
}

int GpuQuant::decode_launches() const {
  return 1;
}

std::string GpuQuant::kernel_config() const {
  if (!group_) return "";
  std::string s = fmt::format("e{}-d{}", gk_.encode_bf16.lane_elems, gk_.decode_reduce.lane_elems);
  if (gk_.decode_reduce_small.lane_elems != gk_.decode_reduce.lane_elems)
    s += fmt::format("-ds{}", gk_.decode_reduce_small.lane_elems);  // small decodes
  return s;
}

ChunkGeometry GpuQuant::geometry(int64_t rows, int64_t cols) const {
  if (geo_valid_ && geo_.rows == rows && geo_.cols == cols) return geo_;
  const QuantLayout L = quant_layout(spec_, rows, cols, name_);  // InputError for unusable shapes
  ChunkGeometry g{};
  g.rows = rows;
  g.cols = cols;
  g.numel = L.numel;
  g.nblocks = L.blocks;
  g.block_len = L.block_len;
  g.code_bytes = L.code_bytes;
  g.scale_off = L.scale_off;
  g.aux_off = L.aux_off;
  g.total = L.total;
  geo_ = g;  // memo: launches in a timing loop skip the layout computation
  geo_valid_ = true;
  return g;
}

KernelParams GpuQuant::base_params(int64_t chunks, int64_t rows, int64_t cols) const {
  TACO_REQUIRE_INPUT(chunks >= 1, "GPU codec {}: chunks must be >= 1, got {}", name_, chunks);
  KernelParams p;
  std::memset(&p, 0, sizeof p);
  p.rules = rules_;
  p.geo = geometry(rows, cols);
  p.chunks = chunks;
  p.in_stride = p.geo.numel;
  p.out_stride = p.geo.numel;
  p.wire_out_stride = p.geo.total;
  p.wire_in_stride = p.geo.total;
  p.nsrc = 0;
  if (group_ && p.geo.nblocks >= 1 && p.geo.nblocks <= kMaxLaunchGroups) {
    const DivMagic dm = div_magic(uint32_t(p.geo.nblocks));
    p.nb_magic = dm.magic;
    p.nb_shift = dm.shift;
  }
  return p;
}

void GpuQuant::launch(KernelFn fn, int occ, int threads, int64_t blocks_needed,
                      const KernelParams& p, cudaStream_t stream, const char* what,
                      size_t shared_bytes) const {
  // A resident grid (every block of it runs at once); grid-stride loops cover the rest.
  const int sms = max_sms_ > 0 ? std::min(max_sms_, sm_count_) : sm_count_;
  const int64_t resident = int64_t(sms) * occ;
  const int64_t grid = std::max<int64_t>(1, std::min(blocks_needed, resident));
  void* args[] = {const_cast<KernelParams*>(&p)};
  const cudaError_t err = cudaLaunchKernel(reinterpret_cast<const void*>(fn), dim3(unsigned(grid)),
                                           dim3(unsigned(threads)), args, shared_bytes, stream);
  if (err != cudaSuccess) throw_cuda_error(err, what, __FILE__, __LINE__);
  TACO_CUDA_CHECK_LAUNCH(what, stream);
}

namespace {
// p moved to chunk c0 of every buffer it addresses (a later launch of a split call).
void skip_chunks(KernelParams& p, int64_t c0) {
  if (p.in)
    p.in = static_cast<const uint8_t*>(p.in) + size_t(c0 * p.in_stride) * dtype_bytes(p.in_type);
  if (p.wire_out) p.wire_out += c0 * p.wire_out_stride;
  for (int s = 0; s < p.nsrc; ++s) p.src[s] += c0 * p.wire_in_stride;
  if (p.out)
    p.out = static_cast<uint8_t*>(p.out) + size_t(c0 * p.out_stride) * dtype_bytes(p.out_type);
  if (p.residual) p.residual += c0 * p.in_stride;
  if (p.chunk_amax) p.chunk_amax += c0;
}
}  // namespace

void GpuQuant::launch_group(const GroupKernel& k, int occ, const KernelParams& p,
                            cudaStream_t stream, const char* what, size_t shared_bytes) const {
  // Whole chunks per launch, so that a launch's group indices fit the kernels' 32 bits. Vector
  // permissions carry over: with more than one chunk they already required aligned strides.
  TACO_REQUIRE_INPUT(
      p.geo.nblocks <= max_launch_groups_,
      "GPU codec {}: a chunk of {} groups; the group kernels take at most {} per launch", name_,
      p.geo.nblocks, max_launch_groups_);
  const int64_t per_launch = max_launch_groups_ / p.geo.nblocks;
  for (int64_t c0 = 0; c0 < p.chunks; c0 += per_launch) {
    KernelParams part = p;
    part.chunks = std::min(per_launch, p.chunks - c0);
    skip_chunks(part, c0);
    const int64_t groups = part.chunks * part.geo.nblocks;
    const int64_t warps = (groups + k.groups_per_warp - 1) / k.groups_per_warp;
    launch(k.fn, occ, kGroupThreads, (warps + kGroupThreads / 32 - 1) / (kGroupThreads / 32), part,
           stream, what, shared_bytes);
  }
}

size_t GpuQuant::stream_shared_bytes(DType out_type) const {
  const GroupKernel& k = gk_.decode_stream;
  const StreamTileLayout t = stream_tile_layout(
      k.stream_tile_groups, k.stream_stages, k.stream_out_stages, spec_.block, rules_.scale_bytes,
      rules_.taco && rules_.dual, int(dtype_bytes(out_type)));
  return size_t(kGroupThreads / 32) * size_t(t.warp_bytes);
}

bool GpuQuant::stream_decode_fits(const KernelParams& p) const {
  const GroupKernel& k = gk_.decode_stream;
  if (!k.fn || p.nsrc != 1 || p.chunks != 1 || p.geo.numel < stream_decode_elems_ ||
      p.geo.numel != p.geo.nblocks * spec_.block || p.geo.nblocks < k.stream_tile_groups)
    return false;
  // Bulk copies move 16-byte aligned runs of multiples of 16 bytes: the tile's codes (G x groups),
  // scales and s_a at every tile, and the output.
  const bool dual = rules_.taco && rules_.dual;
  return aligned(p.src[0], 16) && p.geo.scale_off % 16 == 0 && (!dual || p.geo.aux_off % 16 == 0) &&
         (int64_t(k.stream_tile_groups) * rules_.scale_bytes) % 16 == 0 && aligned(p.out, 16);
}

void GpuQuant::ensure_scratch(size_t bytes) const {
  if (scratch_.bytes() < bytes) scratch_ = DeviceBuffer(bytes, "cudaMalloc(GPU codec scratch)");
}

// Vector permissions of the strided kernels: runs of 8 elements from a row start (cols a multiple
// of 8), from every chunk start.
namespace {
bool strided_runs(const ChunkGeometry& g) {
  return g.cols % 8 == 0;
}
}  // namespace

void GpuQuant::encode(const void* in, DType in_type, int64_t chunks, int64_t rows, int64_t cols,
                      uint8_t* wire, cudaStream_t stream, unsigned long long* stats) const {
  require_kernel_type(in_type, name_, "the input");
  KernelParams p = base_params(chunks, rows, cols);
  p.in = in;
  p.in_type = in_type;
  p.wire_out = wire;
  p.stats = stats;
  p.value_source = ValueSource::Input;
  encode_launch(p, false, stream);
}

void GpuQuant::encode_ef(const void* in, DType in_type, float* residual, int64_t chunks,
                         int64_t rows, int64_t cols, uint8_t* wire, cudaStream_t stream,
                         unsigned long long* stats) const {
  TACO_REQUIRE_INPUT(residual != nullptr, "GPU codec {}: encode_ef needs a residual buffer", name_);
  require_kernel_type(in_type, name_, "the input");
  KernelParams p = base_params(chunks, rows, cols);
  p.in = in;
  p.in_type = in_type;
  p.wire_out = wire;
  p.stats = stats;
  p.residual = residual;
  p.value_source = ValueSource::InputFeedback;
  encode_launch(p, true, stream);
}

void GpuQuant::encode_launch(KernelParams p, bool feedback, cudaStream_t stream) const {
  const int64_t chunks = p.chunks;
  const size_t es = dtype_bytes(p.in_type);
  const uint8_t* wire = p.wire_out;
  if (!group_) {
    const bool runs = strided_runs(p.geo);
    p.in_vec16 = runs && aligned(p.in, 16) && (chunks == 1 || (size_t(p.in_stride) * es) % 16 == 0);
    p.residual_vec16 =
        runs && aligned(p.residual, 16) && (chunks == 1 || (size_t(p.in_stride) * 4) % 16 == 0);
    p.code_vec = runs && aligned(wire, 8) && (chunks == 1 || p.geo.total % 8 == 0);
    p.scale_vec4 = aligned(wire + p.geo.scale_off, 4) && (chunks == 1 || p.geo.total % 4 == 0);
    strided_encode(p, feedback, 0, stream);
    return;
  }
  p.in_vec16 = aligned(p.in, 16) && (chunks == 1 || (size_t(p.in_stride) * es) % 16 == 0);
  p.residual_vec16 =
      aligned(p.residual, 16) && (chunks == 1 || (size_t(p.in_stride) * 4) % 16 == 0);
  p.code_vec = aligned(wire, 16) && (chunks == 1 || p.geo.total % 16 == 0);
  p.scale_vec4 = aligned(wire + p.geo.scale_off, 4) && p.geo.aux_off % 4 == 0 &&
                 (chunks == 1 || p.geo.total % 4 == 0);
  if (two_level_) chunk_amax_pass(p, stream);
  const bool bf16 = p.in_type == DType::BF16;
  if (feedback) {
    if (bf16)
      launch_group(gk_.encode_feedback_bf16, occ_feedback_bf16_, p, stream,
                   "group_encode_feedback_kernel<bf16>");
    else
      launch_group(gk_.encode_feedback_f32, occ_feedback_f32_, p, stream,
                   "group_encode_feedback_kernel<f32>");
  } else if (reference_encode(p.stats)) {
    if (bf16)
      launch_group(gk_.encode_ref_bf16, occ_encode_ref_, p, stream,
                   "group_encode_kernel<reference rules, bf16>");
    else
      launch_group(gk_.encode_ref_f32, occ_encode_ref_f32_, p, stream,
                   "group_encode_kernel<reference rules, f32>");
  } else {
    if (bf16)
      launch_group(gk_.encode_bf16, occ_encode_, p, stream, "group_encode_kernel<bf16>");
    else
      launch_group(gk_.encode_f32, occ_encode_f32_, p, stream, "group_encode_kernel<f32>");
  }
}

void GpuQuant::chunk_amax_pass(KernelParams& p, cudaStream_t stream) const {
  const size_t bytes = size_t(p.chunks) * 4;
  ensure_scratch(bytes);
  p.chunk_amax = scratch_.as<uint32_t>();
  TACO_CUDA_CHECK(cudaMemsetAsync(p.chunk_amax, 0, bytes, stream));
  KernelParams s = p;
  s.stats = nullptr;  // the encode counts
  launch_group(gk_.chunk_amax, occ_chunk_amax_, s, stream, "group_chunk_amax_kernel");
}

void GpuQuant::strided_encode(KernelParams p, bool feedback, size_t scratch_off,
                              cudaStream_t stream) const {
  const StridedKernels& k = strided_kernels();
  const int it = p.in_type == DType::BF16 ? 0 : 1, ef = feedback ? 1 : 0;
  const int sms = max_sms_ > 0 ? std::min(max_sms_, sm_count_) : sm_count_;
  const int64_t rows_total = p.chunks * p.geo.rows;
  if (spec_.gran == Granularity::Row) {
    const int shape = row_shape(p.geo.cols);
    const KernelFn fn = k.row_encode[shape][it][ef];
    const int64_t rows_per_block = kStridedThreads / kRowShapes[shape];
    launch(fn, strided_occupancy(fn), kStridedThreads,
           (rows_total + rows_per_block - 1) / rows_per_block, p, stream, "row_encode_kernel");
    return;
  }
  const int64_t runs = p.chunks * ((p.geo.numel + 7) / 8);
  if (spec_.gran == Granularity::Tensor) {
    ensure_scratch(scratch_off + size_t(p.chunks) * 4);
    p.chunk_amax = reinterpret_cast<uint32_t*>(scratch_.as<uint8_t>() + scratch_off);
    TACO_CUDA_CHECK(cudaMemsetAsync(p.chunk_amax, 0, size_t(p.chunks) * 4, stream));
    // the amax pass counts non-finite values, the codes pass saturated codes
    const int64_t blocks = (runs / p.chunks + kStridedThreads - 1) / kStridedThreads;
    launch(k.tensor_amax[it][ef], strided_occupancy(k.tensor_amax[it][ef]), kStridedThreads, blocks,
           p, stream, "tensor_amax_kernel");
    launch(k.tensor_quant[it][ef], strided_occupancy(k.tensor_quant[it][ef]), kStridedThreads,
           blocks, p, stream, "tensor_quant_kernel");
    return;
  }
  // columns: per-column amax bits, then the scales in use, after what the caller keeps in the
  // scratch
  const size_t nb = size_t(p.chunks * p.geo.cols) * 4;
  ensure_scratch(scratch_off + 2 * nb);
  p.block_amax = reinterpret_cast<uint32_t*>(scratch_.as<uint8_t>() + scratch_off);
  p.block_scale = reinterpret_cast<float*>(scratch_.as<uint8_t>() + scratch_off + nb);
  TACO_CUDA_CHECK(cudaMemsetAsync(p.block_amax, 0, nb, stream));
  // Tiles of enough rows that a resident grid has about two per thread (fewer atomics per
  // element), at least 4 rows and at most 256.
  const int occ_amax = strided_occupancy(k.col_amax[it][ef]);
  const int64_t resident = int64_t(sms) * occ_amax * kStridedThreads;
  const int64_t col_runs = p.chunks * ((p.geo.cols + 7) / 8);
  p.tile_rows = int32_t(
      std::clamp<int64_t>((p.geo.rows * col_runs + 2 * resident - 1) / (2 * resident), 4, 256));
  const int64_t tiles = col_runs * ((p.geo.rows + p.tile_rows - 1) / p.tile_rows);
  const int64_t blocks = (tiles + kStridedThreads - 1) / kStridedThreads;
  launch(k.col_amax[it][ef], occ_amax, kStridedThreads, blocks, p, stream, "col_amax_kernel");
  launch(k.col_scales, strided_occupancy(k.col_scales), kStridedThreads,
         (p.chunks * p.geo.cols + kStridedThreads - 1) / kStridedThreads, p, stream,
         "col_scales_kernel");
  launch(k.col_quant[it][ef], strided_occupancy(k.col_quant[it][ef]), kStridedThreads, blocks, p,
         stream, "col_quant_kernel");
}

void GpuQuant::strided_decode(const KernelParams& p0, cudaStream_t stream) const {
  const StridedKernels& k = strided_kernels();
  KernelParams p = p0;
  const bool runs = strided_runs(p.geo);
  p.code_vec = p.code_vec && runs;
  p.out_vec16 = p.out_vec16 && runs;
  if (spec_.gran == Granularity::Tensor) {
    const int64_t blocks = ((p.geo.numel + 7) / 8 + kStridedThreads - 1) / kStridedThreads;
    launch(k.tensor_decode, strided_occupancy(k.tensor_decode), kStridedThreads, blocks, p, stream,
           "tensor_decode_kernel");
    return;
  }
  const KernelFn fn = spec_.gran == Granularity::Row ? k.row_decode : k.col_decode;
  const int sms = max_sms_ > 0 ? std::min(max_sms_, sm_count_) : sm_count_;
  const int occ = strided_occupancy(fn);
  const int64_t resident = int64_t(sms) * occ * kStridedThreads;
  const int64_t col_runs = p.chunks * ((p.geo.cols + 7) / 8);
  p.tile_rows = int32_t(
      std::clamp<int64_t>((p.geo.rows * col_runs + 2 * resident - 1) / (2 * resident), 1, 64));
  const int64_t tiles = col_runs * ((p.geo.rows + p.tile_rows - 1) / p.tile_rows);
  launch(fn, occ, kStridedThreads, (tiles + kStridedThreads - 1) / kStridedThreads, p, stream,
         spec_.gran == Granularity::Row ? "row_decode_kernel" : "col_decode_kernel");
}

KernelParams GpuQuant::decode_params(const std::vector<const uint8_t*>& srcs, int64_t chunks,
                                     int64_t rows, int64_t cols, void* out, DType out_type) const {
  require_kernel_type(out_type, name_, "the output");
  TACO_REQUIRE_INPUT(!srcs.empty() && srcs.size() <= size_t(kMaxSources),
                     "GPU codec {}: decode-reduce takes 1..{} inputs, got {}", name_, kMaxSources,
                     srcs.size());
  KernelParams p = base_params(chunks, rows, cols);
  p.nsrc = int32_t(srcs.size());
  bool cv = chunks == 1 || p.geo.total % 16 == 0,
       sv = p.geo.aux_off % 4 == 0 && (chunks == 1 || p.geo.total % 4 == 0);
  for (size_t i = 0; i < srcs.size(); ++i) {
    p.src[i] = srcs[i];
    cv = cv && aligned(srcs[i], 16);
    sv = sv && aligned(srcs[i] + p.geo.scale_off, 4);
  }
  p.code_vec = cv;
  p.scale_vec4 = sv;
  p.out = out;
  p.out_type = out_type;
  p.out_vec16 =
      aligned(out, 16) && (chunks == 1 || (size_t(p.out_stride) * dtype_bytes(out_type)) % 16 == 0);
  return p;
}

bool GpuQuant::streams_decode(const uint8_t* wire, int64_t chunks, int64_t rows, int64_t cols,
                              const void* out, DType out_type) const {
  return group_ && chunks * rows * cols > small_decode_elems_ &&
         stream_decode_fits(
             decode_params({wire}, chunks, rows, cols, const_cast<void*>(out), out_type));
}

void GpuQuant::decode_reduce(const std::vector<const uint8_t*>& srcs, int64_t chunks, int64_t rows,
                             int64_t cols, void* out, DType out_type, cudaStream_t stream) const {
  const KernelParams p = decode_params(srcs, chunks, rows, cols, out, out_type);
  if (group_) {
    if (chunks * p.geo.numel <= small_decode_elems_)
      launch_group(gk_.decode_reduce_small, occ_decode_small_, p, stream,
                   "group_decode_reduce_kernel<small>");
    else if (stream_decode_fits(p))
      launch_group(gk_.decode_stream, out_type == DType::BF16 ? occ_stream_bf16_ : occ_stream_f32_,
                   p, stream, "group_decode_stream_kernel", stream_shared_bytes(out_type));
    else if (p.nsrc == 1)
      launch_group(gk_.decode, occ_decode_, p, stream, "group_decode_reduce_kernel<one source>");
    else
      launch_group(gk_.decode_reduce, occ_decode_reduce_, p, stream, "group_decode_reduce_kernel");
  } else {
    strided_decode(p, stream);
  }
}

void GpuQuant::decode_reduce_encode(const std::vector<const uint8_t*>& srcs, int64_t chunks,
                                    int64_t rows, int64_t cols, uint8_t* wire_out, bool round_bf16,
                                    cudaStream_t stream, unsigned long long* stats) const {
  TACO_REQUIRE_INPUT(!srcs.empty() && srcs.size() <= size_t(kMaxSources),
                     "GPU codec {}: decode-reduce takes 1..{} inputs, got {}", name_, kMaxSources,
                     srcs.size());
  KernelParams p = base_params(chunks, rows, cols);
  p.nsrc = int32_t(srcs.size());
  p.round_sum_bf16 = round_bf16 ? 1 : 0;
  p.stats = stats;
  if (group_) {
    bool cv = aligned(wire_out, 16) && (chunks == 1 || p.geo.total % 16 == 0);
    bool sv = aligned(wire_out + p.geo.scale_off, 4) && p.geo.aux_off % 4 == 0 &&
              (chunks == 1 || p.geo.total % 4 == 0);
    for (size_t i = 0; i < srcs.size(); ++i) {
      p.src[i] = srcs[i];
      cv = cv && aligned(srcs[i], 16);
      sv = sv && aligned(srcs[i] + p.geo.scale_off, 4);
    }
    p.code_vec = cv;
    p.scale_vec4 = sv;
    p.wire_out = wire_out;
    p.value_source = ValueSource::DecodeSum;
    if (two_level_) chunk_amax_pass(p, stream);
    launch_group(gk_.decode_reduce_encode, occ_dre_, p, stream,
                 "group_decode_reduce_encode_kernel");
    return;
  }
  // Rows / columns / tensor: the sum goes through fp32 scratch (the decode rounds it to bf16 when
  // asked), then the encode of that (its block statistics after the sums in the scratch).
  // (the whole scratch first: a larger one later would move the sums under the pending decode)
  const size_t sum_bytes = size_t(chunks * p.geo.numel) * 4;
  ensure_scratch(sum_bytes + size_t(chunks * (p.geo.cols + 1)) * 8);
  KernelParams d = decode_params(srcs, chunks, rows, cols, scratch_.get(), DType::F32);
  d.round_sum_bf16 = round_bf16 ? 1 : 0;
  strided_decode(d, stream);
  KernelParams e = base_params(chunks, rows, cols);
  e.in = scratch_.get();
  e.in_type = DType::F32;
  e.wire_out = wire_out;
  e.stats = stats;
  const bool runs = strided_runs(e.geo);
  e.in_vec16 = runs && (chunks == 1 || (size_t(e.in_stride) * 4) % 16 == 0);
  e.code_vec = runs && aligned(wire_out, 8) && (chunks == 1 || e.geo.total % 8 == 0);
  e.scale_vec4 = aligned(wire_out + e.geo.scale_off, 4) && (chunks == 1 || e.geo.total % 4 == 0);
  strided_encode(e, false, sum_bytes, stream);
}

void GpuQuant::decode_add_encode(const uint8_t* wire_in, const void* own, DType own_type,
                                 int64_t rows, int64_t cols, uint8_t* wire_out, float* scratch,
                                 cudaStream_t stream) const {
  require_kernel_type(own_type, name_, "the own chunk");
  if (!group_)  // row / column / tensor blocks: decode, add the own chunk in fp32, encode
    return decode_add_encode_round_trip(wire_in, own, own_type, rows, cols, wire_out, scratch,
                                        stream);
  KernelParams p = base_params(1, rows, cols);
  p.in = own;
  p.in_type = own_type;
  p.wire_out = wire_out;
  p.src[0] = wire_in;
  p.nsrc = 1;
  p.code_vec = aligned(wire_in, 16) && aligned(wire_out, 16);
  p.in_vec16 = aligned(own, 16);
  p.scale_vec4 = aligned(wire_in + p.geo.scale_off, 4) && aligned(wire_out + p.geo.scale_off, 4) &&
                 p.geo.aux_off % 4 == 0;
  p.value_source = ValueSource::DecodeAdd;
  if (two_level_) chunk_amax_pass(p, stream);
  launch_group(gk_.decode_add_encode, occ_dae_, p, stream, "group_decode_add_encode_kernel");
}

}  // namespace taco::gpu
