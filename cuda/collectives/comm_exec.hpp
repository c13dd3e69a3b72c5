#pragma once
// The GPU executor of comm plans (collectives/comm_plans.hpp) and of plain NCCL collectives, for
// every local rank of a process. Each local rank owns its device buffers (In, Out, four wire
// buffers), a compute stream for the codec kernels and a network stream for NCCL, and one
// DeviceCodec per block shape (so every launch hits the codec's geometry memo).
//
// Issue order (software pipelining): step s of piece p is issued in wavefront p + s, later pieces
// first within a wavefront, each step waiting on an event of the step before it in the same piece.
// Compute steps therefore queue on the compute stream while earlier pieces' messages are on the
// network stream: piece p+1 is encoded while piece p travels. NCCL serialises the calls of a
// communicator in issue order, which is the same on every rank.
#include <array>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "collectives/comm_plan.hpp"
#include "core/dtype.hpp"
#include "cuda/codecs/device_codec.hpp"
#include "cuda/collectives/comm_fabric.hpp"
#include "cuda/collectives/comm_kernels.hpp"
#include "cuda/runtime/device.hpp"

namespace taco::gpu {

enum class RunMode {
  Full,       // the compressed collective
  CommOnly,   // its communication steps only (same messages, codec kernels skipped)
  CodecOnly,  // its codec steps only (no communication)
};

struct LocalRank {
  RankTag tag;
  std::unique_ptr<CudaStream> compute, net;
  DeviceBuffer in, out;
  std::array<DeviceBuffer, comm::kWireBufs> wire;
  DeviceBuffer scratch;  // fp32, ring hops of row / tensor codecs
  DeviceBuffer stats;    // CheckStats
  std::vector<cudaEvent_t> events;
  std::map<std::pair<int64_t, int64_t>, std::unique_ptr<DeviceCodec>> codecs;  // per block shape
};

struct BufferSizes {
  size_t in = 0, out = 0, scratch = 0;
  std::array<int64_t, comm::kWireBufs> wire{};
};

class CommContext {
 public:
  // timeout_s <= 0: wait without a deadline.
  CommContext(std::unique_ptr<Fabric> fabric, double timeout_s);
  ~CommContext();
  CommContext(const CommContext&) = delete;
  CommContext& operator=(const CommContext&) = delete;

  Fabric& fabric() { return *fabric_; }
  int nlocal() const { return int(ranks_.size()); }
  LocalRank& local(int l) { return ranks_[size_t(l)]; }
  double timeout_s() const { return timeout_s_; }

  // (Re)allocates every local rank's buffers (wire buffers zeroed).
  void allocate(const BufferSizes& sizes);
  const BufferSizes& sizes() const { return sizes_; }
  // Selects the codec of the following plan runs (GPU variants only; InputError otherwise).
  void set_codec(const VariantSpec& spec);
  const VariantSpec& codec() const { return codec_; }
  // Codec launches of the following plan runs use at most this many SMs (0: all;
  // DeviceCodec::set_max_sms).
  void set_codec_sms(int n) { codec_sms_ = n; }

  // One plain NCCL collective of `count` elements per rank on every local rank (nccl-tests
  // layouts: reduce-scatter and all-to-all in N equal blocks, send/recv to rank+1 from rank-1).
  void enqueue_plain(comm::Coll c, DType t, int64_t count);
  // One run of the compressed collective: plans[l] is local rank l's plan. The io dtype is bf16 or
  // f32.
  void enqueue_plan(const std::vector<const comm::RankPlan*>& plans, DType t, RunMode mode);
  // Blocks until all local streams are idle (deadline, asynchronous NCCL errors: see wait_streams).
  void wait(const char* what);

 private:
  DeviceCodec& codec_for(LocalRank& r, int64_t rows, int64_t cols);
  void run_compute(LocalRank& r, const comm::Op& o, DType t);
  void run_comm(int l, const comm::Op& o);
  uint8_t* wire_ptr(LocalRank& r, const comm::Ref& ref, int64_t bytes);
  uint8_t* elem_ptr(LocalRank& r, const comm::Ref& ref, int64_t n, DType t);
  void ensure_events(LocalRank& r, size_t n);

  std::unique_ptr<Fabric> fabric_;
  double timeout_s_;
  std::vector<LocalRank> ranks_;
  BufferSizes sizes_;
  VariantSpec codec_;
  int codec_sms_ = 0;
};

// The io dtype of a compressed collective, checked: bf16 or f32 (the GPU codecs' inputs);
// InputError otherwise.
DType io_type(DType t);

}  // namespace taco::gpu
