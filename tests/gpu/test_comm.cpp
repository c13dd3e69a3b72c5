// GPU tests of the collective benchmark: the GPU executor runs the same plans as the host executor
// (collectives/comm_hostsim.hpp, itself checked against collectives/sim_collectives by the CPU
// tests) and must give the same bits; the fused ring hop equals the CPU's decode + add + encode
// byte for byte; the structured inputs and the output check find exact sums exact and corrupted
// outputs wrong; the watchdog turns a stalled stream into an error. Loopback (N virtual ranks on
// one GPU) covers N = 2..4 on any machine; the NCCL tests use every visible GPU (1 on a one-GPU
// machine).
#include <cuda_runtime_api.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <random>
#include <set>
#include <thread>

#include "catch.hpp"
#include "codecs/codec.hpp"
#include "collectives/comm_hostsim.hpp"
#include "collectives/comm_plans.hpp"
#include "core/dtype.hpp"
#include "core/error.hpp"
#include "cuda/collectives/comm_exec.hpp"
#include "cuda/collectives/comm_fabric.hpp"
#include "cuda/collectives/comm_kernels.hpp"
#include "cuda/runtime/cuda_check.hpp"
#include "cuda/runtime/device.hpp"
#include "gpu/gpu_test_util.hpp"

using namespace taco;
using namespace taco::gpu;
using comm::Algo;
using comm::Coll;
using test::copy_to_device;
using test::fill_device;

namespace {

std::vector<float> random_values(int64_t n, uint32_t seed, bool bf16) {
  std::mt19937 g(seed);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::uniform_real_distribution<float> u(0.0f, 1.0f);
  std::vector<float> v(static_cast<size_t>(n));
  for (auto& x : v) {
    const float r = u(g);
    x = r < 0.01f ? 30.0f * nd(g) : r < 0.03f ? 0.0f : 0.02f * nd(g);
    if (bf16) x = bf16_to_float(float_to_bf16(x));
  }
  return v;
}

void upload(void* dst, const std::vector<float>& v, DType t) {
  if (t == DType::F32) {
    copy_to_device(dst, v.data(), v.size() * 4);
  } else {
    std::vector<uint16_t> h(v.size());
    for (size_t i = 0; i < v.size(); ++i) h[i] = float_to_bf16(v[i]);
    copy_to_device(dst, h.data(), h.size() * 2);
  }
}

// The first n elements of a device buffer, as floats (bf16 widened exactly).
std::vector<float> download(const void* src, int64_t n, DType t) {
  std::vector<float> out(static_cast<size_t>(n));
  if (t == DType::F32) {
    TACO_CUDA_CHECK(cudaMemcpy(out.data(), src, size_t(n) * 4, cudaMemcpyDeviceToHost));
  } else {
    std::vector<uint16_t> h(static_cast<size_t>(n));
    TACO_CUDA_CHECK(cudaMemcpy(h.data(), src, size_t(n) * 2, cudaMemcpyDeviceToHost));
    for (size_t i = 0; i < h.size(); ++i) out[i] = bf16_to_float(h[i]);
  }
  return out;
}

// Index of the first element whose bits differ (-1: equal).
int64_t first_difference(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return 0;
  for (size_t i = 0; i < a.size(); ++i)
    if (std::memcmp(&a[i], &b[i], 4) != 0) return int64_t(i);
  return -1;
}

BufferSizes sizes_for(const std::vector<comm::RankPlan>& plans, DType t) {
  BufferSizes s;
  const size_t es = dtype_size(t);
  for (const auto& p : plans) {
    s.in = std::max(s.in, size_t(p.in_elems) * es);
    s.out = std::max(s.out, size_t(p.out_elems) * es);
    for (int i = 0; i < comm::kWireBufs; ++i)
      s.wire[size_t(i)] = std::max(s.wire[size_t(i)], p.wire_size[size_t(i)]);
    s.scratch = std::max(s.scratch, size_t(p.in_elems) * 4);
  }
  return s;
}

// Runs one compressed configuration on the GPU (ctx's ranks) and on the host; returns the first
// (rank, element) that differs, or an empty string.
std::string compare_with_host(CommContext& ctx, const std::string& variant, Coll coll, Algo algo,
                              int64_t rows, int64_t cols, int depth, DType t,
                              RunMode mode = RunMode::Full) {
  const int N = ctx.fabric().nranks();
  const comm::WireModel wm = comm::wire_model(variant);
  const comm::PlanRequest rq{coll, algo, N, rows, cols, &wm, depth};
  const auto plans = comm::build_plans(rq);
  ctx.allocate(sizes_for(plans, t));
  ctx.set_codec(parse_variant(variant));
  std::vector<comm::HostRank> host(static_cast<size_t>(N));
  for (int r = 0; r < N; ++r) {
    host[size_t(r)].in =
        random_values(rows * cols, uint32_t(17 * r + rows + cols + depth), t == DType::BF16);
    TACO_CUDA_CHECK(cudaSetDevice(ctx.local(r).tag.device));
    upload(ctx.local(r).in.get(), host[size_t(r)].in, t);
    fill_device(ctx.local(r).out.get(), 0xff, ctx.local(r).out.bytes());
  }
  std::vector<const comm::RankPlan*> pp;
  for (const auto& p : plans) pp.push_back(&p);
  ctx.enqueue_plan(pp, t, mode);
  ctx.wait("test run");
  const auto codec = make_codec(variant);
  comm::run_host(plans, *codec, wm, host, t == DType::BF16);
  for (int r = 0; r < N; ++r) {
    const auto got = download(ctx.local(r).out.get(), plans[size_t(r)].out_elems, t);
    const int64_t at = first_difference(got, host[size_t(r)].out);
    if (at >= 0)
      return fmt::format("rank {} element {} of {}: GPU {} host {}", r, at, got.size(),
                         got[size_t(at)], host[size_t(r)].out[size_t(at)]);
  }
  return "";
}

const std::vector<std::pair<Coll, Algo>> kAlgos = {
    {Coll::AllReduce, Algo::OneShot}, {Coll::AllReduce, Algo::TwoShot},
    {Coll::AllReduce, Algo::Ring},    {Coll::ReduceScatter, Algo::Direct},
    {Coll::AllGather, Algo::Direct},  {Coll::AllToAll, Algo::Direct},
    {Coll::SendRecv, Algo::Direct}};

}  // namespace

