// NCCL and loopback fabrics for taco comm (see comm_fabric.hpp).
#include "cuda/collectives/comm_fabric.hpp"

#include <fmt/format.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <thread>
#include <utility>

#include "core/error.hpp"
#include "cuda/collectives/comm_kernels.hpp"
#include "cuda/runtime/cuda_check.hpp"

#if defined(TACO_HAVE_NCCL)
#include <nccl.h>
#endif

namespace taco::gpu {

std::string rank_prefix(const RankTag& t) {
  return fmt::format("rank {} (host {}, GPU {})", t.rank, t.host, t.device);
}

std::vector<DeviceBuffer> Fabric::alloc_wire(size_t bytes) {
  std::vector<DeviceBuffer> out;
  for (int l = 0; l < nlocal(); ++l) {
    const std::string what = fmt::format("cudaMalloc(wire buffer) on {}", rank_prefix(tag(l)));
    TACO_CUDA_CHECK(cudaSetDevice(tag(l).device));
    out.emplace_back(bytes, what.c_str());
    // The zeros must land before the executor's streams (non-blocking: they do not wait for the
    // legacy stream that cudaMemset runs on) write or read the buffer.
    TACO_CUDA_CHECK(cudaMemset(out.back().get(), 0, bytes));
    TACO_CUDA_CHECK(cudaDeviceSynchronize());
  }
  return out;
}

// ---- NCCL ------------------------------------------------------------------------------------
#if defined(TACO_HAVE_NCCL)

namespace {

std::string version_string(int code) {
  // 2.x codes: major * 10000 + minor * 100 + patch (NCCL >= 2.9); older: major * 1000 + minor * 100
  // + patch
  if (code >= 10000) return fmt::format("{}.{}.{}", code / 10000, (code % 10000) / 100, code % 100);
  return fmt::format("{}.{}.{}", code / 1000, (code % 1000) / 100, code % 100);
}

int runtime_code() {
  int v = 0;
  if (ncclGetVersion(&v) != ncclSuccess) return 0;
  return v;
}

ncclDataType_t nccl_type(DType t) {
  switch (t) {
    case DType::BF16:
      return ncclBfloat16;
    case DType::F16:
      return ncclFloat16;
    case DType::F32:
      return ncclFloat32;
#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 24, 0)
    case DType::F8E4M3:
      return ncclFloat8e4m3;
    case DType::F8E5M2:
      return ncclFloat8e5m2;
#endif
    default:
      break;
  }
  throw_input_error("NCCL {} has no reduction type for {}", version_string(NCCL_VERSION_CODE),
                    dtype_name(t));
}

// Communicators: with a timeout (> 0) they are created non-blocking (ncclCommInitRankConfig with
// blocking = 0, polled with ncclCommGetAsyncError against the deadline, so a peer that never
// arrives cannot hang the start) and then split (ncclCommSplit, same ranks) into blocking twins
// that carry every collective: NCCL runs each non-blocking group on a new thread, which costs
// about 0.1-0.2 ms per call and would dominate small messages. Calls that can block inside NCCL
// (ncclGroupEnd, which may connect peers lazily) are armed on a watchdog thread: past the deadline
// it aborts every communicator (ncclCommAbort, which makes the blocked call return) and, should the
// call still not return, ends the process with a message. Waits on streams poll the streams and
// ncclCommGetAsyncError themselves (wait_streams). Without a timeout (-T 0) the communicators are
// blocking from the start and nothing is watched.
class NcclFabric final : public Fabric {
 public:
  explicit NcclFabric(const NcclSetup& s);
  ~NcclFabric() override;
  std::string kind() const override { return "nccl"; }

