#pragma once
// The host side of a multi-process run: a thin, checked wrapper over the few MPI calls taco comm
// needs (rank, size, node-local rank, broadcast of the NCCL id, reductions of results, barriers).
// Every collective is non-blocking and polled against a deadline, so a stalled or dead peer ends
// the run with a message naming the call, the rank and the host instead of a hang.
//
// MPI is initialised only when the process was started by an MPI launcher (OMPI_COMM_WORLD_SIZE,
// PMIX_RANK, PMI_RANK or MV2_COMM_WORLD_SIZE in the environment); otherwise, and in builds without
// MPI, the object stands for one process. A build without MPI refuses to run under a launcher
// (N independent single-process runs would each report their own numbers).
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace taco::gpu {

class Mpi {
 public:
  // timeout_s <= 0: wait without a deadline.
  explicit Mpi(double timeout_s);
  ~Mpi();
  Mpi(const Mpi&) = delete;
  Mpi& operator=(const Mpi&) = delete;

  static bool launched_by_mpi();
  static bool compiled_in();

  bool active() const { return active_; }
  int rank() const { return rank_; }
  int size() const { return size_; }
  int local_rank() const { return local_rank_; }  // among the processes of this host
  int local_size() const { return local_size_; }
  const std::string& host() const { return host_; }
  // "rank 1 of 2 (host gpu-3, pid 1234)"
  std::string who() const;

  void barrier(const char* why);
  void bcast(void* data, size_t bytes, int root, const char* what);
  // In place over all processes.
  void allreduce_sum(std::vector<double>& v, const char* what);
  void allreduce_max(std::vector<double>& v, const char* what);
  void allreduce_min_max(uint64_t v, uint64_t& min, uint64_t& max, const char* what);
  // Every process's string (each at most 4095 bytes), in rank order.
  std::vector<std::string> allgather(const std::string& mine, const char* what);
  // Ends every process of the job (MPI_Abort) after printing nothing more; never returns.
  [[noreturn]] void abort(int code) const noexcept;

 private:
  double timeout_s_;
  bool active_ = false, initialized_here_ = false;
  int rank_ = 0, size_ = 1, local_rank_ = 0, local_size_ = 1;
  std::string host_;
  void* local_comm_ = nullptr;  // MPI_Comm of this host's processes (opaque here)
};

std::string hostname();

}  // namespace taco::gpu
