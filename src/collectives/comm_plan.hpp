#pragma once
// Compressed collectives as data: which rank encodes what, which peer it sends which chunk to at
// which step, what it decodes and sums, in plain C++ (no CUDA). The same plans drive the GPU
// executor (cuda/collectives/comm_exec.hpp: GpuQuant kernels + NCCL), the host executor
// (collectives/comm_hostsim.hpp: codecs + memcpy), which is the study's simulation
// (collectives/sim_collectives), and taco.dist (through the binding), so the data movement and
// requantization the study measures are exactly what the live benchmark and the trainer run.
//
// Semantics (shared with collectives/sim_collectives.hpp, which documents them in full):
//  * a rank's buffer is [rows, cols]; sim::chunk_layout() cuts it into N chunks, chunk j owned by
//    rank j; the codec sees a chunk (or a piece of it, below) as one [rows, cols] block;
//  * decompress -> sum in fp32 in rank order 0..N-1 -> recompress; a rank's own contribution goes
//    through the codec like everyone else's, except in the ring, where each hop adds its own raw
//    chunk to the decoded partial sum (received + own) before re-encoding;
//  * the result is rounded once to the input dtype when it is written (GPU: bf16 or fp32).
// Pipelining (--pipeline P): every chunk is cut into P pieces at codec block boundaries (flat
// groups of G, whole rows, whole tiles), so each piece encodes to exactly the codes and scales the
// whole chunk would: pipelined results equal unpipelined ones bit for bit. Codecs whose blocks span
// the chunk (tensor, col, TAH-Quant) are not cut (the plan's `depth` says what was used).
//
// A plan is a list of pieces, each a list of steps that alternate compute (codec kernels on the
// rank's compute stream) and communication (NCCL calls in one group). Every rank's plan has the
// same number of pieces and the same step kinds, so single-process drivers can issue step (p, s)
// of all local ranks in one NCCL group, and pieces can be software-pipelined.
#include <algorithm>
#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "codecs/codec.hpp"
#include "codecs/quant_codec.hpp"
#include "codecs/variant.hpp"
#include "collectives/collective_kind.hpp"
#include "collectives/sim_collectives.hpp"
#include "core/error.hpp"

