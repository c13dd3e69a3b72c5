#include "core/atomic_file.hpp"

#include "core/error.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <system_error>

namespace taco {

AtomicFile::AtomicFile(std::string path, bool binary)
    : path_(std::move(path)), tmp_(path_ + ".tmp-" + std::to_string(::getpid())), cleanup_(tmp_) {
  check_output_file(path_, "output");
  out_.open(tmp_, binary ? std::ios::binary | std::ios::trunc : std::ios::trunc);
  if (!out_) throw_write_error(path_, errno);
}

AtomicFile::~AtomicFile() {
  if (!committed_) {
    out_.close();
    std::remove(tmp_.c_str());
  }
}

void AtomicFile::commit() {
  errno = 0;
  out_.flush();
  if (!out_) throw_write_error(path_, errno);
  out_.close();
  if (!out_) throw_write_error(path_, errno);
  check_output_file(path_, "output");  // still not a directory or a device
  if (std::rename(tmp_.c_str(), path_.c_str()) != 0) throw_write_error(path_, errno);
  committed_ = true;
}

void write_file_atomically(const std::string& path, const std::string& contents) {
  AtomicFile f(path, true);
  f.stream() << contents;
  f.commit();
}

void make_directories(const std::string& dir) {
  TACO_REQUIRE_INPUT(!dir.empty(), "output directory: the path is empty");
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec || !std::filesystem::is_directory(dir))
    throw_input_error("{}: cannot create directory{}", dir, ec ? " (" + ec.message() + ")" : std::string());
}

void check_output_file(const std::string& path, const char* flag) {
  TACO_REQUIRE_INPUT(!path.empty(), "{}: the path is empty", flag);
  struct stat st {};
  if (::lstat(path.c_str(), &st) == 0) {
    TACO_REQUIRE_INPUT(!S_ISDIR(st.st_mode), "{} {}: is a directory (give a file name)", flag, path);
    TACO_REQUIRE_INPUT(S_ISREG(st.st_mode) || S_ISLNK(st.st_mode),
                       "{} {}: exists and is not a regular file (a device, pipe or socket); taco replaces only "
                       "regular files",
                       flag, path);
    if (S_ISLNK(st.st_mode) && ::stat(path.c_str(), &st) == 0)
      TACO_REQUIRE_INPUT(S_ISREG(st.st_mode), "{} {}: links to something that is not a regular file", flag, path);
  }
  const std::filesystem::path parent = std::filesystem::path(path).parent_path();
  if (!parent.empty()) {
    std::error_code ec;
    TACO_REQUIRE_INPUT(std::filesystem::is_directory(parent, ec), "{} {}: directory {} does not exist", flag, path,
                       parent.string());
  }
}

void throw_write_error(const std::string& what, int err) {
  if (err == 0) throw_input_error("{}: cannot write", what);
  throw_input_error("{}: cannot write ({})", what, std::strerror(err));
}

}  // namespace taco
