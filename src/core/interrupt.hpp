#pragma once
// What an interrupted command leaves behind: nothing. Temporary outputs (a trace being written,
// a study's directory being filled) are registered here while they exist; SIGINT, SIGTERM and
// SIGHUP remove them, print one line on stderr and end the process with exit code 2, the code
// of every other failure of a command (docs/CONVENTIONS.md).
//
// The handler runs only async-signal-safe system calls (unlink, openat, getdents64, rmdir,
// write, _exit), so it may fire at any point, even inside malloc. A registered directory may
// hold files but no subdirectories.
#include <string>

namespace taco {

// Installs the handlers (once per process; later calls only update the program name) and
// makes a write past the file-size limit (RLIMIT_FSIZE) fail with EFBIG instead of killing
// the process with SIGXFSZ, so that it is reported like any other write error.
void install_interrupt_handlers(const char* prog);

// Restores the default dispositions (for a forked child that must die quietly on a signal).
void reset_interrupt_handlers_in_child();

// While alive, `path` is removed if the process is interrupted. Registrations are few
// (at most 64 at a time); more is an internal error.
class RemoveOnInterrupt {
 public:
  enum class Kind { File, DirectoryOfFiles };
  explicit RemoveOnInterrupt(const std::string& path, Kind kind = Kind::File);
  ~RemoveOnInterrupt();
  RemoveOnInterrupt(const RemoveOnInterrupt&) = delete;
  RemoveOnInterrupt& operator=(const RemoveOnInterrupt&) = delete;

 private:
  int slot_ = -1;
};

// Defers SIGINT/SIGTERM/SIGHUP while alive (a few renames that must not be cut in half); a
// signal that arrived meanwhile is handled when the last guard ends.
class DeferInterrupts {
 public:
  DeferInterrupts();
  ~DeferInterrupts();
  DeferInterrupts(const DeferInterrupts&) = delete;
  DeferInterrupts& operator=(const DeferInterrupts&) = delete;

 private:
  bool outer_ = false;
};

}  // namespace taco
