#include "core/atomic_file.hpp"

#include "core/error.hpp"

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <system_error>

namespace taco {

AtomicFile::AtomicFile(std::string path, bool binary)
    : path_(std::move(path)), tmp_(path_ + ".tmp-" + std::to_string(::getpid())) {
  out_.open(tmp_, binary ? std::ios::binary | std::ios::trunc : std::ios::trunc);
  if (!out_) throw_input_error("{}: cannot open for writing", path_);
}

AtomicFile::~AtomicFile() {
  if (!committed_) {
    out_.close();
    std::remove(tmp_.c_str());
  }
}

void AtomicFile::commit() {
  out_.flush();
  if (!out_) throw_error("{}: write failed", path_);
  out_.close();
  if (std::rename(tmp_.c_str(), path_.c_str()) != 0) throw_error("{}: cannot rename from {}", path_, tmp_);
  committed_ = true;
}

void write_file_atomically(const std::string& path, const std::string& contents) {
  AtomicFile f(path, true);
  f.stream() << contents;
  f.commit();
}

void make_directories(const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec || !std::filesystem::is_directory(dir)) throw_input_error("{}: cannot create directory", dir);
}

}  // namespace taco
