// NumPy .npy: "\x93NUMPY", version (1.0, 2.0 or 3.0), header length (u16 for 1.0, u32 after),
// then a Python dict literal {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }
// padded with spaces and ending in '\n', then the raw elements.
#include "io/npy_read.hpp"

#include "core/error.hpp"
#include "io/readers.hpp"

#include <fmt/format.h>

#include <cctype>
#include <cstring>
#include <map>
#include <optional>
#include <variant>

namespace taco {
namespace {

// A value of the header dict: a string, a bool, or a tuple of integers.
using DictValue = std::variant<std::string, bool, std::vector<int64_t>>;

// Parses the small subset of Python literal syntax that NumPy writes (and older NumPy wrote:
// "3L" integers, double-quoted strings), nothing more.
class DictParser {
 public:
  DictParser(std::string_view text, const std::string& what) : s_(text), what_(what) {}

  std::map<std::string, DictValue> parse() {
    std::map<std::string, DictValue> dict;
    skip_ws();
    expect('{');
    skip_ws();
    while (peek() != '}') {
      std::string key = parse_string();
      skip_ws();
      expect(':');
      skip_ws();
      DictValue value = parse_value(key);
      TACO_REQUIRE_INPUT(dict.emplace(key, std::move(value)).second,
                         "{}: npy header repeats key '{}'", what_, printable(key));
      skip_ws();
      if (peek() == ',') {
        ++pos_;
        skip_ws();
        continue;
      }
      TACO_REQUIRE_INPUT(peek() == '}', "{}: malformed npy header: expected ',' or '}}' at byte {}",
                         what_, pos_);
    }
    ++pos_;
    skip_ws();
    TACO_REQUIRE_INPUT(pos_ == s_.size(),
                       "{}: malformed npy header: unexpected text after the dict", what_);
    return dict;
  }

 private:
  char peek() const {
    TACO_REQUIRE_INPUT(pos_ < s_.size(), "{}: malformed npy header: it ends inside the dict",
                       what_);
    return s_[pos_];
  }
  void expect(char c) {
    TACO_REQUIRE_INPUT(peek() == c, "{}: malformed npy header: expected '{}' at byte {}", what_, c,
                       pos_);
    ++pos_;
  }
  void skip_ws() {
    while (pos_ < s_.size() &&
           (s_[pos_] == ' ' || s_[pos_] == '\n' || s_[pos_] == '\t' || s_[pos_] == '\r'))
      ++pos_;
  }
  std::string parse_string() {
    const char quote = peek();
    TACO_REQUIRE_INPUT(quote == '\'' || quote == '"',
                       "{}: malformed npy header: expected a quoted string at byte {}", what_,
                       pos_);
    ++pos_;
    std::string out;
    while (peek() != quote) {
      TACO_REQUIRE_INPUT(s_[pos_] != '\\',
                         "{}: malformed npy header: escapes in strings are not supported", what_);
      out.push_back(s_[pos_++]);
    }
    ++pos_;
    return out;
  }
  int64_t parse_int() {
    bool negative = false;
    if (peek() == '-') {
      negative = true;
      ++pos_;
    }
    TACO_REQUIRE_INPUT(std::isdigit(static_cast<unsigned char>(peek())),
                       "{}: malformed npy header: expected an integer in the shape at byte {}",
                       what_, pos_);
    uint64_t v = 0;
    while (pos_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[pos_]))) {
      const auto digit = uint64_t(s_[pos_++] - '0');
      TACO_REQUIRE_INPUT(v <= (uint64_t(INT64_MAX) - digit) / 10,
                         "{}: npy shape dimension is too large", what_);
      v = v * 10 + digit;
    }
    if (pos_ < s_.size() && s_[pos_] == 'L') ++pos_;  // Python 2 long
    const auto value = int64_t(v);
    TACO_REQUIRE_INPUT(!negative, "{}: negative dimension -{} in npy shape", what_, value);
    return value;
  }
  DictValue parse_value(const std::string& key) {
    const char c = peek();
    if (c == '\'' || c == '"') return parse_string();
    if (s_.substr(pos_, 4) == "True") {
      pos_ += 4;
      return true;
    }
    if (s_.substr(pos_, 5) == "False") {
      pos_ += 5;
      return false;
    }
    if (c == '(') {
      ++pos_;
      std::vector<int64_t> dims;
      skip_ws();
      while (peek() != ')') {
        TACO_REQUIRE_INPUT(dims.size() < kMaxRank, "{}: npy shape has more than {} dimensions",
                           what_, kMaxRank);
        dims.push_back(parse_int());
        skip_ws();
        if (peek() == ',') {
          ++pos_;
          skip_ws();
        } else {
          TACO_REQUIRE_INPUT(peek() == ')',
                             "{}: malformed npy header: expected ',' or ')' in the shape", what_);
        }
      }
      ++pos_;
      return dims;
    }
    if (c == '[' && key == "descr")
      throw_input_error("{}: structured (record) npy dtypes are not supported", what_);
    throw_input_error("{}: malformed npy header: unexpected value for '{}' at byte {}", what_,
                      printable(key), pos_);
  }

  std::string_view s_;
  const std::string& what_;
  size_t pos_ = 0;
};

