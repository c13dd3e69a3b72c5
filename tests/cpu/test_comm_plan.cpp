// The compressed-collective plans (collectives/comm_plans.hpp) run on host buffers
// (collectives/comm_hostsim.hpp), directly and as the study's simulation
// (collectives/sim_collectives), against each algorithm written as a formula over codec round
// trips: same outputs bit for bit, same quantization counts and bytes. Plus codecs whose wire size
// is a bound, all-to-all, send/recv, pipelining, the bf16 exact codec, schedule invariants and the
// nccl-tests conventions.
#include <cmath>
#include <cstring>
#include <map>
#include <random>
#include <set>

#include "catch.hpp"
#include "codecs/codec.hpp"
#include "collectives/comm_hostsim.hpp"
#include "collectives/comm_plans.hpp"
#include "collectives/sim_collectives.hpp"
#include "core/dtype.hpp"

using namespace taco;
using namespace taco::comm;

namespace {

// Activation-like values: normal bulk, a few large outliers, some exact zeros.
std::vector<float> random_values(int64_t n, uint32_t seed) {
  std::mt19937 g(seed);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::uniform_real_distribution<float> u(0.0f, 1.0f);
  std::vector<float> v(static_cast<size_t>(n));
  for (auto& x : v) {
    const float r = u(g);
    x = r < 0.01f ? 40.0f * nd(g) : r < 0.03f ? 0.0f : 0.05f * nd(g);
  }
  return v;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size() * 4) == 0);
}

struct Case {
  int64_t rows, cols;
};

std::vector<HostRank> run_plans(const std::vector<RankPlan>& plans,
                                const std::vector<std::vector<float>>& in, const Codec& codec,
                                const WireModel& wm, bool bf16 = false) {
  std::vector<HostRank> ranks(in.size());
  for (size_t r = 0; r < in.size(); ++r) ranks[r].in = in[r];
  run_host(plans, codec, wm, ranks, bf16);
  return ranks;
}

// Each simulated algorithm as a formula over codec round trips (methods.md 1.6), written without
// plans, slots or messages: the independent oracle of the plans, and so of the study's
// simulation, which runs them. E = encode, D = decode, x_r[j] = chunk j of rank r:
//   one_shot, reduce_scatter: chunk j = D(E(x_0[j])) + D(E(x_1[j])) + ... (rank order, fp32)
//   two_shot: chunk j = D(E(that sum))
//   ring:     chunk j: w = E(x_{j+1}[j]), then w = E(D(w) + x_k[j]) for k = j+2, ..., j; D(w)
//   all_gather: D(E(x_r)) for every r, concatenated
// and the codec bytes each rank hands to the network (the ring's finished shard is all-gathered
// by its owner).
struct Expected {
  std::vector<std::vector<float>> out;
  std::vector<int64_t> sent;
};

