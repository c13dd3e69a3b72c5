// Picks the reader by the first bytes of the file, never by its extension.
#include "core/error.hpp"
#include "io/readers.hpp"

#include <fmt/format.h>

#include <cstring>

namespace taco {
namespace {

constexpr uint8_t kHdf5Magic[8] = {0x89, 'H', 'D', 'F', '\r', '\n', 0x1a, '\n'};

// HDF5 allows a user block before the superblock: the signature may sit at 0, 512, 1024, ...
bool is_hdf5(const ByteSource& src) {
  for (uint64_t at = 0; at + 8 <= src.size() && at <= (uint64_t(1) << 20); at = at == 0 ? 512 : at * 2) {
    uint8_t b[8];
    src.read_at(at, b, 8);
    if (std::memcmp(b, kHdf5Magic, 8) == 0) return true;
  }
  return false;
}

}  // namespace

std::string sniff_format(const ByteSource& src) {
  uint8_t head[9] = {};
  const size_t n = size_t(std::min<uint64_t>(src.size(), sizeof head));
  src.read_at(0, head, n);
  if (n >= 6 && std::memcmp(head, "\x93NUMPY", 6) == 0) return "npy";
  // A zip archive starts with a local header, or with the end record when it is empty.
  if (n >= 4 && (std::memcmp(head, "PK\x03\x04", 4) == 0 || std::memcmp(head, "PK\x05\x06", 4) == 0)) return "npz";
  // safetensors: a u64 header length, then the JSON object's '{'.
  if (n >= 9 && head[8] == '{') return "safetensors";
  if (is_hdf5(src)) return "taco-hdf5";
  return "";
}

std::unique_ptr<TensorSource> open_tensor_file(const std::string& path) { return open_tensor_file(path, {}); }

std::unique_ptr<TensorSource> open_tensor_file(const std::string& path, const OpenOptions& opts) {
  TACO_REQUIRE_INPUT(opts.u16_as == DType::BF16 || opts.u16_as == DType::F16,
                     "16-bit integer tensors can be read as bf16 or f16 bits, not {}", dtype_name(opts.u16_as));
  TACO_REQUIRE_INPUT(opts.u8_as == DType::F8E4M3 || opts.u8_as == DType::F8E5M2,
                     "8-bit integer tensors can be read as f8e4m3 or f8e5m2 bits, not {}", dtype_name(opts.u8_as));
  auto src = open_file_source(path);
  const std::string format = sniff_format(*src);
  if (format == "npy") return open_npy(std::move(src), opts);
  if (format == "npz") return open_npz(std::move(src), opts);
  if (format == "safetensors") return open_safetensors(std::move(src), opts);
  if (format == "taco-hdf5") {
    src.reset();  // HDF5 opens the file itself
    return open_trace(path);
  }
  uint8_t head[8] = {};
  const size_t n = size_t(std::min<uint64_t>(src->size(), sizeof head));
  src->read_at(0, head, n);
  std::string hex;
  for (size_t i = 0; i < n; ++i) hex += fmt::format("{}{:02x}", i ? " " : "", head[i]);
  throw_input_error("{}: unrecognized file format (not a taco HDF5 trace, safetensors, npy or npz; first bytes: {})",
                    path, hex);
}

}  // namespace taco