// Maps a descr to the element type. Bit patterns of types NumPy cannot name (bf16, fp8) arrive
// as unsigned or void elements; opts says what they are.
void set_dtype(NpyHeader& h, const OpenOptions& opts, const std::string& what) {
  const std::string& d = h.descr;
  TACO_REQUIRE_INPUT(d.size() >= 3, "{}: unknown npy dtype '{}'", what, printable(d));
  const char order = d[0];
  const std::string code = d.substr(1);
  TACO_REQUIRE_INPUT(order == '<' || order == '>' || order == '|' || order == '=',
                     "{}: unknown npy dtype '{}' (no byte-order mark)", what, printable(d));
  h.big_endian = order == '>';
  if (code == "f2") {
    h.dtype = DType::F16;
  } else if (code == "f4") {
    h.dtype = DType::F32;
  } else if (code == "f8") {
    h.dtype = DType::F64;
  } else if (code == "u2" || code == "V2") {
    h.dtype = opts.u16_as;
  } else if (code == "u1" || code == "V1") {
    h.dtype = opts.u8_as;
  } else {
    throw_input_error(
        "{}: npy dtype '{}' is not supported (taco reads <f2, <f4, <f8, and <u2/<V2 or |u1/<V1 "
        "holding "
        "bf16/f16 or fp8 bits)",
        what, printable(d));
  }
  h.elem_size = dtype_size(h.dtype);
  TACO_REQUIRE_INPUT(order != '|' || h.elem_size == 1, "{}: npy dtype '{}' lacks a byte order",
                     what, printable(d));
}

}  // namespace

NpyHeader read_npy_header(ByteStream& in, uint64_t total_bytes, const OpenOptions& opts,
                          const std::string& what) {
  TACO_REQUIRE_INPUT(total_bytes >= 10, "{}: truncated npy header ({} bytes)", what, total_bytes);
  uint8_t pre[10];
  in.read(pre, 10);
  TACO_REQUIRE_INPUT(std::memcmp(pre, "\x93NUMPY", 6) == 0,
                     "{}: not an npy file (no \\x93NUMPY magic)", what);
  const int major = pre[6], minor = pre[7];
  TACO_REQUIRE_INPUT((major == 1 || major == 2 || major == 3) && minor == 0,
                     "{}: unsupported npy format version {}.{} (taco reads 1.0, 2.0, 3.0)", what,
                     major, minor);
  uint64_t header_len = load_le16(pre + 8);
  uint64_t prefix = 10;
  if (major >= 2) {
    TACO_REQUIRE_INPUT(total_bytes >= 12, "{}: truncated npy header ({} bytes)", what, total_bytes);
    uint8_t more[2];
    in.read(more, 2);
    const uint8_t len4[4] = {pre[8], pre[9], more[0], more[1]};
    header_len = load_le32(len4);
    prefix = 12;
  }
  TACO_REQUIRE_INPUT(header_len <= kMaxHeaderBytes,
                     "{}: npy header length {} exceeds the limit of {} bytes", what, header_len,
                     kMaxHeaderBytes);
  TACO_REQUIRE_INPUT(header_len <= total_bytes - prefix,
                     "{}: truncated npy header: it claims {} bytes but only {} follow", what,
                     header_len, total_bytes - prefix);
  std::string text(size_t(header_len), '\0');
  in.read(text.data(), text.size());
  // Version 1.0 and 2.0 headers are latin-1, 3.0 is UTF-8; all that matters here is ASCII.
  const auto dict = DictParser(text, what).parse();

  NpyHeader h;
  auto it = dict.find("descr");
  TACO_REQUIRE_INPUT(it != dict.end() && std::holds_alternative<std::string>(it->second),
                     "{}: npy header has no 'descr' string", what);
  h.descr = std::get<std::string>(it->second);
  it = dict.find("fortran_order");
  TACO_REQUIRE_INPUT(it != dict.end() && std::holds_alternative<bool>(it->second),
                     "{}: npy header has no 'fortran_order' True/False", what);
  h.fortran_order = std::get<bool>(it->second);
  it = dict.find("shape");
  TACO_REQUIRE_INPUT(it != dict.end() && std::holds_alternative<std::vector<int64_t>>(it->second),
                     "{}: npy header has no 'shape' tuple", what);
  h.shape = std::get<std::vector<int64_t>>(it->second);
  TACO_REQUIRE_INPUT(dict.size() == 3,
                     "{}: npy header has keys other than descr, fortran_order, shape", what);
  set_dtype(h, opts, what);

  h.numel = checked_numel(h.shape, h.elem_size, what);
  require_nonempty(h.numel, h.shape, what);
  h.header_bytes = prefix + header_len;
  h.data_bytes = h.numel * h.elem_size;
  const uint64_t available = total_bytes - h.header_bytes;
  TACO_REQUIRE_INPUT(available >= h.data_bytes,
                     "{}: truncated npy data: shape {} of {} needs {} bytes, {} are there", what,
                     shape_string(h.shape), h.descr, h.data_bytes, available);
  TACO_REQUIRE_INPUT(
      available == h.data_bytes,
      "{}: {} bytes after the npy data (shape {} of {} needs {}): shape/byte-count mismatch", what,
      available - h.data_bytes, shape_string(h.shape), h.descr, h.data_bytes);
  return h;
}

std::vector<float> read_npy_values(ByteStream& in, const NpyHeader& h) {
  const auto n = size_t(h.numel);
  std::vector<float> values(n);
  if (h.dtype == DType::F64) {
    std::vector<uint8_t> raw(size_t(h.data_bytes));
    in.read(raw.data(), raw.size());
    if (h.big_endian) byteswap_elements(raw.data(), n, 8);
    narrow_f64(raw.data(), n, values.data());
  } else {
    in.read(values.data(), size_t(h.data_bytes));
    if (h.big_endian) byteswap_elements(values.data(), n, h.elem_size);
    widen_in_place(h.dtype, values.data(), n);
  }
  if (h.fortran_order) fortran_to_row_major(h.shape, values);
  return values;
}

}  // namespace taco