Expected expected(Collective a, const std::vector<std::vector<float>>& x, int64_t rows,
                  int64_t cols, const Codec& c) {
  const int N = int(x.size());
  const int64_t n = rows * cols;
  const auto chunks = sim::chunk_layout(rows, cols, N);
  auto E = [&](const float* p, int64_t r, int64_t cc) { return c.encode(p, r, cc); };
  auto D = [&](const std::vector<uint8_t>& w, int64_t r, int64_t cc) {
    std::vector<float> out(size_t(r * cc));
    c.decode(w.data(), w.size(), r, cc, out.data());
    return out;
  };
  auto add = [](std::vector<float>& acc, const std::vector<float>& d) {
    for (size_t i = 0; i < acc.size(); ++i) acc[i] = acc[i] + d[i];
  };
  Expected e;
  e.sent.assign(size_t(N), 0);
  if (a == sim::kAllGather) {
    std::vector<float> cat;
    for (int r = 0; r < N; ++r) {
      const auto w = E(x[size_t(r)].data(), rows, cols);
      e.sent[size_t(r)] = int64_t(w.size()) * (N - 1);
      const auto d = D(w, rows, cols);
      cat.insert(cat.end(), d.begin(), d.end());
    }
    e.out.assign(size_t(N), cat);
    return e;
  }
  std::vector<float> full(static_cast<size_t>(n));
  std::vector<std::vector<float>> shard(static_cast<size_t>(N));
  for (int j = 0; j < N; ++j) {
    const sim::Chunk& ch = chunks[size_t(j)];
    std::vector<float>& s = shard[size_t(j)];
    if (a == sim::kRing) {
      int k = (j + 1) % N;
      auto w = E(x[size_t(k)].data() + ch.offset, ch.rows, ch.cols);
      for (int hop = 1; hop < N; ++hop) {
        e.sent[size_t(k)] += int64_t(w.size());
        k = (k + 1) % N;
        auto v = D(w, ch.rows, ch.cols);
        add(v, std::vector<float>(x[size_t(k)].begin() + ch.offset,
                                  x[size_t(k)].begin() + ch.offset + ch.numel()));
        w = E(v.data(), ch.rows, ch.cols);
      }
      e.sent[size_t(j)] += int64_t(w.size()) * (N - 1);
      s = D(w, ch.rows, ch.cols);
    } else {
      for (int r = 0; r < N; ++r) {
        const auto w = E(x[size_t(r)].data() + ch.offset, ch.rows, ch.cols);
        e.sent[size_t(r)] += int64_t(w.size()) * (a == sim::kOneShot ? N - 1 : r == j ? 0 : 1);
        const auto d = D(w, ch.rows, ch.cols);
        if (r == 0)
          s = d;
        else
          add(s, d);
      }
      if (a == sim::kTwoShot) {
        const auto w = E(s.data(), ch.rows, ch.cols);
        e.sent[size_t(j)] += int64_t(w.size()) * (N - 1);
        s = D(w, ch.rows, ch.cols);
      }
    }
    std::copy(s.begin(), s.end(), full.begin() + ch.offset);
  }
  if (a == sim::kReduceScatter)
    e.out = shard;
  else
    e.out.assign(size_t(N), full);
  return e;
}

bool bytes_are_16_aligned(const WireModel& wm, const std::vector<sim::Chunk>& chunks) {
  for (const auto& c : chunks)
    if (wm.bytes(c.rows, c.cols) % 16 != 0) return false;
  return true;
}

}  // namespace

TEST_CASE("comm plans compute each algorithm's formula bit for bit", "[comm]") {
  const std::vector<std::string> codecs = {"taco",          "fp8-g128",  "fp8-row", "fp8-tensor",
                                           "int8-g128-had", "mxfp8",     "mxfp4",   "int4-g32-had",
                                           "nvfp4",         "taco-e5m2", "bf16"};
  const int N = GENERATE(1, 2, 3, 4, 8);
  // rows % N == 0 (row chunks, 16-byte aligned wires), rows % N != 0 with rows > 1 (flat chunks),
  // one row with numel % N != 0 and a partial tail group.
  const std::vector<Case> cases = {
      {int64_t(N) * 4, 256}, {int64_t(N) * 3 + 1, 128}, {1, 128 * int64_t(N) * 2 + 37}};
  for (const std::string& v : codecs) {
    const auto codec = make_codec(v);
    const WireModel wm = wire_model(v);
    for (const Case& cs : cases) {
      std::vector<std::vector<float>> in;
      std::vector<const float*> ptrs;
      for (int r = 0; r < N; ++r)
        in.push_back(random_values(cs.rows * cs.cols, uint32_t(1000 * N + r)));
      for (auto& x : in) ptrs.push_back(x.data());
      const sim::SimulatedCommunicator simc(N, *codec, 2);
      const auto chunks = sim::chunk_layout(cs.rows, cs.cols, N);
      for (const Collective sc : sim::kSimulated) {
        const auto [coll, algo] = sc;
        const Expected want =
            N == 1 ? Expected{in, {0}} : expected(sc, in, cs.rows, cs.cols, *codec);
        INFO(v << " N=" << N << " [" << cs.rows << "x" << cs.cols << "] " << coll_name(coll) << " "
               << algo_name(algo));
        // The study's simulation: these plans on the host executor, at depth 1.
        const sim::CollectiveResult study = simc.run(sc, ptrs, cs.rows, cs.cols);
        REQUIRE(study.quantizations == sim::quantizations(sc, N));
        for (int r = 0; r < N; ++r) {
          CAPTURE(r);
          REQUIRE(same_bits(study.outputs[size_t(r)], want.out[size_t(r)]));
          REQUIRE(study.bytes_sent[size_t(r)] == want.sent[size_t(r)]);
        }
        for (int depth : {1, 3}) {
          CAPTURE(depth);
          PlanRequest rq{coll, algo, N, cs.rows, cs.cols, &wm, depth};
          const auto plans = build_plans(rq);
          const auto got = run_plans(plans, in, *codec, wm);
          for (int r = 0; r < N; ++r) {
            CAPTURE(r);
            REQUIRE(same_bits(got[size_t(r)].out, want.out[size_t(r)]));
            REQUIRE(plans[size_t(r)].quantizations == sim::quantizations(sc, N));
          }
          // Bytes on the wire: the slots' bytes equal the codec's whenever none needed padding.
          if (depth == 1 && bytes_are_16_aligned(wm, chunks) &&
              bytes_are_16_aligned(wm, {sim::Chunk{0, cs.rows, cs.cols}}) && cs.rows % N == 0)
            for (int r = 0; r < N; ++r)
              REQUIRE(plans[size_t(r)].bytes_sent == want.sent[size_t(r)]);
        }
      }
    }
  }
}

