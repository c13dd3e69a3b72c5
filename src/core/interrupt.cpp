#include "core/interrupt.hpp"

#include "core/error.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cstring>

namespace taco {
namespace {

constexpr int kSlots = 64;
constexpr size_t kMaxPath = 4096;
enum : int { kFree = 0, kFilling = 1, kActive = 2 };

struct Slot {
  std::atomic<int> state{kFree};
  RemoveOnInterrupt::Kind kind = RemoveOnInterrupt::Kind::File;
  char path[kMaxPath] = {};
};

Slot g_slots[kSlots];
char g_prog[64] = "taco";
std::atomic<pid_t> g_owner{0};         // the process that installed the handlers
std::atomic<int> g_deferred{0};        // DeferInterrupts guards alive
std::atomic<int> g_pending_signal{0};  // a signal that arrived while deferred
const int kSignals[] = {SIGINT, SIGTERM, SIGHUP};

void put(const char* s) {
  size_t n = std::strlen(s);
  while (n > 0) {
    const ssize_t w = ::write(STDERR_FILENO, s, n);
    if (w <= 0) return;
    s += w;
    n -= size_t(w);
  }
}

// Removes the files of a directory (not recursing) and the directory, with system calls only.
void remove_directory_of_files(const char* path) {
  const int fd = ::open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd >= 0) {
    alignas(8) char buf[4096];
    for (;;) {
      const long n = ::syscall(SYS_getdents64, fd, buf, sizeof buf);
      if (n <= 0) break;
      for (long off = 0; off < n;) {
        // struct linux_dirent64: d_ino (8), d_off (8), d_reclen (2), d_type (1), d_name.
        unsigned short reclen;
        std::memcpy(&reclen, buf + off + 16, sizeof reclen);
        const char* name = buf + off + 19;
        if (std::strcmp(name, ".") != 0 && std::strcmp(name, "..") != 0) ::unlinkat(fd, name, 0);
        off += reclen;
      }
    }
    ::close(fd);
  }
  ::rmdir(path);
}

[[noreturn]] void clean_up_and_exit(int sig) {
  for (Slot& s : g_slots) {
    if (s.state.load(std::memory_order_acquire) != kActive) continue;
    if (s.kind == RemoveOnInterrupt::Kind::File)
      ::unlink(s.path);
    else
      remove_directory_of_files(s.path);
  }
  put(g_prog);
  put(": error: interrupted by ");
  put(sig == SIGINT ? "SIGINT" : sig == SIGTERM ? "SIGTERM" : "SIGHUP");
  put("\n");
  ::_exit(2);
}

void on_signal(int sig) {
  // A forked child inherits the handler until it resets it: it must not remove the parent's files.
  if (::getpid() != g_owner.load()) {
    ::signal(sig, SIG_DFL);
    ::raise(sig);
    return;
  }
  if (g_deferred.load() > 0) {
    g_pending_signal.store(sig);
    return;
  }
  clean_up_and_exit(sig);
}

}  // namespace

void install_interrupt_handlers(const char* prog) {
  std::strncpy(g_prog, prog, sizeof g_prog - 1);
  if (g_owner.exchange(::getpid()) == ::getpid()) return;
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  for (int s : kSignals) sigaddset(&sa.sa_mask, s);  // one handler at a time
  for (int s : kSignals) {
    struct sigaction old {};
    ::sigaction(s, nullptr, &old);
    // A signal ignored by whoever started us (nohup, a shell's background job) stays ignored.
    if (old.sa_handler != SIG_IGN) ::sigaction(s, &sa, nullptr);
  }
  ::signal(SIGXFSZ, SIG_IGN);
}

void reset_interrupt_handlers_in_child() {
  for (int s : kSignals) ::signal(s, SIG_DFL);
}

RemoveOnInterrupt::RemoveOnInterrupt(const std::string& path, Kind kind) {
  TACO_ASSERT(path.size() < kMaxPath, "temporary path of {} bytes", path.size());
  for (int i = 0; i < kSlots; ++i) {
    int expected = kFree;
    if (!g_slots[i].state.compare_exchange_strong(expected, kFilling)) continue;
    std::memcpy(g_slots[i].path, path.c_str(), path.size() + 1);
    g_slots[i].kind = kind;
    g_slots[i].state.store(kActive, std::memory_order_release);
    slot_ = i;
    return;
  }
  throw_error("more than {} temporary outputs at once", kSlots);
}

RemoveOnInterrupt::~RemoveOnInterrupt() {
  if (slot_ >= 0) g_slots[slot_].state.store(kFree, std::memory_order_release);
}

DeferInterrupts::DeferInterrupts() {
  outer_ = g_deferred.fetch_add(1) == 0;
}

DeferInterrupts::~DeferInterrupts() {
  if (g_deferred.fetch_sub(1) == 1 && outer_) {
    const int sig = g_pending_signal.exchange(0);
    if (sig != 0) clean_up_and_exit(sig);
  }
}

}  // namespace taco
