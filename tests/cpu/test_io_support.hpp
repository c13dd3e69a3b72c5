#pragma once
// Helpers for the io tests: a temporary directory, and builders for safetensors, .npy and zip
// (.npz) bytes written from the format specifications, independently of the readers.
#include "catch.hpp"
#include "core/error.hpp"
#include "io/tensor_source.hpp"

#include <unistd.h>
#include <zlib.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace taco::iotest {

using Bytes = std::vector<uint8_t>;

// A fresh directory under the system temp dir, removed with everything in it.
class TempDir {
 public:
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "taco-io-test-XXXXXX").string();
    REQUIRE(::mkdtemp(tmpl.data()) != nullptr);
    path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  std::string file(const std::string& name) const {
    return (std::filesystem::path(path_) / name).string();
  }
  const std::string& path() const { return path_; }
  // Names of the files in the directory (to check that nothing was left behind).
  std::vector<std::string> listing() const {
    std::vector<std::string> names;
    for (const auto& e : std::filesystem::directory_iterator(path_))
      names.push_back(e.path().filename().string());
    return names;
  }

 private:
  std::string path_;
};

inline void write_bytes(const std::string& path, const Bytes& b) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(b.data()), std::streamsize(b.size()));
  REQUIRE(out.good());
}
inline Bytes bytes_of(const std::string& s) {
  return Bytes(s.begin(), s.end());
}
template <typename T>
Bytes raw_bytes(const std::vector<T>& v) {
  Bytes b(v.size() * sizeof(T));
  if (!v.empty()) std::memcpy(b.data(), v.data(), b.size());
  return b;
}
inline void append(Bytes& to, const Bytes& from) {
  to.insert(to.end(), from.begin(), from.end());
}
inline void put_le(Bytes& b, uint64_t v, int n) {
  for (int i = 0; i < n; ++i) b.push_back(uint8_t(v >> (8 * i)));
}

// safetensors: u64 header length, the header text as given (no validation), then the data.
inline Bytes safetensors_bytes(const std::string& header, const Bytes& data) {
  Bytes b;
  put_le(b, header.size(), 8);
  append(b, bytes_of(header));
  append(b, data);
  return b;
}

// .npy with the given header dict text (padded to 64 bytes, ending in '\n'), version 1/2/3.
inline Bytes npy_bytes(const std::string& dict, const Bytes& data, int major = 1) {
  const size_t prefix = major == 1 ? 10 : 12;
  std::string header = dict;
  const size_t unpadded = prefix + header.size() + 1;
  header.append((64 - unpadded % 64) % 64, ' ');
  header.push_back('\n');
  Bytes b = bytes_of("\x93NUMPY");
  b.push_back(uint8_t(major));
  b.push_back(0);
  put_le(b, header.size(), major == 1 ? 2 : 4);
  append(b, bytes_of(header));
  append(b, data);
  return b;
}
inline std::string npy_dict(const std::string& descr, const std::string& shape,
                            bool fortran = false) {
  return "{'descr': '" + descr + "', 'fortran_order': " + (fortran ? "True" : "False") +
         ", 'shape': " + shape + ", }";
}

inline Bytes raw_deflate(const Bytes& in) {
  z_stream z{};
  REQUIRE(deflateInit2(&z, 6, Z_DEFLATED, -15, 8, Z_DEFAULT_STRATEGY) == Z_OK);
  Bytes out(deflateBound(&z, uLong(in.size())) + 16);
  z.next_in = const_cast<Bytef*>(in.data());
  z.avail_in = uInt(in.size());
  z.next_out = out.data();
  z.avail_out = uInt(out.size());
  REQUIRE(deflate(&z, Z_FINISH) == Z_STREAM_END);
  out.resize(z.total_out);
  deflateEnd(&z);
  return out;
}

struct ZipMember {
  std::string name;
  Bytes data;  // the plain bytes
  bool deflate = false;
  // Corruptions, applied after the member is encoded:
  uint32_t crc_xor = 0;          // flips bits of the recorded CRC-32
  int method_override = -1;      // records another compression method
  int64_t uncomp_override = -1;  // records another uncompressed size
  bool garble_stream =
      false;  // replaces the first compressed byte with 0xff (invalid deflate block type)
};