TEST_CASE("comm: compressed collectives on the GPU equal the host executor bit for bit (loopback)",
          "[comm]") {
  const std::vector<std::string> codecs = {
      "taco",     "fp8-g128", "fp8-row", "fp8-tensor",   "int8-g128-had", "mxfp8",
      "taco-g32", "nvfp4",    "mxfp4",   "int4-g32-had", "fp8-col"};
  for (int N : {2, 3, 4}) {
    CommContext ctx(make_loopback_fabric(N, 0, "test"), 60.0);
    for (const std::string& v : codecs)
      for (DType t : {DType::F32, DType::BF16})
        for (const auto& [coll, algo] : kAlgos)
          for (auto shape : {std::pair<int64_t, int64_t>{4 * N, 256},
                             std::pair<int64_t, int64_t>{3 * N + 1, 128},
                             std::pair<int64_t, int64_t>{1, 128 * 2 * N + 37}})
            for (int depth : {1, 3}) {
              CAPTURE(N, v, dtype_name(t), taco::coll_name(coll), taco::algo_name(algo),
                      shape.first, shape.second, depth);
              REQUIRE(compare_with_host(ctx, v, coll, algo, shape.first, shape.second, depth, t) ==
                      "");
            }
    // TAH-Quant: data-dependent wires in slots of their bound. It codes whole 64-wide tiles, so
    // [4N, 256] splits into whole tiles for every collective; [3N + 1, 128] does for N = 2 only,
    // and otherwise a piece that is not whole tiles must be refused with the codec's message.
    for (DType t : {DType::F32, DType::BF16})
      for (const auto& [coll, algo] : kAlgos)
        for (auto shape : {std::pair<int64_t, int64_t>{4 * N, 256},
                           std::pair<int64_t, int64_t>{3 * N + 1, 128}}) {
          CAPTURE(N, dtype_name(t), taco::coll_name(coll), taco::algo_name(algo), shape.first,
                  shape.second);
          std::string diff, refused;
          try {
            diff = compare_with_host(ctx, "tahquant", coll, algo, shape.first, shape.second, 1, t);
          } catch (const std::exception& e) {
            refused = e.what();
          }
          REQUIRE(diff == "");
          if (!refused.empty()) {
            REQUIRE(shape.second == 128);
            REQUIRE(N != 2);
            REQUIRE_THAT(refused, Catch::Matchers::Contains("is not a multiple of the tile 64"));
          }
        }
  }
}

