#include "io/isolated_source.hpp"

#include "core/error.hpp"
#include "core/interrupt.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <new>

#if defined(__SANITIZE_ADDRESS__)
#define TACO_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TACO_SANITIZED 1
#endif
#endif
#if defined(TACO_SANITIZED)
#include <sanitizer/common_interface_defs.h>
#endif

namespace taco {
namespace {

enum Status : uint8_t { kOk = 0, kInputError = 1, kOtherError = 2, kNoMemory = 3 };

bool send_all(int fd, const void* data, size_t n) {
  const auto* p = static_cast<const char*>(data);
  while (n > 0) {
    const ssize_t w = ::send(fd, p, n, MSG_NOSIGNAL);  // a dead peer is EPIPE, not SIGPIPE
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    p += w;
    n -= size_t(w);
  }
  return true;
}

bool recv_all(int fd, void* data, size_t n) {
  auto* p = static_cast<char*>(data);
  while (n > 0) {
    const ssize_t r = ::recv(fd, p, n, 0);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    p += r;
    n -= size_t(r);
  }
  return true;
}

// A message: status, payload length, payload.
bool send_message(int fd, Status status, const std::string& payload) {
  const uint64_t len = payload.size();
  return send_all(fd, &status, 1) && send_all(fd, &len, 8) &&
         send_all(fd, payload.data(), payload.size());
}

// ---- the listing, serialized ----------------------------------------------------------

struct Writer {
  std::string b;
  void u64(uint64_t v) { b.append(reinterpret_cast<const char*>(&v), 8); }
  void i64(int64_t v) { u64(uint64_t(v)); }
  void str(const std::string& s) {
    u64(s.size());
    b += s;
  }
};

struct Reader {
  const std::string& b;
  size_t at = 0;
  uint64_t u64() {
    TACO_ASSERT(at + 8 <= b.size(), "isolated reader: short listing");
    uint64_t v;
    std::memcpy(&v, b.data() + at, 8);
    at += 8;
    return v;
  }
  int64_t i64() { return int64_t(u64()); }
  std::string str() {
    const uint64_t n = u64();
    TACO_ASSERT(n <= b.size() - at, "isolated reader: short listing");
    std::string s = b.substr(at, size_t(n));
    at += size_t(n);
    return s;
  }
};

std::string encode_listing(const TensorSource& src) {
  Writer w;
  w.str(src.format());
  w.u64(src.size());
  for (size_t i = 0; i < src.size(); ++i) {
    const TensorInfo t = src.info(i);
    w.str(t.name);
    w.u64(uint64_t(t.dtype));
    w.u64(t.shape.size());
    for (int64_t d : t.shape) w.i64(d);
    const TensorMeta& m = t.meta;
    w.i64(m.layer);
    w.str(m.site);
    w.str(m.direction);
    w.str(m.collective);
    w.i64(m.tp_rank);
    w.i64(m.tp_size);
    w.i64(m.step);
    w.str(m.model);
    w.u64(m.extra.size());
    for (const auto& [k, v] : m.extra) {
      w.str(k);
      w.str(v);
    }
  }
  return std::move(w.b);
}

void decode_listing(const std::string& bytes, std::string& format, std::vector<TensorInfo>& infos) {
  Reader r{bytes};
  format = r.str();
  const uint64_t n = r.u64();
  for (uint64_t i = 0; i < n; ++i) {
    TensorInfo t;
    t.name = r.str();
    t.dtype = DType(r.u64());
    const uint64_t rank = r.u64();
    for (uint64_t k = 0; k < rank; ++k) t.shape.push_back(r.i64());
    TensorMeta& m = t.meta;
    m.layer = int(r.i64());
    m.site = r.str();
    m.direction = r.str();
    m.collective = r.str();
    m.tp_rank = int(r.i64());
    m.tp_size = int(r.i64());
    m.step = r.i64();
    m.model = r.str();
    const uint64_t extras = r.u64();
    for (uint64_t k = 0; k < extras; ++k) {
      std::string key = r.str();
      m.extra[key] = r.str();
    }
    infos.push_back(std::move(t));
  }
}

// ---- the child ----------------------------------------------------------------------------

void close_other_descriptors(int keep) {
  // Copies of other sources' parent ends would keep their children from seeing EOF.
  if ((keep == 3 || ::close_range(3, unsigned(keep) - 1, 0) == 0) &&
      ::close_range(unsigned(keep) + 1, ~0U, 0) == 0)
    return;
  const int max_fd = int(std::min<long>(::sysconf(_SC_OPEN_MAX), 65536));  // kernels before 5.9
  for (int fd = 3; fd < max_fd; ++fd)
    if (fd != keep) ::close(fd);
}

// A corrupt file can also send libhdf5 into an endless loop. Each request gets a CPU-time
// budget (SIGXCPU ends the child, which the parent reports like a crash): generous for real
// work, which runs at tens of millions of elements per second. TACO_READER_CPU_SECONDS sets the
// base (the fuzzer uses a short one).
void limit_cpu(uint64_t numel) {
  double base = 60;
  if (const char* env = std::getenv("TACO_READER_CPU_SECONDS"))
    base = std::max(1.0, std::atof(env));
  rusage ru{};
  ::getrusage(RUSAGE_SELF, &ru);
  const double used = double(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
                      1e-6 * double(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec);
  const auto soft = rlim_t(used + base + double(numel) / 1e6) + 1;
  const rlimit lim{soft, soft + 5};
  ::setrlimit(RLIMIT_CPU, &lim);
}

// A corrupt file can also make libhdf5 allocate gigabytes: one flipped bit in the length of a
// string attribute made it take 4 GB for an 8 MB trace. Each request gets an address-space
// budget on top of what the child maps already: the file's metadata may take a fixed floor plus
// a few times the file's size, and a tensor its values and the reader's buffers. A request
// over it fails inside the library (an InputError naming the file) instead of taking the
// machine's memory. The sanitizers map terabytes of shadow memory: no budget under them.
#if !defined(TACO_SANITIZED)
constexpr uint64_t kMetadataMemoryFloor = uint64_t(256) << 20;
constexpr uint64_t kMetadataPerFileByte = 4;
constexpr uint64_t kBytesPerTensorElement = 16;  // float32 values, f64 staging, conversion

uint64_t mapped_bytes() {
  unsigned long long pages = 0;
  if (FILE* f = std::fopen("/proc/self/statm", "r")) {
    if (std::fscanf(f, "%llu", &pages) != 1) pages = 0;
    std::fclose(f);
  }
  return uint64_t(pages) * uint64_t(::sysconf(_SC_PAGESIZE));
}
#endif

void limit_memory([[maybe_unused]] uint64_t file_size, [[maybe_unused]] uint64_t numel) {
#if !defined(TACO_SANITIZED)
  auto sat_add = [](uint64_t a, uint64_t b) { return a > UINT64_MAX - b ? UINT64_MAX : a + b; };
  auto sat_mul = [](uint64_t a, uint64_t b) {
    return b != 0 && a > UINT64_MAX / b ? UINT64_MAX : a * b;
  };
  const uint64_t budget =
      sat_add(sat_add(kMetadataMemoryFloor, sat_mul(file_size, kMetadataPerFileByte)),
              sat_mul(numel, kBytesPerTensorElement));
  rlimit lim{};
  if (::getrlimit(RLIMIT_AS, &lim) != 0) return;
  const uint64_t soft = sat_add(mapped_bytes(), budget);
  lim.rlim_cur =
      lim.rlim_max == RLIM_INFINITY ? rlim_t(soft) : std::min(rlim_t(soft), lim.rlim_max);
  ::setrlimit(RLIMIT_AS, &lim);
#endif
}

[[noreturn]] void serve(int fd, uint64_t file_size,
                        const std::function<std::unique_ptr<TensorSource>()>& open) {
  // The send may fail (the parent is gone): then there is nothing left to do but leave.
  auto report = [fd](Status s, const char* what) { send_message(fd, s, what); };
  std::unique_ptr<TensorSource> src;
  try {
    limit_cpu(0);
    limit_memory(file_size, 0);
    src = open();
    if (!send_message(fd, kOk, encode_listing(*src))) ::_exit(0);
  } catch (const InputError& e) {
    report(kInputError, e.what());
    ::_exit(0);
  } catch (const std::bad_alloc&) {
    report(kNoMemory, "out of memory");
    ::_exit(0);
  } catch (const std::exception& e) {
    report(kOtherError, e.what());
    ::_exit(0);
  }
  for (;;) {
    uint64_t index = 0;
    if (!recv_all(fd, &index, 8)) ::_exit(0);
    try {
      TACO_ASSERT(index < src->size(), "tensor index {} of {}", index, src->size());
      int64_t numel = 1;
      for (int64_t d : src->info(size_t(index)).shape) numel *= d;
      limit_cpu(uint64_t(numel));
      limit_memory(file_size, uint64_t(numel));
      const Tensor t = src->read(size_t(index));
      const Status ok = kOk;
      const uint64_t len = t.values.size() * sizeof(float);
      if (!send_all(fd, &ok, 1) || !send_all(fd, &len, 8) || !send_all(fd, t.values.data(), len))
        ::_exit(0);
    } catch (const InputError& e) {
      report(kInputError, e.what());
    } catch (const std::bad_alloc&) {
      report(kNoMemory, "out of memory");
    } catch (const std::exception& e) {
      report(kOtherError, e.what());
    }
  }
}

// ---- the parent ---------------------------------------------------------------------------

// A reader process: started, serving, stopped.
struct Child {
  int fd = -1;
  pid_t pid = -1;
};

Child start_child(const std::string& path,
                  const std::function<std::unique_ptr<TensorSource>()>& open) {
  int sv[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
    throw_error("{}: cannot start the reader process ({})", path, std::strerror(errno));
  const pid_t pid = ::fork();
  if (pid < 0) {
    const int err = errno;
    ::close(sv[0]);
    ::close(sv[1]);
    throw_error("{}: cannot start the reader process ({})", path, std::strerror(err));
  }
  if (pid == 0) {
    reset_interrupt_handlers_in_child();
    // A crash inside the library must end the child by its signal (no sanitizer or fuzzer
    // handler turning it into an exit code), so that the parent can tell it from an error.
    for (int sig : {SIGSEGV, SIGBUS, SIGABRT, SIGFPE, SIGILL, SIGXCPU}) ::signal(sig, SIG_DFL);
    close_other_descriptors(sv[1]);
#if !defined(TACO_SANITIZED)
    // What libhdf5 prints (assertions, error stacks) must not reach the user: the parent
    // reports one line.
    const int devnull = ::open("/dev/null", O_WRONLY);
    if (devnull >= 0) ::dup2(devnull, STDERR_FILENO);
#else
    // Under AddressSanitizer, libhdf5's wild memcpy on a corrupt file is caught by the
    // sanitizer's interceptor instead of crashing: make that an abort too (the report stays on
    // stderr), so that it reads as the reader crashing, as it would without the sanitizer. Our
    // own code in the child runs in-process in the unit tests and fuzz_trace as well.
    __sanitizer_set_death_callback(+[] {
      ::signal(SIGABRT, SIG_DFL);
      ::abort();
    });
#endif
    struct stat st {};
    serve(sv[1], ::stat(path.c_str(), &st) == 0 ? uint64_t(st.st_size) : 0, open);
  }
  ::close(sv[1]);
  return Child{sv[0], pid};
}

void stop_child(Child& c) {
  if (c.fd >= 0) ::close(c.fd);
  if (c.pid > 0) {
    ::kill(c.pid, SIGKILL);
    while (::waitpid(c.pid, nullptr, 0) < 0 && errno == EINTR) {
    }
  }
  c = Child{};
}

class IsolatedSource;

// A study opens every input before it reads one, and a directory may hold thousands of HDF5
// files: at most this many reader processes live at once. Another source's child is stopped
// (least recently used first) and started again when that source is read.
constexpr size_t kMaxLiveChildren = 8;
std::mutex g_live_mutex;
std::vector<IsolatedSource*> g_live;  // least recently used first

class IsolatedSource final : public TensorSource {
 public:
  IsolatedSource(std::string path, std::function<std::unique_ptr<TensorSource>()> open)
      : path_(std::move(path)), open_(std::move(open)) {
    ensure_child("opening it");
    decode_listing(listing_, format_, infos_);
  }
  ~IsolatedSource() override {
    forget();
    stop_child(child_);
  }

  const std::string& path() const override { return path_; }
  std::string format() const override { return format_; }
  size_t size() const override { return infos_.size(); }
  TensorInfo info(size_t i) const override {
    TACO_ASSERT(i < infos_.size(), "tensor index {} of {}", i, infos_.size());
    return infos_[i];
  }

  Tensor read(size_t i) override {
    const TensorInfo& info = this->info(i);
    const std::string what = fmt::format("reading tensor '{}'", info.name);
    TACO_REQUIRE_INPUT(!failed_, "{}: the reader process is gone (an earlier error)", path_);
    ensure_child(what);
    const uint64_t index = i;
    if (!send_all(child_.fd, &index, 8)) child_failed(what);
    Tensor t;
    t.name = info.name;
    t.dtype = info.dtype;
    t.shape = info.shape;
    t.meta = info.meta;
    uint64_t len = 0;
    receive_header(len, what, [&] {
      TACO_ASSERT(len == uint64_t(t.numel()) * sizeof(float), "{}: {} bytes for {} values", what,
                  len, t.numel());
      t.values.resize(size_t(t.numel()));
      if (!recv_all(child_.fd, t.values.data(), size_t(len))) child_failed(what);
    });
    return t;
  }

  // Called with g_live_mutex held, by another source that needs the slot.
  void evict() { stop_child(child_); }

 private:
  // A live child that has sent its listing: the first one, or a restart whose listing must be
  // the same (the file did not change under us).
  void ensure_child(const std::string& what) {
    {
      std::lock_guard<std::mutex> lock(g_live_mutex);
      const auto self = std::find(g_live.begin(), g_live.end(), this);
      if (self != g_live.end() && child_.pid > 0) {  // most recently used now
        g_live.erase(self);
        g_live.push_back(this);
        return;
      }
      if (self != g_live.end()) g_live.erase(self);
      while (g_live.size() >= kMaxLiveChildren) {
        g_live.front()->evict();
        g_live.erase(g_live.begin());
      }
      g_live.push_back(this);
    }
    try {
      child_ = start_child(path_, open_);
      std::string listing;
      uint64_t len = 0;
      receive_header(len, what, [&] {
        listing.resize(size_t(len));
        if (!recv_all(child_.fd, listing.data(), listing.size())) child_failed(what);
      });
      if (listing_.empty())
        listing_ = std::move(listing);
      else
        TACO_REQUIRE_INPUT(listing == listing_, "{}: the file changed while taco was reading it",
                           path_);
    } catch (...) {
      forget();
      stop_child(child_);
      throw;
    }
  }

  void forget() {
    std::lock_guard<std::mutex> lock(g_live_mutex);
    g_live.erase(std::remove(g_live.begin(), g_live.end(), this), g_live.end());
  }

  template <typename OnOk>
  void receive_header(uint64_t& len, const std::string& what, OnOk on_ok) {
    uint8_t status = 0;
    if (!recv_all(child_.fd, &status, 1) || !recv_all(child_.fd, &len, 8)) child_failed(what);
    if (status == kOk) return on_ok();
    std::string msg(size_t(std::min<uint64_t>(len, 1 << 20)), '\0');
    if (!recv_all(child_.fd, msg.data(), msg.size())) child_failed(what);
    if (status == kInputError) throw InputError(msg);
    if (status == kNoMemory) throw std::bad_alloc();
    throw Error(msg);
  }

  [[noreturn]] void child_failed(const std::string& what) {
    int status = 0;
    ::close(child_.fd);
    pid_t waited = -1;
    do {
      waited = ::waitpid(child_.pid, &status, 0);
    } while (waited < 0 && errno == EINTR);
    child_ = Child{};
    failed_ = true;
    forget();
    if (waited > 0 && WIFSIGNALED(status) && WTERMSIG(status) == SIGXCPU)
      throw_input_error(
          "{}: the HDF5 library ran out of its CPU-time budget {}: the file is corrupt (or set "
          "TACO_READER_CPU_SECONDS higher)",
          path_, what);
    if (waited > 0 && WIFSIGNALED(status))
      throw_input_error("{}: the HDF5 library crashed ({}) {}: the file is corrupt", path_,
                        sigabbrev_np(WTERMSIG(status))
                            ? fmt::format("SIG{}", sigabbrev_np(WTERMSIG(status)))
                            : fmt::format("signal {}", WTERMSIG(status)),
                        what);
    throw_error("{}: the reader process ended unexpectedly (exit status {}) {}", path_,
                waited > 0 && WIFEXITED(status) ? WEXITSTATUS(status) : -1, what);
  }

  std::string path_, format_, listing_;
  std::function<std::unique_ptr<TensorSource>()> open_;
  std::vector<TensorInfo> infos_;
  Child child_;
  bool failed_ = false;
};

}  // namespace

std::unique_ptr<TensorSource> open_isolated(const std::string& path,
                                            std::function<std::unique_ptr<TensorSource>()> open) {
  return std::make_unique<IsolatedSource>(path, std::move(open));
}

}  // namespace taco