namespace taco::comm {

// The collectives and algorithms (collectives/collective_kind.hpp).
using taco::Algo;
using taco::Coll;

// ---- nccl-tests bandwidth conventions (anchors.md section 1) --------------------------------
// algbw = S / t with S from the per-rank input bytes: the all-gather counts its whole output
// (n x input), everything else the per-rank buffer.
inline int64_t algbw_bytes(Coll c, int64_t size, int n) {
  return c == Coll::AllGather ? size * n : size;
}
// busbw = algbw x factor: all-reduce 2(n-1)/n; reduce-scatter, all-gather, all-to-all (n-1)/n;
// send/recv 1.
inline double busbw_factor(Coll c, int n) {
  switch (c) {
    case Coll::AllReduce:
      return 2.0 * double(n - 1) / double(n);
    case Coll::ReduceScatter:
    case Coll::AllGather:
    case Coll::AllToAll:
      return double(n - 1) / double(n);
    case Coll::SendRecv:
      return 1.0;
  }
  throw_error("busbw_factor: unknown collective {}", int(c));
}
// Whether the collective reduces (redop column; the others print "none" as nccl-tests does).
inline bool coll_reduces(Coll c) {
  return c == Coll::AllReduce || c == Coll::ReduceScatter;
}

// Sizes of an nccl-tests sweep: min, min*f, ... <= max (factor > 1), or min, min+step, ... (step >
// 0).
inline std::vector<int64_t> sweep_sizes(int64_t min_bytes, int64_t max_bytes, int64_t factor,
                                        int64_t step) {
  TACO_REQUIRE_INPUT(min_bytes > 0, "-b/--minbytes must be positive, got {}", min_bytes);
  TACO_REQUIRE_INPUT(max_bytes >= min_bytes, "-e/--maxbytes {} is below -b/--minbytes {}",
                     max_bytes, min_bytes);
  std::vector<int64_t> out;
  if (step > 0) {
    for (int64_t s = min_bytes; s <= max_bytes; s += step) out.push_back(s);
  } else {
    TACO_REQUIRE_INPUT(factor >= 2, "-f/--stepfactor must be >= 2 (or give -i/--stepbytes), got {}",
                       factor);
    for (int64_t s = min_bytes; s <= max_bytes; s *= factor) {
      out.push_back(s);
      if (s > max_bytes / factor) break;
    }
  }
  TACO_REQUIRE_INPUT(out.size() <= 4096, "the size sweep has {} sizes (at most 4096)", out.size());
  return out;
}

// The [rows, cols] view of a per-rank buffer of `count` elements: [count / cols, cols] when cols
// divides count, else one row. (A hidden size of `cols`: tokens x hidden.)
inline std::pair<int64_t, int64_t> buffer_shape(int64_t count, int64_t cols) {
  if (cols >= 1 && count >= cols && count % cols == 0) return {count / cols, cols};
  return {1, count};
}

// ---- the codec as the planner sees it ---------------------------------------------------------
// Wire bytes of one encode() of a [rows, cols] block, and where a chunk may be cut into pipeline
// pieces without changing what the codec computes.
struct WireModel {
  enum class Cut : uint8_t { Flat, Rows, None };
  Cut cut = Cut::None;
  int64_t unit =
      1;  // Flat: elements per indivisible block (G); Rows: rows per block (1, or T for tiles)
  std::function<int64_t(int64_t rows, int64_t cols)> bytes;
  std::string name;  // canonical variant
};

// Where a chunk of a spec's codec may be cut into pipeline pieces (m.cut, m.unit).
inline void set_cut(const VariantSpec& v, WireModel& m) {
  m.cut = WireModel::Cut::None;
  m.unit = 1;
  if (v.family == VariantSpec::Family::Bf16) {
    m.cut = WireModel::Cut::Flat;
    return;
  }
  if (v.family != VariantSpec::Family::Quant) return;  // TAH-Quant: tiles and token order span it
  switch (v.quant.gran) {
    case Granularity::Group:
      // A UE4M3 block scale (NVFP4) is relative to the fp32 scale of the whole encode: a piece
      // would get its own, so such codecs are never cut.
      if (v.quant.scale == ScaleFormat::UE4M3) break;
      m.cut = WireModel::Cut::Flat;
      m.unit = v.quant.block;
      break;
    case Granularity::Row:
      m.cut = WireModel::Cut::Rows;
      break;
    case Granularity::Tile:
      m.cut = WireModel::Cut::Rows;
      m.unit = v.quant.block;
      break;
    case Granularity::Tensor:
    case Granularity::Col:
      break;
  }
}

inline WireModel wire_model(const VariantSpec& v) {
  WireModel m;
  m.name = canonical_variant(v);
  set_cut(v, m);
  switch (v.family) {
    case VariantSpec::Family::Quant:
      m.bytes = [q = v.quant, name = m.name](int64_t r, int64_t c) {
        return quant_layout(q, r, c, name).total;
      };
      return m;
    case VariantSpec::Family::Bf16:
      m.bytes = [](int64_t r, int64_t c) { return 2 * r * c; };
      return m;
    case VariantSpec::Family::TahQuant: {
      // The most TAH-Quant writes (every tile flagged): its size depends on the data.
      std::shared_ptr<Codec> c = make_codec(v);
      m.bytes = [c](int64_t r, int64_t cc) { return c->wire_size(r, cc).bytes; };
      return m;
    }
  }
  throw_error("wire_model: unknown codec family {}", int(v.family));
}
inline WireModel wire_model(const std::string& variant) {
  return wire_model(parse_variant(variant));
}
// The wire model of a codec object: its own wire_size() (the bound where the size depends on the
// data), cut where its parsed spec allows; a codec without one (structured codecs, wrappers) is
// never cut. `c` must outlive the model.
inline WireModel wire_model(const Codec& c) {
  WireModel m;
  m.name = c.name();
  if (const VariantSpec* v = c.variant_spec()) set_cut(*v, m);
  m.bytes = [&c](int64_t r, int64_t cc) { return c.wire_size(r, cc).bytes; };
  return m;
}

// ---- plans ------------------------------------------------------------------------------------
// Per-rank buffers: In and Out hold elements of the input dtype; W0..W3 hold wire bytes.
enum class Buf : uint8_t { In, Out, W0, W1, W2, W3 };
inline constexpr int kWireBufs = 4;
inline int wire_index(Buf b) {
  return int(b) - int(Buf::W0);
}
inline bool is_wire(Buf b) {
  return b >= Buf::W0;
}

struct Ref {
  Buf buf = Buf::In;
  int64_t off = 0;  // In/Out: elements; W*: bytes
};

struct Op {
  enum class Kind : uint8_t {
    Encode,              // srcs[0] (In) -> dst (wire)
    Decode,              // dst (Out) = sum_i decode(srcs[i]), in order, fp32, then the output dtype
    DecodeReduceEncode,  // dst (wire) = encode(sum_i decode(srcs[i]))
    DecodeAddEncode,     // dst (wire) = encode(decode(srcs[0]) + srcs[1] (In, raw)): a ring hop
    Copy,                // dst (Out) = srcs[0] (In), `bytes` elements (nothing crosses the network)
    Send,                // srcs[0] (wire), `bytes`, to `peer`
    Recv,                // dst (wire), `bytes`, from `peer`
    AllGather,           // srcs[0] (wire), `bytes` per rank -> dst + r * bytes for every rank r
  };
  Kind kind = Kind::Encode;
  // Codec ops: `count` blocks of shape [rows, cols] side by side; block b of source i is at
  // srcs[i].off + b * src_stride, of the destination at dst.off + b * dst_stride (bytes for wire
  // buffers, elements for In / Out). DecodeAddEncode's raw source is srcs[1] (count is 1).
  int64_t rows = 0, cols = 0, count = 1;
  std::vector<Ref> srcs;
  int64_t src_stride = 0, dst_stride = 0;
  Ref dst;
  int peer = -1;
  int64_t bytes = 0;