TEST_CASE("comm: the fused ring hop equals the CPU's decode + add + encode byte for byte",
          "[comm]") {
  TACO_CUDA_CHECK(cudaSetDevice(0));
  CudaStream stream;
  for (const std::string var :
       {"taco", "e4m3:g1024:had:dual", "taco-g32", "fp8-g128", "fp8-g128-had", "int8-g128",
        "fp8-row", "fp8-tensor", "fp8-col", "nvfp4", "mxfp4", "int4-g32", "int4-g32-had",
        "e2m1:g16:sue4m3:had", "bf16"}) {
    {
      const auto q = make_device_codec(parse_variant(var));
      const auto cpu = make_codec(var);
      for (auto [rows, cols] :
           {std::pair<int64_t, int64_t>{8, 1024}, std::pair<int64_t, int64_t>{1, 3 * 1024 + 77}}) {
        for (DType t : {DType::F32, DType::BF16}) {
          CAPTURE(var, rows, cols, dtype_name(t));
          const int64_t n = rows * cols;
          const auto partial = random_values(n, 5, false);
          const auto own = random_values(n, 6, t == DType::BF16);
          const auto wire = cpu->encode(partial.data(), rows, cols);
          std::vector<float> dec(static_cast<size_t>(n));
          cpu->decode(wire.data(), wire.size(), rows, cols, dec.data());
          for (int64_t i = 0; i < n; ++i) dec[size_t(i)] = dec[size_t(i)] + own[size_t(i)];
          const auto want = cpu->encode(dec.data(), rows, cols);
          DeviceBuffer d_in(wire.size(), "test"), d_out(wire.size(), "test"),
              d_own(size_t(n) * 4, "test"), scratch(size_t(n) * 4, "test");
          copy_to_device(d_in.get(), wire.data(), wire.size());
          upload(d_own.get(), own, t);  // (synchronizes the device: both copies have landed)
          fill_device(d_out.get(), 0x5a, wire.size());
          TACO_CUDA_CHECK(cudaDeviceSynchronize());
          q->decode_add_encode(d_in.as<uint8_t>(), d_own.get(), io_type(t), rows, cols,
                               d_out.as<uint8_t>(), scratch.as<float>(), stream.get());
          stream.synchronize();
          std::vector<uint8_t> got(wire.size());
          TACO_CUDA_CHECK(cudaMemcpy(got.data(), d_out.get(), got.size(), cudaMemcpyDeviceToHost));
          REQUIRE(got.size() == want.size());
          size_t diff = got.size();
          for (size_t i = 0; i < got.size(); ++i)
            if (got[i] != want[i]) {
              diff = i;
              break;
            }
          CAPTURE(diff);
          REQUIRE(diff == got.size());
        }
      }
    }
  }
}

