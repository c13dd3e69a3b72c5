#pragma once
// Transports under the collective benchmark. A Fabric moves bytes between ranks on CUDA streams;
// one process may drive several of its ranks ("local" ranks, one GPU each). All calls between
// group_start() and group_end() form one group: NCCL's group semantics, for every local rank.
//  * NcclFabric: real NCCL communicators, one per local GPU, created in one group with
//    ncclCommInitRankConfig (non-blocking when a timeout is set, so every wait can poll
//    ncclCommGetAsyncError and give up: ncclCommAbort, then an error naming rank, host and GPU).
//  * LoopbackFabric: N virtual ranks on one GPU, messages as device-to-device copies and
//    reductions as a sum kernel. No network: it runs every code path of the compressed
//    collectives on a single GPU, with the exact semantics of the real one (tests, code checks).
#include <cuda_runtime_api.h>

#include <memory>
#include <string>
#include <vector>

#include "core/dtype.hpp"
#include "cuda/runtime/device.hpp"

namespace taco::gpu {

struct RankTag {
  int rank = 0;      // global rank
  int device = 0;    // CUDA device
  std::string host;  // for messages
};
// "rank 1 (host gpu-3, GPU 1)"
std::string rank_prefix(const RankTag& t);

class Fabric {
 public:
  virtual ~Fabric() = default;
  virtual std::string kind() const = 0;  // "nccl" or "loopback"
  int nranks() const { return nranks_; }
  int nlocal() const { return int(tags_.size()); }
  const RankTag& tag(int local) const { return tags_[size_t(local)]; }

  virtual void group_start() = 0;
  virtual void group_end() = 0;
  virtual void send(int local, const void* buf, size_t bytes, int peer, cudaStream_t s) = 0;
  virtual void recv(int local, void* buf, size_t bytes, int peer, cudaStream_t s) = 0;
  // dst + q * bytes receives rank q's `bytes` from src, for every rank q.
  virtual void all_gather_bytes(int local, const void* src, void* dst, size_t bytes,
                                cudaStream_t s) = 0;
  // Plain (uncompressed) collectives in dtype t, reduction op sum.
  virtual void all_reduce(int local, const void* in, void* out, size_t count, DType t,
                          cudaStream_t s) = 0;
  virtual void reduce_scatter(int local, const void* in, void* out, size_t recvcount, DType t,
                              cudaStream_t s) = 0;
  virtual void all_gather(int local, const void* in, void* out, size_t count, DType t,
                          cudaStream_t s) = 0;

  // A zeroed wire buffer (the compressed collectives' messages) of `bytes` for every local rank.
  // Collective: every process allocates the same sizes in the same order. Default: cudaMalloc.
  virtual std::vector<DeviceBuffer> alloc_wire(size_t bytes);
  // How alloc_wire's buffers are held, for the report: "cudaMalloc", "nccl-window" (symmetric
  // NCCL windows: copy-engine all-gathers) or "ncclMemAlloc" (NCCL declined the windows).
  virtual std::string wire_memory() const { return "cudaMalloc"; }

  // Throws (after aborting the communicators) if a communicator reported an asynchronous error.
  virtual void check_async() = 0;
  // Ends all communication at once (idempotent, never throws): used before reporting a failure.
  virtual void abort() noexcept = 0;

 protected:
  int nranks_ = 1;
  std::vector<RankTag> tags_;
};

// Whether this NCCL can reduce dtype t (fp8 needs NCCL >= 2.24, in the headers and at run time).
bool nccl_supports(DType t);
// "2.28.9" of the library in use, and of the headers taco was built with.
std::string nccl_runtime_version();
std::string nccl_header_version();

struct NcclSetup {
  int nranks = 1;
  std::vector<int> ranks;    // global rank of each local GPU
  std::vector<int> devices;  // CUDA device of each local GPU
  std::vector<char>
      unique_id;           // ncclUniqueId bytes shared by every process (make_nccl_id on rank 0)
  double timeout_s = 300;  // <= 0: blocking communicators, no deadline
  std::string host;
  // Compressed collectives' messages on a second communicator with NCCL_CTA_POLICY_ZERO, their
  // wire buffers from ncclMemAlloc registered as symmetric windows (NCCL >= 2.28): NCCL then
  // moves all-gathers with the copy engines over NVLink, leaving every SM to the codec kernels.
  bool copy_engine = false;
};
std::vector<char> make_nccl_id();
size_t nccl_id_bytes();  // sizeof(ncclUniqueId)

std::unique_ptr<Fabric> make_nccl_fabric(const NcclSetup& setup);
std::unique_ptr<Fabric> make_loopback_fabric(int nranks, int device, const std::string& host);

// Waits until every stream is idle, polling the fabric for asynchronous errors; after
// `timeout_s` (> 0) aborts the fabric and throws naming `what` and the stalled local ranks.
void wait_streams(Fabric& f, const std::vector<std::vector<cudaStream_t>>& streams_per_local,
                  double timeout_s, const char* what);

}  // namespace taco::gpu
