#include "collectives/comm_hostsim.hpp"

#include <omp.h>

#include <algorithm>
#include <cstring>

#include "core/dtype.hpp"
#include "core/error.hpp"

namespace taco::comm {
namespace {

uint8_t* wire_at(HostRank& h, const Ref& r, int64_t bytes) {
  TACO_ASSERT(is_wire(r.buf), "wire reference to buffer {}", int(r.buf));
  auto& w = h.wire[size_t(wire_index(r.buf))];
  TACO_ASSERT(r.off >= 0 && r.off + bytes <= int64_t(w.size()),
              "wire range [{}, {}) outside W{} of {} B", r.off, r.off + bytes, wire_index(r.buf),
              w.size());
  return w.data() + r.off;
}

float* elems_at(HostRank& h, const Ref& r, int64_t n) {
  auto& v = r.buf == Buf::In ? h.in : h.out;
  TACO_ASSERT(r.buf == Buf::In || r.buf == Buf::Out, "element reference to a wire buffer");
  TACO_ASSERT(r.off >= 0 && r.off + n <= int64_t(v.size()),
              "element range [{}, {}) outside {} of {}", r.off, r.off + n,
              r.buf == Buf::In ? "In" : "Out", v.size());
  return v.data() + r.off;
}

// The payload records of h inside [r.off, r.off + bytes) of r's buffer.
using PayloadMap = std::map<std::pair<int, int64_t>, int64_t>;
std::pair<PayloadMap::const_iterator, PayloadMap::const_iterator> payload_range(const HostRank& h,
                                                                                const Ref& r,
                                                                                int64_t bytes) {
  const int b = wire_index(r.buf);
  return {h.payload.lower_bound({b, r.off}), h.payload.lower_bound({b, r.off + bytes})};
}

int64_t payload_in(const HostRank& h, const Ref& r, int64_t bytes) {
  int64_t sum = 0;
  for (auto [it, end] = payload_range(h, r, bytes); it != end; ++it) sum += it->second;
  return sum;
}

// The records of `from`'s range `src` land in `to` at `dst` (a transfer of `bytes`); what `to`
// had recorded there is overwritten. `from` may be `to` (an in-place all-gather).
void move_payload(const HostRank& from, const Ref& src, HostRank& to, const Ref& dst,
                  int64_t bytes) {
  std::vector<std::pair<int64_t, int64_t>> moved;  // (offset in the range, payload)
  for (auto [it, end] = payload_range(from, src, bytes); it != end; ++it)
    moved.emplace_back(it->first.second - src.off, it->second);
  const int b = wire_index(dst.buf);
  to.payload.erase(to.payload.lower_bound({b, dst.off}),
                   to.payload.lower_bound({b, dst.off + bytes}));
  for (const auto& [off, n] : moved) to.payload[{b, dst.off + off}] = n;
}

void host_compute(const Op& o, HostRank& h, const Codec& codec, const WireModel& wm,
                  bool out_bf16) {
  const int64_t n = o.numel();
  if (o.kind != Op::Kind::Copy && n == 0) return;  // an empty chunk: nothing to code
  const int64_t wb = o.kind == Op::Kind::Copy ? 0 : wm.bytes(o.rows, o.cols);
  std::vector<float> acc(static_cast<size_t>(n));
  std::vector<uint8_t> wire;
  auto round_out = [&](float* p, int64_t k) {
    if (out_bf16)
      for (int64_t i = 0; i < k; ++i) p[i] = bf16_to_float(float_to_bf16(p[i]));
  };
  auto sources = [&](const std::vector<Ref>& srcs, int64_t b) {
    std::vector<WireView> from;
    for (Ref src : srcs) {
      src.off += b * o.src_stride;
      from.push_back({wire_at(h, src, wb), size_t(wb)});
    }
    return from;
  };
  // A slot takes exactly wb bytes, or at most wb from a codec whose size is a bound (the rest
  // zeroed: the slot may hold an earlier, longer encoding).
  auto store_wire = [&](const std::vector<uint8_t>& w, Ref dst) {
    const int64_t got = int64_t(w.size());
    TACO_ASSERT(got == wb || (got < wb && !codec.wire_size(o.rows, o.cols).exact),
                "codec {} wrote {} bytes for [{}, {}], the plan expects {}", wm.name, got, o.rows,
                o.cols, wb);
    uint8_t* p = wire_at(h, dst, wb);
    std::memcpy(p, w.data(), w.size());
    std::memset(p + got, 0, size_t(wb - got));
    h.payload[{wire_index(dst.buf), dst.off}] = got;
  };
  for (int64_t b = 0; b < o.count; ++b) {
    Ref dst = o.dst;
    dst.off += b * o.dst_stride;
    switch (o.kind) {
      case Op::Kind::Encode: {
        Ref src = o.srcs[0];
        src.off += b * o.src_stride;
        store_wire(codec.encode(elems_at(h, src, n), o.rows, o.cols), dst);
        break;
      }
      case Op::Kind::Decode: {
        codec.decode_reduce(sources(o.srcs, b), o.rows, o.cols, acc.data());
        float* out = elems_at(h, dst, n);
        std::memcpy(out, acc.data(), size_t(n) * 4);
        round_out(out, n);
        break;
      }
      case Op::Kind::DecodeReduceEncode:
        codec.decode_reduce_encode(sources(o.srcs, b), o.rows, o.cols, false, wire);
        store_wire(wire, dst);
        break;
      case Op::Kind::DecodeAddEncode: {
        TACO_ASSERT(o.count == 1 && o.srcs.size() == 2,
                    "decode-add-encode takes one block and two sources");
        codec.decode_add_encode(sources({o.srcs[0]}, 0)[0], elems_at(h, o.srcs[1], n), o.rows,
                                o.cols, wire);
        store_wire(wire, dst);
        break;
      }
      case Op::Kind::Copy: {
        float* out = elems_at(h, o.dst, o.bytes);
        std::memcpy(out, elems_at(h, o.srcs[0], o.bytes), size_t(o.bytes) * 4);
        round_out(out, o.bytes);
        break;
      }
      default:
        throw_error("host executor: op {} is not a compute op", int(o.kind));
    }
  }
}

// One communication step of every rank: sends matched to receives in issue order per
// (sender, receiver) pair; all-gathers once every rank has posted one.
void host_comm(const std::vector<const Step*>& steps, std::vector<HostRank>& ranks) {
  const int N = int(ranks.size());
  std::map<std::pair<int, int>, std::vector<const Op*>> sends, recvs;
  std::vector<const Op*> gathers(size_t(N), nullptr);
  int ngather = 0;
  for (int r = 0; r < N; ++r)
    for (const Op& o : steps[size_t(r)]->ops) {
      switch (o.kind) {
        case Op::Kind::Send:
          sends[{r, o.peer}].push_back(&o);
          break;
        case Op::Kind::Recv:
          recvs[{o.peer, r}].push_back(&o);
          break;
        case Op::Kind::AllGather:
          TACO_ASSERT(!gathers[size_t(r)], "rank {} posts two all-gathers in one step", r);
          gathers[size_t(r)] = &o;
          ++ngather;
          break;
        default:
          throw_error("host executor: op {} in a communication step", int(o.kind));
      }
    }
  TACO_ASSERT(sends.size() == recvs.size(), "{} send pairs but {} receive pairs", sends.size(),
              recvs.size());
  for (const auto& [pair, ss] : sends) {
    const auto it = recvs.find(pair);
    TACO_ASSERT(it != recvs.end() && it->second.size() == ss.size(),
                "rank {} sends {} messages to rank {} that it does not receive", pair.first,
                ss.size(), pair.second);
    HostRank &from = ranks[size_t(pair.first)], &to = ranks[size_t(pair.second)];
    for (size_t i = 0; i < ss.size(); ++i) {
      const Op& s = *ss[i];
      const Op& d = *it->second[i];
      TACO_ASSERT(s.bytes == d.bytes, "rank {} sends {} B to rank {}, which expects {} B",
                  pair.first, s.bytes, pair.second, d.bytes);
      std::memcpy(wire_at(to, d.dst, d.bytes), wire_at(from, s.srcs[0], s.bytes), size_t(s.bytes));
      from.payload_sent += payload_in(from, s.srcs[0], s.bytes);
      move_payload(from, s.srcs[0], to, d.dst, d.bytes);
    }
  }
  if (ngather == 0) return;
  TACO_ASSERT(ngather == N, "{} of {} ranks post an all-gather", ngather, N);
  const int64_t b = gathers[0]->bytes;
  for (int r = 0; r < N; ++r)
    TACO_ASSERT(gathers[size_t(r)]->bytes == b, "all-gather sizes differ between ranks");
  // Every rank's part (bytes and payload records) first: a gather may be in place.
  std::vector<HostRank> parts(static_cast<size_t>(N));
  for (int q = 0; q < N; ++q) {
    HostRank& from = ranks[size_t(q)];
    const Ref src = gathers[size_t(q)]->srcs[0];
    const uint8_t* p = wire_at(from, src, b);
    HostRank& part = parts[size_t(q)];
    part.wire[0].assign(p, p + b);
    move_payload(from, src, part, Ref{Buf::W0, 0}, b);
    from.payload_sent += payload_in(part, Ref{Buf::W0, 0}, b) * (N - 1);
  }
  for (int r = 0; r < N; ++r)
    for (int q = 0; q < N; ++q) {
      Ref d = gathers[size_t(r)]->dst;
      d.off += q * b;
      std::memcpy(wire_at(ranks[size_t(r)], d, b), parts[size_t(q)].wire[0].data(), size_t(b));
      move_payload(parts[size_t(q)], Ref{Buf::W0, 0}, ranks[size_t(r)], d, b);
    }
}

}  // namespace

void run_host(const std::vector<RankPlan>& plans, const Codec& codec, const WireModel& wm,
              std::vector<HostRank>& ranks, bool out_bf16, int threads) {
  const int N = int(plans.size());
  TACO_ASSERT(int(ranks.size()) == N, "{} host ranks for {} plans", ranks.size(), N);
  for (int r = 0; r < N; ++r) {
    const RankPlan& p = plans[size_t(r)];
    HostRank& h = ranks[size_t(r)];
    TACO_ASSERT(p.rank == r && p.nranks == N, "plan {} is rank {} of {}", r, p.rank, p.nranks);
    TACO_ASSERT(int64_t(h.in.size()) == p.in_elems, "rank {}: {} inputs, the plan needs {}", r,
                h.in.size(), p.in_elems);
    TACO_ASSERT(p.pieces.size() == plans[0].pieces.size(), "ranks disagree on the pipeline depth");
    h.out.assign(size_t(p.out_elems), 0.0f);
    for (int i = 0; i < kWireBufs; ++i) h.wire[size_t(i)].assign(size_t(p.wire_size[size_t(i)]), 0);
    h.payload.clear();
    h.payload_sent = 0;
  }
  for (size_t pc = 0; pc < plans[0].pieces.size(); ++pc) {
    const size_t S = plans[0].pieces[pc].size();
    for (size_t s = 0; s < S; ++s) {
      const bool is_comm = plans[0].pieces[pc][s].comm;
      std::vector<const Step*> steps;
      for (int r = 0; r < N; ++r) {
        TACO_ASSERT(plans[size_t(r)].pieces[pc].size() == S &&
                        plans[size_t(r)].pieces[pc][s].comm == is_comm,
                    "rank {} disagrees on step {} of piece {}", r, s, pc);
        steps.push_back(&plans[size_t(r)].pieces[pc][s]);
      }
      if (is_comm) {
        host_comm(steps, ranks);
        continue;
      }
      // Ranks compute independently (each writes only its own buffers). An exception leaves
      // the parallel region as the first one thrown, rethrown here.
      std::exception_ptr failed;
#pragma omp parallel for schedule(dynamic, 1) \
    num_threads(std::max(1, threads)) if (threads > 1 && N > 1)
      for (int r = 0; r < N; ++r) {
        try {
          for (const Op& o : steps[size_t(r)]->ops)
            host_compute(o, ranks[size_t(r)], codec, wm, out_bf16);
        } catch (...) {
#pragma omp critical(taco_run_host)
          if (!failed) failed = std::current_exception();
        }
      }
      if (failed) std::rethrow_exception(failed);
    }
  }
}

}  // namespace taco::comm
