// safetensors: an 8-byte little-endian header length N, N bytes of JSON
//   {"name": {"dtype": "BF16", "shape": [..], "data_offsets": [begin, end]}, ...,
//    "__metadata__": {"key": "value", ...}}
// then the data section; offsets are relative to its start. Everything in the header is
// checked against the file before any tensor is read.
#include "core/error.hpp"
#include "io/meta_fields.hpp"
#include "io/readers.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <optional>
#include <unordered_set>

namespace taco {
namespace {

// A safetensors header nests 3 levels; refusing deep nesting keeps a hostile header from
// building a huge tree of empty arrays.
constexpr int kMaxJsonDepth = 16;

struct Entry {
  TensorInfo info;
  uint64_t begin = 0, end = 0;  // absolute offsets in the file
};

// Safetensors dtype names. Returns nullopt for names taco cannot read; `known` tells an
// unsupported (integer/bool) dtype from one that is not a safetensors dtype at all.
std::optional<DType> safetensors_dtype(const std::string& s, bool& known) {
  known = true;
  if (s == "F32") return DType::F32;
  if (s == "F16") return DType::F16;
  if (s == "BF16") return DType::BF16;
  if (s == "F64") return DType::F64;
  if (s == "F8_E4M3") return DType::F8E4M3;
  if (s == "F8_E5M2") return DType::F8E5M2;
  known = s == "BOOL" || s == "U8" || s == "I8" || s == "U16" || s == "I16" || s == "U32" ||
          s == "I32" || s == "U64" || s == "I64" || s == "F8_E8M0" || s == "F4" || s == "F6_E2M3" ||
          s == "F6_E3M2" || s == "C64";
  return std::nullopt;
}

uint64_t json_uint(const nlohmann::json& v, const std::string& what) {
  if (v.is_number_unsigned()) return v.get<uint64_t>();
  if (v.is_number_integer()) throw_input_error("{}: negative value {}", what, v.get<int64_t>());
  throw_input_error("{}: expected a non-negative integer, got {}", what, printable(v.dump()));
}

// The checks of a header that its JSON document cannot show afterwards, in one pass over the
// parse events: the nesting depth (a hostile header could build a huge tree of empty arrays), and
// keys named twice in one object (JSON keeps the last of two equal keys, so a header naming a
// tensor twice would silently lose one).
class HeaderCheck final : public nlohmann::json::json_sax_t {
 public:
  explicit HeaderCheck(const std::string& path) : path_(path) {}

  bool null() override { return true; }
  bool boolean(bool) override { return true; }
  bool number_integer(number_integer_t) override { return true; }
  bool number_unsigned(number_unsigned_t) override { return true; }
  bool number_float(number_float_t, const string_t&) override { return true; }
  bool string(string_t&) override { return true; }
  bool binary(binary_t&) override { return true; }
  bool start_object(std::size_t) override { return open(true); }
  bool start_array(std::size_t) override { return open(false); }
  bool end_object() override { return close(); }
  bool end_array() override { return close(); }
  bool key(string_t& k) override {
    TACO_REQUIRE_INPUT(keys_.back().insert(k).second,
                       "{}: safetensors header has the key '{}' twice (one entry would be lost)",
                       path_, printable(k));
    return true;
  }
  bool parse_error(std::size_t, const std::string&,
                   const nlohmann::detail::exception& ex) override {
    throw_input_error("{}: malformed safetensors header JSON: {}", path_,
                      printable(ex.what(), 200));
  }

 private:
  bool open(bool object) {
    TACO_REQUIRE_INPUT(open_.size() < size_t(kMaxJsonDepth),
                       "{}: malformed safetensors header JSON: nested deeper than {} levels", path_,
                       kMaxJsonDepth);
    open_.push_back(object);
    if (object) keys_.emplace_back();
    return true;
  }
  bool close() {
    if (open_.back()) keys_.pop_back();
    open_.pop_back();
    return true;
  }

