#include "tensor_codec.hpp"

#include <cstring>

#include "codecs/quant_codec.hpp"
#include "codecs/structured/structured.hpp"
#include "collectives/sim_collectives.hpp"
#include "core/dtype.hpp"
#include "core/error.hpp"

#ifdef TACO_HAVE_CUDA
#include <cuda_runtime_api.h>

#include "cuda/codecs/codec_params.hpp"
#include "cuda/codecs/device_codec.hpp"
#include "cuda/codecs/elementwise_kernels.hpp"
#include "cuda/runtime/cuda_check.hpp"
#include "cuda/runtime/device.hpp"
#endif

namespace taco::py {

bool gpu_backend_built() {
#ifdef TACO_HAVE_CUDA
  return true;
#else
  return false;
#endif
}

namespace {

// The names the Python side uses, for messages.
const char* torch_name(DType t) {
  switch (t) {
    case DType::F32:
      return "float32";
    case DType::BF16:
      return "bfloat16";
    case DType::F16:
      return "float16";
    case DType::U8:
      return "uint8";
    default:
      return "?";
  }
}

// ---- host values ------------------------------------------------------------------------------

float host_value(const Buf& b, int64_t i) {
  switch (b.dtype) {
    case DType::F32:
      return static_cast<const float*>(b.data)[i];
    case DType::BF16:
      return bf16_to_float(static_cast<const uint16_t*>(b.data)[i]);
    case DType::F16:
      return fp16_to_float(static_cast<const uint16_t*>(b.data)[i]);
    default:
      break;
  }
  throw_error("host_value: not a value buffer");
}

// n values from element `off` as fp32: a pointer into the buffer when it is fp32, else a copy
// (bf16 and fp16 widen exactly).
struct HostF32 {
  const float* p = nullptr;
  std::vector<float> own;
};
HostF32 host_f32(const Buf& b, int64_t off, int64_t n) {
  HostF32 h;
  if (b.dtype == DType::F32) {
    h.p = static_cast<const float*>(b.data) + off;
    return h;
  }
  h.own.resize(size_t(n));
  for (int64_t i = 0; i < n; ++i) h.own[size_t(i)] = host_value(b, off + i);
  h.p = h.own.data();
  return h;
}

// Writes n fp32 values to the buffer from element `off`, rounding once to its type.
void store_host(const float* v, const Buf& out, int64_t off, int64_t n) {
  switch (out.dtype) {
    case DType::F32:
      std::memcpy(static_cast<float*>(out.data) + off, v, size_t(n) * 4);
      return;
    case DType::BF16: {
      auto* o = static_cast<uint16_t*>(out.data) + off;
      for (int64_t i = 0; i < n; ++i) o[i] = float_to_bf16(v[i]);
      return;
    }
    case DType::F16: {
      auto* o = static_cast<uint16_t*>(out.data) + off;
      for (int64_t i = 0; i < n; ++i) o[i] = float_to_fp16(v[i]);
      return;
    }
    default:
      break;
  }
  throw_error("store_host: not a value buffer");
}

uint8_t* bytes(const Buf& b) {
  return static_cast<uint8_t*>(b.data);
}

// A decode kernel's sources per launch (gpu::kMaxSources, the elementwise bf16 sum's 16 too).
constexpr size_t kMaxDeviceSources = 16;

#ifdef TACO_HAVE_CUDA
static_assert(kMaxDeviceSources == size_t(gpu::kMaxSources),
              "the decode kernels' source limit changed");

std::vector<const uint8_t*> wire_sources(const std::vector<Buf>& wires) {
  std::vector<const uint8_t*> src;
  for (const Buf& w : wires) src.push_back(static_cast<const uint8_t*>(w.data));
  return src;
}

// Makes `device` current for the scope of a call and restores the caller's device.
// Touches the device only when it differs: every CUDA runtime call is host time paid per launch.
struct DeviceGuard {
  int prev = -1;  // -1: the caller's device was already current
  explicit DeviceGuard(int device) {
    int cur = 0;
    TACO_CUDA_CHECK(cudaGetDevice(&cur));
    if (cur != device) {
      TACO_CUDA_CHECK(cudaSetDevice(device));
      prev = cur;
    }
  }
  ~DeviceGuard() {
    if (prev >= 0) cudaSetDevice(prev);
  }
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;
};

#endif

}  // namespace

// ---- construction -----------------------------------------------------------------------------

struct GpuState {
#ifdef TACO_HAVE_CUDA
  std::unique_ptr<gpu::DeviceCodec> codec;  // the spec's device codec on this device
#endif
};

TensorCodec::TensorCodec(const std::string& variant) {
  // InputError naming the bad token; the codec keeps the parsed spec (Codec::variant_spec)
  auto from_spec = [this](const std::string& v) { cpu_ = make_codec(parse_variant(v)); };
  auto s = structured::make_structured_codec(variant);
  if (!s) {
    from_spec(variant);
    name_ = cpu_->name();
    return;
  }
  name_ = s->name();
  const std::optional<Wrapped> w = s->wrapped();
  if (!w) {
    cpu_ = std::move(s);  // subspace, low rank, tensor train, TopK: CPU only
    return;
  }
  TACO_REQUIRE_INPUT(
      w->kind == FeedbackKind::ErrorFeedback,
      "variant '{}': AQ-SGD keeps a cache per training sample; taco study runs it on traces (in "
      "training use ef:<variant> or a plain variant)",
      variant);
  feedback_ = true;
  const std::string inner = w->inner->name();
  if (structured::is_structured_variant(inner))
    cpu_ = structured::make_structured_codec(inner);
  else
    from_spec(inner);
}

TensorCodec::~TensorCodec() = default;

std::string TensorCodec::gpu_unsupported_reason() const {
#ifdef TACO_HAVE_CUDA
  if (const VariantSpec* spec = cpu_->variant_spec()) return gpu::device_unsupported_reason(*spec);
  return "only block-scaled quantization codecs and bf16 run on CUDA tensors";
#else
  return "this build of taco has no GPU backend (built without nvcc)";
#endif
}

bool TensorCodec::range(CodecRange& r) const {
  const VariantSpec* spec = cpu_->variant_spec();
  if (spec) r = codec_range(*spec);
  return spec != nullptr;
}

int64_t TensorCodec::out_of_range(const Buf& x, const Shape& s) const {
  check_shape(s);
  check_values(x, s, "input");
  TACO_REQUIRE_INPUT(x.device == -1 && x.dtype == DType::F32,
                     "codec {}: out_of_range takes a host float32 array", name());
  const VariantSpec* spec = cpu_->variant_spec();
  if (!spec) return 0;
  int64_t n = 0;
  for (int64_t c = 0; c < s.chunks; ++c)
    n += out_of_range_blocks(*spec, static_cast<const float*>(x.data) + c * s.rows * s.cols, s.rows,
                             s.cols);
  return n;
}

int64_t TensorCodec::chunk_bytes(int64_t rows, int64_t cols) const {
  TACO_REQUIRE_INPUT(rows >= 1 && cols >= 1, "codec {}: empty shape [{}, {}]", name(), rows, cols);
  // A codec whose wire size depends on the data (TAH-Quant, low rank by energy, TT by tolerance)
  // gets slots of its bound: the encoded bytes, then zeros (Codec::decode takes them so).
  return cpu_->wire_size(rows, cols).bytes;  // InputError for a shape the codec cannot take
}

nlohmann::json TensorCodec::layout(int64_t rows, int64_t cols) const {
  nlohmann::json j;
  const VariantSpec* spec = cpu_->variant_spec();
  if (spec && spec->family == VariantSpec::Family::Quant) {
    const QuantLayout L = quant_layout(spec->quant, rows, cols, name());
    j = {{"codes", {{"offset", 0}, {"bytes", L.code_bytes}, {"count", L.ncodes}}},
         {"scales", {{"offset", L.scale_off}, {"bytes", L.scale_bytes}, {"blocks", L.blocks}}},
         {"aux", {{"offset", L.aux_off}, {"bytes", L.aux_bytes}}},
         {"tensor_scale", {{"offset", L.tensor_off}, {"bytes", L.tensor_bytes}}},
         {"total", L.total}};
  } else {
    j = {{"total", chunk_bytes(rows, cols)}};
  }
  return j;
}

// ---- argument checks (one message each, naming the codec) ---------------------------------------

void TensorCodec::check_shape(const Shape& s) const {
  TACO_REQUIRE_INPUT(s.chunks >= 1 && s.rows >= 1 && s.cols >= 1,
                     "codec {}: empty shape {} x [{}, {}]", name(), s.chunks, s.rows, s.cols);
  TACO_REQUIRE_INPUT(s.rows <= (int64_t(1) << 40) / s.cols / s.chunks,
                     "codec {}: shape {} x [{}, {}] is too large", name(), s.chunks, s.rows,
                     s.cols);
}

void TensorCodec::check_values(const Buf& b, const Shape& s, const char* what) const {
  if (b.dtype == DType::U8)
    throw_input_error("codec {}: {} must be float32, bfloat16 or float16, got uint8", name(), what);
  TACO_REQUIRE_INPUT(b.numel == s.numel(),
                     "codec {}: {} has {} elements, the call covers {} x [{}, {}] = {}", name(),
                     what, b.numel, s.chunks, s.rows, s.cols, s.numel());
}

void TensorCodec::check_wire(const Buf& b, const Shape& s, const char* what) const {
  TACO_REQUIRE_INPUT(b.dtype == DType::U8, "codec {}: {} must be a uint8 buffer, got {}", name(),
                     what, torch_name(b.dtype));
  const int64_t need = s.chunks * chunk_bytes(s.rows, s.cols);
  TACO_REQUIRE_INPUT(b.numel == need, "codec {}: {} has {} bytes, {} x [{}, {}] encodes to {}",
                     name(), what, b.numel, s.chunks, s.rows, s.cols, need);
}

int TensorCodec::common_device(const std::vector<const Buf*>& bufs) const {
  const int d = bufs.front()->device;
  for (const Buf* b : bufs)
    TACO_REQUIRE_INPUT(b->device == d,
                       "codec {}: buffers on different devices ({} and {}; -1 = CPU)", name(), d,
                       b->device);
  if (d >= 0) {
    const std::string why = gpu_unsupported_reason();
    TACO_REQUIRE_INPUT(
        why.empty(),
        "codec {}: no CUDA kernels for this variant ({}); move the tensor to the CPU or "
        "pick a GPU variant (taco.codec.variants())",
        name(), why);
  }
  return d;
}

int TensorCodec::sources_device(const std::vector<Buf>& wires, const Shape& s,
                                const Buf& dest) const {
  TACO_REQUIRE_INPUT(!wires.empty(), "codec {}: a decode needs at least one wire", name());
  std::vector<const Buf*> all{&dest};
  for (const Buf& w : wires) {
    check_wire(w, s, "a wire buffer");
    all.push_back(&w);
  }
  const int dev = common_device(all);
  TACO_REQUIRE_INPUT(dev < 0 || wires.size() <= kMaxDeviceSources,
                     "codec {}: at most {} wires per decode on CUDA, got {}", name(),
                     kMaxDeviceSources, wires.size());
  return dev;
}

GpuState& TensorCodec::gpu(int device) const {
  auto it = gpu_.find(device);
  if (it != gpu_.end()) return *it->second;
  auto st = std::make_unique<GpuState>();
#ifdef TACO_HAVE_CUDA
  DeviceGuard g(device);
  st->codec = gpu::make_device_codec(*cpu_->variant_spec());  // common_device() checked it
#else
  (void)device;
#endif
  return *gpu_.emplace(device, std::move(st)).first->second;
}

// ---- operations -------------------------------------------------------------------------------

void TensorCodec::encode(const Buf& x, const Shape& s, const Buf& wire, uintptr_t stream) const {
  check_shape(s);
  check_values(x, s, "the input");
  check_wire(wire, s, "the wire buffer");
  const int dev = common_device({&x, &wire});
  const int64_t per = s.rows * s.cols, cb = chunk_bytes(s.rows, s.cols);
  if (dev < 0) {
    const HostF32 v = host_f32(x, 0, s.numel());
    std::vector<uint8_t> w;
    for (int64_t c = 0; c < s.chunks; ++c) {
      cpu_->encode_into(v.p + c * per, s.rows, s.cols, w);
      TACO_ASSERT(int64_t(w.size()) <= cb, "codec {}: encoded {} bytes, its wire_size says {}",
                  name(), w.size(), cb);
      std::memcpy(bytes(wire) + c * cb, w.data(), w.size());
      std::memset(bytes(wire) + c * cb + w.size(), 0, size_t(cb) - w.size());
    }
    return;
  }
#ifdef TACO_HAVE_CUDA
  DeviceGuard g(dev);
  const auto st = reinterpret_cast<cudaStream_t>(stream);
  const gpu::DeviceCodec& q = *gpu(dev).codec;
  if (x.dtype == DType::F16) {  // the device codecs take f32 or bf16 values
    gpu::StreamScratch f(size_t(s.numel()) * 4, st);
    gpu::ew::convert(x.data, DType::F16, f.get(), DType::F32, s.numel(), st);
    q.encode(f.get(), DType::F32, s.chunks, s.rows, s.cols, bytes(wire), st);
  } else {
    q.encode(x.data, x.dtype, s.chunks, s.rows, s.cols, bytes(wire), st);
  }
#else
  (void)stream;
#endif
}

void TensorCodec::decode_reduce(const std::vector<Buf>& wires, const Shape& s, const Buf& out,
                                uintptr_t stream) const {
  check_shape(s);
  check_values(out, s, "the output");
  const int dev = sources_device(wires, s, out);
  const int64_t per = s.rows * s.cols, cb = chunk_bytes(s.rows, s.cols);
  if (dev < 0) {
    std::vector<float> acc(static_cast<size_t>(s.numel()));
    std::vector<WireView> chunk(wires.size());
    for (int64_t c = 0; c < s.chunks; ++c) {
      for (size_t i = 0; i < wires.size(); ++i) chunk[i] = {bytes(wires[i]) + c * cb, size_t(cb)};
      cpu_->decode_reduce(chunk, s.rows, s.cols, acc.data() + c * per);
    }
    store_host(acc.data(), out, 0, s.numel());
    return;
  }
#ifdef TACO_HAVE_CUDA
  DeviceGuard g(dev);
  const auto st = reinterpret_cast<cudaStream_t>(stream);
  const gpu::DeviceCodec& q = *gpu(dev).codec;
  const auto src = wire_sources(wires);
  if (out.dtype == DType::F16) {
    gpu::StreamScratch f(size_t(s.numel()) * 4, st);
    q.decode_reduce(src, s.chunks, s.rows, s.cols, f.get(), DType::F32, st);
    gpu::ew::convert(f.get(), DType::F32, out.data, DType::F16, s.numel(), st);
  } else {
    q.decode_reduce(src, s.chunks, s.rows, s.cols, out.data, out.dtype, st);
  }
#else
  (void)stream;
#endif
}

void TensorCodec::decode_reduce_encode(const std::vector<Buf>& wires, const Shape& s,
                                       const Buf& wire_out, uintptr_t stream) const {
  check_shape(s);
  check_wire(wire_out, s, "the output wire");
  const int dev = sources_device(wires, s, wire_out);
  if (dev < 0) {
    std::vector<float> sum(static_cast<size_t>(s.numel()));
    decode_reduce(wires, s, Buf{sum.data(), DType::F32, s.numel(), -1}, 0);
    encode(Buf{sum.data(), DType::F32, s.numel(), -1}, s, wire_out, 0);
    return;
  }
#ifdef TACO_HAVE_CUDA
  DeviceGuard g(dev);
  const auto st = reinterpret_cast<cudaStream_t>(stream);
  const auto src = wire_sources(wires);
  gpu(dev).codec->decode_reduce_encode(src, s.chunks, s.rows, s.cols, bytes(wire_out), false, st);
#else
  (void)stream;
#endif
}

void TensorCodec::decode_add_encode(const Buf& wire_in, const Buf& own, int64_t rows, int64_t cols,
                                    const Buf& wire_out, uintptr_t stream) const {
  const Shape s{1, rows, cols};
  check_shape(s);
  check_wire(wire_in, s, "the input wire");
  check_values(own, s, "the own chunk");
  check_wire(wire_out, s, "the output wire");
  const int dev = common_device({&wire_in, &own, &wire_out});
  const int64_t n = rows * cols;
  if (dev < 0) {
    const HostF32 own_f32 = host_f32(own, 0, n);
    std::vector<uint8_t> w;
    cpu_->decode_add_encode({bytes(wire_in), size_t(wire_in.numel)}, own_f32.p, rows, cols, w);
    std::memcpy(bytes(wire_out), w.data(), w.size());
    std::memset(bytes(wire_out) + w.size(), 0, size_t(wire_out.numel) - w.size());
    return;
  }
#ifdef TACO_HAVE_CUDA
  DeviceGuard g(dev);
  const auto st = reinterpret_cast<cudaStream_t>(stream);
  const gpu::DeviceCodec& q = *gpu(dev).codec;
  if (own.dtype == DType::F16) {  // the device codecs take f32 or bf16 values
    gpu::StreamScratch acc(size_t(n) * 4, st);
    decode_reduce({wire_in}, s, Buf{acc.get(), DType::F32, n, dev}, stream);
    gpu::ew::add_f32(own.data, own.dtype, acc.f32(), acc.f32(), n, false, st);
    encode(Buf{acc.get(), DType::F32, n, dev}, s, wire_out, stream);
    return;
  }
  std::unique_ptr<gpu::StreamScratch> hop;
  if (q.hop_needs_scratch()) hop = std::make_unique<gpu::StreamScratch>(size_t(n) * 4, st);
  q.decode_add_encode(bytes(wire_in), own.data, own.dtype, rows, cols, bytes(wire_out),
                      hop ? hop->f32() : nullptr, st);
#else
  (void)stream;
#endif
}

void TensorCodec::encode_ef(const Buf& x, const Buf& residual, const Shape& s, const Buf& wire,
                            uintptr_t stream) const {
  check_shape(s);
  check_values(x, s, "the input");
  TACO_REQUIRE_INPUT(residual.dtype == DType::F32,
                     "codec {}: the error-feedback residual must be float32, got {}", name(),
                     torch_name(residual.dtype));
  check_values(residual, s, "the residual");
  check_wire(wire, s, "the wire buffer");
  const int dev = common_device({&x, &residual, &wire});
  const int64_t n = s.numel();
  if (dev < 0) {
    // The study's ef: step (docs/variants.md): non-finite inputs and decodes count as 0.
    std::vector<float> v(static_cast<size_t>(n)), d(static_cast<size_t>(n));
    float* e = static_cast<float*>(residual.data);
    auto fin = [](float f) { return (float_bits(f) & 0x7f800000u) != 0x7f800000u ? f : 0.0f; };
    for (int64_t i = 0; i < n; ++i) v[size_t(i)] = fin(host_value(x, i)) + e[i];
    const Buf vb{v.data(), DType::F32, n, -1};
    encode(vb, s, wire, 0);
    decode_reduce({wire}, s, Buf{d.data(), DType::F32, n, -1}, 0);
    for (int64_t i = 0; i < n; ++i) e[i] = v[size_t(i)] - fin(d[size_t(i)]);
    return;
  }
#ifdef TACO_HAVE_CUDA
  DeviceGuard g(dev);
  const auto st = reinterpret_cast<cudaStream_t>(stream);
  float* e = static_cast<float*>(residual.data);
  if (x.dtype != DType::F16) {  // the device codec's step (GpuQuant: one fused kernel)
    gpu(dev).codec->encode_ef(x.data, x.dtype, e, s.chunks, s.rows, s.cols, bytes(wire), st);
    return;
  }
  // fp16 input: the same step from elementwise kernels
  gpu::StreamScratch v(size_t(n) * 4, st), d(size_t(n) * 4, st);
  gpu::ew::add_f32(x.data, x.dtype, e, v.f32(), n, true, st);
  const Buf vb{v.get(), DType::F32, n, dev};
  encode(vb, s, wire, stream);
  decode_reduce({wire}, s, Buf{d.get(), DType::F32, n, dev}, stream);
  gpu::ew::sub_f32(v.f32(), d.f32(), e, n, true, st);
#else
  (void)stream;
#endif
}

// ---- listings and the simulation oracle ---------------------------------------------------------

std::vector<VariantInfo> variant_infos() {
  std::vector<VariantInfo> out;
  for (const Preset& p : preset_table()) {
    VariantInfo v{p.name, p.definition, p.description, false};
#ifdef TACO_HAVE_CUDA
    const VariantSpec s = parse_variant(p.name);
    v.gpu = gpu::device_unsupported_reason(s).empty();
#endif
    out.push_back(std::move(v));
  }
  for (const auto& p : structured::structured_presets())
    out.push_back({p.name, p.definition, p.description, false});
  return out;
}

comm::RankPlan collective_plan(const TensorCodec& codec, const std::string& coll,
                               const std::string& algo, int nranks, int rank, int64_t rows,
                               int64_t cols, int64_t elem_bytes) {
  TACO_REQUIRE_INPUT(nranks >= 1 && rank >= 0 && rank < nranks, "collective_plan: rank {} of {}",
                     rank, nranks);
  comm::PlanRequest rq;
  rq.coll = parse_coll(coll, "collective");
  if (rq.coll != Coll::AllReduce) {
    TACO_REQUIRE_INPUT(algo == "auto" || algo == "direct",
                       "{}: only all_reduce has a choice of algorithm, got '{}'", coll, algo);
    rq.algo = Algo::Direct;
  } else if (algo == "auto") {
    rq.algo = auto_allreduce_algo(double(rows) * double(cols) * double(elem_bytes), nranks);
  } else {
    rq.algo = parse_allreduce_algo(algo);
  }
  rq.nranks = nranks;
  rq.rows = rows;
  rq.cols = cols;
  // The codec's own wire sizes; one piece, so where a chunk could be cut does not matter.
  comm::WireModel wire;
  wire.name = codec.name();
  wire.bytes = [&codec](int64_t r, int64_t c) { return codec.chunk_bytes(r, c); };
  rq.wire = &wire;
  return comm::build_plan(rq, rank);
}

std::vector<std::vector<float>> simulate_collective(const std::string& variant,
                                                    const std::string& algorithm,
                                                    const std::vector<const float*>& inputs,
                                                    int64_t rows, int64_t cols) {
  TACO_REQUIRE_INPUT(!inputs.empty(), "simulate_collective: no inputs");
  const auto codec = make_codec(variant);
  const sim::SimulatedCommunicator comm(int(inputs.size()), *codec);
  return comm.run(sim::parse_collective(algorithm), inputs, rows, cols).outputs;
}

}  // namespace taco::py
