#include "core/error.hpp"
#include "formats/fp8.hpp"
#include "io/readers.hpp"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

// The readers copy little-endian file bytes straight into host floats.
static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "taco's readers assume a little-endian host");

namespace taco {

uint64_t checked_numel(const std::vector<int64_t>& shape, size_t elem_size,
                       const std::string& what) {
  TACO_REQUIRE_INPUT(shape.size() <= kMaxRank, "{}: {} dimensions (at most {} are supported)", what,
                     shape.size(), kMaxRank);
  // Bound numel * 8 (the widest element, and the float copy) well inside int64 and size_t.
  constexpr uint64_t kMaxBytes = uint64_t(1) << 62;
  const uint64_t width = elem_size > 4 ? elem_size : 4;
  uint64_t n = 1;
  bool overflow = false;
  for (int64_t d : shape) {
    TACO_REQUIRE_INPUT(d >= 0, "{}: negative dimension {} in shape {}", what, d,
                       shape_string(shape));
    if (d == 0) return 0;  // an empty tensor whatever the other dimensions say
    if (n > kMaxBytes / width / uint64_t(d)) overflow = true;
    if (!overflow) n *= uint64_t(d);
  }
  TACO_REQUIRE_INPUT(!overflow, "{}: shape {} is too large (element count overflows)", what,
                     shape_string(shape));
  return n;
}

uint64_t memory_limit_from_env() {
  const char* env = std::getenv("TACO_MEMORY_LIMIT");
  if (!env || !*env) return 0;
  const std::string s = env;
  size_t i = 0;
  while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i]))) ++i;
  std::string unit = s.substr(i);
  for (char& c : unit) c = char(std::toupper(static_cast<unsigned char>(c)));
  const int shift = unit.empty() || unit == "B" ? 0
                    : unit == "K"               ? 10
                    : unit == "M"               ? 20
                    : unit == "G"               ? 30
                                                : -1;
  TACO_REQUIRE_INPUT(i > 0 && i <= 15 && shift >= 0,
                     "TACO_MEMORY_LIMIT='{}': expected a size like 8G, 512M or 1000000",
                     printable(s));
  return std::stoull(s.substr(0, i)) << shift;
}

namespace {
std::string human_bytes(uint64_t b) {
  if (b >= (uint64_t(1) << 30))
    return fmt::format("{:.1f} GiB", double(b) / double(uint64_t(1) << 30));
  if (b >= (uint64_t(1) << 20))
    return fmt::format("{:.1f} MiB", double(b) / double(uint64_t(1) << 20));
  return fmt::format("{} bytes", b);
}
}  // namespace

void check_expansion(uint64_t numel, uint64_t stored_bytes, const std::string& what) {
  const uint64_t need = numel * sizeof(float);  // numel is bounded by checked_numel
  if (const uint64_t limit = memory_limit_from_env(); limit > 0) {
    TACO_REQUIRE_INPUT(need <= limit,
                       "{}: its values take {} in memory, over TACO_MEMORY_LIMIT ({})", what,
                       human_bytes(need), human_bytes(limit));
    return;
  }
  const uint64_t allowed = std::max(kExpansionFloor, stored_bytes > UINT64_MAX / kMaxExpansion
                                                         ? UINT64_MAX
                                                         : stored_bytes * kMaxExpansion);
  TACO_REQUIRE_INPUT(
      need <= allowed,
      "{}: {} of values from {} stored (more than {}x): refused to bound memory; set "
      "TACO_MEMORY_LIMIT (e.g. 16G) to read tensors up to that size",
      what, human_bytes(need), human_bytes(stored_bytes), kMaxExpansion);
}

void require_nonempty(uint64_t numel, const std::vector<int64_t>& shape, const std::string& what) {
  TACO_REQUIRE_INPUT(numel > 0, "{}: empty tensor (shape {}, 0 elements)", what,
                     shape_string(shape));
}

namespace {

// Walks blocks from the end: a block's raw elements are copied out first (to a small buffer
// that stays in cache), then widened into place. Element i's float lands at bytes [4i, 4i+4),
// never below the raw bytes of the elements before the block, so nothing unread is overwritten;
// the separate buffer also lets the compiler vectorize the widening loop.
template <typename Raw, typename Widen>
void widen_backwards(float* buf, size_t n, Widen widen) {
  constexpr size_t kBlock = 4096;
  Raw raw[kBlock];
  const auto* bytes = reinterpret_cast<const unsigned char*>(buf);
  size_t end = n;
  while (end > 0) {
    const size_t begin = end > kBlock ? end - kBlock : 0;
    std::memcpy(raw, bytes + begin * sizeof(Raw), (end - begin) * sizeof(Raw));
    for (size_t i = 0; i < end - begin; ++i) buf[begin + i] = widen(raw[i]);
    end = begin;
  }
}

// Every value of a small integer code, decoded once.
template <typename Raw>
std::vector<float> decode_table(float (*decode)(Raw)) {
  std::vector<float> table(size_t(1) << (8 * sizeof(Raw)));
  for (size_t code = 0; code < table.size(); ++code) table[code] = decode(Raw(code));
  return table;
}

}  // namespace