  const std::string& path_;
  std::vector<bool> open_;                             // per open container: is it an object
  std::vector<std::unordered_set<std::string>> keys_;  // per open object: its keys so far
};

class SafetensorsSource final : public TensorSource {
 public:
  SafetensorsSource(std::shared_ptr<ByteSource> src, std::vector<Entry> entries)
      : src_(std::move(src)), entries_(std::move(entries)) {}

  const std::string& path() const override { return src_->name(); }
  std::string format() const override { return "safetensors"; }
  size_t size() const override { return entries_.size(); }
  TensorInfo info(size_t i) const override {
    TACO_ASSERT(i < entries_.size(), "tensor index {} of {}", i, entries_.size());
    return entries_[i].info;
  }

  Tensor read(size_t i) override {
    TACO_ASSERT(i < entries_.size(), "tensor index {} of {}", i, entries_.size());
    const Entry& e = entries_[i];
    Tensor t;
    t.name = e.info.name;
    t.dtype = e.info.dtype;
    t.shape = e.info.shape;
    t.meta = e.info.meta;
    const auto n = size_t(t.numel());
    const size_t nbytes = size_t(e.end - e.begin);
    t.values.resize(n);
    if (t.dtype == DType::F64) {
      std::vector<uint8_t> raw(nbytes);
      src_->read_at(e.begin, raw.data(), nbytes);
      narrow_f64(raw.data(), n, t.values.data());
    } else {
      src_->read_at(e.begin, t.values.data(), nbytes);
      widen_in_place(t.dtype, t.values.data(), n);
    }
    return t;
  }

