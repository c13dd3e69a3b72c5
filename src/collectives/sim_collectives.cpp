#include "collectives/sim_collectives.hpp"

#include "core/error.hpp"
#include "core/splitmix64.hpp"

#include <omp.h>

#include <algorithm>
#include <numeric>

namespace taco::sim {
namespace {

using Wire = std::vector<uint8_t>;

// Runs fn(i) for i in [0, n) on up to `threads` threads. Each i writes only its own outputs,
// so the result does not depend on the thread count.
template <typename Fn>
void parallel_for(int64_t n, int threads, const Fn& fn) {
#pragma omp parallel for schedule(dynamic, 1) \
    num_threads(std::max(1, threads)) if (threads > 1 && n > 1)
  for (int64_t i = 0; i < n; ++i) fn(i);
}

Wire encode_chunk(const Codec& c, const float* base, const Chunk& ch) {
  if (ch.numel() == 0) return {};
  return c.encode(base + ch.offset, ch.rows, ch.cols);
}

void decode_chunk(const Codec& c, const Wire& w, const Chunk& ch, float* out) {
  if (ch.numel() == 0) return;
  c.decode(w.data(), w.size(), ch.rows, ch.cols, out);
}

// out = the sum of every rank's wire of chunk j (wire[r * N + j]), in rank order.
void decode_reduce_chunk(const Codec& c, const std::vector<Wire>& wire, int64_t j, int N,
                         const Chunk& ch, float* out) {
  if (ch.numel() == 0) return;
  std::vector<WireView> from(static_cast<size_t>(N));
  for (int r = 0; r < N; ++r) {
    const Wire& w = wire[size_t(r) * size_t(N) + size_t(j)];
    from[size_t(r)] = {w.data(), w.size()};
  }
  c.decode_reduce(from, ch.rows, ch.cols, out);
}

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
  if (nranks_ == 1) {
    // Nothing crosses the network.
    CollectiveResult r;
    r.outputs.emplace_back(in[0], in[0] + rows * cols);
    r.bytes_sent = {0};
    return r;
  }
  if (a == kOneShot) return one_shot(in, rows, cols);
  if (a == kTwoShot) return two_shot(in, rows, cols);
  if (a == kRing) return ring(in, rows, cols);
  if (a == kAllGather) return all_gather(in, rows, cols);
  if (a == kReduceScatter) return reduce_scatter(in, rows, cols);
  throw_error("SimulatedCommunicator::run: {} is not simulated", collective_name(a));
}

CollectiveResult SimulatedCommunicator::one_shot(const std::vector<const float*>& in, int64_t rows,
                                                 int64_t cols) const {
  const int N = nranks_;
  const auto chunks = chunk_layout(rows, cols, N);
  // wire[r * N + j]: rank r's encoding of its chunk j (rank r's whole compressed buffer is
  // wire[r*N .. r*N+N-1], sent to every peer).
  std::vector<Wire> wire(static_cast<size_t>(N) * size_t(N));
  parallel_for(int64_t(N) * N, threads_, [&](int64_t i) {
    wire[size_t(i)] = encode_chunk(codec_, in[size_t(i / N)], chunks[size_t(i % N)]);
  });
  // Every rank decodes the same N buffers and adds them in rank order: compute once.
  const int64_t n = rows * cols;
  std::vector<float> sum(static_cast<size_t>(n), 0.0f);
  parallel_for(N, threads_, [&](int64_t j) {
    const Chunk& ch = chunks[size_t(j)];
    decode_reduce_chunk(codec_, wire, j, N, ch, sum.data() + ch.offset);
  });
  CollectiveResult res;
  res.quantizations = quantizations(kOneShot, N);
  res.outputs.assign(size_t(N), sum);
  for (int r = 0; r < N; ++r) {
    int64_t bytes = 0;
    for (int j = 0; j < N; ++j) bytes += int64_t(wire[size_t(r) * N + j].size());
    res.bytes_sent.push_back(bytes * (N - 1));
  }
  return res;
}

CollectiveResult SimulatedCommunicator::reduce_scatter(const std::vector<const float*>& in,
                                                       int64_t rows, int64_t cols) const {
  const int N = nranks_;
  const auto chunks = chunk_layout(rows, cols, N);
  std::vector<Wire> wire(static_cast<size_t>(N) * size_t(N));  // [sender r][chunk j]
  parallel_for(int64_t(N) * N, threads_, [&](int64_t i) {
    wire[size_t(i)] = encode_chunk(codec_, in[size_t(i / N)], chunks[size_t(i % N)]);
  });
  CollectiveResult res;
  res.quantizations = quantizations(kReduceScatter, N);
  res.outputs.resize(size_t(N));
  res.bytes_sent.assign(size_t(N), 0);
  parallel_for(N, threads_, [&](int64_t j) {
    const Chunk& ch = chunks[size_t(j)];
    std::vector<float>& acc = res.outputs[size_t(j)];
    acc.assign(size_t(ch.numel()), 0.0f);
    decode_reduce_chunk(codec_, wire, j, N, ch, acc.data());
  });
  for (int r = 0; r < N; ++r)
    for (int j = 0; j < N; ++j)
      if (j != r) res.bytes_sent[size_t(r)] += int64_t(wire[size_t(r) * N + j].size());
  return res;
}

CollectiveResult SimulatedCommunicator::two_shot(const std::vector<const float*>& in, int64_t rows,
                                                 int64_t cols) const {
  const int N = nranks_;
  const auto chunks = chunk_layout(rows, cols, N);
  // Steps 1-3: the direct reduce-scatter (encode N chunks, all-to-all, decode + sum in fp32).
  CollectiveResult rs = reduce_scatter(in, rows, cols);
  // Step 3b: each owner re-encodes its reduced shard; steps 4-5: all-gather, everyone decodes.
  std::vector<Wire> shard_wire(static_cast<size_t>(N));
  parallel_for(N, threads_, [&](int64_t j) {
    const Chunk& ch = chunks[size_t(j)];
    const Chunk local{0, ch.rows, ch.cols};
    shard_wire[size_t(j)] = encode_chunk(codec_, rs.outputs[size_t(j)].data(), local);
  });
  const int64_t n = rows * cols;
  std::vector<float> full(static_cast<size_t>(n));
  parallel_for(N, threads_, [&](int64_t j) {
    const Chunk& ch = chunks[size_t(j)];
    decode_chunk(codec_, shard_wire[size_t(j)], ch, full.data() + ch.offset);
  });
  CollectiveResult res;
  res.quantizations = quantizations(kTwoShot, N);
  res.outputs.assign(size_t(N), full);
  res.bytes_sent = rs.bytes_sent;
  for (int r = 0; r < N; ++r)
    res.bytes_sent[size_t(r)] += int64_t(shard_wire[size_t(r)].size()) * (N - 1);
  return res;
}

CollectiveResult SimulatedCommunicator::ring(const std::vector<const float*>& in, int64_t rows,
                                             int64_t cols) const {
  const int N = nranks_;
  const auto chunks = chunk_layout(rows, cols, N);
  const int64_t n = rows * cols;
  std::vector<float> full(static_cast<size_t>(n));
  std::vector<int64_t> sent(static_cast<size_t>(N) * size_t(N), 0);  // [chunk j][sender rank]
  // Chunks travel the ring independently, so they can be simulated in parallel.
  parallel_for(N, threads_, [&](int64_t j) {
    const Chunk& ch = chunks[size_t(j)];
    if (ch.numel() == 0) return;
    int64_t* sent_j = sent.data() + size_t(j) * size_t(N);
    int k = int((j + 1) % N);  // the rank that starts chunk j with its own raw chunk
    Wire w = encode_chunk(codec_, in[size_t(k)], ch), next;
    for (int hop = 1; hop < N; ++hop) {
      sent_j[k] += int64_t(w.size());
      k = (k + 1) % N;
      codec_.decode_add_encode({w.data(), w.size()}, in[size_t(k)] + ch.offset, ch.rows, ch.cols,
                               next);
      w.swap(next);
    }
    TACO_ASSERT(k == j, "ring ended at rank {} for chunk {}", k, j);
    // All-gather: w is the owner's encoding of the finished shard; it is forwarded N-1 times as
    // is (by ranks j, j+1, ..., j+N-2) and every rank decodes the same bytes.
    const Chunk local{0, ch.rows, ch.cols};
    for (int h = 0; h < N - 1; ++h) sent_j[(j + h) % N] += int64_t(w.size());
    decode_chunk(codec_, w, local, full.data() + ch.offset);
  });
  CollectiveResult res;
  res.quantizations = quantizations(kRing, N);
  res.outputs.assign(size_t(N), full);
  res.bytes_sent.assign(size_t(N), 0);
  for (int j = 0; j < N; ++j)
    for (int r = 0; r < N; ++r) res.bytes_sent[size_t(r)] += sent[size_t(j) * N + r];
  return res;
}

CollectiveResult SimulatedCommunicator::all_gather(const std::vector<const float*>& in,
                                                   int64_t rows, int64_t cols) const {
  const int N = nranks_;
  const int64_t n = rows * cols;
  const Chunk whole{0, rows, cols};
  std::vector<Wire> wire(static_cast<size_t>(N));
  parallel_for(N, threads_,
               [&](int64_t r) { wire[size_t(r)] = encode_chunk(codec_, in[size_t(r)], whole); });
  std::vector<float> out(static_cast<size_t>(n) * size_t(N));
  parallel_for(N, threads_, [&](int64_t r) {
    decode_chunk(codec_, wire[size_t(r)], whole, out.data() + size_t(r) * size_t(n));
  });
  CollectiveResult res;
  res.quantizations = quantizations(kAllGather, N);
  res.outputs.assign(size_t(N), out);
  for (int r = 0; r < N; ++r) res.bytes_sent.push_back(int64_t(wire[size_t(r)].size()) * (N - 1));
  return res;
}

uint64_t memory_estimate(Collective a, int nranks, int64_t numel) {
  const uint64_t n = uint64_t(numel), N = uint64_t(nranks);
  uint64_t outputs = N * n;                  // all-reduce: every rank the sum
  if (a == kAllGather) outputs = N * N * n;  // every rank all the buffers
  if (a == kReduceScatter) outputs = n;      // every rank one chunk
  // inputs + outputs + reference (as big as the outputs) in floats; wire buffers about 1 B/elem.
  return (N * n + 2 * outputs) * sizeof(float) + N * n;
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
