#include "core/atomic_file.hpp"

#include "core/error.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
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
  out_.flush();  // errno is still what the first failed write set
  if (!out_) throw_write_error(path_, errno);
  out_.close();
  if (!out_) throw_write_error(path_, errno);
  check_output_file(path_, "output");  // still not a directory or a device
  if (std::rename(tmp_.c_str(), path_.c_str()) != 0) throw_write_error(path_, errno);
  committed_ = true;
}

namespace {

// Writes the whole string to a new file with plain system calls, so that the reason of a
// failure (errno) is the one that happened.
void write_whole_file(const std::string& path, const std::string& contents,
                      const std::string& what) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
  if (fd < 0) throw_write_error(what, errno);
  const char* p = contents.data();
  size_t left = contents.size();
  while (left > 0) {
    const ssize_t w = ::write(fd, p, left);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      const int err = w < 0 ? errno : ENOSPC;
      ::close(fd);
      throw_write_error(what, err);
    }
    p += w;
    left -= size_t(w);
  }
  if (::close(fd) != 0) throw_write_error(what, errno);
}

}  // namespace

void write_file_atomically(const std::string& path, const std::string& contents) {
  check_output_file(path, "output");
  const std::string tmp = path + ".tmp-" + std::to_string(::getpid());
  RemoveOnInterrupt cleanup(tmp);
  try {
    write_whole_file(tmp, contents, path);
    check_output_file(path, "output");  // still not a directory or a device
    if (std::rename(tmp.c_str(), path.c_str()) != 0) throw_write_error(path, errno);
  } catch (...) {
    std::remove(tmp.c_str());
    throw;
  }
}

void make_directories(const std::string& dir) {
  TACO_REQUIRE_INPUT(!dir.empty(), "output directory: the path is empty");
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec || !std::filesystem::is_directory(dir))
    throw_input_error("{}: cannot create directory{}", dir,
                      ec ? " (" + ec.message() + ")" : std::string());
}

void check_output_file(const std::string& path, const char* flag) {
  TACO_REQUIRE_INPUT(!path.empty(), "{}: the path is empty", flag);
  struct stat st {};
  if (::lstat(path.c_str(), &st) == 0) {
    TACO_REQUIRE_INPUT(!S_ISDIR(st.st_mode), "{} {}: is a directory (give a file name)", flag,
                       path);
    TACO_REQUIRE_INPUT(
        S_ISREG(st.st_mode) || S_ISLNK(st.st_mode),
        "{} {}: exists and is not a regular file (a device, pipe or socket); taco replaces only "
        "regular files",
        flag, path);
    if (S_ISLNK(st.st_mode) && ::stat(path.c_str(), &st) == 0)
      TACO_REQUIRE_INPUT(S_ISREG(st.st_mode),
                         "{} {}: links to something that is not a regular file", flag, path);
  }
  const std::filesystem::path parent = std::filesystem::path(path).parent_path();
  if (!parent.empty()) {
    std::error_code ec;
    TACO_REQUIRE_INPUT(std::filesystem::is_directory(parent, ec),
                       "{} {}: directory {} does not exist", flag, path, parent.string());
  }
}

void check_not_an_input(const std::string& out, const std::vector<std::string>& inputs,
                        const char* flag, OutputKind kind) {
  namespace fs = std::filesystem;
  struct stat o {};
  if (out.empty() || ::stat(out.c_str(), &o) != 0) return;  // a new path replaces nothing
  auto same = [&o](const fs::path& p) {
    struct stat s {};
    return ::stat(p.c_str(), &s) == 0 && s.st_dev == o.st_dev && s.st_ino == o.st_ino;
  };
  for (const std::string& in : inputs) {
    if (same(in))
      throw_input_error(
          "{} {}: is the input {}{}; writing it would destroy the input: give another {}", flag,
          out, in,
          fs::path(in).lexically_normal() == fs::path(out).lexically_normal() ? ""
                                                                              : " (the same file)",
          kind == OutputKind::File ? "file name" : "directory");
    if (kind != OutputKind::Directory) continue;
    // Every directory above the input, links resolved: is one of them the output?
    std::error_code ec;
    const fs::path real = fs::weakly_canonical(fs::absolute(in, ec), ec);
    if (ec) continue;
    for (fs::path p = real.parent_path(); !p.empty(); p = p.parent_path()) {
      if (same(p))
        throw_input_error(
            "{} {}: holds the input {}, which writing the output would replace or remove: give "
            "another directory",
            flag, out, in);
      if (p == p.parent_path()) break;
    }
  }
}