TEST_CASE("comm plans carry codecs whose wire size is a bound: zero-padded slots, true bytes",
          "[comm]") {
  // TAH-Quant writes only its flagged tiles' codes, low rank by energy only the rank it keeps:
  // each slot takes the codec's bound, the tail stays zero (the decode accepts it), and the
  // payload counted is what the codec wrote.
  const std::vector<std::string> codecs = {"tahquant", "lowrank:energy=0.5"};
  for (const std::string& v : codecs) {
    const auto codec = make_codec(v);
    REQUIRE_FALSE(codec->wire_size(64, 256).exact);
    for (int N : {2, 4}) {
      const int64_t rows = 64 * int64_t(N), cols = 256;
      std::vector<std::vector<float>> in;
      std::vector<const float*> ptrs;
      for (int r = 0; r < N; ++r) in.push_back(random_values(rows * cols, uint32_t(50 + r)));
      for (auto& x : in) ptrs.push_back(x.data());
      const sim::SimulatedCommunicator simc(N, *codec, 1);
      bool smaller = false;
      for (const Collective sc : sim::kSimulated) {
        INFO(v << " N=" << N << " " << collective_name(sc));
        const Expected want = expected(sc, in, rows, cols, *codec);
        const sim::CollectiveResult got = simc.run(sc, ptrs, rows, cols);
        const WireModel wm = wire_model(*codec);
        const auto plans = build_plans({sc.coll, sc.algo, N, rows, cols, &wm, 1});
        for (int r = 0; r < N; ++r) {
          REQUIRE(same_bits(got.outputs[size_t(r)], want.out[size_t(r)]));
          REQUIRE(got.bytes_sent[size_t(r)] == want.sent[size_t(r)]);
          REQUIRE(got.bytes_sent[size_t(r)] <= plans[size_t(r)].bytes_sent);
          smaller = smaller || got.bytes_sent[size_t(r)] < plans[size_t(r)].bytes_sent;
        }
      }
      REQUIRE(smaller);  // the data used less than the bound somewhere
    }
  }
}

