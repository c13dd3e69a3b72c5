// GPU executor of comm plans and plain collectives (see comm_exec.hpp).
#include "cuda/collectives/comm_exec.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "core/error.hpp"
#include "cuda/runtime/cuda_check.hpp"

namespace taco::gpu {

using comm::Buf;
using comm::Op;

DType io_type(DType t) {
  if (t == DType::BF16) return DType::BF16;
  if (t == DType::F32) return DType::F32;
  throw_input_error("compressed collectives take bf16 or f32 data (the GPU codecs' inputs), not {}",
                    dtype_name(t));
}

namespace {

// Re-throws the exception in flight with the rank named first (InputError stays InputError).
[[noreturn]] void rethrow_for(const RankTag& t) {
  try {
    throw;
  } catch (const InputError& e) {
    throw InputError(fmt::format("{}: {}", rank_prefix(t), e.what()));
  } catch (const DeviceOutOfMemory& e) {
    throw DeviceOutOfMemory(fmt::format("{}: {}", rank_prefix(t), e.what()));
  } catch (const std::exception& e) {
    throw Error(fmt::format("{}: {}", rank_prefix(t), e.what()));
  }
}

}  // namespace

CommContext::CommContext(std::unique_ptr<Fabric> fabric, double timeout_s)
    : fabric_(std::move(fabric)), timeout_s_(timeout_s) {
  ranks_.resize(size_t(fabric_->nlocal()));
  for (int l = 0; l < nlocal(); ++l) {
    LocalRank& r = ranks_[size_t(l)];
    r.tag = fabric_->tag(l);
    try {
      TACO_CUDA_CHECK(cudaSetDevice(r.tag.device));
      r.compute = std::make_unique<CudaStream>();
      r.net = std::make_unique<CudaStream>();
      r.stats = DeviceBuffer(sizeof(CheckStats), "cudaMalloc(check statistics)");
    } catch (...) {
      rethrow_for(r.tag);
    }
  }
}

CommContext::~CommContext() {
  for (auto& r : ranks_) {
    (void)cudaSetDevice(r.tag.device);
    for (auto e : r.events) (void)cudaEventDestroy(e);
    r.events.clear();
    r.codecs.clear();
  }
}

void CommContext::allocate(const BufferSizes& s) {
  for (auto& r : ranks_) {
    try {
      TACO_CUDA_CHECK(cudaSetDevice(r.tag.device));
      r.in = DeviceBuffer();
      r.out = DeviceBuffer();
      for (auto& w : r.wire) w = DeviceBuffer();
      r.scratch = DeviceBuffer();
      r.in = DeviceBuffer(std::max<size_t>(s.in, 16), "cudaMalloc(collective input)");
      r.out = DeviceBuffer(std::max<size_t>(s.out, 16), "cudaMalloc(collective output)");
      r.scratch = DeviceBuffer(std::max<size_t>(s.scratch, 16), "cudaMalloc(ring scratch)");
    } catch (...) {
      rethrow_for(r.tag);
    }
  }
  // The fabric allocates wire buffers for all local ranks at once (NCCL windows are collective).
  for (int i = 0; i < comm::kWireBufs; ++i) {
    auto bufs = fabric_->alloc_wire(std::max<size_t>(size_t(s.wire[size_t(i)]), 16));
    for (int l = 0; l < nlocal(); ++l)
      ranks_[size_t(l)].wire[size_t(i)] = std::move(bufs[size_t(l)]);
  }
  sizes_ = s;
}

void CommContext::set_codec(const VariantSpec& spec) {
  const std::string why = device_unsupported_reason(spec);
  TACO_REQUIRE_INPUT(why.empty(), "variant '{}' has no GPU implementation ({})",
                     canonical_variant(spec), why);
  codec_ = spec;
  for (auto& r : ranks_) {
    (void)cudaSetDevice(r.tag.device);
    r.codecs.clear();
  }
}

DeviceCodec& CommContext::codec_for(LocalRank& r, int64_t rows, int64_t cols) {
  auto& slot = r.codecs[{rows, cols}];
  if (!slot) {
    slot = make_device_codec(codec_);
    slot->set_max_sms(codec_sms_);
    (void)slot->chunk_bytes(rows,
                            cols);  // memoised: every later launch of this shape skips the layout
  }
  return *slot;
}

uint8_t* CommContext::wire_ptr(LocalRank& r, const comm::Ref& ref, int64_t bytes) {
  TACO_ASSERT(comm::is_wire(ref.buf), "wire reference to buffer {}", int(ref.buf));
  const DeviceBuffer& b = r.wire[size_t(comm::wire_index(ref.buf))];
  TACO_ASSERT(ref.off >= 0 && size_t(ref.off + bytes) <= b.bytes(),
              "wire range [{}, {}) outside W{} of {} B", ref.off, ref.off + bytes,
              comm::wire_index(ref.buf), b.bytes());
  return b.as<uint8_t>() + ref.off;
}

uint8_t* CommContext::elem_ptr(LocalRank& r, const comm::Ref& ref, int64_t n, DType t) {
  TACO_ASSERT(ref.buf == Buf::In || ref.buf == Buf::Out, "element reference to a wire buffer");
  const DeviceBuffer& b = ref.buf == Buf::In ? r.in : r.out;
  const size_t es = dtype_size(t);
  TACO_ASSERT(ref.off >= 0 && size_t(ref.off + n) * es <= b.bytes(),
              "element range [{}, {}) outside {} of {} B", ref.off, ref.off + n,
              ref.buf == Buf::In ? "In" : "Out", b.bytes());
  return b.as<uint8_t>() + size_t(ref.off) * es;
}

void CommContext::ensure_events(LocalRank& r, size_t n) {
  while (r.events.size() < n) {
    cudaEvent_t e = nullptr;
    TACO_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    r.events.push_back(e);
  }
}

void CommContext::run_compute(LocalRank& r, const Op& o, DType t) {
  const cudaStream_t s = r.compute->get();
  const size_t es = dtype_size(t);
  if (o.kind == Op::Kind::Copy) {
    uint8_t* dst = elem_ptr(r, o.dst, o.bytes, t);
    const uint8_t* src = elem_ptr(r, o.srcs[0], o.bytes, t);
    if (o.bytes)
      TACO_CUDA_CHECK(cudaMemcpyAsync(dst, src, size_t(o.bytes) * es, cudaMemcpyDeviceToDevice, s));
    return;
  }
  const DType dt = io_type(t);
  DeviceCodec& q = codec_for(r, o.rows, o.cols);
  const int64_t n = o.numel(), wb = q.chunk_bytes(o.rows, o.cols);
  switch (o.kind) {
    case Op::Kind::Encode: {
      const bool natural = o.count == 1 || (o.src_stride == n && o.dst_stride == wb);
      for (int64_t b = 0; b < (natural ? 1 : o.count); ++b) {
        const int64_t k = natural ? o.count : 1;
        comm::Ref src = o.srcs[0], dst = o.dst;
        src.off += b * o.src_stride;
        dst.off += b * o.dst_stride;
        q.encode(elem_ptr(r, src, n * k, t), dt, k, o.rows, o.cols, wire_ptr(r, dst, wb * k), s);
      }
      return;
    }
    case Op::Kind::Decode: {
      const bool natural = o.count == 1 || (o.src_stride == wb && o.dst_stride == n);
      for (int64_t b = 0; b < (natural ? 1 : o.count); ++b) {
        const int64_t k = natural ? o.count : 1;
        std::vector<const uint8_t*> srcs;
        for (comm::Ref src : o.srcs) {
          src.off += b * o.src_stride;
          srcs.push_back(wire_ptr(r, src, wb * k));
        }
        comm::Ref dst = o.dst;
        dst.off += b * o.dst_stride;
        q.decode_reduce(srcs, k, o.rows, o.cols, elem_ptr(r, dst, n * k, t), dt, s);
      }
      return;
    }
    case Op::Kind::DecodeReduceEncode: {
      TACO_ASSERT(o.count == 1, "decode-reduce-encode of {} blocks", o.count);
      std::vector<const uint8_t*> srcs;
      for (const comm::Ref& src : o.srcs) srcs.push_back(wire_ptr(r, src, wb));
      q.decode_reduce_encode(srcs, 1, o.rows, o.cols, wire_ptr(r, o.dst, wb), false, s);
      return;
    }
    case Op::Kind::DecodeAddEncode: {
      TACO_ASSERT(o.count == 1 && o.srcs.size() == 2,
                  "decode-add-encode takes one block and two sources");
      TACO_ASSERT(r.scratch.bytes() >= size_t(n) * 4 || !q.hop_needs_scratch(),
                  "ring scratch of {} B for {} elements", r.scratch.bytes(), n);
      q.decode_add_encode(wire_ptr(r, o.srcs[0], wb), elem_ptr(r, o.srcs[1], n, t), dt, o.rows,
                          o.cols, wire_ptr(r, o.dst, wb), r.scratch.as<float>(), s);
      return;
    }
    default:
      break;
  }
  throw_error("comm executor: op {} is not a compute op", int(o.kind));
}

void CommContext::run_comm(int l, const Op& o) {
  LocalRank& r = ranks_[size_t(l)];
  const cudaStream_t s = r.net->get();
  switch (o.kind) {
    case Op::Kind::Send:
      fabric_->send(l, wire_ptr(r, o.srcs[0], o.bytes), size_t(o.bytes), o.peer, s);
      return;
    case Op::Kind::Recv:
      fabric_->recv(l, wire_ptr(r, o.dst, o.bytes), size_t(o.bytes), o.peer, s);
      return;
    case Op::Kind::AllGather:
      fabric_->all_gather_bytes(l, wire_ptr(r, o.srcs[0], o.bytes),
                                wire_ptr(r, o.dst, o.bytes * fabric_->nranks()), size_t(o.bytes),
                                s);
      return;
    default:
      break;
  }
  throw_error("comm executor: op {} is not a communication op", int(o.kind));
}

void CommContext::enqueue_plan(const std::vector<const comm::RankPlan*>& plans, DType t,
                               RunMode mode) {
  TACO_ASSERT(int(plans.size()) == nlocal(), "{} plans for {} local ranks", plans.size(), nlocal());
  const auto& p0 = *plans[0];
  const int P = int(p0.pieces.size());
  const int K = int(p0.pieces[0].size());
  for (int l = 0; l < nlocal(); ++l) {
    const auto& pl = *plans[size_t(l)];
    TACO_ASSERT(int(pl.pieces.size()) == P && pl.rank == ranks_[size_t(l)].tag.rank,
                "plan of local rank {} does not match", l);
    for (const auto& pc : pl.pieces)
      TACO_ASSERT(int(pc.size()) == K, "pieces of different lengths");
    try {
      TACO_CUDA_CHECK(cudaSetDevice(ranks_[size_t(l)].tag.device));
      ensure_events(ranks_[size_t(l)], size_t(P) * size_t(K));
    } catch (...) {
      rethrow_for(ranks_[size_t(l)].tag);
    }
  }
  auto ev = [&](int l, int p, int s) {
    return ranks_[size_t(l)].events[size_t(p) * size_t(K) + size_t(s)];
  };
  for (int w = 0; w <= P + K - 2; ++w) {
    for (int p = std::min(w, P - 1); p >= 0 && w - p < K; --p) {
      const int s = w - p;
      const bool is_comm = p0.pieces[size_t(p)][size_t(s)].comm;
      if ((is_comm && mode == RunMode::CodecOnly) || (!is_comm && mode == RunMode::CommOnly))
        continue;
      // Wait for the previous step of this piece where it ran on the other stream.
      for (int l = 0; l < nlocal(); ++l) {
        LocalRank& r = ranks_[size_t(l)];
        try {
          TACO_CUDA_CHECK(cudaSetDevice(r.tag.device));
          const cudaStream_t st = is_comm ? r.net->get() : r.compute->get();
          if (s > 0 && p0.pieces[size_t(p)][size_t(s - 1)].comm != is_comm)
            TACO_CUDA_CHECK(cudaStreamWaitEvent(st, ev(l, p, s - 1), 0));
          if (!is_comm)
            for (const Op& o : plans[size_t(l)]->pieces[size_t(p)][size_t(s)].ops)
              run_compute(r, o, t);
        } catch (...) {
          rethrow_for(r.tag);
        }
      }
      if (is_comm) {
        fabric_->group_start();
        for (int l = 0; l < nlocal(); ++l)
          for (const Op& o : plans[size_t(l)]->pieces[size_t(p)][size_t(s)].ops) run_comm(l, o);
        fabric_->group_end();
      }
      for (int l = 0; l < nlocal(); ++l) {
        LocalRank& r = ranks_[size_t(l)];
        try {
          TACO_CUDA_CHECK(cudaSetDevice(r.tag.device));
          TACO_CUDA_CHECK(cudaEventRecord(ev(l, p, s), is_comm ? r.net->get() : r.compute->get()));
        } catch (...) {
          rethrow_for(r.tag);
        }
      }
    }
  }
}

void CommContext::enqueue_plain(comm::Coll c, DType t, int64_t count) {
  const int N = fabric_->nranks();
  const size_t es = comm_dtype_bytes(t);
  for (int l = 0; l < nlocal(); ++l) {
    LocalRank& r = ranks_[size_t(l)];
    const size_t need_out =
        c == comm::Coll::AllGather ? size_t(count) * es * size_t(N) : size_t(count) * es;
    TACO_ASSERT(size_t(count) * es <= r.in.bytes() && need_out <= r.out.bytes(),
                "plain {}: {} elements do not fit", taco::coll_name(c), count);
  }
  fabric_->group_start();
  for (int l = 0; l < nlocal(); ++l) {
    LocalRank& r = ranks_[size_t(l)];
    const cudaStream_t s = r.net->get();
    const uint8_t* in = r.in.as<uint8_t>();
    uint8_t* out = r.out.as<uint8_t>();
    const int me = r.tag.rank;
    switch (c) {
      case comm::Coll::AllReduce:
        fabric_->all_reduce(l, in, out, size_t(count), t, s);
        break;
      case comm::Coll::ReduceScatter:
        fabric_->reduce_scatter(l, in, out, size_t(count / N), t, s);
        break;
      case comm::Coll::AllGather:
        fabric_->all_gather(l, in, out, size_t(count), t, s);
        break;
      case comm::Coll::AllToAll: {
        const size_t blk = size_t(count / N) * es;
        for (int q = 0; q < N; ++q) {
          fabric_->send(l, in + size_t(q) * blk, blk, q, s);
          fabric_->recv(l, out + size_t(q) * blk, blk, q, s);
        }
        break;
      }
      case comm::Coll::SendRecv:
        fabric_->send(l, in, size_t(count) * es, (me + 1) % N, s);
        fabric_->recv(l, out, size_t(count) * es, (me + N - 1) % N, s);
        break;
    }
  }
  fabric_->group_end();
}

void CommContext::wait(const char* what) {
  std::vector<std::vector<cudaStream_t>> streams;
  for (auto& r : ranks_) streams.push_back({r.compute->get(), r.net->get()});
  wait_streams(*fabric_, streams, timeout_s_, what);
}

}  // namespace taco::gpu
