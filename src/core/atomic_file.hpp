#pragma once
// Output files appear whole or not at all: write to "<path>.tmp-<pid>", then rename over
// <path> in commit(). Destroying an uncommitted AtomicFile removes the temporary file.
#include <fstream>
#include <string>

namespace taco {

class AtomicFile {
 public:
  explicit AtomicFile(std::string path, bool binary = false);
  ~AtomicFile();
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  std::ostream& stream() { return out_; }
  const std::string& temp_path() const { return tmp_; }
  void commit();  // flush, close, rename; throws Error on I/O failure

 private:
  std::string path_, tmp_;
  std::ofstream out_;
  bool committed_ = false;
};

// Writes a whole string atomically.
void write_file_atomically(const std::string& path, const std::string& contents);

// Creates a directory and its parents; InputError if it exists as a file or cannot be made.
void make_directories(const std::string& dir);

}  // namespace taco