TEST_CASE("comm plans: the bf16 codec gives exact sums of small integers", "[comm]") {
  const auto codec = make_codec("bf16");
  const WireModel wm = wire_model("bf16");
  const int N = GENERATE(2, 3, 4, 8);
  const int64_t rows = 2 * N + 1, cols = 96;  // flat chunks
  std::vector<std::vector<float>> in;
  std::mt19937 g(7);
  for (int r = 0; r < N; ++r) {
    std::vector<float> x(size_t(rows * cols));
    for (auto& e : x)
      e = float(int(g() % 31) - 15) * 0.25f;  // |sum| <= 8 * 15 / 4: exact in bf16 and fp32
    in.push_back(x);
  }
  std::vector<float> sum(size_t(rows * cols), 0.0f);
  for (auto& x : in)
    for (size_t i = 0; i < x.size(); ++i) sum[i] += x[i];
  for (Algo a : {Algo::OneShot, Algo::TwoShot, Algo::Ring})
    for (int depth : {1, 4}) {
      PlanRequest rq{Coll::AllReduce, a, N, rows, cols, &wm, depth};
      const auto got = run_plans(build_plans(rq), in, *codec, wm, true);
      for (int r = 0; r < N; ++r) REQUIRE(same_bits(got[size_t(r)].out, sum));
    }
  PlanRequest rs{Coll::ReduceScatter, Algo::Direct, N, rows, cols, &wm, 2};
  const auto plans = build_plans(rs);
  const auto got = run_plans(plans, in, *codec, wm, true);
  const auto chunks = sim::chunk_layout(rows, cols, N);
  for (int r = 0; r < N; ++r) {
    REQUIRE(plans[size_t(r)].out_offset == chunks[size_t(r)].offset);
    const std::vector<float> want(
        sum.begin() + chunks[size_t(r)].offset,
        sum.begin() + chunks[size_t(r)].offset + chunks[size_t(r)].numel());
    REQUIRE(same_bits(got[size_t(r)].out, want));
  }
}

TEST_CASE("comm plans: all-to-all and send/recv deliver decode(encode(block)) to the right rank",
          "[comm]") {
  for (const std::string v : {"taco", "fp8-row", "bf16"}) {
    const auto codec = make_codec(v);
    const WireModel wm = wire_model(v);
    for (int N : {1, 2, 3, 4}) {
      const int64_t rows = 4 * N, cols = 128;
      std::vector<std::vector<float>> in;
      for (int r = 0; r < N; ++r) in.push_back(random_values(rows * cols, uint32_t(77 + r)));
      const auto chunks = sim::chunk_layout(rows, cols, N);
      auto roundtrip = [&](const float* x, int64_t rr, int64_t cc) {
        std::vector<float> out(size_t(rr * cc));
        if (N == 1) return std::vector<float>(x, x + rr * cc);
        const auto w = codec->encode(x, rr, cc);
        codec->decode(w.data(), w.size(), rr, cc, out.data());
        return out;
      };
      for (int depth : {1, 2}) {
        {  // context only: a section per case would re-run the whole test body for each
          INFO(v << " N=" << N << " depth " << depth);
          const auto a2a =
              run_plans(build_plans({Coll::AllToAll, Algo::Direct, N, rows, cols, &wm, depth}), in,
                        *codec, wm);
          const auto sr =
              run_plans(build_plans({Coll::SendRecv, Algo::Direct, N, rows, cols, &wm, depth}), in,
                        *codec, wm);
          for (int r = 0; r < N; ++r) {
            const sim::Chunk& c = chunks[size_t(r)];
            std::vector<float> want;
            for (int q = 0; q < N; ++q) {
              const auto part = roundtrip(in[size_t(q)].data() + c.offset, c.rows, c.cols);
              want.insert(want.end(), part.begin(), part.end());
            }
            REQUIRE(same_bits(a2a[size_t(r)].out, want));
            const int from = (r + N - 1) % N;
            REQUIRE(same_bits(sr[size_t(r)].out, roundtrip(in[size_t(from)].data(), rows, cols)));
          }
        }
      }
    }
  }
}