TEST_CASE("comm: structured inputs, exact plain sums and the output check (loopback)", "[comm]") {
  for (int N : {1, 2, 3}) {
    CommContext ctx(make_loopback_fabric(N, 0, "test"), 60.0);
    const int64_t count = 4096 * 3;  // divisible by N
    for (DType t : {DType::BF16, DType::F16, DType::F32, DType::F8E4M3, DType::F8E5M2}) {
      const size_t es = comm_dtype_bytes(t);
      BufferSizes s;
      s.in = size_t(count) * es;
      s.out = size_t(count) * es * size_t(N);
      ctx.allocate(s);
      const DataGen g{42, data_k(t, N)};
      REQUIRE(int64_t(N) * g.k <= exact_integer_limit(t));
      for (int l = 0; l < N; ++l)
        fill_structured(ctx.local(l).in.get(), t, count, l, g, ctx.local(l).net->get());
      ctx.wait("fill");
      if (t == DType::BF16) {  // values are k * 2^e, |k| <= K, e in [-3, 3]: multiples of 1/8, |x|
                               // <= 8 K
        const auto v = download(ctx.local(0).in.get(), count, t);
        std::set<float> distinct;
        for (float x : v) {
          REQUIRE(x * 8.0f == std::nearbyint(x * 8.0f));
          REQUIRE(std::fabs(x) <= 8.0f * float(g.k));
          distinct.insert(x);
        }
        REQUIRE(distinct.size() > size_t(g.k));  // the integers and exponents actually vary
      }
      for (Coll c : taco::kAllColls) {
        CAPTURE(N, dtype_name(t), taco::coll_name(c));
        const int64_t out = c == Coll::AllGather       ? count * N
                            : c == Coll::ReduceScatter ? count / N
                                                       : count;
        for (int l = 0; l < N; ++l) fill_device(ctx.local(l).out.get(), 0xff, s.out);
        ctx.enqueue_plain(c, t, count);
        ctx.wait("plain");
        for (int corrupt = 0; corrupt < 2; ++corrupt) {
          int64_t wrong = 0;
          for (int l = 0; l < N; ++l) {
            LocalRank& r = ctx.local(l);
            if (corrupt && l == N - 1)  // one element of the last rank's output: a NaN
              fill_device(r.out.as<uint8_t>() + size_t(out / 2) * es, 0xff, es);
            fill_device(r.stats.get(), 0, sizeof(CheckStats));
            CheckSpec sp;
            sp.kind = c;
            sp.rank = l;
            sp.nranks = N;
            sp.count = count;
            sp.out_count = out;
            sp.out_offset = int64_t(l) * (count / N);
            sp.block = count / N;
            sp.dtype = t;
            sp.gen = g;
            check_output(r.out.get(), sp, r.stats.as<CheckStats>(), r.net->get());
            CheckStats h;
            TACO_CUDA_CHECK(cudaStreamSynchronize(r.net->get()));
            TACO_CUDA_CHECK(cudaMemcpy(&h, r.stats.get(), sizeof h, cudaMemcpyDeviceToHost));
            wrong += int64_t(h.nwrong);
            if (!corrupt) {
              REQUIRE(h.err_sq == 0.0);
              REQUIRE(h.ref_sq > 0.0);
            }
          }
          REQUIRE(wrong == corrupt);
        }
      }
    }
  }
}

TEST_CASE("comm: compressed results pass the tolerance check; a wrong shard does not (loopback)",
          "[comm]") {
  const int N = 2;
  CommContext ctx(make_loopback_fabric(N, 0, "test"), 60.0);
  const int64_t count = 1 << 16;
  const comm::WireModel wm = comm::wire_model("taco");
  for (Algo a : {Algo::OneShot, Algo::TwoShot, Algo::Ring}) {
    const auto [rows, cols] = comm::buffer_shape(count, 1024);
    const auto plans = comm::build_plans({Coll::AllReduce, a, N, rows, cols, &wm, 2});
    ctx.allocate(sizes_for(plans, DType::BF16));
    ctx.set_codec(parse_variant("taco"));
    const DataGen g{3, data_k(DType::BF16, N)};
    for (int l = 0; l < N; ++l)
      fill_structured(ctx.local(l).in.get(), DType::BF16, count, l, g, ctx.local(l).net->get());
    ctx.wait("fill");
    std::vector<const comm::RankPlan*> pp = {&plans[0], &plans[1]};
    ctx.enqueue_plan(pp, DType::BF16, RunMode::Full);
    ctx.wait("run");
    for (int shift = 0; shift < 2; ++shift) {
      // shift = 1 checks rank 0's output as if it were rank 1's reduce-scatter shard: wrong data.
      LocalRank& r = ctx.local(0);
      fill_device(r.stats.get(), 0, sizeof(CheckStats));
      CheckSpec sp;
      sp.kind = shift ? Coll::ReduceScatter : Coll::AllReduce;
      sp.nranks = N;
      sp.count = count;
      sp.out_count = shift ? count / 2 : count;
      sp.out_offset = shift ? count / 2 : 0;
      sp.compressed = 1;
      sp.dtype = DType::BF16;
      sp.gen = g;
      check_output(r.out.get(), sp, r.stats.as<CheckStats>(), r.net->get());
      CheckStats h;
      TACO_CUDA_CHECK(cudaStreamSynchronize(r.net->get()));
      TACO_CUDA_CHECK(cudaMemcpy(&h, r.stats.get(), sizeof h, cudaMemcpyDeviceToHost));
      const double rel = std::sqrt(h.err_sq / h.ref_sq);
      CAPTURE(taco::algo_name(a), shift, rel, h.nwrong);
      if (!shift) {
        REQUIRE(h.nwrong == 0);
        REQUIRE(rel > 1e-4);  // lossy
        REQUIRE(rel < 0.1);
      } else {
        REQUIRE(h.nwrong > uint64_t(count / 2 / 10));
      }
    }
  }
}

