#pragma once
// One interface for every codec. A codec turns a row-major [rows, cols] block of floats into
// the exact bytes that would cross the network (element codes, scales, any metadata) and
// back. The CPU implementations behind this interface are the project's ground truth: the GPU
// kernels in cuda/ must reproduce their bytes bit for bit.
//
// Bit-exactness rules every CPU reference follows (and every GPU kernel mirrors):
//  * float32 arithmetic only, no fused multiply-add (built with -ffp-contract=off; the CUDA
//    side with --fmad=false); divisions and square roots are IEEE correctly rounded.
//  * Sums over a group of G elements use a fixed order, the order of a warp that owns the
//    group: L = min(32, G) lanes, lane l owns the S = G/L consecutive elements
//    [l*S, (l+1)*S); each lane sums its elements left to right, then the lane partials are
//    combined with an xor butterfly, strides L/2, L/4, ..., 1 (p[l] = p[l] + p[l ^ s]).
//    Maxima are order-free.
//  * The Walsh-Hadamard transform of size G runs butterfly stages (a, b) -> (a + b, a - b)
//    with strides 1, 2, 4, ..., G/2 in that order, then multiplies by the float constant
//    1/sqrt(G) (computed as float(1.0 / std::sqrt(double(G)))).
//  * NaN payloads and NaN signs are not part of the contract: where an output is NaN, any NaN
//    matches (the GPU's arithmetic writes canonical NaNs).
#include <cstddef>
#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace taco {

// Counters an encoder fills while it runs (for saturation_frac and NaN/Inf reporting).
struct EncodeStats {
  int64_t saturated = 0;  // element codes at the format's largest magnitude
  int64_t nonfinite = 0;  // NaN/Inf inputs (codecs map them to 0, the TACO policy)
};

// The wire a codec writes for a [rows, cols] block: `bytes` exactly, or (exact == false: the size
// depends on the data, as TAH-Quant's flagged tiles, low rank by energy and tensor trains by
// tolerance) at most `bytes`.
struct WireSize {
  int64_t bytes = 0;
  bool exact = true;
};

// Bytes another call wrote: one encoded [rows, cols] block.
struct WireView {
  const uint8_t* data = nullptr;
  size_t size = 0;
};

struct VariantSpec;  // codecs/variant.hpp
class Codec;

// ef: and aqsgd: wrap another codec: they write its bytes, and their state (residuals, per-sample
// caches) lives with the caller (study/error_feedback.hpp, taco.dist), keyed by stream.
enum class FeedbackKind : uint8_t { ErrorFeedback, AqSgd };
std::string_view feedback_kind_name(FeedbackKind k);  // "ef", "aqsgd"

// What a wrapper codec is: its kind and the codec it runs.
struct Wrapped {
  FeedbackKind kind = FeedbackKind::ErrorFeedback;
  const Codec* inner = nullptr;
};

// Every operation is const and may be called from several threads at once (the study runs
// tensors and simulated ranks in parallel): the CPU codecs keep no state or guard it (the
// subspace basis cache), the GPU codec serializes its calls.
class Codec {
 public:
  virtual ~Codec() = default;

  // Canonical variant string; make_codec(name()) rebuilds an identical codec.
  virtual const std::string& name() const = 0;
  // Every parameter, for results.json and provenance.
  virtual nlohmann::json params() const = 0;
  // The parsed variant the codec was built from (quantization, TAH-Quant and bf16 families), so
  // that what callers need to know about it comes from the one parse; nullptr otherwise
  // (structured codecs).
  virtual const VariantSpec* variant_spec() const { return nullptr; }
  // A wrapper (ef:, aqsgd:) says what it wraps; every other codec returns nullopt. With
  // variant_spec(), this is how callers learn what a codec is (never by its dynamic type).
  virtual std::optional<Wrapped> wrapped() const { return std::nullopt; }

  // Encodes x (rows x cols, row-major) into the wire buffer. Throws InputError when the shape
  // does not suit the codec (e.g. a tile codec on rows not divisible by the tile).
  virtual std::vector<uint8_t> encode(const float* x, int64_t rows, int64_t cols,
                                      EncodeStats* stats = nullptr) const = 0;
  // encode() into `wire` (resized to the encoded size), reusing its memory: repeated calls of
  // one size then cost no allocation or page faults. Same bytes as encode(). Codecs that do not
  // override it fall back to encode().
  virtual void encode_into(const float* x, int64_t rows, int64_t cols, std::vector<uint8_t>& wire,
                           EncodeStats* stats = nullptr) const {
    wire = encode(x, rows, cols, stats);
  }
  // What encode() writes for the shape, known without encoding (so buffers, plans and byte
  // counts need no probe encode); the same InputError as encode() for a shape it cannot take.
  virtual WireSize wire_size(int64_t rows, int64_t cols) const = 0;
  // Decodes a buffer that encode() produced for the same shape into out (rows x cols).
  // Throws InputError if nbytes is not what this codec writes for that shape. A codec whose
  // wire_size() is a bound also takes its wire padded with zero bytes to that bound (a transport
  // of fixed-size slots, taco.codec, carries it so): check_wire_bytes().
  virtual void decode(const uint8_t* wire, size_t nbytes, int64_t rows, int64_t cols,
                      float* out) const = 0;

  // The operations of a compressed collective on one [rows, cols] block (collectives/), defined
  // by encode() and decode(): the implementations here do exactly what the comments say, and a
  // backend with fused kernels (the GPU codec) overrides them with the same bytes.
  //
  // out = decode(wires[0]) + decode(wires[1]) + ..., added left to right in fp32 (the order
  // every rank uses, so ranks that reduce the same wires get the same bits).
  virtual void decode_reduce(const std::vector<WireView>& wires, int64_t rows, int64_t cols,
                             float* out) const;
  // wire_out = encode(s), s the sum decode_reduce() computes; round_bf16: s is first rounded to
  // bf16 (nearest even), as the owner of a bf16 all-reduce's shard holds it.
  virtual void decode_reduce_encode(const std::vector<WireView>& wires, int64_t rows, int64_t cols,
                                    bool round_bf16, std::vector<uint8_t>& wire_out,
                                    EncodeStats* stats = nullptr) const;
  // wire_out = encode(decode(wire_in) + own), the sum in fp32: one hop of a ring all-reduce.
  virtual void decode_add_encode(WireView wire_in, const float* own, int64_t rows, int64_t cols,
                                 std::vector<uint8_t>& wire_out,
                                 EncodeStats* stats = nullptr) const;
};

// decode()'s size check for a wire whose encoded size is `exact` bytes: nbytes is exact, or the
// codec's wire_size() bound with the bytes past `exact` zero; InputError naming `codec` otherwise.
void check_wire_bytes(const std::string& codec, const uint8_t* wire, size_t nbytes, int64_t exact,
                      const WireSize& bound);

// Builds a codec from a preset name ("taco", "fp8-g128", ...) or the variant grammar
// documented in codecs/variant.hpp. Throws InputError naming the bad token.
std::unique_ptr<Codec> make_codec(const std::string& variant);
// The same from a spec parsed once by the caller (quantization, TAH-Quant and bf16 families).
std::unique_ptr<Codec> make_codec(const VariantSpec& spec);

// Preset names with one-line descriptions, in a stable order (for --help and --list).
std::vector<std::pair<std::string, std::string>> codec_presets();

}  // namespace taco
