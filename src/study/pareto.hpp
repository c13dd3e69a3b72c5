#pragma once
// Every codec family on one axis: error against wire bytes. Per (site, direction), each variant
// is one point (mean bytes/elem, median rel_l2 over that site's tensors, as aggregate() has
// them); a point is on the Pareto front when no other variant of the same (site, direction) is
// at least as good on both axes and strictly better on one (equal points are both on the front;
// a NaN/Inf error is never on it). Written as DIR/pareto.csv (docs/results-schema.md).
#include "study/study.hpp"

#include <string>
#include <vector>

namespace taco::study {

struct ParetoPoint {
  std::string site, direction, variant, family;
  double bytes_per_elem = 0, rel_l2 = 0, p99_rel_l2 = 0;
  int64_t tensors = 0;
  bool on_front = false;
};

// Marks on_front within pts (one group). Returns how many are on the front.
size_t mark_front(std::vector<ParetoPoint>& pts);

// Points of a study, sorted by (site, direction, bytes_per_elem, rel_l2, variant order).
std::vector<ParetoPoint> pareto_points(const StudyResult& r);

// site,direction,variant,family,bytes_per_elem,rel_l2,on_front,tensors,p99_rel_l2
std::string pareto_csv(const std::vector<ParetoPoint>& pts);

// The variants `taco study --pareto` adds: a sweep over every family at 0.05 .. 2 bytes/elem
// (quantizers, TACO, error feedback, subspace, low rank, tensor train, TopK, random-K).
std::vector<std::string> pareto_sweep_variants();

// A short printed summary: per (site, direction), the front from fewest bytes to most.
std::string format_pareto(const std::vector<ParetoPoint>& pts);

}  // namespace taco::study
