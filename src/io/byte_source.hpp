#pragma once
// Random access to the bytes of an input: a file (pread, nothing mapped or slurped) or a
// buffer in memory (fuzzers and tests). Readers ask for exactly the ranges they need, so
// memory stays bounded by what they decode, not by the file.
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

namespace taco {

class ByteSource {
 public:
  virtual ~ByteSource() = default;
  const std::string& name() const { return name_; }  // the path, for messages
  uint64_t size() const { return size_; }
  // Copies exactly n bytes at offset into dst. InputError "<name>: truncated ..." when the
  // range is not all there; readers check ranges first to give a more specific message.
  virtual void read_at(uint64_t offset, void* dst, size_t n) const = 0;

 protected:
  ByteSource(std::string name, uint64_t size) : name_(std::move(name)), size_(size) {}

 private:
  std::string name_;
  uint64_t size_;
};

// Opens a regular, non-empty file. InputError naming the path for a missing path, a
// directory, something that is not a regular file, an unreadable or an empty file.
std::shared_ptr<ByteSource> open_file_source(const std::string& path);

// Bytes held in memory, under a display name.
std::shared_ptr<ByteSource> memory_source(std::string name, std::vector<uint8_t> bytes);

// Little-endian loads from a byte buffer (the formats we read are all little-endian).
inline uint16_t load_le16(const uint8_t* p) {
  return uint16_t(p[0] | (p[1] << 8));
}
inline uint32_t load_le32(const uint8_t* p) {
  return uint32_t(p[0]) | (uint32_t(p[1]) << 8) | (uint32_t(p[2]) << 16) | (uint32_t(p[3]) << 24);
}
inline uint64_t load_le64(const uint8_t* p) {
  return uint64_t(load_le32(p)) | (uint64_t(load_le32(p + 4)) << 32);
}

}  // namespace taco
