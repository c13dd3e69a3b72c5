// Checked, deadline-polled MPI for taco comm (see comm_mpi.hpp).
#include "cuda/collectives/comm_mpi.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "core/error.hpp"

#if defined(TACO_HAVE_MPI)
#include <mpi.h>
#endif

namespace taco::gpu {

std::string hostname() {
  char buf[256] = {0};
  if (gethostname(buf, sizeof buf - 1) != 0) return "unknown-host";
  return buf;
}

bool Mpi::launched_by_mpi() {
  for (const char* v :
       {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK", "PMI_SIZE", "MV2_COMM_WORLD_SIZE"})
    if (std::getenv(v)) return true;
  return false;
}

bool Mpi::compiled_in() {
#if defined(TACO_HAVE_MPI)
  return true;
#else
  return false;
#endif
}

std::string Mpi::who() const {
  return fmt::format("rank {} of {} (host {}, pid {})", rank_, size_, host_, int(getpid()));
}

#if defined(TACO_HAVE_MPI)

namespace {

MPI_Comm& as_comm(void*& p) {
  return *reinterpret_cast<MPI_Comm*>(&p);
}

}  // namespace

#define TACO_MPI_CHECK(call)                                                                \
  do {                                                                                      \
    const int taco_mpi_rc_ = (call);                                                        \
    if (taco_mpi_rc_ != MPI_SUCCESS) {                                                      \
      char taco_mpi_msg_[MPI_MAX_ERROR_STRING] = {0};                                       \
      int taco_mpi_len_ = 0;                                                                \
      MPI_Error_string(taco_mpi_rc_, taco_mpi_msg_, &taco_mpi_len_);                        \
      throw ::taco::Error(fmt::format("{}: {} failed at {}:{}: {}", who(), #call, __FILE__, \
                                      __LINE__,                                             \
                                      std::string(taco_mpi_msg_, size_t(taco_mpi_len_))));  \
    }                                                                                       \
  } while (0)

static_assert(sizeof(MPI_Comm) <= sizeof(void*), "MPI_Comm must fit in a pointer");

Mpi::Mpi(double timeout_s) : timeout_s_(timeout_s), host_(hostname()) {
  if (!launched_by_mpi()) return;
  int inited = 0;
  TACO_MPI_CHECK(MPI_Initialized(&inited));
  if (!inited) {
    TACO_MPI_CHECK(MPI_Init(nullptr, nullptr));
    initialized_here_ = true;
  }
  // Report errors to us (with rank and host) instead of the default abort.
  TACO_MPI_CHECK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
  TACO_MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &rank_));
  TACO_MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &size_));
  MPI_Comm local;
  TACO_MPI_CHECK(
      MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &local));
  as_comm(local_comm_) = local;
  TACO_MPI_CHECK(MPI_Comm_rank(local, &local_rank_));
  TACO_MPI_CHECK(MPI_Comm_size(local, &local_size_));
  active_ = true;
}

Mpi::~Mpi() {
  if (!active_) return;
  MPI_Comm local = as_comm(local_comm_);
  (void)MPI_Comm_free(&local);
  int finalized = 0;
  (void)MPI_Finalized(&finalized);
  if (initialized_here_ && !finalized) (void)MPI_Finalize();
}

