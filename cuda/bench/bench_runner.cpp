#include "cuda/bench/bench_runner.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <memory>

#include "codecs/codec.hpp"
#include "core/dtype.hpp"
#include "core/error.hpp"
#include "cuda/bench/bench_data.hpp"
#include "cuda/codecs/device_codec.hpp"
#include "cuda/codecs/unfused_taco.hpp"
#include "cuda/runtime/cuda_check.hpp"

namespace taco::gpu {

namespace {

size_t dt_bytes(DType t) {
  return t == DType::BF16 ? 2 : 4;
}
const char* dt_name(DType t) {
  return t == DType::BF16 ? "bf16" : "f32";
}

// K rotating sets of one kind of buffer.
struct Rotation {
  std::vector<DeviceBuffer> bufs;
  void alloc(int k, size_t bytes, const char* what) {
    bufs.clear();
    for (int i = 0; i < k; ++i) bufs.emplace_back(bytes, what);
  }
  uint8_t* at(int i) const { return bufs[size_t(i) % bufs.size()].as<uint8_t>(); }
};

// "" when equal, else where they differ.
std::string compare_bytes(const std::vector<uint8_t>& a, const std::vector<uint8_t>& b) {
  if (a.size() != b.size()) return fmt::format("sizes {} and {}", a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i)
    if (a[i] != b[i])
      return fmt::format("first difference at byte {} ({} vs {})", i, int(a[i]), int(b[i]));
  return "";
}

std::vector<uint8_t> download(const void* d, size_t n, cudaStream_t s) {
  std::vector<uint8_t> h(n);
  TACO_CUDA_CHECK(cudaMemcpyAsync(h.data(), d, n, cudaMemcpyDeviceToHost, s));
  TACO_CUDA_CHECK(cudaStreamSynchronize(s));
  return h;
}

}  // namespace

BenchReport run_bench(const BenchOptions& o) {
  TACO_REQUIRE_INPUT(!o.sizes.empty(), "taco bench: no sizes");
  TACO_REQUIRE_INPUT(o.sources >= 1 && o.sources <= kMaxSources, "--sources must be in 1..{}",
                     kMaxSources);
  TACO_REQUIRE_INPUT(o.chunks >= 1, "--chunks must be >= 1");
  TACO_REQUIRE_INPUT(o.cols >= 1, "--cols must be >= 1");
  TACO_REQUIRE_INPUT(o.cold || o.batch, "taco bench: nothing to time (--no-cold and --no-batch)");
  for (const auto& op : o.ops)
    TACO_REQUIRE_INPUT(op == "encode" || op == "encode_ef" || op == "decode" ||
                           op == "decode_reduce" || op == "decode_reduce_encode",
                       "--ops: unknown operation '{}' (encode, encode_ef, decode, decode_reduce, "
                       "decode_reduce_encode)",
                       op);
  for (const auto& im : o.impls)
    TACO_REQUIRE_INPUT(im == "fused" || im == "unfused",
                       "--impl: unknown implementation '{}' (fused, unfused)", im);
  std::vector<VariantSpec> specs;  // the one parse of each variant; fails before any timing
  for (const auto& v : o.variants) specs.push_back(require_device_variant(v));
  const int ndev = device_count_noexcept();
  if (ndev == 0) throw taco::Error("taco bench: no CUDA device is available");
  TACO_REQUIRE_INPUT(o.device >= 0 && o.device < ndev, "--device {}: only {} CUDA device(s)",
                     o.device, ndev);
  TACO_CUDA_CHECK(cudaSetDevice(o.device));

  BenchReport rep;
  rep.device = query_device(o.device);
  CudaStream stream;
  const cudaStream_t s = stream.get();
  Timer timer(rep.device, o.timing, s);
  rep.flush_bytes = timer.flush_bytes();
  // Batch rows rotate over enough input sets to exceed twice the L2 (plus some).
  const size_t rotate_bytes = size_t(2) * size_t(rep.device.l2_bytes) + (size_t(16) << 20);
  auto rotations = [&](size_t footprint) {
    return int(
        std::min<size_t>(256, std::max<size_t>(1, (rotate_bytes + footprint - 1) / footprint)));
  };
  auto note = [&](const std::string& line) {
    if (o.progress) o.progress(line);
  };

  for (const int64_t size : o.sizes) {
    TACO_REQUIRE_INPUT(size >= 64 && size % 2 == 0, "size {} bytes is too small or odd", size);
    const int64_t numel = size / 2;
    const int64_t cols = std::min(o.cols, numel);
    TACO_REQUIRE_INPUT(numel % cols == 0, "size {}: {} elements are not a multiple of --cols {}",
                       size, numel, cols);
    const int64_t rows = numel / cols;
    TACO_REQUIRE_INPUT(rows % o.chunks == 0, "size {}: {} rows do not split into --chunks {}", size,
                       rows, o.chunks);
    const bool do_batch = o.batch && size <= o.batch_max_bytes;

    // ---- the copy this size is compared with ----
    std::map<bool, double> copy_gbps;
    {
      const int k = do_batch ? rotations(size_t(2 * size)) : 1;
      Rotation src, dst;
      src.alloc(k, size_t(size), "cudaMalloc(bench copy source)");
      dst.alloc(k, size_t(size), "cudaMalloc(bench copy destination)");
      for (int i = 0; i < k; ++i)
        fill_random(src.at(i), true, numel, cols, o.seed + uint64_t(i), s);
      auto work = [&](int i) {
        TACO_CUDA_CHECK(
            cudaMemcpyAsync(dst.at(i), src.at(i), size_t(size), cudaMemcpyDeviceToDevice, s));
      };
      for (int mode = 0; mode < 2; ++mode) {
        const bool cold = mode == 0;
        if ((cold && !o.cold) || (!cold && !do_batch)) continue;
        const TimingResult t = cold ? timer.cold(work) : timer.batch(work, 16);
        CopyRow c;
        c.bytes = size;
        c.median_us = t.median_us;
        c.tbps = 2.0 * double(size) / (t.median_us * 1e-6) / 1e12;
        c.cold = cold;
        c.noise_pct = t.noise_pct;
        c.samples = t.samples;
        copy_gbps[cold] = c.tbps * 1000.0;
        rep.copy.push_back(c);
        note(fmt::format(
            "copy {:>10} B {:5}: {:9.2f} us  {:7.1f} GB/s  noise {:.2f}%  ({} samples)", size,
            cold ? "cold" : "batch", t.median_us, c.tbps * 1000.0, t.noise_pct, t.samples));
      }
    }

    for (size_t vi = 0; vi < specs.size(); ++vi) {
      const std::string& variant = o.variants[vi];
      const VariantSpec& spec = specs[vi];
      const std::unique_ptr<DeviceCodec> codec = make_device_codec(spec);
      const DeviceCodec& q = *codec;
      const std::string config = q.kernel_config();
      std::unique_ptr<UnfusedTaco> unfused;
      const bool want_unfused =
          std::find(o.impls.begin(), o.impls.end(), "unfused") != o.impls.end();
      if (want_unfused && UnfusedTaco::supports(spec))
        unfused = std::make_unique<UnfusedTaco>(spec);
      const bool want_fused = std::find(o.impls.begin(), o.impls.end(), "fused") != o.impls.end();

      const int64_t crow = rows / o.chunks;
      const int64_t wire_bytes = o.chunks * q.chunk_bytes(crow, cols);
      const int64_t N = o.sources;
      TACO_REQUIRE_INPUT(rows % N == 0, "size {}: {} rows do not split into --sources {}", size,
                         rows, N);
      const int64_t srow = rows / N;
      const int64_t src_bytes = q.chunk_bytes(srow, cols);  // one decode-reduce source
      const size_t in_bytes = size_t(numel) * dt_bytes(o.dtype);
      const size_t out_bytes = in_bytes;

      const size_t footprint = in_bytes + size_t(wire_bytes) + out_bytes + size_t(N * src_bytes);
      const int k = do_batch ? rotations(footprint) : 1;
      Rotation in, wire, out, dr, rew;
      in.alloc(k, in_bytes, "cudaMalloc(bench input)");
      wire.alloc(k, size_t(wire_bytes), "cudaMalloc(bench wire)");
      out.alloc(k, out_bytes, "cudaMalloc(bench output)");
      dr.alloc(k, size_t(N * src_bytes), "cudaMalloc(bench decode-reduce sources)");
      const bool want_dre =
          std::find(o.ops.begin(), o.ops.end(), "decode_reduce_encode") != o.ops.end();
      if (want_dre) rew.alloc(k, size_t(src_bytes), "cudaMalloc(bench re-encode output)");
      // error feedback: one fp32 residual per rotation set, zero at the start (it then holds
      // whatever the timed steps leave, as a training step's would)
      Rotation res;
      const bool want_ef = std::find(o.ops.begin(), o.ops.end(), "encode_ef") != o.ops.end();
      if (want_ef) {
        res.alloc(k, size_t(numel) * 4, "cudaMalloc(bench residual)");
        for (int i = 0; i < k; ++i)
          TACO_CUDA_CHECK(cudaMemsetAsync(res.at(i), 0, size_t(numel) * 4, s));
      }
      for (int i = 0; i < k; ++i) {
        fill_random(in.at(i), o.dtype == DType::BF16, numel, cols, o.seed + 1000 + uint64_t(i), s);
        q.encode(in.at(i), o.dtype, o.chunks, crow, cols, wire.at(i), s);
        q.encode(in.at(i), o.dtype, N, srow, cols, dr.at(i), s);  // N sources side by side
      }
      TACO_CUDA_CHECK(cudaStreamSynchronize(s));
      auto srcs_of = [&](int i) {
        std::vector<const uint8_t*> v;
        for (int64_t j = 0; j < N; ++j) v.push_back(dr.at(i) + j * src_bytes);
        return v;
      };

      // ---- verification (outside any timing) ----
      if (o.verify && size <= o.verify_max_bytes) {
        const auto gpu_wire = download(wire.at(0), size_t(wire_bytes), s);
        const auto cpu = make_codec(spec);
        const auto raw = download(in.at(0), in_bytes, s);
        std::vector<float> x(static_cast<size_t>(numel));
        for (int64_t i = 0; i < numel; ++i) {
          if (o.dtype == DType::BF16) {
            uint16_t h;
            std::memcpy(&h, raw.data() + 2 * i, 2);
            x[size_t(i)] = bf16_to_float(h);
          } else {
            std::memcpy(&x[size_t(i)], raw.data() + 4 * i, 4);
          }
        }
        // Each chunk's CPU bytes in a slot of chunk_bytes (zeros after a data-dependent size).
        const size_t slot = size_t(q.chunk_bytes(crow, cols));
        std::vector<uint8_t> cpu_wire;
        for (int64_t c = 0; c < o.chunks; ++c) {
          const auto w = cpu->encode(x.data() + c * crow * cols, crow, cols);
          cpu_wire.insert(cpu_wire.end(), w.begin(), w.end());
          cpu_wire.resize(size_t(c + 1) * slot, 0);
        }
        auto check = [&](const std::string& what, const std::string& diff) {
          if (diff.empty()) {
            rep.checks.push_back(what + ": identical");
          } else {
            rep.failures.push_back(what + ": " + diff);
            note("VERIFICATION FAILED: " + what + ": " + diff);
          }
        };
        check(fmt::format("{} ({}) encode of {} B, GPU bytes vs CPU bytes", variant, config, size),
              compare_bytes(gpu_wire, cpu_wire));
        if (want_ef) {
          // one step from a zero residual: v = finite(x) + 0, the wire of encode(v), e' = v -
          // decode
          DeviceBuffer w2(size_t(wire_bytes), "cudaMalloc(bench verify)"),
              r2(size_t(numel) * 4, "cudaMalloc(bench verify)");
          TACO_CUDA_CHECK(cudaMemsetAsync(r2.get(), 0, size_t(numel) * 4, s));
          q.encode_ef(in.at(0), o.dtype, r2.as<float>(), o.chunks, crow, cols, w2.as<uint8_t>(), s);
          std::vector<float> v(static_cast<size_t>(numel)), dec(static_cast<size_t>(numel));
          for (int64_t i = 0; i < numel; ++i)
            v[size_t(i)] = (std::isfinite(x[size_t(i)]) ? x[size_t(i)] : 0.0f) + 0.0f;
          std::vector<uint8_t> ef_wire;
          for (int64_t c = 0; c < o.chunks; ++c) {
            const auto w = cpu->encode(v.data() + c * crow * cols, crow, cols);
            cpu->decode(w.data(), w.size(), crow, cols, dec.data() + c * crow * cols);
            ef_wire.insert(ef_wire.end(), w.begin(), w.end());
            ef_wire.resize(size_t(c + 1) * slot, 0);
          }
          check(fmt::format("{} encode_ef of {} B, GPU bytes vs CPU bytes", variant, size),
                compare_bytes(download(w2.get(), size_t(wire_bytes), s), ef_wire));
          std::vector<uint8_t> want_res(size_t(numel) * 4);
          for (int64_t i = 0; i < numel; ++i) {
            const float e = v[size_t(i)] - (std::isfinite(dec[size_t(i)]) ? dec[size_t(i)] : 0.0f);
            std::memcpy(want_res.data() + 4 * i, &e, 4);
          }
          check(fmt::format("{} encode_ef of {} B, GPU residual vs CPU residual", variant, size),
                compare_bytes(download(r2.get(), size_t(numel) * 4, s), want_res));
        }
        if (unfused) {
          DeviceBuffer w2(size_t(wire_bytes), "cudaMalloc(bench verify)");
          unfused->encode(in.at(0), o.dtype, o.chunks, crow, cols, w2.as<uint8_t>(), s);
          check(fmt::format("{} encode of {} B, unfused vs fused bytes", variant, size),
                compare_bytes(download(w2.get(), size_t(wire_bytes), s), gpu_wire));
          DeviceBuffer o1(out_bytes / size_t(N), "cudaMalloc(bench verify)"),
              o2(out_bytes / size_t(N), "cudaMalloc(bench verify)");
          q.decode_reduce(srcs_of(0), 1, srow, cols, o1.get(), o.dtype, s);
          unfused->decode_reduce(srcs_of(0), 1, srow, cols, o2.get(), o.dtype, s);
          check(
              fmt::format("{} decode_reduce of {} B, unfused vs fused outputs", variant, size),
              compare_bytes(download(o2.get(), o2.bytes(), s), download(o1.get(), o1.bytes(), s)));
        }
      }

      for (const std::string& op : o.ops) {
        for (const std::string& impl : o.impls) {
          if (impl == "unfused" && (!unfused || op == "decode_reduce_encode" || op == "encode_ef"))
            continue;
          if (impl == "fused" && !want_fused) continue;
          std::function<void(int)> work;
          BenchRow r;
          r.variant = q.name();
          r.op = op;
          r.impl = impl;
          r.dtype = dt_name(o.dtype);
          r.size_bytes = size;
          r.chunks = o.chunks;
          r.config = impl == "fused" ? config : "";
          if (op == "encode") {
            r.numel = numel;
            r.bytes_counted = int64_t(in_bytes) + wire_bytes;
            if (impl == "fused")
              work = [&](int i) {
                q.encode(in.at(i), o.dtype, o.chunks, crow, cols, wire.at(i), s);
              };
            else
              work = [&](int i) {
                unfused->encode(in.at(i), o.dtype, o.chunks, crow, cols, wire.at(i), s);
              };
            r.launches = impl == "fused" ? q.encode_launches() : unfused->encode_launches();
          } else if (op == "encode_ef") {
            r.numel = numel;
            r.bytes_counted = int64_t(in_bytes) + wire_bytes + 2 * numel * 4;
            work = [&](int i) {
              q.encode_ef(in.at(i), o.dtype, reinterpret_cast<float*>(res.at(i)), o.chunks, crow,
                          cols, wire.at(i), s);
            };
            r.launches = q.encode_launches();
          } else if (op == "decode") {
            r.numel = numel;
            r.bytes_counted = wire_bytes + int64_t(out_bytes);
            if (impl == "fused")
              work = [&](int i) {
                q.decode(wire.at(i), o.chunks, crow, cols, out.at(i), o.dtype, s);
              };
            else
              work = [&](int i) {
                unfused->decode_reduce({wire.at(i)}, o.chunks, crow, cols, out.at(i), o.dtype, s);
              };
            r.launches = impl == "fused" ? 1 : unfused->decode_launches(1);
          } else if (op == "decode_reduce") {
            r.numel = numel;  // N * n decoded elements
            r.sources = int(N);
            r.bytes_counted = N * src_bytes + int64_t(out_bytes) / N;
            if (impl == "fused")
              work = [&](int i) {
                q.decode_reduce(srcs_of(i), 1, srow, cols, out.at(i), o.dtype, s);
              };
            else
              work = [&](int i) {
                unfused->decode_reduce(srcs_of(i), 1, srow, cols, out.at(i), o.dtype, s);
              };
            r.launches = impl == "fused" ? 1 : unfused->decode_launches(int(N));
          } else {  // decode_reduce_encode
            r.numel = numel;
            r.sources = int(N);
            r.bytes_counted = N * src_bytes + src_bytes;
            work = [&](int i) {
              q.decode_reduce_encode(srcs_of(i), 1, srow, cols, rew.at(i), false, s);
            };
            r.launches = q.decode_reduce_encode_launches();
          }
          for (int mode = 0; mode < 2; ++mode) {
            const bool cold = mode == 0;
            if ((cold && !o.cold) || (!cold && !do_batch)) continue;
            const TimingResult t = cold ? timer.cold(work) : timer.batch(work, 16);
            BenchRow row = r;
            row.cold = cold;
            row.median_us = t.median_us;
            row.min_us = t.min_us;
            row.max_us = t.max_us;
            row.noise_pct = t.noise_pct;
            row.samples = t.samples;
            row.timed_out = t.timed_out;
            row.gbps = double(row.bytes_counted) / (t.median_us * 1e-6) / 1e9;
            row.copy_gbps = copy_gbps.count(cold) ? copy_gbps[cold] : 0.0;
            row.pct_copy = row.copy_gbps > 0 ? 100.0 * row.gbps / row.copy_gbps : 0.0;
            rep.rows.push_back(row);
            note(
                fmt::format("{:<14} {:<20} {:<7} {:<9} {:>10} B {:5}: {:9.2f} us  {:7.1f} GB/s  "
                            "{:5.1f}% of copy  "
                            "noise {:.2f}%  ({} samples)",
                            row.variant, op, impl, row.config, size, cold ? "cold" : "batch",
                            t.median_us, row.gbps, row.pct_copy, t.noise_pct, t.samples));
          }
        }
      }
    }
  }
  return rep;
}

}  // namespace taco::gpu
