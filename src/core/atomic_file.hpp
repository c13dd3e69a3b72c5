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
#include <memory>
#include <string>
#include <vector>

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

// What an output path names, for check_not_an_input.
enum class OutputKind {
  File,       // one file, written whole and renamed over the path
  Directory,  // a directory that the command replaces or writes files into
};

// Checks, before any work, that writing the output `out` cannot replace or remove one of the
// command's `inputs` (files or directories, as given or as found in directories): `out` must
// not be an input (the same path, or a symbolic or hard link to the same file), and a
// Directory output must not hold one (an input inside it, at any depth, through links too).
// Paths that do not exist yet are no input. InputError "<flag> <out>: ..." naming the input.
void check_not_an_input(const std::string& out, const std::vector<std::string>& inputs,
                        const char* flag, OutputKind kind);

// A directory of outputs that replaces <dir> as a whole, so that it never mixes two runs: the
// files go into a fresh "<dir>.tmp-<pid>" next to it, and commit() swaps that in with one
// atomic rename (renameat2 RENAME_EXCHANGE; where the file system lacks it, two renames with
// signals deferred), then removes the old set. Two commands writing the same <dir> at once
// each swap in a complete set; the last one stays.
//
// An existing <dir> is replaced only when it is empty or holds nothing but names in `owned`
// (files, or directories such as report/ that a later command added to the set), so that
// pointing --out at a directory of other files is an InputError before any work, never a
// loss. A symbolic link to a directory is followed.
class AtomicDirectory {
 public:
  AtomicDirectory(const std::string& dir, std::vector<std::string> owned, const char* flag);
  ~AtomicDirectory();
  AtomicDirectory(const AtomicDirectory&) = delete;
  AtomicDirectory& operator=(const AtomicDirectory&) = delete;

  // The temporary directory, created on first use: write the set's files here.
  const std::string& staging();
  // Writes one file of the set (a failure names <dir>/<name>, not the temporary directory).
  void write(const std::string& name, const std::string& contents);
  void commit();

 private:
  std::string dir_, tmp_, flag_;
  std::unique_ptr<RemoveOnInterrupt> cleanup_;
  bool created_ = false, committed_ = false;
};

// "<what>: cannot write (<strerror(err)>)" as an InputError.
[[noreturn]] void throw_write_error(const std::string& what, int err);

}  // namespace taco
