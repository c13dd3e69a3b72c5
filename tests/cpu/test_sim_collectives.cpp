// Simulated compressed collectives: exactness with a lossless codec, the path every value takes
// (counted with a codec that adds 1 per round trip), chunking, byte accounting, thread-count
// invariance and the growth of ring error with the TP degree.
#include "catch.hpp"
#include "collectives/sim_collectives.hpp"
#include "study/metrics.hpp"
#include "test_study_support.hpp"

#include <cstring>
#include <random>
#include <vector>

using namespace taco;
using namespace taco::sim;
using taco::testing::GroupInt8Codec;
using taco::testing::IdentityCodec;
using taco::testing::PlusOneCodec;

namespace {

// Integer-valued inputs: every fp32 partial sum is exact, so any summation order gives the
// exact result (the nccl-tests trick).
std::vector<std::vector<float>> integer_inputs(int nranks, int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> u(-1000, 1000);
  std::vector<std::vector<float>> in(static_cast<size_t>(nranks));
  for (auto& v : in) {
    v.resize(size_t(n));
    for (float& f : v) f = float(u(rng));
  }
  return in;
}

std::vector<std::vector<float>> gaussian_inputs(int nranks, int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0, 1);
  std::vector<std::vector<float>> in(static_cast<size_t>(nranks));
  for (auto& v : in) {
    v.resize(size_t(n));
    for (float& f : v) f = nd(rng);
  }
  return in;
}

std::vector<const float*> ptrs(const std::vector<std::vector<float>>& in) {
  std::vector<const float*> p;
  for (const auto& v : in) p.push_back(v.data());
  return p;
}

double rel_l2(const CollectiveResult& r, const std::vector<std::vector<float>>& ref) {
  taco::study::ErrorSums s;
  for (size_t k = 0; k < ref.size(); ++k)
    s.combine(taco::study::error_sums(ref[k].data(), r.outputs[k].data(), int64_t(ref[k].size()), 0,
                                      false, 1));
  return *taco::study::finish_metrics(s).rel_l2;
}

const Collective kAll[] = {kOneShot, kTwoShot, kRing, kAllGather, kReduceScatter};

}  // namespace

TEST_CASE("chunk layout follows methods.md 1.4", "[sim]") {
  // rows % N == 0: [rows/N, cols] blocks of whole rows.
  auto c = chunk_layout(8, 6, 4);
  REQUIRE(c.size() == 4);
  for (int j = 0; j < 4; ++j) {
    REQUIRE(c[size_t(j)].rows == 2);
    REQUIRE(c[size_t(j)].cols == 6);
    REQUIRE(c[size_t(j)].offset == 12 * j);
  }
  // rows % N != 0: flat [1, n_j] pieces with floor boundaries, covering everything once.
  c = chunk_layout(3, 5, 4);  // 15 elements
  int64_t next = 0;
  for (const Chunk& ch : c) {
    REQUIRE(ch.rows == 1);
    REQUIRE(ch.offset == next);
    next += ch.numel();
  }
  REQUIRE(next == 15);
  REQUIRE(c[0].cols == 3);
  REQUIRE(c[3].cols == 4);
}

TEST_CASE("a lossless codec gives the exact result for every algorithm", "[sim]") {
  const IdentityCodec id;
  for (int N : {2, 3, 4, 8}) {
    for (int64_t rows : {int64_t(8), int64_t(5)}) {  // chunks of rows, and flat chunks
      const int64_t cols = 24;
      const auto in = integer_inputs(N, rows * cols, uint32_t(N * 100 + rows));
      const SimulatedCommunicator comm(N, id, 2);
      for (Collective a : kAll) {
        CAPTURE(N, rows, collective_name(a));
        const CollectiveResult r = comm.run(a, ptrs(in), rows, cols);
        const auto ref = reference_outputs(a, ptrs(in), rows, cols);
        REQUIRE(r.outputs.size() == size_t(N));
        REQUIRE(r.quantizations == quantizations(a, N));
        for (int k = 0; k < N; ++k) REQUIRE(r.outputs[size_t(k)] == ref[size_t(k)]);
        if (a != kReduceScatter)
          for (int k = 1; k < N; ++k) REQUIRE(r.outputs[size_t(k)] == r.outputs[0]);
      }
    }
  }
}