// A zip archive. zip64 = true writes zip64 extra fields and zip64 end records as large
// archives (and numpy's force_zip64) do.
inline Bytes zip_bytes(const std::vector<ZipMember>& members, bool zip64 = false) {
  Bytes out, central;
  for (const ZipMember& m : members) {
    Bytes payload = m.deflate ? raw_deflate(m.data) : m.data;
    if (m.garble_stream && !payload.empty()) payload[0] = 0xff;
    const uint32_t crc = uint32_t(crc32(0, m.data.data(), uInt(m.data.size()))) ^ m.crc_xor;
    const uint16_t method =
        m.method_override >= 0 ? uint16_t(m.method_override) : (m.deflate ? 8 : 0);
    const uint64_t uncomp = m.uncomp_override >= 0 ? uint64_t(m.uncomp_override) : m.data.size();
    const uint64_t local_at = out.size();
    Bytes z64;
    if (zip64) {
      put_le(z64, 1, 2);
      put_le(z64, 24, 2);
      put_le(z64, uncomp, 8);
      put_le(z64, payload.size(), 8);
      put_le(z64, local_at, 8);
    }
    // Local header.
    put_le(out, 0x04034b50, 4);
    put_le(out, zip64 ? 45 : 20, 2);
    put_le(out, 0, 2);
    put_le(out, method, 2);
    put_le(out, 0, 4);  // time, date
    put_le(out, crc, 4);
    put_le(out, zip64 ? 0xffffffffu : payload.size(), 4);
    put_le(out, zip64 ? 0xffffffffu : uncomp, 4);
    put_le(out, m.name.size(), 2);
    put_le(out, zip64 ? 20 : 0, 2);
    append(out, bytes_of(m.name));
    if (zip64) {  // local zip64 extra holds the two sizes only
      put_le(out, 1, 2);
      put_le(out, 16, 2);
      put_le(out, uncomp, 8);
      put_le(out, payload.size(), 8);
    }
    append(out, payload);
    // Central directory entry.
    put_le(central, 0x02014b50, 4);
    put_le(central, zip64 ? 45 : 20, 2);
    put_le(central, zip64 ? 45 : 20, 2);
    put_le(central, 0, 2);
    put_le(central, method, 2);
    put_le(central, 0, 4);
    put_le(central, crc, 4);
    put_le(central, zip64 ? 0xffffffffu : payload.size(), 4);
    put_le(central, zip64 ? 0xffffffffu : uncomp, 4);
    put_le(central, m.name.size(), 2);
    put_le(central, z64.size(), 2);
    put_le(central, 0, 2);  // comment
    put_le(central, 0, 2);  // disk
    put_le(central, 0, 2);
    put_le(central, 0, 4);
    put_le(central, zip64 ? 0xffffffffu : local_at, 4);
    append(central, bytes_of(m.name));
    append(central, z64);
  }
  const uint64_t cd_at = out.size();
  append(out, central);
  if (zip64) {
    const uint64_t z64_end_at = out.size();
    put_le(out, 0x06064b50, 4);
    put_le(out, 44, 8);
    put_le(out, 45, 2);
    put_le(out, 45, 2);
    put_le(out, 0, 4);
    put_le(out, 0, 4);
    put_le(out, members.size(), 8);
    put_le(out, members.size(), 8);
    put_le(out, central.size(), 8);
    put_le(out, cd_at, 8);
    put_le(out, 0x07064b50, 4);
    put_le(out, 0, 4);
    put_le(out, z64_end_at, 8);
    put_le(out, 1, 4);
  }
  put_le(out, 0x06054b50, 4);
  put_le(out, 0, 2);
  put_le(out, 0, 2);
  put_le(out, zip64 ? 0xffff : members.size(), 2);
  put_le(out, zip64 ? 0xffff : members.size(), 2);
  put_le(out, zip64 ? 0xffffffffu : central.size(), 4);
  put_le(out, zip64 ? 0xffffffffu : cd_at, 4);
  put_le(out, 0, 2);
  return out;
}

// Opens the file and reads every tensor (some problems show only when the data is read).
inline std::vector<Tensor> read_all(const std::string& path, const OpenOptions& opts = {}) {
  auto src = open_tensor_file(path, opts);
  std::vector<Tensor> out;
  for (size_t i = 0; i < src->size(); ++i) out.push_back(src->read(i));
  return out;
}

// The message of the InputError that f throws; fails the test if it throws nothing or
// anything else.
template <typename F>
std::string input_error_of(F&& f) {
  try {
    f();
  } catch (const InputError& e) {
    return e.what();
  } catch (const std::exception& e) {
    FAIL("expected taco::InputError, got another exception: " << e.what());
  }
  FAIL("expected taco::InputError, nothing was thrown");
  return {};
}

// Reading `path` fails with a one-line InputError naming the file and containing `fragment`.
#define REQUIRE_BAD_INPUT(path, fragment)                                        \
  do {                                                                           \
    const std::string taco_msg_ =                                                \
        ::taco::iotest::input_error_of([&] { ::taco::iotest::read_all(path); }); \
    INFO("message: " << taco_msg_);                                              \
    REQUIRE(taco_msg_.find(path) != std::string::npos);                          \
    REQUIRE(taco_msg_.find(fragment) != std::string::npos);                      \
    REQUIRE(taco_msg_.find('\n') == std::string::npos);                          \
  } while (0)

}  // namespace taco::iotest
