#pragma once
// Byte-level building blocks shared by the structured codecs: a little-endian writer/reader,
// the 8-byte header, and the number formats factors and coefficients travel in.
//
// Header (8 bytes, little-endian), first in every subspace / lowrank / tt buffer:
//   byte 0     magic: 'S' subspace, 'L' lowrank, 'T' tt
//   byte 1     number format of the payload (NumFormat: 0 f32, 1 bf16, 2 e4m3)
//   bytes 2-3  u16: tt: the order D; otherwise 0
//   bytes 4-7  u32: subspace: k; lowrank: the rank r; tt: 0
//
// Payload formats:
//   f32   4 bytes per value, IEEE little-endian (exact)
//   bf16  2 bytes per value, round to nearest even (dtype.hpp)
//   e4m3  1 byte per value, FP8 E4M3 saturating RNE (formats/fp8.hpp) of v / s, where each
//         vector (a row of coefficients, a factor column) has one fp32 scale s = amax / 448
//         (amax over the vector; s = 0 for an all-zero vector, whose codes are all 0).
//         Decode: fp8_value(code) * s.
#include "core/error.hpp"

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

namespace taco::structured {

enum class NumFormat : uint8_t { F32 = 0, BF16 = 1, E4M3 = 2 };

std::string_view num_format_name(NumFormat f);  // "f32", "bf16", "e4m3"
NumFormat parse_num_format(std::string_view s,
                           const std::string& context);  // also "fp8"; InputError
int num_format_bytes(NumFormat f);                       // 4, 2, 1
inline constexpr float kE4M3Max = 448.0f;

// Encodes n values (non-finite values must already be zeroed) at out (n * bytes). For E4M3 the
// scale is computed, returned and not written (callers place scales). saturated counts E4M3
// codes at +-448.
float encode_values(const float* v, int64_t n, NumFormat f, uint8_t* out, int64_t* saturated);
// Decodes n values; scale is used only for E4M3.
void decode_values(const uint8_t* in, int64_t n, NumFormat f, float scale, float* out);

// Strided variants: value i is v[i * stride] (a column of a row-major matrix).
float encode_strided(const float* v, int64_t n, int64_t stride, NumFormat f, uint8_t* out,
                     int64_t* saturated);
void decode_strided(const uint8_t* in, int64_t n, NumFormat f, float scale, float* out,
                    int64_t stride);

class ByteWriter {
 public:
  explicit ByteWriter(size_t reserve = 0) { buf_.reserve(reserve); }
  void u8(uint8_t v) { buf_.push_back(v); }
  void u16(uint16_t v) {
    u8(uint8_t(v));
    u8(uint8_t(v >> 8));
  }
  void u32(uint32_t v) {
    u16(uint16_t(v));
    u16(uint16_t(v >> 16));
  }
  void u64(uint64_t v) {
    u32(uint32_t(v));
    u32(uint32_t(v >> 32));
  }
  void f32(float v) {
    uint32_t u;
    std::memcpy(&u, &v, 4);
    u32(u);
  }
  // Makes room for n bytes and returns where they go (valid until the next write).
  uint8_t* extend(size_t n) {
    const size_t at = buf_.size();
    buf_.resize(at + n);
    return buf_.data() + at;
  }
  size_t size() const { return buf_.size(); }
  std::vector<uint8_t> take() { return std::move(buf_); }

 private:
  std::vector<uint8_t> buf_;
};

class ByteReader {
 public:
  ByteReader(const uint8_t* p, size_t n, std::string codec)
      : p_(p), n_(n), codec_(std::move(codec)) {}
  uint8_t u8() { return *need(1); }
  uint16_t u16() {
    const uint8_t* q = need(2);
    return uint16_t(q[0] | (q[1] << 8));
  }
  uint32_t u32() {
    const uint8_t* q = need(4);
    return uint32_t(q[0]) | (uint32_t(q[1]) << 8) | (uint32_t(q[2]) << 16) | (uint32_t(q[3]) << 24);
  }
  uint64_t u64() {
    const uint64_t lo = u32();
    return lo | (uint64_t(u32()) << 32);
  }
  float f32() {
    const uint32_t u = u32();
    float f;
    std::memcpy(&f, &u, 4);
    return f;
  }
  const uint8_t* bytes(size_t n) { return need(n); }
  size_t remaining() const { return n_ - at_; }
  size_t position() const { return at_; }

 private:
  const uint8_t* need(size_t n) {
    TACO_REQUIRE_INPUT(n <= n_ - at_,
                       "codec {}: wire buffer of {} bytes ends early (needs {} more at offset {})",
                       codec_, n_, n, at_);
    const uint8_t* q = p_ + at_;
    at_ += n;
    return q;
  }
  const uint8_t* p_;
  size_t n_, at_ = 0;
  std::string codec_;
};

inline constexpr size_t kHeaderBytes = 8;
inline constexpr uint8_t kMagicSubspace = 'S', kMagicLowRank = 'L', kMagicTT = 'T';

struct Header {
  uint8_t magic = 0;
  NumFormat format = NumFormat::F32;
  uint16_t a = 0;  // tt: order
  uint32_t b = 0;  // subspace: k; lowrank: rank
};
void write_header(ByteWriter& w, const Header& h);
// Reads and validates the magic and format byte; InputError naming the codec otherwise.
Header read_header(ByteReader& r, uint8_t magic, const std::string& codec);

// Copies x with NaN/Inf replaced by 0 (the TACO policy) and returns how many were replaced.
int64_t sanitize(const float* x, int64_t n, std::vector<float>& out);

// Shape check shared by the codecs: rows, cols > 0 and numel <= 2^40.
int64_t checked_numel(const std::string& codec, int64_t rows, int64_t cols);

}  // namespace taco::structured
