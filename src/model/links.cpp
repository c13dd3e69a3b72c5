#include "model/links.hpp"

#include "core/error.hpp"
#include "model/json_check.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

namespace taco::model {

CollShape coll_shape(Coll c, int nranks) {
  TACO_ASSERT(nranks >= 1, "nranks {}", nranks);
  const double n = nranks;
  switch (c) {
    case Coll::AllReduce:
      return {2 * (n - 1), 2 * (n - 1) / n};
    case Coll::AllGather:
      return {n - 1, n - 1};
    case Coll::ReduceScatter:
      return {n - 1, (n - 1) / n};
    case Coll::AllToAll:
      return {n - 1, (n - 1) / n};
    case Coll::SendRecv:
      return {1, 1};
  }
  throw Error("coll_shape: unknown collective");
}

double envelope_time_us(const std::vector<AlphaBeta>& lines, Coll c, int nranks, double bytes) {
  const CollShape sh = coll_shape(c, nranks);
  if (sh.steps == 0) return 0;  // one rank: nothing moves
  TACO_ASSERT(!lines.empty(), "no alpha-beta line");
  double best = std::numeric_limits<double>::infinity();
  // bytes / (GB/s * 1e3) is microseconds.
  for (const AlphaBeta& l : lines)
    best = std::min(best, sh.steps * l.alpha_us + sh.volume * bytes / (l.bw_GBps * 1e3));
  return best;
}

std::vector<AlphaBeta> LinkTier::lines() const {
  if (!fit.empty()) return fit;
  return {AlphaBeta{latency_us, bw_GBps * efficiency}};
}

double LinkTier::time_us(Coll c, int nranks, double bytes) const {
  auto own = coll_fit.find(c);
  if (own != coll_fit.end()) return envelope_time_us(own->second, c, nranks, bytes);
  const double t = envelope_time_us(lines(), c, nranks, bytes);
  auto it = coll_factor.find(c);
  return it == coll_factor.end() ? t : t * it->second;
}

const LinkTier& LinkConfig::tier(const std::string& name, const std::string& flag) const {
  auto it = tiers.find(name);
  if (it != tiers.end()) return it->second;
  std::string known;
  for (const auto& [k, v] : tiers) known += (known.empty() ? "" : ", ") + k;
  throw_input_error("{} '{}': no such link tier in {} (tiers: {})", flag, name, path, known);
}

// ---- the links file ------------------------------------------------------------------------
namespace {

AlphaBeta read_line(const jc::json& o, const std::string& where) {
  jc::only_keys(o, where, {"alpha_us", "bw_GBps"});
  return {jc::non_negative(o, "alpha_us", where), jc::positive(o, "bw_GBps", where)};
}

LinkTier read_tier(const std::string& name, const jc::json& o, const std::string& where) {
  jc::only_keys(o, where,
                {"description", "scope", "bw_GBps", "efficiency", "latency_us", "basis", "source",
                 "transport", "fit", "coll_factor", "coll_fit", "notes"});
  LinkTier t;
  t.name = name;
  t.description = jc::string(o, "description", where);
  t.scope = jc::one_of(o, "scope", where, {"intra-node", "inter-node"});
  t.bw_GBps = jc::positive(o, "bw_GBps", where);
  t.efficiency = jc::positive(o, "efficiency", where);
  TACO_REQUIRE_INPUT(t.efficiency <= 1, "{}.efficiency: must be <= 1, got {}", where, t.efficiency);
  t.latency_us = jc::non_negative(o, "latency_us", where);
  t.basis = jc::one_of(o, "basis", where, {"datasheet", "measured", "assumption"});
  t.source = jc::string(o, "source", where);
  TACO_REQUIRE_INPUT(!t.source.empty(), "{}.source: every tier states where its numbers come from",
                     where);
  if (o.contains("transport")) t.transport = jc::string(o, "transport", where);
  if (o.contains("fit")) {
    const jc::json& f = o.at("fit");
    const std::string fw = where + ".fit";
    jc::only_keys(f, fw, {"lines", "source", "max_rel_err", "rms_rel_err"});
    const jc::json& ls = jc::member(f, "lines", fw);
    TACO_REQUIRE_INPUT(ls.is_array() && !ls.empty(), "{}.lines: expected a non-empty list", fw);
    for (size_t i = 0; i < ls.size(); ++i)
      t.fit.push_back(read_line(ls[i], fmt::format("{}.lines[{}]", fw, i)));
    t.fit_source = jc::string(f, "source", fw);
  }
  if (o.contains("coll_factor")) {
    const jc::json& f = o.at("coll_factor");
    TACO_REQUIRE_INPUT(f.is_object(), "{}.coll_factor: expected an object", where);
    for (auto it = f.begin(); it != f.end(); ++it) {
      const Coll c = parse_coll(it.key(), where + ".coll_factor");
      t.coll_factor[c] = jc::positive(f, it.key(), where + ".coll_factor");
    }
  }
  if (o.contains("coll_fit")) {
    const jc::json& f = o.at("coll_fit");
    TACO_REQUIRE_INPUT(f.is_object(), "{}.coll_fit: expected an object", where);
    for (auto it = f.begin(); it != f.end(); ++it) {
      const std::string cw = where + ".coll_fit." + it.key();
      const Coll c = parse_coll(it.key(), where + ".coll_fit");
      TACO_REQUIRE_INPUT(it.value().is_array() && !it.value().empty(),
                         "{}: expected a non-empty list of lines", cw);
      for (size_t i = 0; i < it.value().size(); ++i)
        t.coll_fit[c].push_back(read_line(it.value()[i], fmt::format("{}[{}]", cw, i)));
    }
  }
  return t;
}

}  // namespace

LinkConfig read_links(const std::string& path) {
  const jc::json j = jc::load(path, "the link tiers");
  LinkConfig cfg;
  cfg.path = path;
  jc::only_keys(j, path, {"schema", "notes", "executor", "tiers"});
  const std::string schema = jc::string(j, "schema", path);
  TACO_REQUIRE_INPUT(schema == "taco.links/1", "{}: schema \"{}\" is not \"taco.links/1\"", path,
                     schema);
  const jc::json& ex = jc::member(j, "executor", path);
  const std::string ew = path + ": executor";
  jc::only_keys(ex, ew,
                {"pipeline", "pipeline_min_bytes", "overlap_efficiency", "codec_step_overhead_us",
                 "source", "notes"});
  cfg.exec.pipeline = int(jc::integer(ex, "pipeline", ew, 1));
  cfg.exec.pipeline_min_bytes = jc::integer(ex, "pipeline_min_bytes", ew, 0);
  cfg.exec.overlap_efficiency = jc::non_negative(ex, "overlap_efficiency", ew);
  TACO_REQUIRE_INPUT(cfg.exec.overlap_efficiency <= 1, "{}.overlap_efficiency: must be <= 1", ew);
  cfg.exec.codec_step_overhead_us = jc::non_negative(ex, "codec_step_overhead_us", ew);
  cfg.exec.source = jc::string(ex, "source", ew);
  const jc::json& ts = jc::member(j, "tiers", path);
  TACO_REQUIRE_INPUT(ts.is_object() && !ts.empty(), "{}: \"tiers\" must be a non-empty object",
                     path);
  for (auto it = ts.begin(); it != ts.end(); ++it)
    cfg.tiers[it.key()] = read_tier(it.key(), it.value(), path + ": tiers." + it.key());
  return cfg;
}

// ---- calibration ---------------------------------------------------------------------------
namespace {

struct Line {
  double a = 0, b = 0;  // t = a + b * bytes (us)
  bool ok = false;
};

// Least squares on the relative error: minimise sum ((a + b x_i) / t_i - 1)^2 with a >= 0, b > 0.
Line fit_segment(const std::vector<TimePoint>& p, size_t lo, size_t hi) {
  double s11 = 0, s12 = 0, s22 = 0, r1 = 0, r2 = 0;
  for (size_t i = lo; i < hi; ++i) {
    const double u = 1 / p[i].time_us, v = p[i].bytes / p[i].time_us;
    s11 += u * u, s12 += u * v, s22 += v * v, r1 += u, r2 += v;
  }
  Line l;
  const double det = s11 * s22 - s12 * s12;
  if (det > 0) {
    l.a = (r1 * s22 - r2 * s12) / det;
    l.b = (s11 * r2 - s12 * r1) / det;
  }
  if (!(det > 0) || l.a < 0) {  // a line through the origin (pure bandwidth)
    l.a = 0;
    l.b = r2 / s22;
  }
  l.ok = l.b > 0 && std::isfinite(l.a) && std::isfinite(l.b);
  return l;
}

void splits(size_t n, int parts, size_t start, std::vector<size_t>& cur,
            std::vector<std::vector<size_t>>& out) {
  if (parts == 1) {
    if (n - start >= 2) {
      cur.push_back(n);
      out.push_back(cur);
      cur.pop_back();
    }
    return;
  }
  for (size_t end = start + 2; end + 2 <= n; ++end) {
    cur.push_back(end);
    splits(n, parts - 1, end, cur, out);
    cur.pop_back();
  }
}

}  // namespace

LineFit fit_lines(std::vector<TimePoint> pts, Coll c, int nranks, int max_lines) {
  TACO_REQUIRE_INPUT(pts.size() >= 2,
                     "fitting {} at {} ranks needs at least 2 measured sizes, got {}", coll_name(c),
                     nranks, pts.size());
  TACO_REQUIRE_INPUT(nranks >= 2, "fitting needs at least 2 ranks, got {}", nranks);
  TACO_REQUIRE_INPUT(max_lines >= 1, "at least one line");
  for (const TimePoint& p : pts)
    TACO_REQUIRE_INPUT(p.bytes > 0 && p.time_us > 0, "fitting {}: sizes and times must be positive",
                       coll_name(c));
  std::sort(pts.begin(), pts.end(),
            [](const TimePoint& x, const TimePoint& y) { return x.bytes < y.bytes; });
  const CollShape sh = coll_shape(c, nranks);
  LineFit best;
  best.max_rel_err = std::numeric_limits<double>::infinity();
  for (int k = 1; k <= max_lines; ++k) {
    std::vector<std::vector<size_t>> ends;
    std::vector<size_t> cur;
    splits(pts.size(), k, 0, cur, ends);
    LineFit best_k;
    best_k.max_rel_err = std::numeric_limits<double>::infinity();
    for (const auto& e : ends) {
      std::vector<Line> ls;
      size_t lo = 0;
      bool ok = true;
      for (size_t hi : e) {
        ls.push_back(fit_segment(pts, lo, hi));
        ok = ok && ls.back().ok;
        lo = hi;
      }
      if (!ok) continue;
      double mx = 0, ss = 0;
      for (const TimePoint& p : pts) {
        double t = std::numeric_limits<double>::infinity();
        for (const Line& l : ls) t = std::min(t, l.a + l.b * p.bytes);
        const double r = t / p.time_us - 1;
        mx = std::max(mx, std::abs(r));
        ss += r * r;
      }
      if (mx < best_k.max_rel_err) {
        best_k.max_rel_err = mx;
        best_k.rms_rel_err = std::sqrt(ss / double(pts.size()));
        best_k.lines.clear();
        for (const Line& l : ls) best_k.lines.push_back({l.a / sh.steps, sh.volume / (l.b * 1e3)});
      }
    }
    // One more line must cut the largest error by a quarter and by at least 1 point of relative
    // error, or it only chases noise (a 3-iteration socket row, say).
    if (!best_k.lines.empty() &&
        (best.lines.empty() ||
         best_k.max_rel_err < std::min(0.75 * best.max_rel_err, best.max_rel_err - 0.01)))
      best = best_k;
  }
  TACO_REQUIRE_INPUT(!best.lines.empty(),
                     "fitting {}: no line with a positive bandwidth fits the points", coll_name(c));
  return best;
}

}  // namespace taco::model
