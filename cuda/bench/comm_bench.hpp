#pragma once
// taco comm's harness: the nccl-tests loop (sizes, warm-up, timed iterations, one checked run)
// over plain NCCL collectives and their compressed versions, for one process driving its local
// GPUs (single process: all of them; MPI: -g GPUs per process). The caller (apps/cmd_comm.cpp)
// prints rows and writes JSON; docs/comm.md describes every column.
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "collectives/comm_plan.hpp"
#include "core/dtype.hpp"
#include "cuda/runtime/device.hpp"

namespace taco::gpu {

struct CommOptions {
  std::vector<comm::Coll> colls = {comm::Coll::AllReduce};
  std::vector<int64_t> sizes;  // per-rank input buffer, bytes
  std::vector<DType> dtypes = {DType::BF16};
  std::vector<std::string> codecs = {"taco"};  // compressed variants (empty: plain only)
  bool plain = true;                           // plain rows (needed for `speedup`)
  std::vector<comm::Algo> algos;  // compressed all-reduce; empty: by size (COCCL's rule)
  int pipeline = 1;
  int64_t pipeline_min_bytes = 4 << 20;  // pieces of a rank's chunk never smaller (0: no limit)
  int codec_sms = 0;                     // SMs the codec kernels may use (0: all)
  bool copy_engine = false;              // NcclSetup::copy_engine (--nccl-ce)
  int iters = 20, warmup = 5, check = 1;
  int gpus_per_proc = 0;  // 0: all visible GPUs (single process) or 1 (MPI)
  int loopback = 0;       // > 0: that many virtual ranks on one GPU
  int device = 0;         // first CUDA device of this process's GPUs
  int64_t cols = 1024;
  uint64_t seed = 1;
  double timeout_s = 300;
  std::string transport;  // label; "" = from the NCCL environment
  bool overlap = true;    // comm-only and codec-only runs (hidden_codec_pct)
  std::function<void(const std::string&)> progress;  // root only
};

// One row of results-schema.md's `taco comm --json` (then appended fields).
struct CommRow {
  std::string collective, type, redop, codec, algorithm, transport;
  int64_t size = 0, count = 0;
  int nranks = 0;
  double time_us = 0, algbw = 0, busbw = 0, eff_busbw = 0;
  int64_t wire_bytes = 0;
  double speedup = -1;               // < 0: none (plain rows)
  double rel_l2 = -1, max_abs = -1;  // < 0: not checked
  int64_t nwrong = -1;               // < 0: not checked
  double hidden_codec_pct = -1;      // < 0: not measured
  // appended
  int pipeline = 1, quantizations = 0;
  bool algo_auto = false;  // compressed all-reduce: algorithm chosen by size (--algo auto)
  double bytes_sent = 0;   // per rank and run, mean over ranks
  double t_comm_us = -1, t_codec_us = -1;
  int64_t nonfinite = -1;
};

struct RankInfo {
  int rank = 0, pid = 0, device = 0;
  std::string host, name, pci;
};

struct CommReport {
  bool root = true;    // this process prints and writes
  std::string launch;  // "single-process", "mpi" or "loopback"
  int nranks = 1, nprocs = 1, gpus_per_proc = 1;
  std::string transport;
  std::string nccl_runtime, nccl_header;
  DeviceInfo device;  // the root's first GPU
  std::vector<RankInfo> ranks;
  std::map<std::string, std::string> env;  // NCCL_*, CUDA_VISIBLE_DEVICES, ...
  std::string wire_memory;                 // Fabric::wire_memory() after allocation
  std::string settings;                    // what every rank agreed on
  uint64_t settings_hash = 0;
  std::vector<std::string> notes;  // skipped combinations and why
  std::vector<CommRow> rows;
};

// Runs the benchmark. Rows are also passed to `on_row` (root only) as they are measured. In a
// multi-process run, any failure after MPI start-up prints one line naming the rank and host
// and ends every process (MPI_Abort) with exit code 2 (bad input) or 1.
CommReport run_comm(const CommOptions& opts,
                    const std::function<void(const CommReport&, const CommRow&)>& on_row);

// Transport label from the environment: "shm" (NCCL_P2P_DISABLE=1), "socket" (also
// NCCL_SHM_DISABLE=1) or "p2p".
std::string transport_from_env();
// nccl-tests' type names: bfloat16, half, float, f8e4m3, f8e5m2.
std::string nccl_type_name(DType t);
DType parse_comm_dtype(const std::string& s);  // taco or nccl-tests spelling; InputError otherwise

}  // namespace taco::gpu