  void group_start() override {
    check(ncclGroupStart(), "ncclGroupStart()", -1, __FILE__, __LINE__);
  }
  void group_end() override {
    arm("ncclGroupEnd()");
    const ncclResult_t r = ncclGroupEnd();
    disarm();
    check(r, "ncclGroupEnd()", -1, __FILE__, __LINE__);
  }
  // Byte messages are the compressed collectives' (and plain all-to-all / send-recv rows'): on the
  // wire communicator when it exists, and only there can they meet the windows of alloc_wire.
  void send(int l, const void* buf, size_t bytes, int peer, cudaStream_t s) override {
    check(ncclSend(buf, bytes, ncclUint8, peer, byte_comm(l, buf), s), "ncclSend", l, __FILE__,
          __LINE__);
  }
  void recv(int l, void* buf, size_t bytes, int peer, cudaStream_t s) override {
    check(ncclRecv(buf, bytes, ncclUint8, peer, byte_comm(l, buf), s), "ncclRecv", l, __FILE__,
          __LINE__);
  }
  void all_gather_bytes(int l, const void* src, void* dst, size_t bytes, cudaStream_t s) override {
    check(ncclAllGather(src, dst, bytes, ncclUint8, byte_comm(l, dst), s), "ncclAllGather(bytes)",
          l, __FILE__, __LINE__);
  }
  void all_reduce(int l, const void* in, void* out, size_t count, DType t,
                  cudaStream_t s) override {
    check(ncclAllReduce(in, out, count, nccl_type(t), ncclSum, comm(l), s), "ncclAllReduce", l,
          __FILE__, __LINE__);
  }
  void reduce_scatter(int l, const void* in, void* out, size_t recvcount, DType t,
                      cudaStream_t s) override {
    check(ncclReduceScatter(in, out, recvcount, nccl_type(t), ncclSum, comm(l), s),
          "ncclReduceScatter", l, __FILE__, __LINE__);
  }
  void all_gather(int l, const void* in, void* out, size_t count, DType t,
                  cudaStream_t s) override {
    check(ncclAllGather(in, out, count, nccl_type(t), comm(l), s), "ncclAllGather", l, __FILE__,
          __LINE__);
  }

  std::vector<DeviceBuffer> alloc_wire(size_t bytes) override;
  std::string wire_memory() const override { return wire_memory_; }

  void check_async() override {
    for (int l = 0; l < nlocal(); ++l) {
      for (ncclComm_t c : {comm(l), wire_comms_.empty() ? nullptr : wire_comms_[size_t(l)]}) {
        if (!c) continue;
        ncclResult_t st = ncclSuccess;
        check(ncclCommGetAsyncError(c, &st), "ncclCommGetAsyncError", l, __FILE__, __LINE__);
        if (st != ncclSuccess && st != ncclInProgress) fail(l, "asynchronous NCCL error", st);
      }
    }
  }

  void abort() noexcept override {
    if (aborted_.exchange(true)) return;
    for (auto* v : {&wire_comms_, &comms_, &init_comms_})
      for (auto& c : *v)
        if (c) {
          (void)ncclCommAbort(c);
          c = nullptr;
        }
  }

