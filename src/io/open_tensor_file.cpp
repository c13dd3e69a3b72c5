// Picks the reader by the first bytes of the file, never by its extension; HDF5 is read in a
// child process; every reader's names are checked and its metadata completed from the names.
#include "core/error.hpp"
#include "io/isolated_source.hpp"
#include "io/name_rules.hpp"
#include "io/readers.hpp"

#include <fmt/format.h>

#include <cstring>
#include <filesystem>
#include <map>

namespace taco {
namespace {

constexpr uint8_t kHdf5Magic[8] = {0x89, 'H', 'D', 'F', '\r', '\n', 0x1a, '\n'};

// HDF5 allows a user block before the superblock: the signature may sit at 0, 512, 1024, ...
bool is_hdf5(const ByteSource& src) {
  for (uint64_t at = 0; at + 8 <= src.size() && at <= (uint64_t(1) << 20);
       at = at == 0 ? 512 : at * 2) {
    uint8_t b[8];
    src.read_at(at, b, 8);
    if (std::memcmp(b, kHdf5Magic, 8) == 0) return true;
  }
  return false;
}

// Names end up in CSV and JSON files and on the terminal: they must be text.
void check_name(const std::string& name, const std::string& path) {
  for (size_t i = 0; i < name.size();) {
    const auto c = static_cast<unsigned char>(name[i]);
    TACO_REQUIRE_INPUT(c >= 0x20 && c != 0x7f,
                       "{}: tensor name '{}' contains a control character (byte 0x{:02x})", path,
                       printable(name), c);
    const size_t n = utf8_sequence_length(name, i);
    TACO_REQUIRE_INPUT(n > 0, "{}: tensor name '{}' is not UTF-8 text (byte 0x{:02x} at {})", path,
                       printable(name), c, i);
    i += n;
  }
}

// The file's directory name and stem ("rank1/step_100"): where rank, step and direction may be
// written when the tensor names do not say them.
std::string file_hint(const std::string& path) {
  const std::filesystem::path p(path);
  const std::string dir = p.parent_path().filename().string();
  return dir.empty() ? p.stem().string() : dir + "/" + p.stem().string();
}

// A source whose names are checked and whose metadata is completed from the names.
class NamedSource final : public TensorSource {
 public:
  NamedSource(std::unique_ptr<TensorSource> base, const OpenOptions& opts)
      : base_(std::move(base)) {
    const std::string hint = file_hint(base_->path());
    for (size_t i = 0; i < base_->size(); ++i) {
      TensorInfo info = base_->info(i);
      check_name(info.name, base_->path());
      // Metadata strings end up in the same files; a stray byte in an attribute is not worth
      // refusing the file for: it becomes '?'.
      TensorMeta& m = info.meta;
      for (std::string* v : {&m.site, &m.direction, &m.collective, &m.model})
        *v = printable(*v, std::string::npos);
      std::map<std::string, std::string> extra;
      for (const auto& [k, v] : m.extra)
        extra[printable(k, std::string::npos)] = printable(v, std::string::npos);
      m.extra = std::move(extra);
      if (opts.infer_from_names || opts.name_map)
        apply_name_rules(info.name, opts.infer_from_names ? hint : std::string(),
                         opts.name_map.get(), info.meta);
      infos_.push_back(std::move(info));
    }
  }
  const std::string& path() const override { return base_->path(); }
  std::string format() const override { return base_->format(); }
  size_t size() const override { return infos_.size(); }
  TensorInfo info(size_t i) const override {
    TACO_ASSERT(i < infos_.size(), "tensor index {} of {}", i, infos_.size());
    return infos_[i];
  }
  Tensor read(size_t i) override {
    Tensor t = base_->read(i);
    t.meta = info(i).meta;
    return t;
  }

 private:
  std::unique_ptr<TensorSource> base_;
  std::vector<TensorInfo> infos_;
};

}  // namespace

std::string sniff_format(const ByteSource& src) {
  uint8_t head[9] = {};
  const size_t n = size_t(std::min<uint64_t>(src.size(), sizeof head));
  src.read_at(0, head, n);
  if (n >= 6 && std::memcmp(head, "\x93NUMPY", 6) == 0) return "npy";
  // A zip archive starts with a local header, or with the end record when it is empty.
  if (n >= 4 &&
      (std::memcmp(head, "PK\x03\x04", 4) == 0 || std::memcmp(head, "PK\x05\x06", 4) == 0))
    return "npz";
  // safetensors: a u64 header length, then the JSON object's '{'.
  if (n >= 9 && head[8] == '{') return "safetensors";
  if (is_hdf5(src)) return "taco-hdf5";
  return "";
}

std::unique_ptr<TensorSource> open_tensor_file(const std::string& path) {
  return open_tensor_file(path, {});
}

std::unique_ptr<TensorSource> open_tensor_file(const std::string& path, const OpenOptions& opts) {
  TACO_REQUIRE_INPUT(opts.u16_as == DType::BF16 || opts.u16_as == DType::F16,
                     "16-bit integer tensors can be read as bf16 or f16 bits, not {}",
                     dtype_name(opts.u16_as));
  TACO_REQUIRE_INPUT(opts.u8_as == DType::F8E4M3 || opts.u8_as == DType::F8E5M2,
                     "8-bit integer tensors can be read as f8e4m3 or f8e5m2 bits, not {}",
                     dtype_name(opts.u8_as));
  auto src = open_file_source(path);
  const std::string format = sniff_format(*src);
  std::unique_ptr<TensorSource> base;
  if (format == "npy") base = open_npy(std::move(src), opts);
  if (format == "npz") base = open_npz(std::move(src), opts);
  if (format == "safetensors") base = open_safetensors(std::move(src), opts);
  if (format == "taco-hdf5") {
    src.reset();  // HDF5 opens the file itself
    base = open_isolated(path, [path, opts] { return open_hdf5(path, opts); });
  }
  if (!base) {
    uint8_t head[8] = {};
    const size_t n = size_t(std::min<uint64_t>(src->size(), sizeof head));
    src->read_at(0, head, n);
    std::string hex;
    for (size_t i = 0; i < n; ++i) hex += fmt::format("{}{:02x}", i ? " " : "", head[i]);
    throw_input_error(
        "{}: unrecognized file format (not HDF5, safetensors, npy or npz; first bytes: {})", path,
        hex);
  }
  return std::make_unique<NamedSource>(std::move(base), opts);
}

}  // namespace taco