namespace {

// "results.csv.tmp-123" (left by a run that was killed outright) counts as "results.csv".
std::string without_temp_suffix(const std::string& name) {
  const size_t at = name.rfind(".tmp-");
  if (at == std::string::npos || at + 5 == name.size()) return name;
  const bool digits = std::all_of(name.begin() + long(at) + 5, name.end(),
                                  [](char c) { return c >= '0' && c <= '9'; });
  return digits ? name.substr(0, at) : name;
}

}  // namespace

AtomicDirectory::AtomicDirectory(const std::string& dir, std::vector<std::string> owned,
                                 const char* flag)
    : flag_(flag) {
  namespace fs = std::filesystem;
  TACO_REQUIRE_INPUT(!dir.empty(), "{}: the path is empty", flag);
  fs::path p = fs::path(dir).lexically_normal();
  if (!p.has_filename()) p = p.parent_path();  // "out/" -> "out"
  std::error_code ec;
  if (fs::is_symlink(p, ec)) {
    TACO_REQUIRE_INPUT(fs::is_directory(p, ec),
                       "{} {}: is a link to something that is not a directory", flag, dir);
    p = fs::canonical(p, ec);
  }
  if (p.filename() == "." || p.filename() == "..") p = fs::absolute(p, ec).lexically_normal();
  if (!p.has_filename()) p = p.parent_path();
  const fs::file_status st = fs::symlink_status(p, ec);
  if (fs::exists(st)) {
    TACO_REQUIRE_INPUT(fs::is_directory(st), "{} {}: exists and is not a directory", flag, dir);
    for (const auto& e : fs::directory_iterator(p, ec)) {
      const std::string name = e.path().filename().string();
      TACO_REQUIRE_INPUT(
          std::find(owned.begin(), owned.end(), without_temp_suffix(name)) != owned.end(),
          "{} {}: holds '{}', which this command did not write; give a new or empty directory (the "
          "directory is replaced as a whole)",
          flag, dir, name);
    }
    TACO_REQUIRE_INPUT(!ec, "{} {}: cannot list the directory ({})", flag, dir, ec.message());
  }
  dir_ = p.string();
  tmp_ = dir_ + ".tmp-" + std::to_string(::getpid());
}

AtomicDirectory::~AtomicDirectory() {
  if (created_ && !committed_) {
    std::error_code ec;
    std::filesystem::remove_all(tmp_, ec);
  }
}

void AtomicDirectory::write(const std::string& name, const std::string& contents) {
  write_whole_file((std::filesystem::path(staging()) / name).string(), contents,
                   (std::filesystem::path(dir_) / name).string());
}

const std::string& AtomicDirectory::staging() {
  if (!created_) {
    const std::filesystem::path parent = std::filesystem::path(dir_).parent_path();
    if (!parent.empty()) make_directories(parent.string());
    cleanup_ = std::make_unique<RemoveOnInterrupt>(tmp_, RemoveOnInterrupt::Kind::DirectoryOfFiles);
    std::error_code ec;
    std::filesystem::remove_all(tmp_, ec);  // a stale one from a process that had our pid
    if (::mkdir(tmp_.c_str(), 0777) != 0)
      throw_write_error(fmt::format("{} {}", flag_, dir_), errno);
    created_ = true;
  }
  return tmp_;
}

void AtomicDirectory::commit() {
  staging();
  DeferInterrupts defer;  // the swap and the removal of the old set are not cut in half
  std::error_code ec;
  if (!std::filesystem::exists(std::filesystem::symlink_status(dir_, ec))) {
    if (std::rename(tmp_.c_str(), dir_.c_str()) != 0)
      throw_write_error(fmt::format("{} {}", flag_, dir_), errno);
  } else if (::renameat2(AT_FDCWD, tmp_.c_str(), AT_FDCWD, dir_.c_str(), RENAME_EXCHANGE) == 0) {
    std::filesystem::remove_all(tmp_, ec);  // now the old set
  } else {
    // No atomic exchange here (EINVAL, ENOSYS): move the old set aside, then the new one in.
    const std::string old = dir_ + ".old-" + std::to_string(::getpid());
    if (std::rename(dir_.c_str(), old.c_str()) != 0)
      throw_write_error(fmt::format("{} {}", flag_, dir_), errno);
    if (std::rename(tmp_.c_str(), dir_.c_str()) != 0) {
      const int err = errno;
      std::rename(old.c_str(), dir_.c_str());
      throw_write_error(fmt::format("{} {}", flag_, dir_), err);
    }
    std::filesystem::remove_all(old, ec);
  }
  committed_ = true;
  cleanup_.reset();
}

void throw_write_error(const std::string& what, int err) {
  if (err == 0) throw_input_error("{}: cannot write", what);
  throw_input_error("{}: cannot write ({})", what, std::strerror(err));
}

}  // namespace taco
