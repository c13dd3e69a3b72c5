#include "io/byte_source.hpp"

#include "core/error.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace taco {
namespace {

class FileSource final : public ByteSource {
 public:
  FileSource(const std::string& path, int fd, uint64_t size) : ByteSource(path, size), fd_(fd) {}
  ~FileSource() override { ::close(fd_); }
  FileSource(const FileSource&) = delete;
  FileSource& operator=(const FileSource&) = delete;

  void read_at(uint64_t offset, void* dst, size_t n) const override {
    if (offset > size() || n > size() - offset)
      throw_input_error("{}: truncated: needs bytes [{}, {}) but the file has {} bytes", name(),
                        offset, offset + n, size());
    auto* out = static_cast<uint8_t*>(dst);
    while (n > 0) {
      const ssize_t got = ::pread(fd_, out, n, off_t(offset));
      if (got < 0 && errno == EINTR) continue;
      if (got < 0) throw_input_error("{}: read failed: {}", name(), std::strerror(errno));
      if (got == 0)
        throw_input_error("{}: truncated: the file shrank while it was being read", name());
      out += got;
      offset += uint64_t(got);
      n -= size_t(got);
    }
  }

 private:
  int fd_;
};

class MemorySource final : public ByteSource {
 public:
  MemorySource(std::string name, std::vector<uint8_t> bytes)
      : ByteSource(std::move(name), bytes.size()), bytes_(std::move(bytes)) {}

  void read_at(uint64_t offset, void* dst, size_t n) const override {
    if (offset > size() || n > size() - offset)
      throw_input_error("{}: truncated: needs bytes [{}, {}) but there are {} bytes", name(),
                        offset, offset + n, size());
    if (n > 0) std::memcpy(dst, bytes_.data() + offset, n);
  }

 private:
  std::vector<uint8_t> bytes_;
};

}  // namespace

std::shared_ptr<ByteSource> open_file_source(const std::string& path) {
  TACO_REQUIRE_INPUT(!path.empty(), "empty input path");
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    if (errno == ENOENT || errno == ENOTDIR) throw_input_error("{}: no such file", path);
    throw_input_error("{}: cannot access: {}", path, std::strerror(errno));
  }
  if (S_ISDIR(st.st_mode)) throw_input_error("{}: is a directory, not a tensor file", path);
  // Pipes and devices have no size and may never end; the readers need random access.
  if (!S_ISREG(st.st_mode)) throw_input_error("{}: not a regular file", path);
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw_input_error("{}: cannot open: {}", path, std::strerror(errno));
  struct stat fst {};
  if (::fstat(fd, &fst) != 0) {
    const int err = errno;
    ::close(fd);
    throw_input_error("{}: cannot stat: {}", path, std::strerror(err));
  }
  if (fst.st_size == 0) {
    ::close(fd);
    throw_input_error("{}: file is empty (0 bytes)", path);
  }
  return std::make_shared<FileSource>(path, fd, uint64_t(fst.st_size));
}

std::shared_ptr<ByteSource> memory_source(std::string name, std::vector<uint8_t> bytes) {
  return std::make_shared<MemorySource>(std::move(name), std::move(bytes));
}

}  // namespace taco
