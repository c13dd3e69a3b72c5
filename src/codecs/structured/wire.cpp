#include "codecs/structured/wire.hpp"

#include "core/dtype.hpp"
#include "formats/fp8.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>

namespace taco::structured {

std::string_view num_format_name(NumFormat f) {
  switch (f) {
    case NumFormat::F32:
      return "f32";
    case NumFormat::BF16:
      return "bf16";
    case NumFormat::E4M3:
      return "e4m3";
  }
  throw_error("unknown number format {}", int(f));
}

NumFormat parse_num_format(std::string_view s, const std::string& context) {
  std::string l(s);
  std::transform(l.begin(), l.end(), l.begin(),
                 [](unsigned char c) { return char(std::tolower(c)); });
  if (l == "f32" || l == "fp32") return NumFormat::F32;
  if (l == "bf16") return NumFormat::BF16;
  if (l == "e4m3" || l == "fp8") return NumFormat::E4M3;
  throw_input_error("{}: unknown number format '{}' (f32, bf16, e4m3)", context, s);
}

int num_format_bytes(NumFormat f) {
  switch (f) {
    case NumFormat::F32:
      return 4;
    case NumFormat::BF16:
      return 2;
    case NumFormat::E4M3:
      return 1;
  }
  throw_error("unknown number format {}", int(f));
}

float encode_strided(const float* v, int64_t n, int64_t stride, NumFormat f, uint8_t* out,
                     int64_t* saturated) {
  switch (f) {
    case NumFormat::F32:
      for (int64_t i = 0; i < n; ++i) {
        const uint32_t u = float_bits(v[i * stride]);
        out[4 * i] = uint8_t(u);
        out[4 * i + 1] = uint8_t(u >> 8);
        out[4 * i + 2] = uint8_t(u >> 16);
        out[4 * i + 3] = uint8_t(u >> 24);
      }
      return 1.0f;
    case NumFormat::BF16:
      for (int64_t i = 0; i < n; ++i) {
        const uint16_t h = float_to_bf16(v[i * stride]);
        out[2 * i] = uint8_t(h);
        out[2 * i + 1] = uint8_t(h >> 8);
      }
      return 1.0f;
    case NumFormat::E4M3: {
      float amax = 0;
      for (int64_t i = 0; i < n; ++i) amax = std::max(amax, std::fabs(v[i * stride]));
      const float s = amax / kE4M3Max;
      int64_t sat = 0;
      for (int64_t i = 0; i < n; ++i) {
        const uint8_t c = s > 0 ? float_to_fp8_e4m3(v[i * stride] / s, true) : uint8_t(0);
        out[i] = c;
        sat += (c & 0x7f) == 0x7e;
      }
      if (saturated) *saturated += sat;
      return s;
    }
  }
  throw_error("unknown number format {}", int(f));
}

float encode_values(const float* v, int64_t n, NumFormat f, uint8_t* out, int64_t* saturated) {
  return encode_strided(v, n, 1, f, out, saturated);
}

void decode_strided(const uint8_t* in, int64_t n, NumFormat f, float scale, float* out,
                    int64_t stride) {
  switch (f) {
    case NumFormat::F32:
      for (int64_t i = 0; i < n; ++i)
        out[i * stride] =
            bits_float(uint32_t(in[4 * i]) | (uint32_t(in[4 * i + 1]) << 8) |
                       (uint32_t(in[4 * i + 2]) << 16) | (uint32_t(in[4 * i + 3]) << 24));
      return;
    case NumFormat::BF16:
      for (int64_t i = 0; i < n; ++i)
        out[i * stride] = bf16_to_float(uint16_t(in[2 * i] | (in[2 * i + 1] << 8)));
      return;
    case NumFormat::E4M3:
      for (int64_t i = 0; i < n; ++i) out[i * stride] = fp8_e4m3_to_float(in[i]) * scale;
      return;
  }
  throw_error("unknown number format {}", int(f));
}

void decode_values(const uint8_t* in, int64_t n, NumFormat f, float scale, float* out) {
  decode_strided(in, n, f, scale, out, 1);
}

void write_header(ByteWriter& w, const Header& h) {
  w.u8(h.magic);
  w.u8(uint8_t(h.format));
  w.u16(h.a);
  w.u32(h.b);
}

Header read_header(ByteReader& r, uint8_t magic, const std::string& codec) {
  Header h;
  h.magic = r.u8();
  TACO_REQUIRE_INPUT(h.magic == magic,
                     "codec {}: wire buffer does not start with '{}' (found byte {})", codec,
                     char(magic), int(h.magic));
  const uint8_t f = r.u8();
  TACO_REQUIRE_INPUT(f <= uint8_t(NumFormat::E4M3), "codec {}: unknown number format byte {}",
                     codec, int(f));
  h.format = NumFormat(f);
  h.a = r.u16();
  h.b = r.u32();
  return h;
}

int64_t sanitize(const float* x, int64_t n, std::vector<float>& out) {
  out.resize(size_t(n));
  int64_t bad = 0;
#pragma omp parallel for schedule(static) reduction(+ : bad) if (n >= (1 << 16))
  for (int64_t i = 0; i < n; ++i) {
    const bool fin = std::isfinite(x[i]);
    out[size_t(i)] = fin ? x[i] : 0.0f;
    bad += !fin;
  }
  return bad;
}

int64_t checked_numel(const std::string& codec, int64_t rows, int64_t cols) {
  TACO_REQUIRE_INPUT(rows > 0 && cols > 0 && rows <= (int64_t(1) << 40) / cols,
                     "codec {}: unusable shape [{}, {}]", codec, rows, cols);
  return rows * cols;
}

}  // namespace taco::structured
