#pragma once
// Output files appear whole or not at all: write to "<path>.tmp-<pid>", then rename over
// <path> in commit(). Destroying an uncommitted AtomicFile, or interrupting the process
// (core/interrupt.hpp), removes the temporary file.
//
// Failures to write an output (a full disk, the file-size limit, no permission) are
// InputError naming the path and the system's reason: the user fixes them by choosing
// another place, as with any other bad argument.
#include "core/interrupt.hpp"

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
  void commit();  // flush, close, rename; InputError on I/O failure

 private:
  std::string path_, tmp_;
  RemoveOnInterrupt cleanup_;
  std::ofstream out_;
  bool committed_ = false;
};

// Writes a whole string atomically.
void write_file_atomically(const std::string& path, const std::string& contents);

// Creates a directory and its parents; InputError if it exists as a file or cannot be made.
void make_directories(const std::string& dir);

// Checks, before any work, that `path` can become an output file: not empty, not an existing
// directory, device, pipe or socket (renaming over those would replace them), and its
// directory exists. InputError "<flag> <path>: ...".
void check_output_file(const std::string& path, const char* flag);

// "<what>: cannot write (<strerror(err)>)" as an InputError.
[[noreturn]] void throw_write_error(const std::string& what, int err);

}  // namespace taco