TEST_CASE("the reference sums in double and rounds once", "[sim]") {
  // 1 + 2^-24 + 2^-24 in fp32 left to right is 1; the exact sum rounds to 1 + 2^-23.
  const std::vector<std::vector<float>> in = {
      {1.0f}, {std::ldexp(1.0f, -24)}, {std::ldexp(1.0f, -24)}};
  const auto ref = reference_outputs(kOneShot, ptrs(in), 1, 1);
  REQUIRE(ref[0][0] == 1.0f + std::ldexp(1.0f, -23));
}

TEST_CASE("each algorithm sends every value through the codec the documented number of times",
          "[sim]") {
  // PlusOneCodec decodes to x + 1: the offset in the output counts codec round trips along the
  // path, summed over the contributions. S = exact sum of the inputs.
  const PlusOneCodec plus1;
  for (int N : {2, 3, 5}) {
    const int64_t rows = 10, cols = 8;
    const auto in = integer_inputs(N, rows * cols, 11u + uint32_t(N));
    const auto sum = reference_outputs(kOneShot, ptrs(in), rows, cols)[0];
    const SimulatedCommunicator comm(N, plus1, 1);
    auto expect_offset = [&](Collective a, float offset) {
      CAPTURE(N, collective_name(a));
      const CollectiveResult r = comm.run(a, ptrs(in), rows, cols);
      for (int k = 0; k < N; ++k)
        for (size_t e = 0; e < sum.size(); ++e) REQUIRE(r.outputs[size_t(k)][e] == sum[e] + offset);
    };
    expect_offset(kOneShot, float(N));      // N contributions, one trip each
    expect_offset(kTwoShot, float(N + 1));  // N trips to the owner, one back
    expect_offset(kRing, float(N));         // N-1 hops, then the all-gather
    const CollectiveResult ag = comm.run(kAllGather, ptrs(in), rows, cols);
    for (int r = 0; r < N; ++r)
      for (int64_t e = 0; e < rows * cols; ++e)
        REQUIRE(ag.outputs[0][size_t(r * rows * cols + e)] == in[size_t(r)][size_t(e)] + 1);
  }
  REQUIRE(quantizations(kOneShot, 8) == 1);
  REQUIRE(quantizations(kTwoShot, 8) == 2);
  REQUIRE(quantizations(kRing, 8) == 8);
  REQUIRE(quantizations(kRing, 1) == 0);
}

TEST_CASE("bytes sent per rank follow each algorithm's traffic", "[sim]") {
  const IdentityCodec id;  // 4 bytes per element
  const int N = 4;
  const int64_t rows = 8, cols = 16, n = rows * cols;
  const auto in = integer_inputs(N, n, 5);
  const SimulatedCommunicator comm(N, id, 1);
  auto sent = [&](Collective a) { return comm.run(a, ptrs(in), rows, cols).bytes_sent; };
  for (int64_t b : sent(kOneShot)) REQUIRE(b == (N - 1) * n * 4);
  for (int64_t b : sent(kTwoShot)) REQUIRE(b == 2 * (N - 1) * (n / N) * 4);
  for (int64_t b : sent(kRing)) REQUIRE(b == 2 * (N - 1) * (n / N) * 4);
  for (int64_t b : sent(kAllGather)) REQUIRE(b == (N - 1) * n * 4);
  for (int64_t b : sent(kReduceScatter)) REQUIRE(b == (N - 1) * (n / N) * 4);
}

