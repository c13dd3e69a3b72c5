#include "collectives/sim_collectives.hpp"

#include "collectives/comm_hostsim.hpp"
#include "collectives/comm_plans.hpp"

#include "core/error.hpp"
#include "core/splitmix64.hpp"

#include <algorithm>
#include <numeric>

namespace taco::sim {
namespace {

// A seeded stream of core/splitmix64.hpp (no global state).
struct SplitMix64 {
  uint64_t s;
  uint64_t next() { return splitmix64_next(s); }
  uint64_t below(uint64_t n) { return next() % n; }  // bias < n / 2^64: irrelevant here
};

}  // namespace

bool simulated(Collective c) {
  for (Collective k : kSimulated)
    if (c == k) return true;
  return false;
}

Collective parse_collective(std::string_view s) {
  for (Collective c : kSimulated)
    if (s == collective_name(c)) return c;
  throw_input_error(
      "--collectives: unknown algorithm '{}' (one of one_shot, two_shot, ring, all_gather, "
      "reduce_scatter)",
      s);
}

int quantizations(Collective a, int nranks) {
  if (nranks <= 1) return 0;
  TACO_ASSERT(simulated(a), "quantizations: {} is not simulated", collective_name(a));
  return a == kTwoShot ? 2
         : a == kRing  ? nranks
                       : 1;  // ring: N-1 reduce-scatter hops + 1 all-gather
}

std::vector<Chunk> chunk_layout(int64_t rows, int64_t cols, int nranks) {
  TACO_ASSERT(nranks >= 1 && rows >= 0 && cols >= 0, "bad layout {}x{} / {}", rows, cols, nranks);
  std::vector<Chunk> out(static_cast<size_t>(nranks));
  const int64_t n = rows * cols;
  for (int j = 0; j < nranks; ++j) {
    Chunk& c = out[size_t(j)];
    if (rows % nranks == 0) {
      c.rows = rows / nranks;
      c.cols = cols;
      c.offset = int64_t(j) * c.rows * cols;
    } else {
      c.offset = n * j / nranks;
      c.rows = 1;
      c.cols = n * (j + 1) / nranks - c.offset;
    }
  }
  return out;
}

SimulatedCommunicator::SimulatedCommunicator(int nranks, const Codec& codec, int threads)
    : nranks_(nranks), codec_(codec), threads_(threads) {
  TACO_REQUIRE_INPUT(nranks >= 1, "--tp: need at least 1 rank, got {}", nranks);
}

CollectiveResult SimulatedCommunicator::run(Collective a, const std::vector<const float*>& in,
                                            int64_t rows, int64_t cols) const {
  TACO_ASSERT(int(in.size()) == nranks_, "{} inputs for {} ranks", in.size(), nranks_);
  TACO_ASSERT(simulated(a), "SimulatedCommunicator::run: {} is not simulated", collective_name(a));
  // The plans the live collectives run (collectives/comm_plans.hpp), on host buffers.
  const comm::WireModel wm = comm::wire_model(codec_);
  const comm::PlanRequest rq{a.coll, a.algo, nranks_, rows, cols, &wm, 1};
  const std::vector<comm::RankPlan> plans = comm::build_plans(rq);
  std::vector<comm::HostRank> ranks(static_cast<size_t>(nranks_));
  for (int r = 0; r < nranks_; ++r)
    ranks[size_t(r)].in.assign(in[size_t(r)], in[size_t(r)] + rows * cols);
  comm::run_host(plans, codec_, wm, ranks, false, threads_);
  CollectiveResult res;
  res.quantizations = plans[0].quantizations;
  for (comm::HostRank& h : ranks) {
    res.outputs.push_back(std::move(h.out));
    res.bytes_sent.push_back(h.payload_sent);
  }
  return res;
}

uint64_t memory_estimate(Collective a, int nranks, int64_t numel) {
  const uint64_t n = uint64_t(numel), N = uint64_t(nranks);
  uint64_t outputs = N * n;                  // all-reduce: every rank the sum
  if (a == kAllGather) outputs = N * N * n;  // every rank all the buffers
  if (a == kReduceScatter) outputs = n;      // every rank one chunk
  // The plans' wire buffers at about 1 B/elem: in a one-shot all-reduce or an all-gather every
  // rank holds every rank's encoding; otherwise about three copies of its own.
  const uint64_t wires = a == kOneShot || a == kAllGather ? N * N * n : 3 * N * n;
  // The caller's inputs and the executor's copies, outputs and their reference (floats), wires.
  return (2 * N * n + 2 * outputs) * sizeof(float) + wires;
}

std::vector<std::vector<float>> reference_outputs(Collective a, const std::vector<const float*>& in,
                                                  int64_t rows, int64_t cols) {
  const int N = int(in.size());
  const int64_t n = rows * cols;
  if (a == kAllGather) {
    std::vector<float> cat;
    cat.reserve(size_t(n) * size_t(N));
    for (const float* p : in) cat.insert(cat.end(), p, p + n);
    return std::vector<std::vector<float>>(size_t(N), cat);
  }
  std::vector<float> sum(static_cast<size_t>(n));
  for (int64_t e = 0; e < n; ++e) {
    double s = 0;
    for (const float* p : in) s += double(p[e]);
    sum[size_t(e)] = float(s);
  }
  if (a == kReduceScatter) {
    std::vector<std::vector<float>> out;
    for (const Chunk& c : chunk_layout(rows, cols, N))
      out.emplace_back(sum.begin() + c.offset, sum.begin() + c.offset + c.numel());
    return out;
  }
  return std::vector<std::vector<float>>(size_t(N), sum);
}

std::vector<float> derive_rank(const float* base, int64_t rows, int64_t cols, uint64_t seed,
                               int rank) {
  SplitMix64 rng{seed ^ (0xd1b54a32d192ed03ull * uint64_t(rank + 1))};
  const int64_t n = rows * cols;
  std::vector<float> out(static_cast<size_t>(n));
  if (rows >= 2) {
    std::vector<int64_t> perm(static_cast<size_t>(rows));
    std::iota(perm.begin(), perm.end(), int64_t(0));
    for (int64_t i = rows - 1; i > 0; --i)  // Fisher-Yates
      std::swap(perm[size_t(i)], perm[size_t(rng.below(uint64_t(i + 1)))]);
    for (int64_t r = 0; r < rows; ++r) {
      const float sign = (rng.next() >> 63) ? -1.0f : 1.0f;
      const float* src = base + perm[size_t(r)] * cols;
      float* dst = out.data() + r * cols;
      for (int64_t c = 0; c < cols; ++c) dst[c] = sign * src[c];
    }
  } else if (n > 0) {
    const int64_t shift = int64_t(rng.below(uint64_t(n)));
    for (int64_t e = 0; e < n; ++e) {
      const float sign = (rng.next() >> 63) ? -1.0f : 1.0f;
      out[size_t(e)] = sign * base[(e + shift) % n];
    }
  }
  return out;
}

}  // namespace taco::sim