TEST_CASE("comm: pipelined runs, comm-only and codec-only modes keep the plan's results (loopback)",
          "[comm]") {
  const int N = 2;
  CommContext ctx(make_loopback_fabric(N, 0, "test"), 60.0);
  // A full run after comm-only and codec-only runs still gives the exact result.
  for (int depth : {1, 4, 8}) {
    CAPTURE(depth);
    REQUIRE(compare_with_host(ctx, "taco", Coll::AllReduce, Algo::TwoShot, 64, 1024, depth,
                              DType::BF16) == "");
    const comm::WireModel wm = comm::wire_model("taco");
    const auto plans = comm::build_plans({Coll::AllReduce, Algo::TwoShot, N, 64, 1024, &wm, depth});
    std::vector<const comm::RankPlan*> pp = {&plans[0], &plans[1]};
    ctx.enqueue_plan(pp, DType::BF16, RunMode::CommOnly);
    ctx.enqueue_plan(pp, DType::BF16, RunMode::CodecOnly);
    ctx.wait("modes");
    REQUIRE(compare_with_host(ctx, "taco", Coll::AllReduce, Algo::TwoShot, 64, 1024, depth,
                              DType::BF16) == "");
  }
}

TEST_CASE("comm: a stalled stream ends the wait with an error naming the rank", "[comm]") {
  CommContext ctx(make_loopback_fabric(2, 0, "test-host"), 0.5);
  std::atomic<int> release{0};
  auto block = [](void* p) {
    auto* f = static_cast<std::atomic<int>*>(p);
    while (!f->load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  };
  TACO_CUDA_CHECK(cudaLaunchHostFunc(ctx.local(1).net->get(), block, &release));
  std::string msg;
  const auto t0 = std::chrono::steady_clock::now();
  try {
    ctx.wait("a stalled collective");
  } catch (const Error& e) {
    msg = e.what();
  }
  const double waited =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  release = 1;
  TACO_CUDA_CHECK(cudaStreamSynchronize(ctx.local(1).net->get()));
  CAPTURE(msg);
  REQUIRE(msg.find("rank 1 (host test-host, GPU 0)") != std::string::npos);
  REQUIRE(msg.find("did not finish within 0.5 s") != std::string::npos);
  REQUIRE(waited >= 0.5);
  REQUIRE(waited < 5.0);
}

TEST_CASE("comm: mismatched groups are reported, not hung (loopback)", "[comm]") {
  CommContext ctx(make_loopback_fabric(2, 0, "test"), 5.0);
  BufferSizes s;
  s.in = s.out = 1024;
  ctx.allocate(s);
  ctx.fabric().group_start();
  ctx.fabric().send(0, ctx.local(0).in.get(), 64, 1, ctx.local(0).net->get());
  std::string msg;
  try {
    ctx.fabric().group_end();
  } catch (const Error& e) {
    msg = e.what();
  }
  REQUIRE(msg.find("rank 0 sends 1 messages to rank 1, which posts 0 receives") !=
          std::string::npos);
}

// One process driving every visible GPU (up to 8) as NCCL ranks.
static NcclSetup all_gpus_setup(bool copy_engine) {
  const int ndev = std::min(device_count_noexcept(), 8);
  REQUIRE(ndev >= 1);
  NcclSetup st;
  st.nranks = ndev;
  for (int d = 0; d < ndev; ++d) {
    st.ranks.push_back(d);
    st.devices.push_back(d);
  }
  st.unique_id = make_nccl_id();
  st.timeout_s = 60;
  st.host = "test";
  st.copy_engine = copy_engine;
  return st;
}

TEST_CASE("comm: NCCL on every visible GPU equals the host executor", "[comm][nccl]") {
  const NcclSetup st = all_gpus_setup(false);
  const int ndev = st.nranks;
  CommContext ctx(make_nccl_fabric(st), 60.0);
  // plain: exact
  const int64_t count = 8192 * ndev;
  BufferSizes s;
  s.in = size_t(count) * 4;
  s.out = size_t(count) * 4 * size_t(ndev);
  ctx.allocate(s);
  for (DType t : {DType::BF16, DType::F32}) {
    const DataGen g{9, data_k(t, ndev)};
    for (int l = 0; l < ndev; ++l)
      fill_structured(ctx.local(l).in.get(), t, count, l, g, ctx.local(l).net->get());
    for (Coll c : taco::kAllColls) {
      CAPTURE(dtype_name(t), taco::coll_name(c));
      ctx.enqueue_plain(c, t, count);
      ctx.wait("plain nccl");
      for (int l = 0; l < ndev; ++l) {
        LocalRank& r = ctx.local(l);
        TACO_CUDA_CHECK(cudaSetDevice(r.tag.device));
        fill_device(r.stats.get(), 0, sizeof(CheckStats));
        CheckSpec sp;
        sp.kind = c;
        sp.rank = l;
        sp.nranks = ndev;
        sp.count = count;
        sp.out_count = c == Coll::AllGather       ? count * ndev
                       : c == Coll::ReduceScatter ? count / ndev
                                                  : count;
        sp.out_offset = int64_t(l) * (count / ndev);
        sp.block = count / ndev;
        sp.dtype = t;
        sp.gen = g;
        check_output(r.out.get(), sp, r.stats.as<CheckStats>(), r.net->get());
        CheckStats h;
        TACO_CUDA_CHECK(cudaStreamSynchronize(r.net->get()));
        TACO_CUDA_CHECK(cudaMemcpy(&h, r.stats.get(), sizeof h, cudaMemcpyDeviceToHost));
        REQUIRE(h.nwrong == 0);
      }
    }
  }
  // compressed: bit for bit with the host executor
  for (const auto& [coll, algo] : kAlgos)
    for (int depth : {1, 2}) {
      CAPTURE(taco::coll_name(coll), taco::algo_name(algo), depth);
      REQUIRE(compare_with_host(ctx, "taco", coll, algo, 8 * ndev, 1024, depth, DType::BF16) == "");
      REQUIRE(compare_with_host(ctx, "fp8-row", coll, algo, 3 * ndev + 1, 256, depth, DType::F32) ==
              "");
    }
}

// --nccl-ce: the compressed messages go through symmetric windows on a zero-CTA communicator (copy
// engines between NVLink peers); the results must not change by a bit.
TEST_CASE("comm: NCCL with copy-engine messages (--nccl-ce) equals the host executor",
          "[comm][nccl]") {
  const NcclSetup st = all_gpus_setup(true);
  const int ndev = st.nranks;
  CommContext ctx(make_nccl_fabric(st), 60.0);
  for (const auto& [coll, algo] : kAlgos)
    for (int depth : {1, 3}) {
      CAPTURE(taco::coll_name(coll), taco::algo_name(algo), depth);
      REQUIRE(compare_with_host(ctx, "taco", coll, algo, 8 * ndev, 1024, depth, DType::BF16) == "");
      REQUIRE(compare_with_host(ctx, "fp8-g128", coll, algo, 16 * ndev, 4096, depth, DType::F32) ==
              "");
    }
  // With several NVLink GPUs and P2P allowed, NCCL must have taken the windows (else this case
  // would test the kernel path twice).
  const char* p2p_off = std::getenv("NCCL_P2P_DISABLE");
  if (ndev >= 2 && !(p2p_off && std::string(p2p_off) == "1"))
    CHECK(ctx.fabric().wire_memory() == "nccl-window");
}