namespace {

// Polls a request until it completes or the deadline passes.
void wait_request(MPI_Request& req, double timeout_s, const std::string& who, const char* what) {
  const auto t0 = std::chrono::steady_clock::now();
  int done = 0;
  for (long spins = 0;; ++spins) {
    MPI_Status st;
    const int rc = MPI_Test(&req, &done, &st);
    if (rc != MPI_SUCCESS) {
      char msg[MPI_MAX_ERROR_STRING] = {0};
      int len = 0;
      MPI_Error_string(rc, msg, &len);
      throw Error(
          fmt::format("{}: MPI_Test({}) failed: {}", who, what, std::string(msg, size_t(len))));
    }
    if (done) return;
    if (timeout_s > 0 &&
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() > timeout_s)
      throw Error(fmt::format(
          "{}: {} did not complete within {} s (--timeout): a peer process stalled or died", who,
          what, timeout_s));
    if (spins > 1000) std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
}

}  // namespace

void Mpi::barrier(const char* why) {
  if (!active_) return;
  MPI_Request req;
  TACO_MPI_CHECK(MPI_Ibarrier(MPI_COMM_WORLD, &req));
  wait_request(req, timeout_s_, who(), why);
}

void Mpi::bcast(void* data, size_t bytes, int root, const char* what) {
  if (!active_) return;
  MPI_Request req;
  TACO_MPI_CHECK(MPI_Ibcast(data, int(bytes), MPI_BYTE, root, MPI_COMM_WORLD, &req));
  wait_request(req, timeout_s_, who(), what);
}

void Mpi::allreduce_sum(std::vector<double>& v, const char* what) {
  if (!active_ || v.empty()) return;
  MPI_Request req;
  TACO_MPI_CHECK(MPI_Iallreduce(MPI_IN_PLACE, v.data(), int(v.size()), MPI_DOUBLE, MPI_SUM,
                                MPI_COMM_WORLD, &req));
  wait_request(req, timeout_s_, who(), what);
}

void Mpi::allreduce_max(std::vector<double>& v, const char* what) {
  if (!active_ || v.empty()) return;
  MPI_Request req;
  TACO_MPI_CHECK(MPI_Iallreduce(MPI_IN_PLACE, v.data(), int(v.size()), MPI_DOUBLE, MPI_MAX,
                                MPI_COMM_WORLD, &req));
  wait_request(req, timeout_s_, who(), what);
}

void Mpi::allreduce_min_max(uint64_t v, uint64_t& mn, uint64_t& mx, const char* what) {
  mn = mx = v;
  if (!active_) return;
  unsigned long long lo = v, hi = v;
  MPI_Request req[2];
  TACO_MPI_CHECK(MPI_Iallreduce(MPI_IN_PLACE, &lo, 1, MPI_UNSIGNED_LONG_LONG, MPI_MIN,
                                MPI_COMM_WORLD, &req[0]));
  TACO_MPI_CHECK(MPI_Iallreduce(MPI_IN_PLACE, &hi, 1, MPI_UNSIGNED_LONG_LONG, MPI_MAX,
                                MPI_COMM_WORLD, &req[1]));
  wait_request(req[0], timeout_s_, who(), what);
  wait_request(req[1], timeout_s_, who(), what);
  mn = lo;
  mx = hi;
}

std::vector<std::string> Mpi::allgather(const std::string& mine, const char* what) {
  if (!active_) return {mine};
  constexpr size_t kLen = 4096;
  std::vector<char> send(kLen, 0), recv(kLen * size_t(size_), 0);
  std::memcpy(send.data(), mine.data(), std::min(mine.size(), kLen - 1));
  MPI_Request req;
  TACO_MPI_CHECK(MPI_Iallgather(send.data(), int(kLen), MPI_CHAR, recv.data(), int(kLen), MPI_CHAR,
                                MPI_COMM_WORLD, &req));
  wait_request(req, timeout_s_, who(), what);
  std::vector<std::string> out;
  for (int r = 0; r < size_; ++r) out.emplace_back(recv.data() + size_t(r) * kLen);
  return out;
}

void Mpi::abort(int code) const noexcept {
  if (active_) MPI_Abort(MPI_COMM_WORLD, code);
  std::_Exit(code);
}

#else  // no MPI in this build

Mpi::Mpi(double timeout_s) : timeout_s_(timeout_s), host_(hostname()) {
  if (launched_by_mpi())
    throw_input_error(
        "taco was built without MPI but runs under an MPI launcher: rebuild with MPI "
        "(Debian/Ubuntu: "
        "libopenmpi-dev, scripts/setup.sh) or run one process driving all GPUs (taco comm -g N)");
}
Mpi::~Mpi() = default;
void Mpi::barrier(const char*) {}
void Mpi::bcast(void*, size_t, int, const char*) {}
void Mpi::allreduce_sum(std::vector<double>&, const char*) {}
void Mpi::allreduce_max(std::vector<double>&, const char*) {}
void Mpi::allreduce_min_max(uint64_t v, uint64_t& mn, uint64_t& mx, const char*) {
  mn = mx = v;
}
std::vector<std::string> Mpi::allgather(const std::string& mine, const char*) {
  return {mine};
}
void Mpi::abort(int code) const noexcept {
  std::_Exit(code);
}

#endif

}  // namespace taco::gpu
