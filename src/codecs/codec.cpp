#include "codecs/codec.hpp"

#include "core/dtype.hpp"
#include "core/error.hpp"

namespace taco {

std::string_view feedback_kind_name(FeedbackKind k) {
  switch (k) {
    case FeedbackKind::ErrorFeedback:
      return "ef";
    case FeedbackKind::AqSgd:
      return "aqsgd";
  }
  throw_error("unknown feedback kind {}", int(k));
}

void check_wire_bytes(const std::string& codec, const uint8_t* wire, size_t nbytes, int64_t exact,
                      const WireSize& bound) {
  const int64_t n = int64_t(nbytes);
  if (n == exact) return;
  TACO_REQUIRE_INPUT(
      !bound.exact && n == bound.bytes,
      "codec {}: wire buffer has {} bytes, but what it encodes takes {}{}", codec, nbytes, exact,
      bound.exact ? std::string() : fmt::format(" (or {} padded to the bound)", bound.bytes));
  for (int64_t i = exact; i < n; ++i)
    TACO_REQUIRE_INPUT(wire[i] == 0, "codec {}: padding byte {} of the wire is not 0", codec, i);
}

void Codec::decode_reduce(const std::vector<WireView>& wires, int64_t rows, int64_t cols,
                          float* out) const {
  TACO_REQUIRE_INPUT(!wires.empty(), "codec {}: decode-reduce of no wires", name());
  const size_t n = size_t(rows * cols);
  decode(wires[0].data, wires[0].size, rows, cols, out);
  std::vector<float> tmp(wires.size() > 1 ? n : 0);
  for (size_t w = 1; w < wires.size(); ++w) {
    decode(wires[w].data, wires[w].size, rows, cols, tmp.data());
    for (size_t i = 0; i < n; ++i) out[i] = out[i] + tmp[i];
  }
}

void Codec::decode_reduce_encode(const std::vector<WireView>& wires, int64_t rows, int64_t cols,
                                 bool round_bf16, std::vector<uint8_t>& wire_out,
                                 EncodeStats* stats) const {
  std::vector<float> sum(size_t(rows * cols));
  decode_reduce(wires, rows, cols, sum.data());
  if (round_bf16)
    for (float& v : sum) v = bf16_to_float(float_to_bf16(v));
  encode_into(sum.data(), rows, cols, wire_out, stats);
}

void Codec::decode_add_encode(WireView wire_in, const float* own, int64_t rows, int64_t cols,
                              std::vector<uint8_t>& wire_out, EncodeStats* stats) const {
  std::vector<float> sum(size_t(rows * cols));
  decode(wire_in.data, wire_in.size, rows, cols, sum.data());
  for (size_t i = 0; i < sum.size(); ++i) sum[i] = sum[i] + own[i];
  encode_into(sum.data(), rows, cols, wire_out, stats);
}

}  // namespace taco