TEST_CASE("comm plans: schedule invariants", "[comm]") {
  const WireModel wm = wire_model("taco");
  for (int N : {2, 3, 5}) {
    for (auto [coll, algo] :
         {std::pair{Coll::AllReduce, Algo::OneShot}, std::pair{Coll::AllReduce, Algo::TwoShot},
          std::pair{Coll::AllReduce, Algo::Ring}, std::pair{Coll::AllGather, Algo::Direct},
          std::pair{Coll::ReduceScatter, Algo::Direct}, std::pair{Coll::AllToAll, Algo::Direct},
          std::pair{Coll::SendRecv, Algo::Direct}}) {
      for (int depth : {1, 4}) {
        {  // context only: a section per case would re-run the whole test body for each
          INFO(coll_name(coll) << " " << algo_name(algo) << " N=" << N << " depth " << depth);
          const auto plans = build_plans({coll, algo, N, int64_t(N) * 8, 1024, &wm, depth});
          const auto& p0 = plans[0];
          REQUIRE(p0.depth == depth);
          REQUIRE(int(p0.pieces.size()) == depth);
          for (const auto& p : plans) {
            REQUIRE(p.pieces.size() == p0.pieces.size());
            for (size_t k = 0; k < p.pieces.size(); ++k) {
              REQUIRE(p.pieces[k].size() == p0.pieces[k].size());
              for (size_t s = 0; s < p.pieces[k].size(); ++s) {
                const Step& st = p.pieces[k][s];
                REQUIRE(st.comm == p0.pieces[k][s].comm);
                if (s > 0)
                  REQUIRE(st.comm != p.pieces[k][s - 1].comm);  // compute and comm alternate
                for (const Op& o : st.ops) {
                  REQUIRE(o.is_comm() == st.comm);
                  if (o.kind == Op::Kind::Send || o.kind == Op::Kind::Recv) {
                    REQUIRE(o.peer != p.rank);
                    REQUIRE(o.peer >= 0);
                    REQUIRE(o.peer < N);
                  }
                  // Every wire reference lies inside its buffer.
                  auto inside = [&](const Ref& ref, int64_t len) {
                    if (!is_wire(ref.buf)) return true;
                    return ref.off >= 0 &&
                           ref.off + len <= p.wire_size[size_t(wire_index(ref.buf))];
                  };
                  const int64_t wb = o.is_comm() ? o.bytes : wm.bytes(o.rows, o.cols);
                  for (const Ref& ref : o.srcs)
                    REQUIRE(inside(ref, wb + (o.count - 1) * o.src_stride));
                  REQUIRE(inside(o.dst, o.kind == Op::Kind::AllGather
                                            ? wb * N
                                            : wb + (o.count - 1) * o.dst_stride));
                }
              }
              REQUIRE_FALSE(p.pieces[k].front().comm);  // starts with an encode
              REQUIRE_FALSE(p.pieces[k].back().comm);   // ends with a decode
            }
          }
        }
      }
    }
  }

  SECTION("ring order: at hop h rank r sends chunk r-h to r+1") {
    const int N = 4;
    const auto plans = build_plans({Coll::AllReduce, Algo::Ring, N, 4 * 8, 256, &wm, 1});
    const auto chunks = sim::chunk_layout(32, 256, N);
    for (const auto& p : plans) {
      const auto& steps = p.pieces[0];
      REQUIRE(steps.size() == size_t(2 * (N - 1) + 3));
      REQUIRE(steps[0].ops[0].srcs[0].off == chunks[size_t((p.rank + N - 1) % N)].offset);
      for (int h = 1; h < N; ++h) {
        const Step& x = steps[size_t(2 * h - 1)];
        REQUIRE(x.comm);
        REQUIRE(x.ops[0].kind == Op::Kind::Send);
        REQUIRE(x.ops[0].peer == (p.rank + 1) % N);
        REQUIRE(x.ops[1].peer == (p.rank + N - 1) % N);
        const Op& hop = steps[size_t(2 * h)].ops[0];
        REQUIRE(hop.kind == Op::Kind::DecodeAddEncode);
        REQUIRE(hop.srcs[1].off == chunks[size_t((p.rank - 1 - h + 2 * N) % N)].offset);
      }
    }
  }

  SECTION("pipeline pieces cut at group boundaries and cover each chunk") {
    const auto chunks = sim::chunk_layout(1, 128 * 10 * 3 + 5, 3);
    const auto pcs = detail::split_chunks(chunks, wm, 4);
    for (size_t j = 0; j < chunks.size(); ++j) {
      int64_t at = chunks[j].offset;
      for (const auto& pc : pcs[j]) {
        REQUIRE(pc.off == at);
        REQUIRE((pc.off - chunks[j].offset) % 128 == 0);
        at += pc.numel();
      }
      REQUIRE(at == chunks[j].offset + chunks[j].numel());
    }
    // Tensor-scaled codecs, and NVFP4's block scales relative to an fp32 scale per encode, are
    // never cut.
    for (const char* v : {"fp8-tensor", "nvfp4", "int4:g32:sue4m3"})
      REQUIRE(detail::split_chunks(chunks, wire_model(v), 4)[0].size() == 1);
  }

  SECTION("one launch for equally shaped chunks") {
    const auto plans = build_plans({Coll::AllReduce, Algo::TwoShot, 4, 32, 1024, &wm, 1});
    const Op& enc = plans[0].pieces[0][0].ops[0];
    REQUIRE(plans[0].pieces[0][0].ops.size() == 1);
    REQUIRE(enc.count == 4);
    REQUIRE(enc.src_stride == 8 * 1024);
    REQUIRE(enc.dst_stride == wm.bytes(8, 1024));
  }
}

