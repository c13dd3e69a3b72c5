#include "cuda/gpu_quant.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>

#include "codecs/hadamard.hpp"
#include "codecs/quant_codec.hpp"
#include "core/error.hpp"
#include "cuda/cuda_check.hpp"
#include "formats/elem.hpp"
#include "formats/fp8.hpp"

namespace taco::gpu {

namespace {

bool aligned(const void* p, size_t a) { return reinterpret_cast<uintptr_t>(p) % a == 0; }

ElemKind elem_kind(ElemFormat f) {
  switch (f) {
    case ElemFormat::E4M3: return ElemKind::E4M3;
    case ElemFormat::E5M2: return ElemKind::E5M2;
    case ElemFormat::INT8: return ElemKind::INT8;
    case ElemFormat::E2M1:
    case ElemFormat::INT4: break;
  }
  throw_input_error("GPU codecs: no kernel for element format {}", elem_format_name(f));
}

ScaleKind scale_kind(ScaleFormat f) {
  switch (f) {
    case ScaleFormat::F32: return ScaleKind::F32;
    case ScaleFormat::BF16: return ScaleKind::BF16;
    case ScaleFormat::F16: return ScaleKind::F16;
    case ScaleFormat::E8M0: return ScaleKind::E8M0;
    case ScaleFormat::UE4M3: break;
  }
  throw_input_error("GPU codecs: no kernel for scale format {}", scale_format_name(f));
}

ScaleRoundKind round_kind(ScaleRound r) {
  switch (r) {
    case ScaleRound::Exact: return ScaleRoundKind::Exact;
    case ScaleRound::Up: return ScaleRoundKind::Up;
    case ScaleRound::Nearest: return ScaleRoundKind::Nearest;
    case ScaleRound::OcpFloor: return ScaleRoundKind::OcpFloor;
  }
  throw_error("unknown scale rounding {}", int(r));
}

size_t dtype_bytes(DataType t) { return t == DataType::BF16 ? 2 : 4; }

// The rule of QuantCodec's is_sat_ table: codes at the largest magnitude the codec emits.
bool saturated_code(const QuantSpec& s, int c) {
  switch (s.elem) {
    case ElemFormat::E4M3:
      return s.taco ? (c & 0x7f) == int(float_to_fp8_e4m3(448.0f)) : (c & 0x7f) >= 0x7e;
    case ElemFormat::E5M2:
      return s.taco ? (c & 0x7f) == int(float_to_fp8_e5m2(448.0f)) : (c & 0x7f) >= 0x7b;
    case ElemFormat::INT8: {
      const int v = int(int8_t(uint8_t(c)));
      return v == 127 || v == -127;
    }
    default: return false;
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
  TACO_CUDA_CHECK(
      cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, reinterpret_cast<const void*>(fn), threads, shared_bytes));
  return std::max(n, 1);
}

}  // namespace

std::string GpuQuant::unsupported_reason(const VariantSpec& v) {
  if (v.family != VariantSpec::Family::Quant) return "only block-scaled quantization codecs run on the GPU";
  const QuantSpec& s = v.quant;
  if (s.elem != ElemFormat::E4M3 && s.elem != ElemFormat::E5M2 && s.elem != ElemFormat::INT8)
    return fmt::format("element format {} (GPU: e4m3, e5m2, int8)", elem_format_name(s.elem));
  if (s.asym) return "asymmetric integer codes";
  if (s.gran != Granularity::Group && s.gran != Granularity::Row && s.gran != Granularity::Tensor)
    return fmt::format("{} blocks (GPU: g<G>, row, tensor)", granularity_name(s.gran));
  if (s.scale == ScaleFormat::UE4M3) return "two-level ue4m3 scales";
  if (s.gran == Granularity::Group && (s.block < 16 || s.block > kMaxGroupSize))
    return fmt::format("group size {} (GPU: 16..1024)", s.block);
  return "";
}

std::vector<std::string> GpuQuant::supported_presets() {
  std::vector<std::string> out;
  for (const Preset& p : preset_table())
    if (unsupported_reason(parse_variant(p.name)).empty()) out.emplace_back(p.name);
  return out;
}

VariantSpec GpuQuant::require_supported(const std::string& variant) {
  const VariantSpec v = parse_variant(variant);  // InputError naming a bad token
  const std::string why = unsupported_reason(v);
  if (!why.empty()) {
    std::string list;
    for (const auto& s : supported_presets()) list += (list.empty() ? "" : ", ") + s;
    throw_input_error("variant '{}' has no GPU implementation ({}); GPU variants: {}, and the grammar "
                      "forms e4m3|e5m2|int8 : g<G> (G = 16..1024) | row | tensor [: had | rht] "
                      "[: sf32 | sbf16 | sf16 | se8m0] [: taco | dual]", variant, why, list);
  }
  return v;
}

GpuQuant::GpuQuant(const std::string& variant) : GpuQuant(require_supported(variant)) {}

GpuQuant::GpuQuant(const VariantSpec& v) {
  const std::string why = unsupported_reason(v);
  if (!why.empty())
    throw_input_error("variant '{}' has no GPU implementation ({})", canonical_variant(v), why);
  name_ = canonical_variant(v);
  spec_ = v.quant;
  const QuantSpec& s = spec_;
  QuantRules& q = rules_;
  std::memset(&q, 0, sizeof q);
  q.elem = elem_kind(s.elem);
  q.saturate = s.saturate ? 1 : 0;
  q.scale = scale_kind(s.scale);
  q.sround = round_kind(s.sround);
  q.scale_bytes = scale_format_bytes(s.scale);
  q.emax = elem_is_float(s.elem) ? elem_emax(s.elem) : 0;
  q.blocks = s.gran == Granularity::Group ? BlockKind::Group
             : s.gran == Granularity::Row ? BlockKind::Row
                                          : BlockKind::Tensor;
  q.group = s.gran == Granularity::Group ? s.block : 0;
  q.taco = s.taco ? 1 : 0;
  q.dual = s.dual ? 1 : 0;
  q.transform = s.transform != Transform::None ? 1 : 0;
  q.rht = s.transform == Transform::RandHadamard ? 1 : 0;
  q.target = s.target;
  q.lambda = s.lambda;
  q.fmax = elem_max(s.elem, false);
  q.hconst = q.transform ? hadamard_scale(s.block) : 1.0f;
  q.qmax = s.elem == ElemFormat::INT8 ? elem_max(s.elem, false) : 0.0f;
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
  if (group_) {
    gk_ = select_group_kernels(s.block, q.transform != 0, q.taco != 0);
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
    if (gk_.decode_stream.fn) {
      stream_decode_elems_ = gk_.decode_stream.stream_min_elems;
      const auto fn = reinterpret_cast<const void*>(gk_.decode_stream.fn);
      const size_t most = std::max(stream_shared_bytes(DataType::BF16), stream_shared_bytes(DataType::F32));
      TACO_CUDA_CHECK(cudaFuncSetAttribute(fn, cudaFuncAttributeMaxDynamicSharedMemorySize, int(most)));
      occ_stream_bf16_ = occupancy(gk_.decode_stream.fn, kGroupThreads, stream_shared_bytes(DataType::BF16));
      occ_stream_f32_ = occupancy(gk_.decode_stream.fn, kGroupThreads, stream_shared_bytes(DataType::F32));
    }
  } else {
    occ_scoped_ = occupancy(scoped_quant_kernel(), kScopedThreads);
  }
}

ChunkGeometry GpuQuant::geometry(int64_t rows, int64_t cols) const {
  if (geo_valid_ && geo_.rows == rows && geo_.cols == cols) return geo_;
  const QuantCodec cpu(spec_, name_);
  const QuantLayout L = cpu.layout(rows, cols);  // InputError for unusable shapes
  ChunkGeometry g{};
  g.rows = rows;
  g.cols = cols;
  g.numel = L.numel;
  g.nblocks = L.blocks;
  g.block_len = spec_.gran == Granularity::Group ? spec_.block : spec_.gran == Granularity::Row ? cols : L.numel;
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

void GpuQuant::launch(KernelFn fn, int occ, int threads, int64_t blocks_needed, const KernelParams& p,
                      cudaStream_t stream, const char* what, size_t shared_bytes) const {
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
  if (p.in) p.in = static_cast<const uint8_t*>(p.in) + size_t(c0 * p.in_stride) * dtype_bytes(p.in_type);
  if (p.wire_out) p.wire_out += c0 * p.wire_out_stride;
  for (int s = 0; s < p.nsrc; ++s) p.src[s] += c0 * p.wire_in_stride;
  if (p.out) p.out = static_cast<uint8_t*>(p.out) + size_t(c0 * p.out_stride) * dtype_bytes(p.out_type);
}
}  // namespace

void GpuQuant::launch_group(const GroupKernel& k, int occ, const KernelParams& p, cudaStream_t stream,
                            const char* what, size_t shared_bytes) const {
  // Whole chunks per launch, so that a launch's group indices fit the kernels' 32 bits. Vector
  // permissions carry over: with more than one chunk they already required aligned strides.
  TACO_REQUIRE_INPUT(p.geo.nblocks <= max_launch_groups_,
                     "GPU codec {}: a chunk of {} groups; the group kernels take at most {} per launch", name_,
                     p.geo.nblocks, max_launch_groups_);
  const int64_t per_launch = max_launch_groups_ / p.geo.nblocks;
  for (int64_t c0 = 0; c0 < p.chunks; c0 += per_launch) {
    KernelParams part = p;
    part.chunks = std::min(per_launch, p.chunks - c0);
    skip_chunks(part, c0);
    const int64_t groups = part.chunks * part.geo.nblocks;
    const int64_t warps = (groups + k.groups_per_warp - 1) / k.groups_per_warp;
    launch(k.fn, occ, kGroupThreads, (warps + kGroupThreads / 32 - 1) / (kGroupThreads / 32), part, stream, what,
           shared_bytes);
  }
}

size_t GpuQuant::stream_shared_bytes(DataType out_type) const {
  const GroupKernel& k = gk_.decode_stream;
  const StreamTileLayout t =
      stream_tile_layout(k.stream_tile_groups, k.stream_stages, k.stream_out_stages, spec_.block, rules_.scale_bytes,
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

void GpuQuant::encode(const void* in, DataType in_type, int64_t chunks, int64_t rows, int64_t cols,
                      uint8_t* wire, cudaStream_t stream, unsigned long long* stats) const {
  KernelParams p = base_params(chunks, rows, cols);
  p.in = in;
  p.in_type = in_type;
  p.wire_out = wire;
  p.stats = stats;
  const size_t es = dtype_bytes(in_type);
  p.in_vec16 = aligned(in, 16) && (chunks == 1 || (size_t(p.in_stride) * es) % 16 == 0);
  p.code_vec = aligned(wire, 16) && (chunks == 1 || p.geo.total % 16 == 0);
  p.scale_vec4 = aligned(wire + p.geo.scale_off, 4) && p.geo.aux_off % 4 == 0 && (chunks == 1 || p.geo.total % 4 == 0);
  if (group_ && reference_encode(stats)) {
    if (in_type == DataType::BF16)
      launch_group(gk_.encode_ref_bf16, occ_encode_ref_, p, stream, "group_encode_kernel<reference rules, bf16>");
    else launch_group(gk_.encode_ref_f32, occ_encode_ref_f32_, p, stream, "group_encode_kernel<reference rules, f32>");
  } else if (group_) {
    if (in_type == DataType::BF16) launch_group(gk_.encode_bf16, occ_encode_, p, stream, "group_encode_kernel<bf16>");
    else launch_group(gk_.encode_f32, occ_encode_f32_, p, stream, "group_encode_kernel<f32>");
  }
  else scoped_encode(p, 0, stream);
}

void GpuQuant::scoped_encode(KernelParams p, size_t scratch_off, cudaStream_t stream) const {
  const int64_t nb = p.chunks * p.geo.nblocks;
  const size_t amax_bytes = size_t(nb) * 4;
  // Per-block amax bits, then the scales in use, after anything the caller keeps in the scratch.
  ensure_scratch(scratch_off + 2 * amax_bytes);
  p.block_amax = reinterpret_cast<uint32_t*>(scratch_.as<uint8_t>() + scratch_off);
  p.block_scale = reinterpret_cast<float*>(scratch_.as<uint8_t>() + scratch_off + amax_bytes);
  TACO_CUDA_CHECK(cudaMemsetAsync(p.block_amax, 0, amax_bytes, stream));
  const int64_t segs = (p.geo.block_len + kStatsSegment - 1) / kStatsSegment;
  const int64_t warps = nb * segs;
  launch(scoped_stats_kernel(), occ_scoped_, kScopedThreads, (warps + 7) / 8, p, stream, "scoped_stats");
  launch(scoped_scales_kernel(), occ_scoped_, kScopedThreads, (nb + kScopedThreads - 1) / kScopedThreads, p,
         stream, "scoped_scales");
  const int64_t runs = p.chunks * ((p.geo.numel + kScopedRun - 1) / kScopedRun);
  launch(scoped_quant_kernel(), occ_scoped_, kScopedThreads, (runs + kScopedThreads - 1) / kScopedThreads, p,
         stream, "scoped_quant");
}

void GpuQuant::decode(const uint8_t* wire, int64_t chunks, int64_t rows, int64_t cols, void* out,
                      DataType out_type, cudaStream_t stream) const {
  decode_reduce({wire}, chunks, rows, cols, out, out_type, stream);
}

KernelParams GpuQuant::decode_params(const std::vector<const uint8_t*>& srcs, int64_t chunks, int64_t rows,
                                     int64_t cols, void* out, DataType out_type) const {
  TACO_REQUIRE_INPUT(!srcs.empty() && srcs.size() <= size_t(kMaxSources),
                     "GPU codec {}: decode-reduce takes 1..{} inputs, got {}", name_, kMaxSources, srcs.size());
  KernelParams p = base_params(chunks, rows, cols);
  p.nsrc = int32_t(srcs.size());
  bool cv = chunks == 1 || p.geo.total % 16 == 0, sv = p.geo.aux_off % 4 == 0 && (chunks == 1 || p.geo.total % 4 == 0);
  for (size_t i = 0; i < srcs.size(); ++i) {
    p.src[i] = srcs[i];
    cv = cv && aligned(srcs[i], 16);
    sv = sv && aligned(srcs[i] + p.geo.scale_off, 4);
  }
  p.code_vec = cv;
  p.scale_vec4 = sv;
  p.out = out;
  p.out_type = out_type;
  p.out_vec16 = aligned(out, 16) && (chunks == 1 || (size_t(p.out_stride) * dtype_bytes(out_type)) % 16 == 0);
  return p;
}

bool GpuQuant::streams_decode(const uint8_t* wire, int64_t chunks, int64_t rows, int64_t cols, const void* out,
                              DataType out_type) const {
  return group_ && chunks * rows * cols > small_decode_elems_ &&
         stream_decode_fits(decode_params({wire}, chunks, rows, cols, const_cast<void*>(out), out_type));
}

void GpuQuant::decode_reduce(const std::vector<const uint8_t*>& srcs, int64_t chunks, int64_t rows,
                             int64_t cols, void* out, DataType out_type, cudaStream_t stream) const {
  const KernelParams p = decode_params(srcs, chunks, rows, cols, out, out_type);
  if (group_) {
    if (chunks * p.geo.numel <= small_decode_elems_)
      launch_group(gk_.decode_reduce_small, occ_decode_small_, p, stream, "group_decode_reduce_kernel<small>");
    else if (stream_decode_fits(p))
      launch_group(gk_.decode_stream, out_type == DataType::BF16 ? occ_stream_bf16_ : occ_stream_f32_, p, stream,
                   "group_decode_stream_kernel", stream_shared_bytes(out_type));
    else if (p.nsrc == 1)
      launch_group(gk_.decode, occ_decode_, p, stream, "group_decode_reduce_kernel<one source>");
    else
      launch_group(gk_.decode_reduce, occ_decode_reduce_, p, stream, "group_decode_reduce_kernel");
  } else {
    const int64_t n = p.chunks * p.geo.numel;
    launch(scoped_decode_reduce_kernel(), occ_scoped_, kScopedThreads, (n + kScopedThreads - 1) / kScopedThreads, p,
           stream, "scoped_decode_reduce");
  }
}

void GpuQuant::decode_reduce_encode(const std::vector<const uint8_t*>& srcs, int64_t chunks, int64_t rows,
                                    int64_t cols, uint8_t* wire_out, bool round_bf16, cudaStream_t stream,
                                    unsigned long long* stats) const {
  TACO_REQUIRE_INPUT(!srcs.empty() && srcs.size() <= size_t(kMaxSources),
                     "GPU codec {}: decode-reduce takes 1..{} inputs, got {}", name_, kMaxSources, srcs.size());
  KernelParams p = base_params(chunks, rows, cols);
  p.nsrc = int32_t(srcs.size());
  p.round_sum_bf16 = round_bf16 ? 1 : 0;
  p.stats = stats;
  if (group_) {
    bool cv = aligned(wire_out, 16) && (chunks == 1 || p.geo.total % 16 == 0);
    bool sv = aligned(wire_out + p.geo.scale_off, 4) && p.geo.aux_off % 4 == 0 && (chunks == 1 || p.geo.total % 4 == 0);
    for (size_t i = 0; i < srcs.size(); ++i) {
      p.src[i] = srcs[i];
      cv = cv && aligned(srcs[i], 16);
      sv = sv && aligned(srcs[i] + p.geo.scale_off, 4);
    }
    p.code_vec = cv;
    p.scale_vec4 = sv;
    p.wire_out = wire_out;
    launch_group(gk_.decode_reduce_encode, occ_dre_, p, stream, "group_decode_reduce_encode_kernel");
    return;
  }
  // Row / tensor: the sum needs every block's amax first, so it goes through fp32 scratch.
  const size_t sum_bytes = size_t(chunks * p.geo.numel) * 4;
  ensure_scratch(sum_bytes + size_t(chunks * p.geo.nblocks) * 8);
  for (size_t i = 0; i < srcs.size(); ++i) p.src[i] = srcs[i];
  p.sum_f32 = scratch_.as<float>();
  const int64_t n = p.chunks * p.geo.numel;
  launch(scoped_decode_reduce_kernel(), occ_scoped_, kScopedThreads, (n + kScopedThreads - 1) / kScopedThreads, p,
         stream, "scoped_decode_reduce");
  KernelParams e = base_params(chunks, rows, cols);
  e.in = scratch_.get();
  e.in_type = DataType::F32;
  e.wire_out = wire_out;
  e.stats = stats;
  e.code_vec = aligned(wire_out, 16) && (chunks == 1 || p.geo.total % 16 == 0);
  scoped_encode(e, sum_bytes, stream);
}

void GpuQuant::decode_add_encode(const uint8_t* wire_in, const void* own, DataType own_type, int64_t rows,
                                 int64_t cols, uint8_t* wire_out, cudaStream_t stream) const {
  TACO_REQUIRE_INPUT(group_, "GPU codec {}: decode-add-encode is fused only for flat groups", name_);
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
  launch_group(gk_.decode_add_encode, occ_dae_, p, stream, "group_decode_add_encode_kernel");
}

}  // namespace taco::gpu
