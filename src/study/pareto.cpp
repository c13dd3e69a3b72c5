#include "study/pareto.hpp"

#include "core/csv.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <tuple>

namespace taco::study {

size_t mark_front(std::vector<ParetoPoint>& pts) {
  size_t n = 0;
  for (ParetoPoint& p : pts) {
    p.on_front = std::isfinite(p.rel_l2) && std::isfinite(p.bytes_per_elem);
    if (!p.on_front) continue;
    for (const ParetoPoint& q : pts) {
      if (&q == &p || !std::isfinite(q.rel_l2) || !std::isfinite(q.bytes_per_elem)) continue;
      const bool no_worse = q.bytes_per_elem <= p.bytes_per_elem && q.rel_l2 <= p.rel_l2;
      const bool better = q.bytes_per_elem < p.bytes_per_elem || q.rel_l2 < p.rel_l2;
      if (no_worse && better) {
        p.on_front = false;
        break;
      }
    }
    n += p.on_front;
  }
  return n;
}

std::vector<ParetoPoint> pareto_points(const StudyResult& r) {
  std::map<SiteKey, std::vector<std::pair<ParetoPoint, size_t>>> groups;
  for (const Aggregate& a : aggregate(r)) {
    ParetoPoint p;
    p.site = a.site;
    p.direction = a.direction;
    p.variant = r.variants[a.variant_index].name;
    p.family = r.variants[a.variant_index].family;
    p.bytes_per_elem = a.mean_bytes_per_elem;
    p.rel_l2 = a.median_rel_l2;
    p.p99_rel_l2 = a.p99_rel_l2;
    p.tensors = a.tensors;
    groups[{a.site, a.direction}].emplace_back(p, a.variant_index);
  }
  std::vector<ParetoPoint> out;
  for (auto& group : groups) {
    auto& g = group.second;  // a named reference: clang 14 cannot capture structured bindings
    std::vector<ParetoPoint> pts;
    for (const auto& pv : g) pts.push_back(pv.first);
    mark_front(pts);
    std::vector<size_t> order(pts.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
      return std::tie(pts[a].bytes_per_elem, pts[a].rel_l2, g[a].second) <
             std::tie(pts[b].bytes_per_elem, pts[b].rel_l2, g[b].second);
    });
    for (size_t i : order) out.push_back(pts[i]);
  }
  return out;
}

using csv::field;

std::string pareto_csv(const std::vector<ParetoPoint>& pts) {
  std::string out =
      "site,direction,variant,family,bytes_per_elem,rel_l2,on_front,tensors,p99_rel_l2\n";
  for (const ParetoPoint& p : pts)
    out += fmt::format("{},{},{},{},{:.9g},{:.9g},{},{},{:.9g}\n", field(p.site),
                       field(p.direction), field(p.variant), field(p.family), p.bytes_per_elem,
                       p.rel_l2, p.on_front ? 1 : 0, p.tensors, p.p99_rel_l2);
  return out;
}

std::vector<std::string> pareto_sweep_variants() {
  return {// number formats (the TACO axis)
          "bf16", "fp8-g128", "taco", "mxfp8", "int8-g128", "nvfp4", "mxfp4", "int4-g32",
          // memory across steps
          "ef:int4-g32", "ef:nvfp4",
          // fixed random subspace (Protocol Models)
          "subspace:frac=0.5", "subspace:frac=0.25", "subspace:frac=0.125",
          "subspace:frac=0.25:coef=e4m3",
          // low rank (randomized SVD, rank from the byte budget)
          "lowrank:bpe=1:rsvd", "lowrank:bpe=0.5:rsvd", "lowrank:bpe=0.25:rsvd",
          "lowrank:bpe=0.1:rsvd", "lowrank:bpe=0.5:rsvd:factors=e4m3",
          // tensor train, order 3, rank caps
          "tt:order=3:rank=32", "tt:order=3:rank=128", "tt:order=3:rank=512",
          // sparsification
          "topk:frac=0.25", "topk:frac=0.1", "topk:frac=0.05", "topk:frac=0.25:index=bitmap",
          "randk:frac=0.25", "randk:frac=0.1"};
}

std::string format_pareto(const std::vector<ParetoPoint>& pts) {
  std::string out;
  std::string cur;
  for (const ParetoPoint& p : pts) {
    if (!p.on_front) continue;
    const std::string key = p.site + " " + p.direction;
    if (key != cur) {
      out += fmt::format("\nPareto front, {} / {} (bytes/elem -> median rel_l2):\n",
                         p.site.empty() ? "-" : p.site, p.direction.empty() ? "-" : p.direction);
      cur = key;
    }
    out += fmt::format("  {:>8.4f}  {:>10.3e}  {} ({})\n", p.bytes_per_elem, p.rel_l2, p.variant,
                       p.family);
  }
  return out;
}

}  // namespace taco::study