 private:
  ncclComm_t comm(int l) const {
    if (aborted_)
      throw Error(
          fmt::format("{}: NCCL communicators were aborted after an earlier failure", where(l)));
    return comms_[size_t(l)];
  }
  // The wire communicator for messages in alloc_wire's buffers, else the plain one (plain rows'
  // send/recv keep the default CTA policy).
  ncclComm_t byte_comm(int l, const void* buf) const {
    const ncclComm_t c = comm(l);
    if (wire_comms_.empty()) return c;
    for (const auto& [ptr, bytes] : wire_ranges_[size_t(l)])
      if (static_cast<const uint8_t*>(buf) >= ptr && static_cast<const uint8_t*>(buf) < ptr + bytes)
        return wire_comms_[size_t(l)];
    return c;
  }
  void make_wire_comms();
  void release_window(int l, void* ptr, void* win) noexcept;  // win: an ncclWindow_t or nullptr
  std::string where(int l) const {
    return l >= 0 ? rank_prefix(tag(l))
                  : fmt::format("ranks {}..{} (host {})", tag(0).rank, tag(nlocal() - 1).rank,
                                tag(0).host);
  }
  [[noreturn]] void fail(int l, const std::string& what, ncclResult_t r) {
    const char* last = nullptr;
    if (!aborted_)
      last = ncclGetLastError(l >= 0 && size_t(l) < comms_.size() ? comms_[size_t(l)] : nullptr);
    std::string msg =
        fmt::format("{}: {}: {} ({}){}", where(l), what, ncclGetErrorString(r), int(r),
                    last && *last ? fmt::format("; NCCL says: {}", last) : std::string());
    if (fired_)
      msg += fmt::format("; the watchdog aborted the communicators after {} s in {} (--timeout)",
                         timeout_s_, fired_what_);
    abort();
    throw Error(msg);
  }
  void check(ncclResult_t r, const char* call, int l, const char* file, int line,
             bool in_progress_ok = false) {
    if (r == ncclSuccess || (r == ncclInProgress && in_progress_ok)) return;
    fail(l, fmt::format("{} failed at {}:{}", call, file, line), r);
  }
  // Waits until no call is in progress on any of `cs` (non-blocking communicators), or the
  // deadline.
  void settle(const std::vector<ncclComm_t>& cs, const char* what) {
    const auto t0 = std::chrono::steady_clock::now();
    for (long spins = 0;; ++spins) {
      bool busy = false;
      for (int l = 0; l < int(cs.size()); ++l) {
        ncclResult_t st = ncclSuccess;
        check(ncclCommGetAsyncError(cs[size_t(l)], &st), "ncclCommGetAsyncError", l, __FILE__,
              __LINE__);
        if (st == ncclInProgress)
          busy = true;
        else if (st != ncclSuccess)
          fail(l, fmt::format("{} failed asynchronously", what), st);
      }
      if (!busy) return;
      if (timeout_s_ > 0 &&
          std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() >
              timeout_s_) {
        abort();
        throw Error(
            fmt::format("{}: {} still in progress after {} s (--timeout): a peer stalled or died; "
                        "communicators aborted",
                        where(-1), what, timeout_s_));
      }
      if (spins > 1000) std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
  }

  // ---- watchdog over calls that may block inside NCCL ----
  void arm(const char* what) {
    if (timeout_s_ <= 0) return;
    armed_what_.store(what);
    armed_ns_.store(std::chrono::steady_clock::now().time_since_epoch().count());
  }
  void disarm() { armed_ns_.store(0); }
  void watch() {
    std::unique_lock<std::mutex> lk(mu_);
    while (!stop_) {
      cv_.wait_for(lk, std::chrono::milliseconds(20));
      const int64_t since = armed_ns_.load();
      if (stop_ || since == 0) continue;
      const double held =
          double(std::chrono::steady_clock::now().time_since_epoch().count() - since) * 1e-9;
      if (held <= timeout_s_) continue;
      fired_what_ = armed_what_.load();
      fired_ = true;
      abort();  // makes the blocked call return an error, which the owning thread reports
      for (int i = 0; i < 500 && !stop_ && armed_ns_.load() == since; ++i)
        cv_.wait_for(lk, std::chrono::milliseconds(20));
      if (!stop_ && armed_ns_.load() == since) {
        std::fprintf(
            stderr,
            "taco: error: %s: %s blocked for more than %g s (--timeout) and did not return after "
            "ncclCommAbort; exiting\n",
            where(-1).c_str(), fired_what_, timeout_s_);
        std::fflush(stderr);
        std::_Exit(1);
      }
    }
  }

  std::vector<ncclComm_t> comms_;       // used for every call
  std::vector<ncclComm_t> init_comms_;  // the non-blocking parents (timeout > 0)
  std::vector<ncclComm_t> wire_comms_;  // copy_engine: CTA policy zero, for alloc_wire's buffers
  std::vector<std::vector<std::pair<const uint8_t*, size_t>>> wire_ranges_;  // per local rank
  std::string wire_memory_ = "cudaMalloc";
  std::vector<ncclConfig_t> configs_, child_configs_, wire_configs_;
  double timeout_s_ = 0;
  std::atomic<bool> aborted_{false}, fired_{false};
  std::atomic<int64_t> armed_ns_{0};
  std::atomic<const char*> armed_what_{""};
  const char* fired_what_ = "";
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread watchdog_;
};

NcclFabric::NcclFabric(const NcclSetup& s) : timeout_s_(s.timeout_s) {
  TACO_ASSERT(s.ranks.size() == s.devices.size() && !s.ranks.empty(),
              "NCCL setup with {} ranks, {} devices", s.ranks.size(), s.devices.size());
  TACO_ASSERT(s.unique_id.size() == sizeof(ncclUniqueId), "NCCL unique id of {} bytes",
              s.unique_id.size());
  nranks_ = s.nranks;
  for (size_t i = 0; i < s.ranks.size(); ++i)
    tags_.push_back(RankTag{s.ranks[i], s.devices[i], s.host});
  ncclUniqueId id;
  std::memcpy(&id, s.unique_id.data(), sizeof id);
  const bool watched = timeout_s_ > 0;
  std::vector<ncclComm_t> first(s.ranks.size(), nullptr);
  configs_.assign(s.ranks.size(), ncclConfig_t(NCCL_CONFIG_INITIALIZER));
  for (auto& c : configs_) c.blocking = watched ? 0 : 1;
  check(ncclGroupStart(), "ncclGroupStart()", -1, __FILE__, __LINE__);
  for (int l = 0; l < nlocal(); ++l) {
    const cudaError_t e = cudaSetDevice(tag(l).device);
    if (e != cudaSuccess) {
      (void)ncclGroupEnd();
      throw Error(fmt::format("{}: cudaSetDevice({}) failed: {}", rank_prefix(tag(l)),
                              tag(l).device, cudaGetErrorString(e)));
    }
    check(ncclCommInitRankConfig(&first[size_t(l)], nranks_, id, tag(l).rank, &configs_[size_t(l)]),
          "ncclCommInitRankConfig", l, __FILE__, __LINE__, watched);
  }
  check(ncclGroupEnd(), "ncclGroupEnd() after ncclCommInitRankConfig", -1, __FILE__, __LINE__,
        watched);
  if (!watched) {
    comms_ = first;
    if (s.copy_engine) make_wire_comms();
    return;
  }
  init_comms_ = first;
  settle(init_comms_, "ncclCommInitRankConfig");
  // Blocking twins for the collectives.
  comms_.assign(s.ranks.size(), nullptr);
  child_configs_.assign(s.ranks.size(), ncclConfig_t(NCCL_CONFIG_INITIALIZER));
  for (auto& c : child_configs_) c.blocking = 1;
  check(ncclGroupStart(), "ncclGroupStart()", -1, __FILE__, __LINE__);
  for (int l = 0; l < nlocal(); ++l)
    check(ncclCommSplit(init_comms_[size_t(l)], 0, tag(l).rank, &comms_[size_t(l)],
                        &child_configs_[size_t(l)]),
          "ncclCommSplit", l, __FILE__, __LINE__, true);
  check(ncclGroupEnd(), "ncclGroupEnd() after ncclCommSplit", -1, __FILE__, __LINE__, true);
  settle(init_comms_, "ncclCommSplit");
  settle(comms_, "ncclCommSplit (new communicators)");
  watchdog_ = std::thread([this] { watch(); });
  if (s.copy_engine) make_wire_comms();
}

// A blocking twin of every communicator with NCCL_CTA_POLICY_ZERO: with symmetric windows on both
// buffers, NCCL (>= 2.28) runs all-gathers and all-to-alls of it as copy-engine transfers.
void NcclFabric::make_wire_comms() {
#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 28, 0)
  if (runtime_code() < 22800)
    throw_input_error("--nccl-ce needs NCCL >= 2.28 at run time; this process loaded {}",
                      version_string(runtime_code()));
  wire_comms_.assign(comms_.size(), nullptr);
  wire_ranges_.assign(comms_.size(), {});
  wire_configs_.assign(comms_.size(), ncclConfig_t(NCCL_CONFIG_INITIALIZER));
  for (auto& c : wire_configs_) {
    c.blocking = 1;
    c.CTAPolicy = NCCL_CTA_POLICY_ZERO;
  }
  const auto& parents = init_comms_.empty() ? comms_ : init_comms_;
  arm("ncclCommSplit (wire communicators)");
  check(ncclGroupStart(), "ncclGroupStart()", -1, __FILE__, __LINE__);
  for (int l = 0; l < nlocal(); ++l)
    check(ncclCommSplit(parents[size_t(l)], 0, tag(l).rank, &wire_comms_[size_t(l)],
                        &wire_configs_[size_t(l)]),
          "ncclCommSplit (wire communicators)", l, __FILE__, __LINE__, true);
  const ncclResult_t r = ncclGroupEnd();
  disarm();
  check(r, "ncclGroupEnd() after ncclCommSplit (wire communicators)", -1, __FILE__, __LINE__, true);
  if (!init_comms_.empty()) settle(init_comms_, "ncclCommSplit (wire communicators)");
  settle(wire_comms_, "ncclCommSplit (wire communicators)");
  wire_memory_ = "ncclMemAlloc";
#else
  throw_input_error("--nccl-ce needs NCCL >= 2.28; taco was built with the headers of {}",
                    version_string(NCCL_VERSION_CODE));
#endif
}

std::vector<DeviceBuffer> NcclFabric::alloc_wire(size_t bytes) {
  if (wire_comms_.empty()) return Fabric::alloc_wire(bytes);
#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 28, 0)
  std::vector<void*> ptrs(size_t(nlocal()), nullptr);
  std::vector<ncclWindow_t> wins(size_t(nlocal()), nullptr);
  auto free_all = [&] {
    for (int l = 0; l < nlocal(); ++l) release_window(l, ptrs[size_t(l)], wins[size_t(l)]);
  };
  try {
    for (int l = 0; l < nlocal(); ++l) {
      TACO_CUDA_CHECK(cudaSetDevice(tag(l).device));
      const ncclResult_t r = ncclMemAlloc(&ptrs[size_t(l)], bytes);
      if (r != ncclSuccess) {
        ptrs[size_t(l)] = nullptr;
        fail(l, fmt::format("ncclMemAlloc of {} B (wire buffer) failed", bytes), r);
      }
      TACO_CUDA_CHECK(cudaMemset(ptrs[size_t(l)], 0, bytes));
      TACO_CUDA_CHECK(cudaDeviceSynchronize());  // as in alloc_wire
    }
    // Collective over every rank: one group for this process's ranks.
    arm("ncclCommWindowRegister");
    check(ncclGroupStart(), "ncclGroupStart()", -1, __FILE__, __LINE__);
    for (int l = 0; l < nlocal(); ++l)
      check(ncclCommWindowRegister(wire_comms_[size_t(l)], ptrs[size_t(l)], bytes, &wins[size_t(l)],
                                   NCCL_WIN_COLL_SYMMETRIC),
            "ncclCommWindowRegister", l, __FILE__, __LINE__);
    const ncclResult_t r = ncclGroupEnd();
    disarm();
    check(r, "ncclGroupEnd() after ncclCommWindowRegister", -1, __FILE__, __LINE__);
  } catch (...) {
    free_all();
    throw;
  }
  // NCCL registers nothing (and returns success) where it has no symmetric memory support
  // (peers not all NVLink-connected, or no cuMem): the messages then take NCCL's kernels.
  bool all = true;
  for (auto w : wins) all = all && w != nullptr;
  wire_memory_ = all ? "nccl-window" : "ncclMemAlloc";
  std::vector<DeviceBuffer> out;
  for (int l = 0; l < nlocal(); ++l) {
    wire_ranges_[size_t(l)].emplace_back(static_cast<const uint8_t*>(ptrs[size_t(l)]), bytes);
    void* w = wins[size_t(l)];
    out.emplace_back(ptrs[size_t(l)], bytes, [this, l, w](void* p) { release_window(l, p, w); });
  }
  return out;
#else
  (void)bytes;
  throw_error("NCCL windows without NCCL >= 2.28");
#endif
}

void NcclFabric::release_window(int l, void* ptr, void* win) noexcept {
  if (!ptr) return;
  (void)cudaSetDevice(tag(l).device);
  auto& ranges = wire_ranges_[size_t(l)];
  for (size_t i = 0; i < ranges.size(); ++i)
    if (ranges[i].first == ptr) {
      ranges.erase(ranges.begin() + long(i));
      break;
    }
#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 28, 0)
  // Deregistering is local; after an abort the communicator is gone and so is its window.
  if (win && !aborted_)
    (void)ncclCommWindowDeregister(wire_comms_[size_t(l)], static_cast<ncclWindow_t>(win));
  (void)ncclMemFree(ptr);
#else
  (void)win;
#endif
}

NcclFabric::~NcclFabric() {
  if (watchdog_.joinable()) {
    {
      std::lock_guard<std::mutex> lk(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    watchdog_.join();
  }
  if (aborted_) return;
  try {
    for (auto& c : wire_comms_) (void)ncclCommDestroy(c);
    wire_comms_.clear();
    for (auto& c : comms_) (void)ncclCommDestroy(c);
    comms_.clear();
    if (!init_comms_.empty()) {
      for (auto& c : init_comms_) (void)ncclCommFinalize(c);
      settle(init_comms_, "ncclCommFinalize");
      for (auto& c : init_comms_) (void)ncclCommDestroy(c);
      init_comms_.clear();
    }
  } catch (...) {
    abort();
  }
}

}  // namespace

bool nccl_supports(DType t) {
  switch (t) {
    case DType::BF16:
    case DType::F16:
    case DType::F32:
      return true;
    case DType::F8E4M3:
    case DType::F8E5M2:
      return NCCL_VERSION_CODE >= NCCL_VERSION(2, 24, 0) && runtime_code() >= 22400;
    default:
      return false;
  }
}
std::string nccl_runtime_version() {
  return version_string(runtime_code());
}
std::string nccl_header_version() {
  return version_string(NCCL_VERSION_CODE);
}

std::vector<char> make_nccl_id() {
  ncclUniqueId id;
  const ncclResult_t r = ncclGetUniqueId(&id);
  if (r != ncclSuccess)
    throw Error(fmt::format("rank 0: ncclGetUniqueId failed: {}", ncclGetErrorString(r)));
  std::vector<char> out(sizeof id);
  std::memcpy(out.data(), &id, sizeof id);
  return out;
}

std::unique_ptr<Fabric> make_nccl_fabric(const NcclSetup& setup) {
  return std::make_unique<NcclFabric>(setup);
}
size_t nccl_id_bytes() {
  return sizeof(ncclUniqueId);
}

#else  // built without NCCL

bool nccl_supports(DType) {
  return false;
}
std::string nccl_runtime_version() {
  return "";
}
std::string nccl_header_version() {
  return "";
}
std::vector<char> make_nccl_id() {
  throw_input_error("taco was built without NCCL (no nccl.h found)");
}
size_t nccl_id_bytes() {
  return 128;
}
std::unique_ptr<Fabric> make_nccl_fabric(const NcclSetup&) {
  throw_input_error("taco was built without NCCL (no nccl.h found): only --loopback runs");
}

#endif

// ---- loopback --------------------------------------------------------------------------------
namespace {

class LoopbackFabric final : public Fabric {
 public:
  LoopbackFabric(int n, int device, const std::string& host) : device_(device) {
    TACO_REQUIRE_INPUT(n >= 1 && n <= kMaxSumSources, "--loopback: 1..{} virtual ranks, got {}",
                       kMaxSumSources, n);
    nranks_ = n;
    for (int r = 0; r < n; ++r) tags_.push_back(RankTag{r, device, host});
    TACO_CUDA_CHECK(cudaSetDevice(device));
    ready_.assign(size_t(n), nullptr);
    done_.assign(size_t(n), nullptr);
    for (int r = 0; r < n; ++r) {
      TACO_CUDA_CHECK(cudaEventCreateWithFlags(&ready_[size_t(r)], cudaEventDisableTiming));
      TACO_CUDA_CHECK(cudaEventCreateWithFlags(&done_[size_t(r)], cudaEventDisableTiming));
    }
  }
  ~LoopbackFabric() override {
    for (auto e : ready_)
      if (e) (void)cudaEventDestroy(e);
    for (auto e : done_)
      if (e) (void)cudaEventDestroy(e);
  }
  std::string kind() const override { return "loopback"; }

  void group_start() override { ++depth_; }
  void group_end() override {
    TACO_ASSERT(depth_ > 0, "loopback: group_end without group_start");
    if (--depth_ == 0) run();
  }
  void send(int l, const void* buf, size_t bytes, int peer, cudaStream_t s) override {
    post({Kind::Send, l, buf, nullptr, bytes, peer, DType::BF16, s});
  }
  void recv(int l, void* buf, size_t bytes, int peer, cudaStream_t s) override {
    post({Kind::Recv, l, nullptr, buf, bytes, peer, DType::BF16, s});
  }
  void all_gather_bytes(int l, const void* src, void* dst, size_t bytes, cudaStream_t s) override {
    post({Kind::AllGather, l, src, dst, bytes, -1, DType::BF16, s});
  }
  void all_reduce(int l, const void* in, void* out, size_t count, DType t,
                  cudaStream_t s) override {
    post({Kind::AllReduce, l, in, out, count, -1, t, s});
  }
  void reduce_scatter(int l, const void* in, void* out, size_t recvcount, DType t,
                      cudaStream_t s) override {
    post({Kind::ReduceScatter, l, in, out, recvcount, -1, t, s});
  }
  void all_gather(int l, const void* in, void* out, size_t count, DType t,
                  cudaStream_t s) override {
    post({Kind::AllGather, l, in, out, count * comm_dtype_bytes(t), -1, t, s});
  }
  void check_async() override {}
  void abort() noexcept override {
    ops_.clear();
    depth_ = 0;
  }

 private:
  enum class Kind { Send, Recv, AllGather, AllReduce, ReduceScatter };
  struct Pending {
    Kind k;
    int l;
    const void* src;
    void* dst;
    size_t n;  // bytes (send/recv/all-gather) or elements (reductions)
    int peer;
    DType t;
    cudaStream_t s;
  };
  void post(const Pending& p) {
    TACO_ASSERT(p.l >= 0 && p.l < nranks_, "loopback: rank {} of {}", p.l, nranks_);
    TACO_ASSERT(p.k == Kind::Send || p.k == Kind::Recv || p.peer < 0,
                "loopback: peer on a collective");
    TACO_ASSERT(p.peer < nranks_, "loopback: peer {} of {}", p.peer, nranks_);
    if (depth_ == 0) {  // outside a group: a group of one call (only valid for one rank)
      ops_.push_back(p);
      run();
      return;
    }
    ops_.push_back(p);
  }
  [[noreturn]] void fail(const std::string& msg) {
    ops_.clear();
    throw Error("loopback fabric: " + msg);
  }

  // Executes a group: every participant waits for all participants' prior work, the receiving side
  // of every call runs on the receiver's stream, then every participant waits for all of it.
  void run() {
    std::vector<Pending> ops;
    ops.swap(ops_);
    if (ops.empty()) return;
    TACO_CUDA_CHECK(cudaSetDevice(device_));
    std::vector<cudaStream_t> stream(size_t(nranks_), nullptr);
    for (const auto& o : ops) {
      if (stream[size_t(o.l)] && stream[size_t(o.l)] != o.s)
        fail("one rank used two streams in one group");
      stream[size_t(o.l)] = o.s;
    }
    // The collectives of a group must be posted by every rank, in the same order.
    std::vector<std::vector<const Pending*>> colls(static_cast<size_t>(nranks_));
    std::map<std::pair<int, int>, std::vector<const Pending*>> sends, recvs;
    for (const auto& o : ops) {
      if (o.k == Kind::Send)
        sends[{o.l, o.peer}].push_back(&o);
      else if (o.k == Kind::Recv)
        recvs[{o.peer, o.l}].push_back(&o);
      else
        colls[size_t(o.l)].push_back(&o);
    }
    for (int r = 1; r < nranks_; ++r)
      if (colls[size_t(r)].size() != colls[0].size())
        fail(fmt::format("rank {} posts {} collectives in a group, rank 0 posts {}", r,
                         colls[size_t(r)].size(), colls[0].size()));
    for (const auto& [pair, ss] : sends) {
      const auto it = recvs.find(pair);
      const size_t nr = it == recvs.end() ? 0 : it->second.size();
      if (nr != ss.size())
        fail(fmt::format("rank {} sends {} messages to rank {}, which posts {} receives",
                         pair.first, ss.size(), pair.second, nr));
    }
    for (const auto& [pair, rs] : recvs)
      if (!sends.count(pair))
        fail(fmt::format("rank {} receives {} messages from rank {}, which sends none", pair.second,
                         rs.size(), pair.first));
    std::vector<int> part;
    for (int r = 0; r < nranks_; ++r)
      if (stream[size_t(r)]) part.push_back(r);
    for (int r : part) TACO_CUDA_CHECK(cudaEventRecord(ready_[size_t(r)], stream[size_t(r)]));
    for (int r : part)
      for (int q : part)
        TACO_CUDA_CHECK(cudaStreamWaitEvent(stream[size_t(r)], ready_[size_t(q)], 0));
    // point to point
    for (const auto& [pair, ss] : sends) {
      const auto& rs = recvs[pair];
      for (size_t i = 0; i < ss.size(); ++i) {
        if (ss[i]->n != rs[i]->n)
          fail(fmt::format("rank {} sends {} B to rank {}, which expects {} B", pair.first,
                           ss[i]->n, pair.second, rs[i]->n));
        if (ss[i]->n)
          TACO_CUDA_CHECK(cudaMemcpyAsync(rs[i]->dst, ss[i]->src, ss[i]->n,
                                          cudaMemcpyDeviceToDevice, rs[i]->s));
      }
    }
    // collectives, k-th of every rank together
    for (size_t k = 0; k < colls[0].size(); ++k) {
      const Pending& a = *colls[0][k];
      for (int r = 1; r < nranks_; ++r) {
        const Pending& b = *colls[size_t(r)][k];
        if (b.k != a.k || b.n != a.n || b.t != a.t)
          fail(fmt::format(
              "rank {} posts a different collective than rank 0 (call {} of the group)", r, k));
      }
      for (int r = 0; r < nranks_; ++r) {
        const Pending& me = *colls[size_t(r)][k];
        switch (a.k) {
          case Kind::AllGather:
            for (int q = 0; q < nranks_; ++q) {
              uint8_t* to = static_cast<uint8_t*>(me.dst) + size_t(q) * a.n;
              if (a.n && to != colls[size_t(q)][k]->src)  // in place: the own part is already there
                TACO_CUDA_CHECK(cudaMemcpyAsync(to, colls[size_t(q)][k]->src, a.n,
                                                cudaMemcpyDeviceToDevice, me.s));
            }
            break;
          case Kind::AllReduce:
          case Kind::ReduceScatter: {
            SumSources src{};
            src.n = nranks_;
            const size_t off =
                a.k == Kind::ReduceScatter ? size_t(r) * a.n * comm_dtype_bytes(a.t) : 0;
            for (int q = 0; q < nranks_; ++q)
              src.src[q] = static_cast<const uint8_t*>(colls[size_t(q)][k]->src) + off;
            sum_buffers(src, a.t, int64_t(a.n), me.dst, me.s);
            break;
          }
          default:
            fail("internal: unexpected call kind");
        }
      }
    }
    for (int r : part) TACO_CUDA_CHECK(cudaEventRecord(done_[size_t(r)], stream[size_t(r)]));
    for (int r : part)
      for (int q : part)
        TACO_CUDA_CHECK(cudaStreamWaitEvent(stream[size_t(r)], done_[size_t(q)], 0));
  }

  int device_;
  int depth_ = 0;
  std::vector<Pending> ops_;
  std::vector<cudaEvent_t> ready_, done_;
};

}  // namespace

std::unique_ptr<Fabric> make_loopback_fabric(int nranks, int device, const std::string& host) {
  return std::make_unique<LoopbackFabric>(nranks, device, host);
}

void wait_streams(Fabric& f, const std::vector<std::vector<cudaStream_t>>& streams,
                  double timeout_s, const char* what) {
  const auto t0 = std::chrono::steady_clock::now();
  auto last_poll = t0;
  for (long spins = 0;; ++spins) {
    std::vector<int> busy;
    for (size_t l = 0; l < streams.size(); ++l) {
      for (cudaStream_t s : streams[l]) {
        const cudaError_t e = cudaStreamQuery(s);
        if (e == cudaErrorNotReady) {
          busy.push_back(int(l));
          break;
        }
        if (e != cudaSuccess) {
          const std::string msg = fmt::format("{}: {} failed on the GPU: cudaStreamQuery: {} ({})",
                                              rank_prefix(f.tag(int(l))), what,
                                              cudaGetErrorString(e), cudaGetErrorName(e));
          f.abort();
          throw Error(msg);
        }
      }
    }
    if (busy.empty()) {
      f.check_async();
      return;
    }
    const auto now = std::chrono::steady_clock::now();
    if (now - last_poll > std::chrono::milliseconds(5)) {
      f.check_async();
      last_poll = now;
    }
    if (timeout_s > 0 && std::chrono::duration<double>(now - t0).count() > timeout_s) {
      std::string who;
      for (int l : busy) who += (who.empty() ? "" : ", ") + rank_prefix(f.tag(l));
      f.abort();
      throw Error(fmt::format(
          "{}: {} did not finish within {} s (--timeout): a peer stalled, died or disagrees on "
          "the sequence of collectives; communicators aborted",
          who, what, timeout_s));
    }
    if (spins > 20000) std::this_thread::sleep_for(std::chrono::microseconds(20));
  }
}

}  // namespace taco::gpu