TEST_CASE("comm: nccl-tests conventions and COCCL's size rule", "[comm]") {
  for (int n : {3, 4, 8}) {
    REQUIRE(auto_allreduce_algo((1 << 20) - 1, n) == Algo::OneShot);
    REQUIRE(auto_allreduce_algo(1 << 20, n) == Algo::TwoShot);
    REQUIRE(auto_allreduce_algo((32 << 20) - 2, n) == Algo::TwoShot);
    REQUIRE(auto_allreduce_algo(32 << 20, n) == Algo::Ring);
  }
  // Two ranks: one-shot at every size (same bytes, one quantization).
  for (int64_t b : {int64_t(1) << 10, int64_t(1) << 20, int64_t(32) << 20, int64_t(1) << 30})
    REQUIRE(auto_allreduce_algo(b, 2) == Algo::OneShot);
  REQUIRE(busbw_factor(Coll::AllReduce, 2) == 1.0);
  REQUIRE(busbw_factor(Coll::AllReduce, 8) == 1.75);
  REQUIRE(busbw_factor(Coll::ReduceScatter, 4) == 0.75);
  REQUIRE(busbw_factor(Coll::AllGather, 2) == 0.5);
  REQUIRE(busbw_factor(Coll::AllToAll, 2) == 0.5);
  REQUIRE(busbw_factor(Coll::SendRecv, 2) == 1.0);
  REQUIRE(algbw_bytes(Coll::AllGather, 100, 4) == 400);
  REQUIRE(algbw_bytes(Coll::ReduceScatter, 100, 4) == 100);
  REQUIRE(sweep_sizes(1 << 20, 1 << 30, 2, 0).size() == 11);
  REQUIRE(sweep_sizes(8, 8, 2, 0) == std::vector<int64_t>{8});
  REQUIRE(sweep_sizes(100, 350, 2, 100) == std::vector<int64_t>{100, 200, 300});
  REQUIRE_THROWS_AS(sweep_sizes(0, 8, 2, 0), InputError);
  REQUIRE_THROWS_AS(sweep_sizes(16, 8, 2, 0), InputError);
  REQUIRE_THROWS_AS(sweep_sizes(8, 16, 1, 0), InputError);
  REQUIRE(buffer_shape(4096, 1024) == std::pair<int64_t, int64_t>{4, 1024});
  REQUIRE(buffer_shape(1000, 1024) == std::pair<int64_t, int64_t>{1, 1000});
  REQUIRE(parse_coll("all_reduce") == Coll::AllReduce);
  REQUIRE(parse_coll("alltoall") == Coll::AllToAll);
  REQUIRE_THROWS_AS(parse_coll("broadcast"), InputError);
  REQUIRE_THROWS_AS(parse_allreduce_algo("tree"), InputError);
  const WireModel wm = wire_model("taco");
  REQUIRE_THROWS_AS(build_plan({Coll::AllGather, Algo::Ring, 2, 4, 128, &wm, 1}, 0), InputError);
  REQUIRE(wm.bytes(1, 1024) == 1024 + 8 * 8);  // methods.md 1.4: n + 8 g
}
