#include "model/validate.hpp"

#include "core/error.hpp"
#include "model/collective.hpp"
#include "model/step_time.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <tuple>

namespace taco::model {

LinkTier TransportFit::tier() const {
  LinkTier t;
  t.name = "fit:" + transport;
  t.description = fmt::format("fit to the plain {} rows ({} ranks)", transport, nranks);
  t.scope = "intra-node";
  t.basis = "measured";
  t.source = t.description;
  t.transport = transport;
  t.fit = all_reduce.lines;
  t.bw_GBps = all_reduce.lines.back().bw_GBps;
  t.latency_us = all_reduce.lines.front().alpha_us;
  t.coll_factor = factor;
  for (const auto& [c, lf] : own) t.coll_fit[c] = lf.lines;
  return t;
}

namespace {

bool is_bf16(const std::string& type) {
  return type == "bfloat16" || type == "bf16";
}

std::string mib(double bytes) {
  if (bytes >= double(1 << 30) && std::fmod(bytes, double(1 << 30)) == 0)
    return fmt::format("{:g} GiB", bytes / (1 << 30));
  if (bytes >= double(1 << 20)) return fmt::format("{:g} MiB", bytes / (1 << 20));
  return fmt::format("{:g} KiB", bytes / 1024);
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

Algo row_algo(const CommRow& r) {
  return parse_algo(r.algorithm, fmt::format("{}: results[{}].algorithm", r.file, r.index));
}

// The compressed row as the model sees it: its own depth, no --pipeline-min.
CollCost predict_compressed(const CommRow& r, const LinkTier& tier, const ExecutorParams& base,
                            const CodecTable& bench) {
  ExecutorParams ex = base;
  ex.pipeline = r.pipeline;
  ex.pipeline_min_bytes = 0;
  const CodecModel codec = codec_from_table(r.codec, &bench);
  return compressed_collective(tier, ex, codec, parse_coll(r.collective, r.file), row_algo(r),
                               r.nranks, r.size, 2, r.pipeline > 1);
}

}  // namespace

std::vector<TransportFit> fit_transports(const std::vector<CommRecord>& comm, int max_lines) {
  std::map<std::pair<std::string, int>, std::vector<const CommRow*>> plain;
  for (const CommRecord& rec : comm)
    for (const CommRow& r : rec.rows)
      if (r.plain() && is_bf16(r.type) && r.nranks >= 2)
        plain[{r.transport, r.nranks}].push_back(&r);
  std::vector<TransportFit> fits;
  for (const auto& [key, rows] : plain) {
    std::vector<TimePoint> ar;
    for (const CommRow* r : rows)
      if (r->collective == "all_reduce") ar.push_back({r->size, r->time_us});
    if (ar.size() < 2) continue;  // nothing to fit; validate() notes the rows it leaves out
    TransportFit f;
    f.transport = key.first;
    f.nranks = key.second;
    f.points = int(ar.size());
    f.all_reduce = fit_lines(ar, Coll::AllReduce, key.second, max_lines);
    std::map<Coll, std::vector<const CommRow*>> others;
    for (const CommRow* r : rows) {
      const Coll c = parse_coll(r->collective, r->file);
      if (c != Coll::AllReduce) others[c].push_back(r);
    }
    for (const auto& [c, rs] : others) {
      std::vector<TimePoint> pts;
      std::set<double> sizes;
      for (const CommRow* r : rs) pts.push_back({r->size, r->time_us}), sizes.insert(r->size);
      if (sizes.size() >= 2) {
        // Enough sizes for lines of its own: NCCL's all-gather, say, is not the all-reduce's
        // formula with other step counts (measured slower per byte on NVLink).
        f.own[c] = fit_lines(pts, c, key.second, max_lines);
        f.own_points[c] = int(pts.size());
        continue;
      }
      double s = 0;
      for (const CommRow* r : rs)
        s += std::log(r->time_us / envelope_time_us(f.all_reduce.lines, c, r->nranks, r->size));
      f.factor[c] = std::exp(s / double(rs.size()));  // geometric mean of measured / formula
      f.factor_points[c] = int(rs.size());
    }
    fits.push_back(std::move(f));
  }
  return fits;
}

ValidationReport validate(const std::vector<CommRecord>& comm, const CodecTable* bench,
                          const LayerRecord* layer, const LinkConfig& links,
                          const ValidationOptions& opt) {
  ValidationReport rep;
  rep.fits = fit_transports(comm, opt.max_lines);
  rep.exec = opt.exec;
  rep.exec_basis = "from " + links.path;
  auto fit_of = [&](const std::string& tr, int n) -> const TransportFit* {
    for (const TransportFit& f : rep.fits)
      if (f.transport == tr && f.nranks == n) return &f;
    return nullptr;
  };
  auto compressible = [&](const CommRow& r) {
    return !r.plain() && is_bf16(r.type) && bench != nullptr && bench->has(r.codec) &&
           fit_of(r.transport, r.nranks) != nullptr;
  };

  // Executor: the overlap efficiency from the measured overlap of the pipelined rows of one
  // transport. Each row says how much codec time its pipeline hid (t_comm + t_codec - t); the
  // model's schedule with its steps scaled to the measured totals (t_comm, t_codec) says how
  // much an interference-free pipeline would hide. eta is the least-squares ratio of the two
  // (through the origin), so it is fitted to the overlap alone, not to the component models.
  if (!opt.fit_overlap_on.empty() && bench != nullptr) {
    // First the per-step overhead: the codec-only runs (t_codec_us) against the kernels' bench
    // time. The bench batches launches; the collective issues each piece's kernels behind an
    // event of the network stream, which costs a few microseconds per step.
    std::vector<const CommRow*> crow;
    for (const CommRecord& rec : comm)
      for (const CommRow& r : rec.rows)
        if (compressible(r) && r.transport == opt.fit_overlap_on && r.t_codec_us)
          crow.push_back(&r);
    if (!crow.empty()) {
      double best = 1e300;
      for (int k = 0; k <= 80; ++k) {
        ExecutorParams ex = rep.exec;
        ex.codec_step_overhead_us = k * 0.125;
        double ss = 0;
        for (const CommRow* r : crow) {
          const double e = std::log(
              predict_compressed(*r, fit_of(r->transport, r->nranks)->tier(), ex, *bench).codec_us /
              *r->t_codec_us);
          ss += e * e;
        }
        if (ss < best - 1e-15)
          best = ss, rep.exec.codec_step_overhead_us = ex.codec_step_overhead_us;
      }
    }
    double num = 0, den = 0;
    int used = 0;
    for (const CommRecord& rec : comm)
      for (const CommRow& r : rec.rows) {
        if (!compressible(r) || r.transport != opt.fit_overlap_on || r.pipeline < 2 ||
            !r.t_comm_us || !r.t_codec_us)
          continue;
        ExecutorParams ex = rep.exec;
        ex.pipeline = r.pipeline;
        ex.pipeline_min_bytes = 0;
        const PieceSchedule sch = compressed_schedule(
            fit_of(r.transport, r.nranks)->tier(), ex, codec_from_table(r.codec, bench),
            parse_coll(r.collective, r.file), row_algo(r), r.nranks, r.size, 2, true);
        double w = 0, k = 0;
        for (const Step& s : sch.steps) (s.network ? w : k) += s.us * sch.pieces;
        if (w <= 0 || k <= 0) continue;
        std::vector<Step> scaled = sch.steps;
        for (Step& s : scaled) s.us *= s.network ? *r.t_comm_us / w : *r.t_codec_us / k;
        const double serial = *r.t_comm_us + *r.t_codec_us;
        const double ideal_hidden = serial - two_stream_makespan(std::vector<std::vector<Step>>(
                                                 static_cast<size_t>(sch.pieces), scaled));
        const double hidden = std::max(0.0, serial - r.time_us);
        num += hidden * ideal_hidden, den += ideal_hidden * ideal_hidden;
        ++used;
      }
    if (used >= 1 && den > 0) {
      rep.exec.overlap_efficiency = std::min(1.0, std::max(0.0, num / den));
      rep.exec_basis = fmt::format(
          "codec step overhead fitted to the codec-only times (t_codec_us) of the {} compressed "
          "rows on {}; overlap efficiency to the measured overlap (t_comm + t_codec - t) of "
          "its {} pipelined rows",
          crow.size(), opt.fit_overlap_on, used);
    } else {
      rep.notes.push_back(
          fmt::format("no pipelined compressed rows with t_comm_us / t_codec_us on '{}': overlap "
                      "efficiency kept from {}",
                      opt.fit_overlap_on, links.path));
    }
  }

  // Comm rows.
  for (const CommRecord& rec : comm) {
    for (const CommRow& r : rec.rows) {
      const std::string src = fmt::format("{}#{}", rec.path, r.index);
      const TransportFit* f = fit_of(r.transport, r.nranks);
      if (!is_bf16(r.type)) {
        rep.notes.push_back(
            fmt::format("{}: type {} (the model costs bf16 collectives)", src, r.type));
        continue;
      }
      if (f == nullptr) {
        rep.notes.push_back(fmt::format("{}: no plain all-reduce rows at {} ranks on '{}' to fit",
                                        src, r.nranks, r.transport));
        continue;
      }
      const LinkTier tier = f->tier();
      const Coll c = parse_coll(r.collective, src);
      ValidationRow v;
      v.source = src;
      v.transport = r.transport;
      v.size = r.size;
      v.measured_us = r.time_us;
      if (r.plain()) {
        v.kind = "comm-plain";
        v.config = fmt::format("{} {} plain NCCL, {} ranks, {}", r.collective, mib(r.size),
                               r.nranks, rec.launch);
        v.predicted_us = tier.time_us(c, r.nranks, r.size);
        if (c == Coll::AllReduce) {
          v.basis = "fit (in-sample)";
          // Leave this size out (every row of it) and predict it from the others.
          std::vector<TimePoint> rest;
          for (const CommRecord& rr : comm)
            for (const CommRow& o : rr.rows)
              if (o.plain() && is_bf16(o.type) && o.transport == r.transport &&
                  o.nranks == r.nranks && o.collective == "all_reduce" && o.size != r.size)
                rest.push_back({o.size, o.time_us});
          std::sort(rest.begin(), rest.end(), [](auto& a, auto& b) { return a.bytes < b.bytes; });
          if (rest.size() >= 2 && r.size > rest.front().bytes && r.size < rest.back().bytes) {
            const LineFit lf = fit_lines(rest, Coll::AllReduce, r.nranks, opt.max_lines);
            v.loo_predicted_us = envelope_time_us(lf.lines, c, r.nranks, r.size);
          }
        } else if (f->own.count(c)) {
          v.basis = fmt::format("own fit on {} point(s) (in-sample)", f->own_points.at(c));
          v.loo_predicted_us = envelope_time_us(f->all_reduce.lines, c, r.nranks, r.size);
        } else {
          v.basis = fmt::format("factor fit on {} point(s) (in-sample)", f->factor_points.at(c));
          // Out of sample: the collective's alpha-beta formula from the all-reduce lines alone.
          v.loo_predicted_us = envelope_time_us(f->all_reduce.lines, c, r.nranks, r.size);
        }
        rep.rows.push_back(v);
        continue;
      }
      if (bench == nullptr || !bench->has(r.codec)) {
        rep.notes.push_back(
            fmt::format("{}: codec '{}' has no kernel rows in the bench file", src, r.codec));
        continue;
      }
      v.kind = "comm-compressed";
      v.config = fmt::format("{} {} {} {} p{}, {} ranks, {}", r.collective, mib(r.size), r.codec,
                             r.algorithm, r.pipeline, r.nranks, rec.launch);
      const CollCost cc = predict_compressed(r, tier, rep.exec, *bench);
      v.predicted_us = cc.total_us;
      v.basis = (r.transport == opt.fit_overlap_on && r.pipeline > 1 && r.t_comm_us &&
                 r.t_codec_us && rep.exec_basis.rfind("codec step overhead fitted", 0) == 0)
                    ? "predicted; its overlap in the eta fit"
                    : "predicted";
      if (r.t_comm_us) v.wire_measured_us = *r.t_comm_us, v.wire_predicted_us = cc.wire_us;
      if (r.t_codec_us) v.codec_measured_us = *r.t_codec_us, v.codec_predicted_us = cc.codec_us;
      rep.rows.push_back(v);
    }
  }

  // Layer rows.
  if (layer != nullptr) {
    const double rate = opt.compute_efficiency * opt.peak_tflops * 1e12;
    for (const LayerRow& r : layer->rows) {
      const std::string src = fmt::format("{}#rows[{}]", layer->path, r.index);
      ModelShape m;
      m.arch = r.model.arch;
      m.hidden = r.model.hidden, m.ffn = r.model.ffn, m.heads = r.model.heads,
      m.kv_heads = r.model.kv_heads;
      TrainShape t;
      t.seq = r.seq, t.micro_batch = r.micro_batch;
      Parallel par;
      par.tp = int(r.tp);
      par.sp = r.sp;
      const double flops_us = 3 * layer_fwd_flops(m, t, par, opt.causal_attention) / rate * 1e6;
      const LayerRow* base =
          layer->find(r.model, r.seq, r.micro_batch, r.tp, r.sp, "bf16", "shard");
      const std::string cfg = fmt::format("{} h{} ffn{} tp{}{} b{} s{} {} {}", r.model.arch,
                                          r.model.hidden, r.model.ffn, r.tp, r.sp ? " sp" : "",
                                          r.micro_batch, r.seq, r.variant, r.mode);
      ValidationRow v;
      v.source = src;
      v.transport = layer->gpu;
      v.measured_us = r.step_median_ms * 1e3;
      v.config = cfg;
      if (r.mode == "shard" && r.variant == "bf16") {
        v.kind = "layer-compute";
        v.predicted_us = flops_us;
        v.basis = fmt::format("placeholder: FLOPs at {:.0f}% of {:.0f} TFLOP/s",
                              100 * opt.compute_efficiency, opt.peak_tflops);
        rep.rows.push_back(v);
        continue;
      }
      const bool compressed = r.variant != "bf16";
      if (compressed && (bench == nullptr || !bench->has(r.variant))) {
        rep.notes.push_back(
            fmt::format("{}: codec '{}' has no kernel rows in the bench file", src, r.variant));
        continue;
      }
      CodecModel codec;
      if (compressed) codec = codec_from_table(r.variant, bench);
      ExecutorParams bare = rep.exec;
      bare.codec_step_overhead_us = 0;
      const double compute_us = base != nullptr ? base->step_median_ms * 1e3 : flops_us;
      double add_us = 0;
      for (size_t i = 0; i < r.messages.size(); ++i) {
        const LayerMessage& msg = r.messages[i];
        const Coll c = parse_coll(msg.collective, src);
        const double bytes = double(msg.bytes_plain);  // the collective's per-rank input buffer
        if (r.mode == "shard") {
          if (!compressed) continue;
          const Algo a = c == Coll::AllReduce ? (r.algo == "nccl" || r.algo == "auto"
                                                     ? auto_allreduce_algo(bytes, int(r.tp))
                                                     : parse_algo(r.algo, src))
                                              : Algo::Direct;
          // One GPU runs the codec kernels of one rank, unpipelined, no transfer.
          const LinkTier& any = links.tiers.begin()->second;
          const double cu =
              compressed_collective(any, bare, codec, c, a, int(r.tp), bytes, 2, false).codec_us;
          add_us += cu;
          ValidationRow m2;
          m2.source = fmt::format("{}.messages[{}]", src, i);
          m2.kind = "layer-codec";
          m2.transport = layer->gpu;
          m2.size = bytes;
          m2.config = fmt::format("{} {} {} {} {}", msg.site, msg.direction, msg.collective,
                                  mib(bytes), r.variant);
          m2.measured_us = msg.codec_ms * 1e3;
          m2.predicted_us = cu;
          m2.basis = "predicted from taco bench GB/s";
          if (m2.measured_us > 0) rep.rows.push_back(m2);
        } else {
          const LinkTier& tier = links.tier(opt.layer_tier, "--layer-tier");
          if (!compressed) {
            add_us += plain_collective(tier, c, int(r.tp), bytes).total_us;
          } else {
            const Algo a = c == Coll::AllReduce ? (r.algo == "nccl" || r.algo == "auto"
                                                       ? auto_allreduce_algo(bytes, int(r.tp))
                                                       : parse_algo(r.algo, src))
                                                : Algo::Direct;
            add_us += compressed_collective(tier, rep.exec, codec, c, a, int(r.tp), bytes, 2, true)
                          .total_us;
          }
        }
      }
      v.kind = r.mode == "shard" ? "layer-step" : "layer-dist";
      v.predicted_us = compute_us + add_us;
      v.basis = fmt::format(
          "{} + {}", base != nullptr ? "measured bf16 shard row" : "placeholder compute",
          r.mode == "shard" ? "codec from taco bench" : "collectives on " + opt.layer_tier);
      rep.rows.push_back(v);
    }
  }

  // Summary per (kind, transport); plain rows also out of sample.
  std::map<std::pair<std::string, std::string>, std::vector<double>> errs;
  for (const ValidationRow& v : rep.rows) {
    errs[{v.kind, v.transport}].push_back(std::abs(v.err()));
    if (v.kind == "comm-plain" && v.loo_predicted_us && v.basis.rfind("fit", 0) == 0)
      errs[{"comm-plain-leave-one-out", v.transport}].push_back(
          std::abs(*v.loo_predicted_us / v.measured_us - 1));
    // The parts of a compressed row against their own measurements say where a miss comes from.
    if (v.wire_measured_us && *v.wire_measured_us > 0)
      errs[{"part: wire", v.transport}].push_back(
          std::abs(*v.wire_predicted_us / *v.wire_measured_us - 1));
    if (v.codec_measured_us && *v.codec_measured_us > 0)
      errs[{"part: codec", v.transport}].push_back(
          std::abs(*v.codec_predicted_us / *v.codec_measured_us - 1));
  }
  for (const auto& [k, e] : errs) {
    ValidationSummary s;
    s.kind = k.first;
    s.transport = k.second;
    s.n = int(e.size());
    s.median_abs_err = median(e);
    s.max_abs_err = *std::max_element(e.begin(), e.end());
    s.within_10pct = int(std::count_if(e.begin(), e.end(), [](double x) { return x <= 0.10; }));
    rep.summary.push_back(s);
  }
  return rep;
}

}  // namespace taco::model