 private:
  std::shared_ptr<ByteSource> src_;
  std::vector<Entry> entries_;
};

}  // namespace

std::unique_ptr<TensorSource> open_safetensors(std::shared_ptr<ByteSource> src,
                                               const OpenOptions&) {
  const std::string& path = src->name();
  TACO_REQUIRE_INPUT(src->size() >= 8,
                     "{}: truncated safetensors file ({} bytes, the header length alone needs 8)",
                     path, src->size());
  uint8_t len_bytes[8];
  src->read_at(0, len_bytes, 8);
  const uint64_t header_len = load_le64(len_bytes);
  TACO_REQUIRE_INPUT(header_len <= kMaxHeaderBytes,
                     "{}: safetensors header length {} exceeds the limit of {} bytes", path,
                     header_len, kMaxHeaderBytes);
  TACO_REQUIRE_INPUT(header_len >= 2,
                     "{}: safetensors header length {} is too small for a JSON object", path,
                     header_len);
  TACO_REQUIRE_INPUT(
      header_len <= src->size() - 8,
      "{}: truncated safetensors header: it claims {} bytes but only {} follow the length", path,
      header_len, src->size() - 8);
  std::string text(size_t(header_len), '\0');
  src->read_at(8, text.data(), text.size());

  nlohmann::json header;
  try {
    // Checked in a pass of its own: nlohmann's parse callback rescans the enclosing object
    // after every nested one, which is quadratic in the number of tensors.
    HeaderCheck check(path);
    nlohmann::json::sax_parse(text, &check);
    header = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& ex) {
    throw_input_error("{}: malformed safetensors header JSON: {}", path, printable(ex.what(), 200));
  }
  text = std::string();
  TACO_REQUIRE_INPUT(header.is_object(), "{}: safetensors header is not a JSON object (it is {})",
                     path, header.type_name());

  const uint64_t data_begin = 8 + header_len;
  const uint64_t data_size = src->size() - data_begin;

  TensorMeta file_meta;
  if (auto it = header.find("__metadata__"); it != header.end()) {
    TACO_REQUIRE_INPUT(it->is_object(), "{}: __metadata__ is not a JSON object", path);
    for (const auto& [key, value] : it->items()) {
      TACO_REQUIRE_INPUT(value.is_string(), "{}: __metadata__ value of '{}' is not a string", path,
                         printable(key));
      set_meta_field(file_meta, key, value.get_ref<const std::string&>(),
                     fmt::format("{}: __metadata__", path));
    }
    check_meta(file_meta, fmt::format("{}: __metadata__", path));
  }

  std::vector<Entry> entries;
  for (const auto& [name, desc] : header.items()) {
    if (name == "__metadata__") continue;
    const std::string what = fmt::format("{}: tensor '{}'", path, printable(name));
    TACO_REQUIRE_INPUT(desc.is_object(), "{}: entry is not a JSON object", what);
    const auto dt = desc.find("dtype"), sh = desc.find("shape"), off = desc.find("data_offsets");
    TACO_REQUIRE_INPUT(dt != desc.end() && sh != desc.end() && off != desc.end(),
                       "{}: entry needs dtype, shape and data_offsets", what);
    TACO_REQUIRE_INPUT(dt->is_string(), "{}: dtype is not a string", what);
    bool known = false;
    const auto dtype = safetensors_dtype(dt->get_ref<const std::string&>(), known);
    if (!dtype) {
      if (known)
        throw_input_error(
            "{}: dtype {} is not supported (taco reads F32, F16, BF16, F64, F8_E4M3, F8_E5M2)",
            what, dt->get_ref<const std::string&>());
      throw_input_error("{}: unknown dtype '{}'", what,
                        printable(dt->get_ref<const std::string&>()));
    }
    TACO_REQUIRE_INPUT(sh->is_array(), "{}: shape is not a JSON array", what);
    TACO_REQUIRE_INPUT(sh->size() <= kMaxRank, "{}: shape has {} dimensions (at most {})", what,
                       sh->size(), kMaxRank);
    Entry e;
    e.info.name = name;
    e.info.dtype = *dtype;
    e.info.meta = file_meta;
    for (const auto& d : *sh) {
      if (d.is_number_integer() && !d.is_number_unsigned())
        throw_input_error("{}: negative dimension {} in shape", what, d.get<int64_t>());
      TACO_REQUIRE_INPUT(d.is_number_unsigned(), "{}: shape entry {} is not a non-negative integer",
                         what, printable(d.dump()));
      const uint64_t v = d.get<uint64_t>();
      TACO_REQUIRE_INPUT(v <= uint64_t(INT64_MAX), "{}: dimension {} is too large", what, v);
      e.info.shape.push_back(int64_t(v));
    }
    const uint64_t numel = checked_numel(e.info.shape, dtype_size(*dtype), what);
    require_nonempty(numel, e.info.shape, what);
    TACO_REQUIRE_INPUT(off->is_array() && off->size() == 2, "{}: data_offsets must be [begin, end]",
                       what);
    const uint64_t begin = json_uint((*off)[0], what + ": data_offsets begin");
    const uint64_t end = json_uint((*off)[1], what + ": data_offsets end");
    TACO_REQUIRE_INPUT(begin <= end, "{}: data_offsets [{}, {}] end before they begin", what, begin,
                       end);
    const uint64_t expected = numel * dtype_size(*dtype);
    TACO_REQUIRE_INPUT(end - begin == expected,
                       "{}: data_offsets [{}, {}] hold {} bytes but {} {} needs {} "
                       "(shape/dtype/byte-count mismatch)",
                       what, begin, end, end - begin, shape_string(e.info.shape),
                       dt->get_ref<const std::string&>(), expected);
    TACO_REQUIRE_INPUT(
        end <= data_size,
        "{}: truncated data: data_offsets [{}, {}] run past the end of the data section ({} bytes)",
        what, begin, end, data_size);
    e.begin = data_begin + begin;
    e.end = data_begin + end;
    entries.push_back(std::move(e));
  }
  TACO_REQUIRE_INPUT(!entries.empty(), "{}: safetensors file holds no tensors", path);

  // File order (by offset) is the order the tensors were written in.
  std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.info.name < b.info.name;
  });
  for (size_t i = 1; i < entries.size(); ++i)
    TACO_REQUIRE_INPUT(entries[i - 1].end <= entries[i].begin,
                       "{}: tensors '{}' and '{}' overlap in the data section", path,
                       printable(entries[i - 1].info.name), printable(entries[i].info.name));
  return std::make_unique<SafetensorsSource>(std::move(src), std::move(entries));
}

}  // namespace taco