TEST_CASE("one rank: nothing is quantized", "[sim]") {
  const GroupInt8Codec q(32, false);
  const auto in = gaussian_inputs(1, 64, 1);
  const SimulatedCommunicator comm(1, q, 1);
  const CollectiveResult r = comm.run(kRing, ptrs(in), 2, 32);
  REQUIRE(r.quantizations == 0);
  REQUIRE(r.outputs[0] == in[0]);
}

TEST_CASE("simulated collectives do not depend on the thread count", "[sim]") {
  const GroupInt8Codec q(32, true);
  const int N = 4;
  const auto in = gaussian_inputs(N, 64 * 32, 9);
  for (Collective a : kAll) {
    const CollectiveResult r1 = SimulatedCommunicator(N, q, 1).run(a, ptrs(in), 64, 32);
    const CollectiveResult r3 = SimulatedCommunicator(N, q, 3).run(a, ptrs(in), 64, 32);
    CAPTURE(collective_name(a));
    REQUIRE(r1.outputs == r3.outputs);
    REQUIRE(r1.bytes_sent == r3.bytes_sent);
  }
}

TEST_CASE("ring error grows with the TP degree for a lossy codec", "[sim]") {
  // Per-group scaled int8: each hop's error scales with the partial sum, and the ring
  // requantizes N-1 times, so relative error grows with N while one-shot's does not.
  const GroupInt8Codec q(32, false);
  const int64_t rows = 64, cols = 256;
  double prev_ring = 0;
  for (int N : {2, 4, 8}) {
    const auto in = gaussian_inputs(N, rows * cols, 21);
    const SimulatedCommunicator comm(N, q, 2);
    const auto ref = reference_outputs(kRing, ptrs(in), rows, cols);
    const double ring = rel_l2(comm.run(kRing, ptrs(in), rows, cols), ref);
    const double one = rel_l2(comm.run(kOneShot, ptrs(in), rows, cols), ref);
    const double two = rel_l2(comm.run(kTwoShot, ptrs(in), rows, cols), ref);
    CAPTURE(N, ring, one, two);
    REQUIRE(one > 0);
    REQUIRE(ring > prev_ring * 1.2);
    REQUIRE(two > one);
    if (N > 2) REQUIRE(ring > two);
    prev_ring = ring;
  }
}

TEST_CASE("derived ranks keep magnitudes and are deterministic", "[sim]") {
  const int64_t rows = 16, cols = 8;
  std::vector<float> base(static_cast<size_t>(rows * cols));
  for (size_t i = 0; i < base.size(); ++i) base[i] = float(i) + 1;
  const auto a = derive_rank(base.data(), rows, cols, 42, 3);
  REQUIRE(a == derive_rank(base.data(), rows, cols, 42, 3));
  REQUIRE(a != derive_rank(base.data(), rows, cols, 42, 4));
  REQUIRE(a != derive_rank(base.data(), rows, cols, 43, 3));
  // Every row is some base row, whole, with one sign; each base row used once.
  std::vector<int> used(static_cast<size_t>(rows), 0);
  for (int64_t r = 0; r < rows; ++r) {
    const float first = std::fabs(a[size_t(r * cols)]);
    const int64_t src = int64_t(first - 1) / cols;
    ++used[size_t(src)];
    const float sign = a[size_t(r * cols)] < 0 ? -1.0f : 1.0f;
    for (int64_t c = 0; c < cols; ++c)
      REQUIRE(a[size_t(r * cols + c)] == sign * base[size_t(src * cols + c)]);
  }
  for (int u : used) REQUIRE(u == 1);
  // A single row: the same magnitudes, rotated.
  const auto flat = derive_rank(base.data(), 1, 128, 1, 2);
  std::vector<float> mags;
  for (float v : flat) mags.push_back(std::fabs(v));
  std::sort(mags.begin(), mags.end());
  REQUIRE(mags == base);
}

TEST_CASE("unknown algorithm names are input errors", "[sim]") {
  REQUIRE(parse_collective("two_shot") == kTwoShot);
  REQUIRE_THROWS_AS(parse_collective("tree"), InputError);
}
