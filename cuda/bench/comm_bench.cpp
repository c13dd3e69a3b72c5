// taco comm's harness (see comm_bench.hpp and docs/comm.md).
#include "cuda/bench/comm_bench.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <sstream>
#include <thread>

#include "codecs/variant.hpp"
#include "collectives/comm_plans.hpp"
#include "core/error.hpp"
#include "cuda/codecs/device_codec.hpp"
#include "cuda/collectives/comm_exec.hpp"
#include "cuda/collectives/comm_fabric.hpp"
#include "cuda/collectives/comm_kernels.hpp"
#include "cuda/collectives/comm_mpi.hpp"
#include "cuda/runtime/cuda_check.hpp"

extern char** environ;

namespace taco::gpu {

using comm::Algo;
using comm::Coll;

std::string nccl_type_name(DType t) {
  switch (t) {
    case DType::BF16:
      return "bfloat16";
    case DType::F16:
      return "half";
    case DType::F32:
      return "float";
    case DType::F8E4M3:
      return "f8e4m3";
    case DType::F8E5M2:
      return "f8e5m2";
    default:
      break;
  }
  throw_input_error("-d: {} is not a collective dtype (bf16, f16, f32, f8e4m3, f8e5m2)",
                    dtype_name(t));
}

DType parse_comm_dtype(const std::string& s) {
  static const std::pair<const char*, DType> names[] = {
      {"bf16", DType::BF16},   {"bfloat16", DType::BF16}, {"f16", DType::F16},
      {"fp16", DType::F16},    {"half", DType::F16},      {"float16", DType::F16},
      {"f32", DType::F32},     {"fp32", DType::F32},      {"float", DType::F32},
      {"float32", DType::F32}, {"f8e4m3", DType::F8E4M3}, {"fp8e4m3", DType::F8E4M3},
      {"e4m3", DType::F8E4M3}, {"f8e5m2", DType::F8E5M2}, {"fp8e5m2", DType::F8E5M2},
      {"e5m2", DType::F8E5M2}};
  for (const auto& [n, t] : names)
    if (s == n) return t;
  throw_input_error(
      "-d/--datatype: unknown type '{}' (bf16|bfloat16, f16|half, f32|float, f8e4m3, f8e5m2, all)",
      s);
}

std::string transport_from_env() {
  auto on = [](const char* v) {
    const char* e = std::getenv(v);
    return e && (std::string(e) == "1" || std::string(e) == "true" || std::string(e) == "TRUE");
  };
  if (on("NCCL_P2P_DISABLE")) return on("NCCL_SHM_DISABLE") ? "socket" : "shm";
  return "p2p";
}

namespace {

uint64_t fnv1a(const std::string& s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

std::map<std::string, std::string> collect_env() {
  std::map<std::string, std::string> out;
  for (char** e = environ; e && *e; ++e) {
    const std::string kv(*e);
    const size_t eq = kv.find('=');
    if (eq == std::string::npos) continue;
    const std::string k = kv.substr(0, eq);
    if (k.rfind("NCCL_", 0) == 0 || k == "CUDA_VISIBLE_DEVICES" ||
        k == "TORCH_SYMM_MEM_DISABLE_MULTICAST" || k == "NVSHMEM_DISABLE_NVLS")
      out[k] = kv.substr(eq + 1);
  }
  return out;
}

std::string join_sizes(const std::vector<int64_t>& v) {
  std::string s;
  for (int64_t x : v) s += (s.empty() ? "" : ",") + std::to_string(x);
  return s;
}

// One measured configuration.
struct Run {
  Coll coll = Coll::AllReduce;
  DType dtype = DType::BF16;
  int64_t count = 0;
  bool compressed = false;
  std::string codec;  // compressed
  const comm::WireModel* wm = nullptr;
  Algo algo = Algo::Nccl;
  bool algo_auto = false;
  std::vector<comm::RankPlan> plans;  // local ranks
};

struct Stats {
  int64_t nwrong = 0, nonfinite = 0;
  double err_sq = 0, ref_sq = 0, max_abs = 0;
};

int64_t plain_out_elems(Coll c, int64_t count, int N) {
  return c == Coll::AllGather ? count * N : c == Coll::ReduceScatter ? count / N : count;
}

double plain_bytes_sent(Coll c, int64_t size, int N) {
  const double n = N;
  switch (c) {
    case Coll::AllReduce:
      return 2.0 * (n - 1) / n * double(size);
    case Coll::ReduceScatter:
    case Coll::AllToAll:
      return (n - 1) / n * double(size);
    case Coll::AllGather:
      return (n - 1) * double(size);
    case Coll::SendRecv:
      return double(size);
  }
  return 0;
}

class Harness {
 public:
  Harness(const CommOptions& o, Mpi& mpi,
          const std::function<void(const CommReport&, const CommRow&)>& on_row)
      : o_(o), mpi_(mpi), on_row_(on_row) {}

  CommReport run();

 private:
  void setup();
  void plan_runs();
  void allocate();
  void fill_inputs(DType t, int64_t count);
  void measure(Run& r);
  double time_loop(const std::function<void()>& enqueue, int iters, const char* what);
  Stats check(const Run& r);
  void note(const std::string& s) {
    if (std::find(rep_.notes.begin(), rep_.notes.end(), s) == rep_.notes.end())
      rep_.notes.push_back(s);
  }

  const CommOptions& o_;
  Mpi& mpi_;
  const std::function<void(const CommReport&, const CommRow&)>& on_row_;
  CommReport rep_;
  int N_ = 1;
  std::unique_ptr<CommContext> ctx_;
  std::map<std::string, comm::WireModel> wire_models_;  // by --codec name
  std::map<std::string, VariantSpec> codec_specs_;      // by --codec name: the one parse
  std::vector<Run> runs_;
  std::map<std::tuple<int, int, int64_t>, double> plain_time_;  // (coll, dtype, count) -> us
};

void Harness::setup() {
  TACO_REQUIRE_INPUT(o_.iters >= 1, "-n/--iters must be >= 1, got {}", o_.iters);
  TACO_REQUIRE_INPUT(o_.warmup >= 0, "-w/--warmup_iters must be >= 0, got {}", o_.warmup);
  TACO_REQUIRE_INPUT(o_.check >= 0, "-c/--check must be >= 0, got {}", o_.check);
  TACO_REQUIRE_INPUT(o_.pipeline >= 1 && o_.pipeline <= 64, "--pipeline must be in 1..64, got {}",
                     o_.pipeline);
  TACO_REQUIRE_INPUT(o_.cols >= 1, "--cols must be >= 1, got {}", o_.cols);
  TACO_REQUIRE_INPUT(!o_.sizes.empty(), "no sizes to run (-b/-e)");
  TACO_REQUIRE_INPUT(!o_.dtypes.empty() && !o_.colls.empty(), "no collective or dtype to run");
  TACO_REQUIRE_INPUT(o_.plain || !o_.codecs.empty(), "nothing to run: --no-plain and no --codec");
  TACO_REQUIRE_INPUT(!(o_.copy_engine && o_.loopback > 0),
                     "--nccl-ce needs NCCL ranks, not --loopback");
  for (const auto& c : o_.codecs) {
    const VariantSpec spec = require_device_variant(c);  // InputError naming what the GPU supports
    codec_specs_.emplace(c, spec);
    wire_models_.emplace(c, comm::wire_model(spec));
  }
  const int ndev = device_count_noexcept();
  if (ndev == 0) throw Error(fmt::format("{}: no CUDA device is visible", mpi_.who()));
  TACO_REQUIRE_INPUT(o_.device >= 0 && o_.device < ndev,
                     "--device {}: host {} has {} CUDA device(s)", o_.device, mpi_.host(), ndev);
  std::vector<int> ranks, devices;
  if (o_.loopback > 0) {
    TACO_REQUIRE_INPUT(!mpi_.active() || mpi_.size() == 1,
                       "--loopback runs in one process, not under mpirun");
    N_ = o_.loopback;
    rep_.launch = "loopback";
    rep_.nprocs = 1;
    rep_.gpus_per_proc = N_;
  } else {
    const int g = o_.gpus_per_proc > 0 ? o_.gpus_per_proc : mpi_.active() ? 1 : ndev - o_.device;
    const int first = o_.device + mpi_.local_rank() * g;
    TACO_REQUIRE_INPUT(first + g <= ndev,
                       "-g {}: process {} of host {} would drive GPUs {}..{}, but the host has {}",
                       g, mpi_.local_rank(), mpi_.host(), first, first + g - 1, ndev);
    N_ = mpi_.size() * g;
    for (int i = 0; i < g; ++i) {
      ranks.push_back(mpi_.rank() * g + i);
      devices.push_back(first + i);
    }
    rep_.launch = mpi_.active() ? "mpi" : "single-process";
    rep_.nprocs = mpi_.size();
    rep_.gpus_per_proc = g;
  }
  rep_.nranks = N_;
  rep_.root = mpi_.rank() == 0;
  rep_.transport = !o_.transport.empty() ? o_.transport
                   : o_.loopback         ? "loopback"
                                         : transport_from_env();
  rep_.env = collect_env();
  rep_.nccl_runtime = nccl_runtime_version();
  rep_.nccl_header = nccl_header_version();

  // Every process must run the same benchmark: compare a hash of the settings.
  std::string algos, colls, dtypes, codecs;
  for (auto a : o_.algos) algos += std::string(taco::algo_name(a)) + ",";
  for (auto c : o_.colls) colls += std::string(taco::coll_name(c)) + ",";
  for (auto t : o_.dtypes) dtypes += nccl_type_name(t) + ",";
  for (const auto& c : o_.codecs) codecs += c + ",";
  rep_.settings = fmt::format(
      "nranks={} procs={} g={} launch={} coll={} sizes={} dtypes={} codecs={} plain={} algos={} "
      "pipeline={}/{} iters={} "
      "warmup={} check={} cols={} seed={} overlap={} timeout={} codec_sms={} nccl_ce={}",
      N_, rep_.nprocs, rep_.gpus_per_proc, rep_.launch, colls, join_sizes(o_.sizes), dtypes, codecs,
      int(o_.plain), algos.empty() ? "auto" : algos, o_.pipeline, o_.pipeline_min_bytes, o_.iters,
      o_.warmup, o_.check, o_.cols, o_.seed, int(o_.overlap), o_.timeout_s, o_.codec_sms,
      int(o_.copy_engine));
  rep_.settings_hash = fnv1a(rep_.settings);
  uint64_t lo = 0, hi = 0;
  mpi_.allreduce_min_max(rep_.settings_hash, lo, hi, "MPI_Iallreduce(settings hash)");
  if (lo != hi)
    throw_input_error(
        "{}: the processes disagree on the benchmark settings (hash {:016x}; others "
        "{:016x}..{:016x}); "
        "every process must get the same flags. This one has: {}",
        mpi_.who(), rep_.settings_hash, lo, hi, rep_.settings);

  std::unique_ptr<Fabric> fabric;
  if (o_.loopback > 0) {
    fabric = make_loopback_fabric(N_, o_.device, mpi_.host());
  } else {
    NcclSetup s;
    s.nranks = N_;
    s.ranks = ranks;
    s.devices = devices;
    s.timeout_s = o_.timeout_s;
    s.host = mpi_.host();
    s.copy_engine = o_.copy_engine;
    s.unique_id = mpi_.rank() == 0 ? make_nccl_id() : std::vector<char>(nccl_id_bytes());
    mpi_.bcast(s.unique_id.data(), s.unique_id.size(), 0, "MPI_Ibcast(ncclUniqueId)");
    fabric = make_nccl_fabric(s);
  }
  ctx_ = std::make_unique<CommContext>(std::move(fabric), o_.timeout_s);
  ctx_->set_codec_sms(o_.codec_sms);

  // Who is who (nccl-tests' "#  Rank r Group g Pid p on host device d [pci] name" lines).
  std::string mine;
  for (int l = 0; l < ctx_->nlocal(); ++l) {
    const RankTag& t = ctx_->local(l).tag;
    char pci[64] = {0};
    TACO_CUDA_CHECK(cudaDeviceGetPCIBusId(pci, sizeof pci, t.device));
    cudaDeviceProp p{};
    TACO_CUDA_CHECK(cudaGetDeviceProperties(&p, t.device));
    mine += fmt::format("{}\t{}\t{}\t{}\t{}\t{}\n", t.rank, int(getpid()), t.host, t.device, p.name,
                        pci);
  }
  for (const std::string& block : mpi_.allgather(mine, "MPI_Iallgather(rank descriptions)")) {
    std::istringstream in(block);
    std::string line;
    while (std::getline(in, line)) {
      if (line.empty()) continue;
      std::vector<std::string> f;
      std::istringstream ls(line);
      std::string x;
      while (std::getline(ls, x, '\t')) f.push_back(x);
      if (f.size() != 6) continue;
      rep_.ranks.push_back(
          RankInfo{std::stoi(f[0]), std::stoi(f[1]), std::stoi(f[3]), f[2], f[4], f[5]});
    }
  }
  std::sort(rep_.ranks.begin(), rep_.ranks.end(),
            [](const RankInfo& a, const RankInfo& b) { return a.rank < b.rank; });
  rep_.device = query_device(ctx_->local(0).tag.device);
}

void Harness::plan_runs() {
  for (Coll c : o_.colls) {
    for (DType t : o_.dtypes) {
      const size_t es = comm_dtype_bytes(t);
      const bool plain_ok = o_.loopback > 0 || nccl_supports(t);
      if (o_.plain && !plain_ok)
        note(fmt::format("{}: NCCL {} has no {} reductions: plain rows skipped", nccl_type_name(t),
                         rep_.nccl_runtime, nccl_type_name(t)));
      const bool comp_ok = t == DType::BF16 || t == DType::F32;
      if (!o_.codecs.empty() && !comp_ok)
        note(fmt::format("{}: compressed rows skipped (the GPU codecs take bf16 or f32 data)",
                         nccl_type_name(t)));
      for (int64_t size : o_.sizes) {
        const int64_t count = int64_t(size / int64_t(es)) / N_ * N_;
        if (count == 0) {
          note(fmt::format("{} B of {} is fewer than {} elements: size skipped", size,
                           nccl_type_name(t), N_));
          continue;
        }
        if (o_.plain && plain_ok) {
          Run r;
          r.coll = c;
          r.dtype = t;
          r.count = count;
          runs_.push_back(std::move(r));
        }
        if (!comp_ok) continue;
        const auto [rows, cols] = comm::buffer_shape(count, o_.cols);
        for (const std::string& codec : o_.codecs) {
          std::vector<Algo> algos(o_.algos.begin(), o_.algos.end());
          if (c != Coll::AllReduce)
            algos.assign(1, Algo::Direct);
          else if (algos.empty())
            algos.push_back(taco::auto_allreduce_algo(double(count * int64_t(es)), N_));
          for (Algo a : algos) {
            Run r;
            r.coll = c;
            r.dtype = t;
            r.count = count;
            r.compressed = true;
            r.codec = codec;
            r.wm = &wire_models_.at(codec);
            r.algo = a;
            r.algo_auto = c == Coll::AllReduce && o_.algos.empty();
            // Pieces below pipeline_min_bytes cost more in launches and NCCL calls than they hide.
            const int64_t chunk_bytes =
                (c == Coll::AllGather || c == Coll::SendRecv ? count : count / N_) * int64_t(es);
            const int depth =
                o_.pipeline_min_bytes > 0
                    ? int(std::max<int64_t>(
                          1, std::min<int64_t>(o_.pipeline, chunk_bytes / o_.pipeline_min_bytes)))
                    : o_.pipeline;
            const comm::PlanRequest rq{c, a, N_, rows, cols, r.wm, depth};
            for (int l = 0; l < ctx_->nlocal(); ++l)
              r.plans.push_back(comm::build_plan(rq, ctx_->local(l).tag.rank));
            runs_.push_back(std::move(r));
          }
        }
      }
    }
  }
  TACO_REQUIRE_INPUT(!runs_.empty(), "nothing to run for these sizes, dtypes and codecs");
}

void Harness::allocate() {
  BufferSizes s;
  for (const Run& r : runs_) {
    const size_t es = comm_dtype_bytes(r.dtype);
    s.in = std::max(s.in, size_t(r.count) * es);
    if (!r.compressed) {
      s.out = std::max(s.out, size_t(plain_out_elems(r.coll, r.count, N_)) * es);
      continue;
    }
    const bool hop_scratch = make_device_codec(codec_specs_.at(r.codec))->hop_needs_scratch();
    for (const auto& p : r.plans) {
      s.out = std::max(s.out, size_t(p.out_elems) * es);
      for (int i = 0; i < comm::kWireBufs; ++i)
        s.wire[size_t(i)] = std::max(s.wire[size_t(i)], p.wire_size[size_t(i)]);
      for (const auto& piece : p.pieces)
        for (const auto& st : piece)
          for (const auto& op : st.ops)
            if (op.kind == comm::Op::Kind::DecodeAddEncode && hop_scratch)
              s.scratch = std::max(s.scratch, size_t(op.numel()) * 4);
    }
  }
  size_t need = s.in + s.out + s.scratch;
  for (int64_t w : s.wire) need += size_t(w);
  for (int l = 0; l < ctx_->nlocal(); ++l) {
    const RankTag& t = ctx_->local(l).tag;
    size_t free_b = 0, total_b = 0;
    TACO_CUDA_CHECK(cudaSetDevice(t.device));
    TACO_CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
    // Loopback ranks share one GPU.
    const size_t want = o_.loopback > 0 ? need * size_t(N_) : need;
    TACO_REQUIRE_INPUT(
        double(want) < 0.9 * double(free_b),
        "{}: the largest size needs {:.2f} GiB of buffers per GPU, {:.2f} GiB are free (lower -e)",
        rank_prefix(t), double(want) / double(1u << 30), double(free_b) / double(1u << 30));
    if (o_.loopback > 0) break;
  }
  ctx_->allocate(s);
  rep_.wire_memory = ctx_->fabric().wire_memory();
  if (o_.copy_engine && rep_.wire_memory != "nccl-window")
    note(
        "--nccl-ce: NCCL registered no symmetric windows (its peers are not all NVLink P2P, or "
        "cuMem is off), so "
        "compressed messages take NCCL's kernels");
}

void Harness::fill_inputs(DType t, int64_t count) {
  const DataGen g{o_.seed, data_k(t, N_)};
  for (int l = 0; l < ctx_->nlocal(); ++l) {
    LocalRank& r = ctx_->local(l);
    TACO_CUDA_CHECK(cudaSetDevice(r.tag.device));
    fill_structured(r.in.get(), t, count, r.tag.rank, g, r.net->get());
  }
  ctx_->wait("filling the inputs");
}

double Harness::time_loop(const std::function<void()>& enqueue, int iters, const char* what) {
  ctx_->wait(what);
  mpi_.barrier("MPI_Ibarrier(before timing)");
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < iters; ++i) enqueue();
  ctx_->wait(what);
  const auto t1 = std::chrono::steady_clock::now();
  std::vector<double> t = {std::chrono::duration<double, std::micro>(t1 - t0).count() / iters};
  mpi_.allreduce_sum(t, "MPI_Iallreduce(times)");
  return t[0] / double(mpi_.size());  // mean over processes (nccl-tests -a 1)
}

Stats Harness::check(const Run& r) {
  Stats st;
  const size_t es = comm_dtype_bytes(r.dtype);
  const DataGen g{o_.seed, data_k(r.dtype, N_)};
  for (int c = 0; c < o_.check; ++c) {
    for (int l = 0; l < ctx_->nlocal(); ++l) {
      LocalRank& lr = ctx_->local(l);
      TACO_CUDA_CHECK(cudaSetDevice(lr.tag.device));
      const int64_t out =
          r.compressed ? r.plans[size_t(l)].out_elems : plain_out_elems(r.coll, r.count, N_);
      // Poison: 0xff.. is NaN in every float format, so an element nobody wrote counts as wrong.
      TACO_CUDA_CHECK(cudaMemsetAsync(lr.out.get(), 0xff, size_t(out) * es, lr.net->get()));
      TACO_CUDA_CHECK(cudaMemsetAsync(lr.stats.get(), 0, sizeof(CheckStats), lr.net->get()));
    }
    ctx_->wait("preparing the check");
    if (r.compressed) {
      std::vector<const comm::RankPlan*> pp;
      for (const auto& p : r.plans) pp.push_back(&p);
      ctx_->enqueue_plan(pp, r.dtype, RunMode::Full);
    } else {
      ctx_->enqueue_plain(r.coll, r.dtype, r.count);
    }
    ctx_->wait("the checked run");
    std::vector<double> sums(4, 0.0), maxes(1, 0.0);
    for (int l = 0; l < ctx_->nlocal(); ++l) {
      LocalRank& lr = ctx_->local(l);
      TACO_CUDA_CHECK(cudaSetDevice(lr.tag.device));
      CheckSpec sp;
      sp.kind = r.coll;
      sp.rank = lr.tag.rank;
      sp.nranks = N_;
      sp.count = r.count;
      sp.out_count =
          r.compressed ? r.plans[size_t(l)].out_elems : plain_out_elems(r.coll, r.count, N_);
      sp.out_offset = r.coll == Coll::ReduceScatter ? int64_t(lr.tag.rank) * (r.count / N_) : 0;
      sp.block = r.count / N_;
      sp.compressed = r.compressed ? 1 : 0;
      sp.dtype = r.dtype;
      sp.gen = g;
      check_output(lr.out.get(), sp, lr.stats.as<CheckStats>(), lr.net->get());
      CheckStats h;
      TACO_CUDA_CHECK(
          cudaMemcpyAsync(&h, lr.stats.get(), sizeof h, cudaMemcpyDeviceToHost, lr.net->get()));
      ctx_->wait("the output check");
      sums[0] += double(h.nwrong);
      sums[1] += double(h.nonfinite);
      sums[2] += h.err_sq;
      sums[3] += h.ref_sq;
      float m = 0;
      std::memcpy(&m, &h.max_abs_bits, 4);
      maxes[0] = std::max(maxes[0], double(m));
    }
    mpi_.allreduce_sum(sums, "MPI_Iallreduce(check sums)");
    mpi_.allreduce_max(maxes, "MPI_Iallreduce(check maxima)");
    st.nwrong += int64_t(sums[0]);
    st.nonfinite += int64_t(sums[1]);
    st.err_sq += sums[2];
    st.ref_sq += sums[3];
    st.max_abs = std::max(st.max_abs, maxes[0]);
  }
  return st;
}

void Harness::measure(Run& r) {
  const size_t es = comm_dtype_bytes(r.dtype);
  CommRow row;
  row.collective = std::string(taco::coll_name(r.coll));
  row.size = r.count * int64_t(es);
  row.count = r.count;
  row.type = nccl_type_name(r.dtype);
  row.redop = comm::coll_reduces(r.coll) ? "sum" : "none";
  row.codec = r.compressed ? r.codec : "none";
  row.algorithm = std::string(taco::algo_name(r.algo));
  row.transport = rep_.transport;
  row.nranks = N_;
  row.algo_auto = r.algo_auto;

  std::vector<const comm::RankPlan*> pp;
  for (const auto& p : r.plans) pp.push_back(&p);
  auto run_once = [&](RunMode m) {
    if (r.compressed)
      ctx_->enqueue_plan(pp, r.dtype, m);
    else
      ctx_->enqueue_plain(r.coll, r.dtype, r.count);
  };

  if (o_.check > 0) {
    const Stats st = check(r);
    row.nwrong = st.nwrong;
    row.nonfinite = st.nonfinite;
    row.rel_l2 = st.ref_sq > 0 ? std::sqrt(st.err_sq / st.ref_sq) : 0.0;
    row.max_abs = st.max_abs;
  }
  for (int i = 0; i < o_.warmup; ++i) run_once(RunMode::Full);
  row.time_us = time_loop([&] { run_once(RunMode::Full); }, o_.iters, "the timed iterations");
  if (r.compressed) {
    const auto& p = r.plans[0];
    row.pipeline = p.depth;
    row.quantizations = p.quantizations;
    row.wire_bytes = p.wire_bytes;
    std::vector<double> sent = {0};
    for (const auto& q : r.plans) sent[0] += double(q.bytes_sent);
    mpi_.allreduce_sum(sent, "MPI_Iallreduce(bytes sent)");
    row.bytes_sent = sent[0] / N_;
    if (o_.overlap && N_ > 1) {
      run_once(RunMode::CommOnly);
      row.t_comm_us = time_loop([&] { run_once(RunMode::CommOnly); }, o_.iters,
                                "the communication-only iterations");
      run_once(RunMode::CodecOnly);
      row.t_codec_us =
          time_loop([&] { run_once(RunMode::CodecOnly); }, o_.iters, "the codec-only iterations");
      if (row.t_codec_us > 0)
        row.hidden_codec_pct =
            100.0 * std::clamp(1.0 - (row.time_us - row.t_comm_us) / row.t_codec_us, 0.0, 1.0);
    }
    const auto it = plain_time_.find({int(r.coll), int(r.dtype), r.count});
    if (it != plain_time_.end() && row.time_us > 0) row.speedup = it->second / row.time_us;
  } else {
    row.wire_bytes = row.size;
    row.bytes_sent = plain_bytes_sent(r.coll, row.size, N_);
    plain_time_[{int(r.coll), int(r.dtype), r.count}] = row.time_us;
  }
  const double t = row.time_us;
  row.algbw = t > 0 ? double(comm::algbw_bytes(r.coll, row.size, N_)) / t / 1e3 : 0.0;
  row.busbw = row.algbw * comm::busbw_factor(r.coll, N_);
  row.eff_busbw = row.busbw * 2.0 / double(es);  // as if the data were bf16
  rep_.rows.push_back(row);
  if (rep_.root && on_row_) on_row_(rep_, row);
}

CommReport Harness::run() {
  setup();
  plan_runs();
  allocate();
  // Fault injection for tests of the failure paths (docs/comm.md): the process driving rank
  // TACO_COMM_STALL_RANK stops answering for TACO_COMM_STALL_S seconds (default 3600) before the
  // first collective, as a hung peer would.
  if (const char* st = std::getenv("TACO_COMM_STALL_RANK")) {
    const int who = std::atoi(st);
    for (int l = 0; l < ctx_->nlocal(); ++l)
      if (ctx_->local(l).tag.rank == who) {
        const char* secs = std::getenv("TACO_COMM_STALL_S");
        const double s = secs ? std::atof(secs) : 3600.0;
        std::fprintf(stderr, "taco comm: TACO_COMM_STALL_RANK=%d: %s stalls for %g s\n", who,
                     mpi_.who().c_str(), s);
        std::this_thread::sleep_for(std::chrono::duration<double>(s));
      }
  }
  int64_t filled = -1;
  int filled_type = -1;
  for (Run& r : runs_) {
    if (int(r.dtype) != filled_type || r.count > filled) {
      int64_t most = 0;
      for (const Run& x : runs_)
        if (x.dtype == r.dtype) most = std::max(most, x.count);
      fill_inputs(r.dtype, most);
      filled = most;
      filled_type = int(r.dtype);
    }
    if (r.compressed) {
      const VariantSpec& spec = codec_specs_.at(r.codec);
      if (!(ctx_->codec() == spec)) ctx_->set_codec(spec);
    }
    measure(r);
  }
  mpi_.barrier("MPI_Ibarrier(end)");
  return std::move(rep_);
}

}  // namespace

CommReport run_comm(const CommOptions& opts,
                    const std::function<void(const CommReport&, const CommRow&)>& on_row) {
  Mpi mpi(opts.timeout_s);
  const bool multi = mpi.active() && mpi.size() > 1;
  try {
    Harness h(opts, mpi, on_row);
    return h.run();
  } catch (const std::exception& e) {
    if (!multi) throw;
    // One line, then every process of the job ends: no rank is left waiting for a dead peer.
    const std::string msg = e.what();
    std::fprintf(stderr, "taco: error: %s%s\n",
                 msg.find("rank ") == std::string::npos ? (mpi.who() + ": ").c_str() : "",
                 msg.c_str());
    std::fflush(stderr);
    mpi.abort(dynamic_cast<const InputError*>(&e) ? 2 : 1);
  }
}

}  // namespace taco::gpu