void widen_in_place(DType src, float* buf, size_t n) {
  switch (src) {
    case DType::F32:
      return;  // already floats (little-endian host)
    // Lambdas (not function pointers) so that the conversion is inlined into the loop.
    case DType::BF16:
      return widen_backwards<uint16_t>(buf, n, [](uint16_t h) { return bf16_to_float(h); });
    case DType::F16: {
      // fp16_to_float is exact but branchy; for large tensors a table of all 65536 values
      // (built from it, so equally exact) is several times faster.
      if (n < (size_t(1) << 16))
        return widen_backwards<uint16_t>(buf, n, [](uint16_t h) { return fp16_to_float(h); });
      const std::vector<float> table = decode_table<uint16_t>(fp16_to_float);
      return widen_backwards<uint16_t>(buf, n, [&table](uint16_t h) { return table[h]; });
    }
    case DType::F8E4M3: {
      const std::vector<float> table = decode_table<uint8_t>(fp8_e4m3_to_float);
      return widen_backwards<uint8_t>(buf, n, [&table](uint8_t b) { return table[b]; });
    }
    case DType::F8E5M2: {
      const std::vector<float> table = decode_table<uint8_t>(fp8_e5m2_to_float);
      return widen_backwards<uint8_t>(buf, n, [&table](uint8_t b) { return table[b]; });
    }
    case DType::F64:
    case DType::I8:
    case DType::U8:
    case DType::I16:
    case DType::I32:
    case DType::I64:
      break;
  }
  throw_error("widen_in_place: dtype {} is not widened in place", dtype_name(src));
}

void narrow_f64(const uint8_t* raw_le, size_t n, float* out) {
  for (size_t i = 0; i < n; ++i) {
    double d;
    std::memcpy(&d, raw_le + 8 * i, 8);
    out[i] = float(d);
  }
}

void byteswap_elements(void* data, size_t n, size_t elem_size) {
  auto* p = static_cast<uint8_t*>(data);
  for (size_t i = 0; i < n; ++i, p += elem_size)
    for (size_t a = 0, b = elem_size - 1; a < b; ++a, --b) std::swap(p[a], p[b]);
}

void fortran_to_row_major(const std::vector<int64_t>& shape, std::vector<float>& values) {
  if (shape.size() < 2) return;  // 0-d and 1-d arrays are the same in both orders
  std::vector<float> out(values.size());
  // Row-major strides; walk the input in its own (column-major) order with an odometer whose
  // first index runs fastest, and scatter each element to its row-major position.
  const size_t rank = shape.size();
  std::vector<size_t> stride(rank), index(rank, 0);
  size_t s = 1;
  for (size_t k = rank; k-- > 0;) {
    stride[k] = s;
    s *= size_t(shape[k]);
  }
  size_t pos = 0;
  for (size_t i = 0; i < values.size(); ++i) {
    out[pos] = values[i];
    for (size_t k = 0; k < rank; ++k) {
      if (++index[k] < size_t(shape[k])) {
        pos += stride[k];
        break;
      }
      pos -= stride[k] * (index[k] - 1);
      index[k] = 0;
    }
  }
  values.swap(out);
}

size_t utf8_sequence_length(std::string_view s, size_t i) {
  const auto b = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char c = b(i);
  if (c < 0x80) return 1;
  size_t n = 0;
  uint32_t cp = 0;
  if (c >= 0xc2 && c <= 0xdf)
    n = 2, cp = c & 0x1f;
  else if (c >= 0xe0 && c <= 0xef)
    n = 3, cp = c & 0x0f;
  else if (c >= 0xf0 && c <= 0xf4)
    n = 4, cp = c & 0x07;
  else
    return 0;
  if (i + n > s.size()) return 0;
  for (size_t k = 1; k < n; ++k) {
    if ((b(i + k) & 0xc0) != 0x80) return 0;
    cp = (cp << 6) | (b(i + k) & 0x3f);
  }
  if ((n == 3 && (cp < 0x800 || (cp >= 0xd800 && cp <= 0xdfff))) ||
      (n == 4 && (cp < 0x10000 || cp > 0x10ffff)))
    return 0;
  return n;
}

std::string printable(std::string_view text, size_t max_chars) {
  std::string out;
  const std::string_view head = text.substr(0, max_chars);
  for (size_t i = 0; i < head.size();) {
    const auto u = static_cast<unsigned char>(head[i]);
    const size_t n = utf8_sequence_length(head, i);
    if (n == 0 || u < 0x20 || u == 0x7f) {  // messages are one line of UTF-8 text
      out.push_back('?');
      ++i;
    } else {
      out.append(head.substr(i, n));
      i += n;
    }
  }
  if (text.size() > max_chars) out += "...";
  return out;
}

}  // namespace taco