  int64_t numel() const { return rows * cols; }
  bool is_comm() const {
    return kind == Kind::Send || kind == Kind::Recv || kind == Kind::AllGather;
  }
};

struct Step {
  bool comm = false;
  std::vector<Op> ops;
};

struct PlanRequest {
  Coll coll = Coll::AllReduce;
  Algo algo = Algo::TwoShot;
  int nranks = 1;
  int64_t rows = 0, cols = 0;  // the per-rank buffer
  const WireModel* wire = nullptr;
  int pipeline = 1;  // requested depth
};

struct RankPlan {
  Coll coll = Coll::AllReduce;
  Algo algo = Algo::TwoShot;
  int rank = 0, nranks = 1;
  int64_t rows = 0, cols = 0;
  int64_t in_elems = 0, out_elems = 0;
  std::array<int64_t, kWireBufs> wire_size{};  // bytes of W0..W3
  std::vector<std::vector<Step>> pieces;       // pieces[p][s]
  int depth = 1;                               // pieces used
  int quantizations = 0;                       // times each output element was quantized
  int64_t bytes_sent = 0;                      // bytes this rank hands to the network per run
  int64_t wire_bytes = 0;                      // encoded size of this rank's input buffer
  int64_t out_offset = 0;                      // reduce-scatter: where the rank's chunk starts
};

// ---- building blocks shared by the per-collective builders -----------------------------------
namespace detail {

inline int64_t round16(int64_t b) {
  return (b + 15) / 16 * 16;
}
inline int mod(int a, int n) {
  return ((a % n) + n) % n;
}

// A piece of a chunk: elements [off, off + rows*cols) of the rank's buffer, seen as [rows, cols].
struct Piece {
  int64_t off = 0, rows = 0, cols = 0;
  int64_t numel() const { return rows * cols; }
};

// Cuts every chunk into the same number of pieces (<= depth) at codec block boundaries.
// Returns pieces[j][p].
inline std::vector<std::vector<Piece>> split_chunks(const std::vector<sim::Chunk>& chunks,
                                                    const WireModel& wm, int depth) {
  TACO_REQUIRE_INPUT(depth >= 1, "--pipeline must be >= 1, got {}", depth);
  // Indivisible units per chunk.
  auto units = [&](const sim::Chunk& c) -> int64_t {
    switch (wm.cut) {
      case WireModel::Cut::Flat:
        return std::max<int64_t>(1, c.numel() / wm.unit);
      case WireModel::Cut::Rows:
        return std::max<int64_t>(1, c.rows / wm.unit);
      case WireModel::Cut::None:
        return 1;
    }
    return 1;
  };
  int64_t k = depth;
  for (const auto& c : chunks) k = std::min(k, units(c));
  k = std::max<int64_t>(1, k);
  std::vector<std::vector<Piece>> out(chunks.size());
  for (size_t j = 0; j < chunks.size(); ++j) {
    const sim::Chunk& c = chunks[j];
    const int64_t U = units(c);
    for (int64_t p = 0; p < k; ++p) {
      const int64_t u0 = p * U / k, u1 = (p + 1) * U / k;
      Piece pc;
      if (k == 1) {
        pc = {c.offset, c.rows, c.cols};
      } else if (wm.cut == WireModel::Cut::Rows) {
        const int64_t r0 = u0 * wm.unit, r1 = p == k - 1 ? c.rows : u1 * wm.unit;
        pc = {c.offset + r0 * c.cols, r1 - r0, c.cols};
      } else {  // Flat
        const int64_t e0 = u0 * wm.unit, e1 = p == k - 1 ? c.numel() : u1 * wm.unit;
        const int64_t len = e1 - e0;
        if (c.cols > 0 && e0 % c.cols == 0 && len % c.cols == 0)
          pc = {c.offset + e0, len / c.cols, c.cols};
        else
          pc = {c.offset + e0, 1, len};
      }
      out[j].push_back(pc);
    }
  }
  return out;
}

// Bump allocator of 16-byte aligned slots in one wire buffer.
struct Arena {
  int64_t size = 0;
  int64_t take(int64_t bytes) {
    const int64_t off = size;
    size += round16(bytes);
    return off;
  }
};

inline Op encode_op(const Piece& pc, int64_t wire_off, Buf wire) {
  Op o;
  o.kind = Op::Kind::Encode;
  o.rows = pc.rows;
  o.cols = pc.cols;
  o.srcs = {Ref{Buf::In, pc.off}};
  o.dst = Ref{wire, wire_off};
  return o;
}

inline Op decode_op(const Piece& pc, std::vector<Ref> srcs, int64_t out_off) {
  Op o;
  o.kind = Op::Kind::Decode;
  o.rows = pc.rows;
  o.cols = pc.cols;
  o.srcs = std::move(srcs);
  o.dst = Ref{Buf::Out, out_off};
  return o;
}

inline Op send_op(Buf b, int64_t off, int64_t bytes, int peer) {
  Op o;
  o.kind = Op::Kind::Send;
  o.srcs = {Ref{b, off}};
  o.bytes = bytes;
  o.peer = peer;
  return o;
}

inline Op recv_op(Buf b, int64_t off, int64_t bytes, int peer) {
  Op o;
  o.kind = Op::Kind::Recv;
  o.dst = Ref{b, off};
  o.bytes = bytes;
  o.peer = peer;
  return o;
}

inline Op all_gather_op(Buf src, int64_t src_off, int64_t bytes, Buf dst, int64_t dst_off) {
  Op o;
  o.kind = Op::Kind::AllGather;
  o.srcs = {Ref{src, src_off}};
  o.bytes = bytes;
  o.dst = Ref{dst, dst_off};
  return o;
}

inline Step compute(std::vector<Op> ops) {
  return Step{false, std::move(ops)};
}
inline Step comm(std::vector<Op> ops) {
  return Step{true, std::move(ops)};
}

// Merges ops of one step that are the same codec operation on equally shaped blocks at a fixed
// stride into one op with count > 1 (one kernel launch for all of them on the GPU).
inline std::vector<Op> coalesce(std::vector<Op> ops) {
  std::vector<Op> out;
  for (Op& o : ops) {
    if (!out.empty()) {
      Op& l = out.back();
      const bool codec = o.kind == Op::Kind::Encode || o.kind == Op::Kind::Decode;
      if (codec && l.kind == o.kind && l.rows == o.rows && l.cols == o.cols && o.count == 1 &&
          l.srcs.size() == o.srcs.size() && l.dst.buf == o.dst.buf) {
        const int64_t ds = o.dst.off - (l.dst.off + (l.count - 1) * l.dst_stride);
        bool ok = l.count == 1 ? ds > 0 : ds == l.dst_stride;
        int64_t ss = 0;
        for (size_t i = 0; ok && i < o.srcs.size(); ++i) {
          if (o.srcs[i].buf != l.srcs[i].buf) {
            ok = false;
            break;
          }
          const int64_t d = o.srcs[i].off - (l.srcs[i].off + (l.count - 1) * l.src_stride);
          if (i == 0) ss = d;
          ok = ok && d == ss && (l.count == 1 ? d > 0 : d == l.src_stride);
        }
        if (ok) {
          if (l.count == 1) {
            l.dst_stride = ds;
            l.src_stride = ss;
          }
          ++l.count;
          continue;
        }
      }
    }
    out.push_back(std::move(o));
  }
  return out;
}

// The one-rank plan of every collective: nothing crosses the network.
inline RankPlan single_rank_plan(const PlanRequest& rq, RankPlan p) {
  p.depth = 1;
  Op o;
  o.kind = Op::Kind::Copy;
  o.srcs = {Ref{Buf::In, 0}};
  o.dst = Ref{Buf::Out, 0};
  o.bytes = rq.rows * rq.cols;
  p.pieces = {{compute({o})}};
  p.quantizations = 0;
  p.bytes_sent = 0;
  p.wire_bytes = 0;
  return p;
}

inline RankPlan base_plan(const PlanRequest& rq, int rank) {
  TACO_ASSERT(rq.wire && rq.wire->bytes, "plan request without a wire model");
  TACO_REQUIRE_INPUT(rq.nranks >= 1, "a collective needs at least 1 rank, got {}", rq.nranks);
  TACO_ASSERT(rank >= 0 && rank < rq.nranks, "rank {} of {}", rank, rq.nranks);
  TACO_REQUIRE_INPUT(rq.rows >= 1 && rq.cols >= 1, "empty buffer [{}, {}]", rq.rows, rq.cols);
  RankPlan p;
  p.coll = rq.coll;
  p.algo = rq.algo;
  p.rank = rank;
  p.nranks = rq.nranks;
  p.rows = rq.rows;
  p.cols = rq.cols;
  p.in_elems = rq.rows * rq.cols;
  return p;
}

// Piece p of an all-to-all exchange of compressed chunks (all-to-all and reduce-scatter): the
// pieces p of all N chunks encoded into slots of a send buffer (W0), slot q sent to rank q, rank
// q's slot r received into recv slot q (W1). Adds the bytes to the plan's counters.
struct Exchange {
  int64_t send = 0, recv = 0, slot = 0;  // buffer offsets and the slot stride
  int rank = 0;
  std::vector<Op> encodes, transfers;
  // Where rank q's copy of this rank's chunk piece sits: its own send slot for q == rank.
  Ref from(int q) const {
    return q == rank ? Ref{Buf::W0, send + q * slot} : Ref{Buf::W1, recv + q * slot};
  }
};

inline Exchange exchange_piece(const std::vector<std::vector<Piece>>& pcs, const WireModel& wm,
                               int r, int p, std::array<Arena, kWireBufs>& A, RankPlan& plan) {
  const int N = int(pcs.size());
  auto bytes_of = [&](int j) {
    return wm.bytes(pcs[size_t(j)][size_t(p)].rows, pcs[size_t(j)][size_t(p)].cols);
  };
  Exchange ex;
  ex.rank = r;
  for (int j = 0; j < N; ++j) {
    ex.slot = std::max(ex.slot, round16(bytes_of(j)));
    plan.wire_bytes += bytes_of(j);
  }
  ex.send = A[0].take(ex.slot * N);
  ex.recv = A[1].take(ex.slot * N);
  for (int j = 0; j < N; ++j)
    ex.encodes.push_back(encode_op(pcs[size_t(j)][size_t(p)], ex.send + j * ex.slot, Buf::W0));
  for (int q = 0; q < N; ++q) {
    if (q == r) continue;
    ex.transfers.push_back(send_op(Buf::W0, ex.send + q * ex.slot, bytes_of(q), q));
    ex.transfers.push_back(recv_op(Buf::W1, ex.recv + q * ex.slot, bytes_of(r), q));
    plan.bytes_sent += bytes_of(q);
  }
  return ex;
}

}  // namespace detail
}  // namespace taco::comm
