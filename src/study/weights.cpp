#include "study/weights.hpp"

#include "codecs/structured/linalg.hpp"
#include "codecs/structured/structured.hpp"
#include "codecs/structured/tt.hpp"
#include "codecs/structured/wire.hpp"
#include "core/csv.hpp"
#include "core/error.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>

namespace taco::study {

namespace {

std::string join(const std::vector<int64_t>& v) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ";" : "") + std::to_string(v[i]);
  return s;
}

using csv::field;
using csv::known;

}  // namespace

WeightsResult run_weights_study(const std::vector<TensorSource*>& sources,
                                const WeightsOptions& opts) {
  using namespace structured;
  TACO_REQUIRE_INPUT(opts.tt_order >= 2 && opts.tt_order <= 16,
                     "--weights: TT order {} is not in 2..16", opts.tt_order);
  TACO_REQUIRE_INPUT(opts.rtol > 0 && opts.rtol < 1, "--weights: rtol {} is not in (0, 1)",
                     opts.rtol);
  const auto t0 = std::chrono::steady_clock::now();
  WeightsResult res;
  for (const TensorSource* s : sources) res.files.push_back(s->path());
  struct Ref {
    size_t file, index;
  };
  std::vector<Ref> refs;
  for (size_t f = 0; f < sources.size(); ++f)
    for (size_t i = 0; i < sources[f]->size(); ++i) {
      if (opts.max_tensors >= 0 && int64_t(refs.size()) >= opts.max_tensors) break;
      const TensorInfo info = sources[f]->info(i);
      if (!opts.filter.matches(info)) continue;
      if (info.shape.size() != 2 || info.shape[0] < 2 || info.shape[1] < 2) {
        res.skipped.push_back(
            {res.files[f], info.name, "",
             fmt::format("not a 2-D matrix: shape {}", shape_string(info.shape))});
        continue;
      }
      refs.push_back({f, i});
    }
  int64_t done = 0, elements = 0;
  for (const Ref& ref : refs) {
    const Tensor t = sources[ref.file]->read(ref.index);
    std::vector<float> w;
    const int64_t m = t.shape[0], n = t.shape[1];
    const int64_t bad = sanitize(t.values.data(), t.numel(), w);
    if (bad)
      res.skipped.push_back(
          {res.files[ref.file], t.name, "", fmt::format("{} non-finite values taken as 0", bad)});
    WeightSpectrum sp;
    sp.file_index = ref.file;
    sp.tensor_index = ref.index;
    sp.tensor = t.name;
    sp.rows = m;
    sp.cols = n;
    const VectorD s = singular_values(w.data(), m, n);
    sp.sigma.assign(s.data(), s.data() + s.size());
    sp.effective_rank = effective_rank(s);
    const std::vector<float> mpo = mpo_permute(w.data(), m, n, opts.tt_order, &sp.tt_modes);
    sp.tt_unfolding_ranks = unfolding_ranks(mpo.data(), sp.tt_modes, opts.rtol);
    const size_t si = res.spectra.size();
    res.spectra.push_back(sp);

    // Low rank: Eckart-Young from the spectrum (tails summed from the smallest value up).
    const int64_t full = std::min(m, n);
    std::vector<double> tail(size_t(full) + 1, 0.0);
    for (int64_t i = full; i-- > 0;) tail[size_t(i)] = tail[size_t(i + 1)] + s[i] * s[i];
    const double total = tail[0];
    std::vector<int64_t> ranks;
    for (double f : opts.rank_fracs) {
      const int64_t r = std::clamp<int64_t>(int64_t(std::ceil(f * double(full))), 1, full);
      if (std::find(ranks.begin(), ranks.end(), r) != ranks.end()) continue;
      ranks.push_back(r);
      WeightPoint p;
      p.spectrum = si;
      p.method = "lowrank";
      p.rank = r;
      p.params = r * (m + n);
      p.rel_fro_err = total > 0 ? std::sqrt(tail[size_t(r)] / total) : 0.0;
      res.points.push_back(p);
    }
    // TT-matrix at each rank cap: measured on the reconstruction.
    const double norm2 = frobenius2(w.data(), m * n);
    for (int64_t cap : opts.tt_ranks) {
      TtOptions o;
      o.max_rank = cap;
      const TensorTrain tt = tt_svd(mpo.data(), sp.tt_modes, o);
      const std::vector<double> full_t = tt_full(tt);
      double err2 = 0;
      for (size_t i = 0; i < full_t.size(); ++i) {
        const double d = double(mpo[i]) - full_t[i];
        err2 += d * d;
      }
      WeightPoint p;
      p.spectrum = si;
      p.method = "tt";
      p.rank = cap;
      p.tt_ranks.assign(tt.ranks.begin() + 1, tt.ranks.end() - 1);
      p.params = tt.parameters();
      p.rel_fro_err = norm2 > 0 ? std::sqrt(err2 / norm2) : 0.0;
      res.points.push_back(p);
    }
    ++done;
    elements += t.numel();
    if (opts.progress) {
      Progress pr;
      pr.done = done;
      pr.total = int64_t(refs.size());
      pr.tensor = t.name;
      pr.elements = elements;
      pr.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      opts.progress(pr);
    }
  }
  res.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return res;
}

std::string spectra_csv(const WeightsResult& r) {
  std::string out = "file,tensor,index,sigma\n";
  for (const WeightSpectrum& sp : r.spectra)
    for (size_t i = 0; i < sp.sigma.size(); ++i)
      out += fmt::format("{},{},{},{:.9g}\n", field(r.files[sp.file_index]), field(sp.tensor), i,
                         sp.sigma[i]);
  return out;
}

std::string weights_csv(const WeightsResult& r, int tt_order) {
  std::string out =
      "file,tensor,rows,cols,effective_rank,tt_order,tt_modes,tt_unfolding_ranks,method,rank,tt_"
      "ranks,params,"
      "compression_ratio,rel_fro_err\n";
  for (const WeightPoint& p : r.points) {
    const WeightSpectrum& sp = r.spectra[p.spectrum];
    const double ratio = p.params > 0 ? double(sp.rows) * double(sp.cols) / double(p.params) : 0.0;
    out += fmt::format("{},{},{},{},{:.9g},{},{},{},{},{},{},{},{:.9g},{:.9g}\n",
                       field(r.files[sp.file_index]), field(sp.tensor), sp.rows, sp.cols,
                       sp.effective_rank, tt_order, join(sp.tt_modes), join(sp.tt_unfolding_ranks),
                       p.method, p.rank, join(p.tt_ranks), p.params, ratio, p.rel_fro_err);
  }
  return out;
}

std::string format_weights(const WeightsResult& r) {
  std::string out = fmt::format("{:<40} {:>11} {:>9} {:>9}  {}\n", "tensor", "shape", "eff.rank",
                                "max rank", "rel. error at compression (lowrank | tt)");
  for (size_t si = 0; si < r.spectra.size(); ++si) {
    const WeightSpectrum& sp = r.spectra[si];
    std::string lr, tt;
    for (const WeightPoint& p : r.points) {
      if (p.spectrum != si) continue;
      const double ratio = double(sp.rows) * double(sp.cols) / double(p.params);
      (p.method == "lowrank" ? lr : tt) += fmt::format(" {:.3g}@{:.3g}x", p.rel_fro_err, ratio);
    }
    out += fmt::format("{:<40} {:>11} {:>9.1f} {:>9}  {} |{}\n", sp.tensor,
                       fmt::format("{}x{}", sp.rows, sp.cols), sp.effective_rank,
                       std::min(sp.rows, sp.cols), lr, tt);
  }
  return out;
}

StructureCollector::StructureCollector(const std::vector<VariantInfo>& variants) {
  for (const VariantInfo& v : variants) {
    const nlohmann::json& p = v.params;
    const bool sub = v.family == "subspace" || p.value("inner_family", "") == "subspace";
    if (!sub) continue;
    Sub s;
    s.variant = v.name;
    if (p.contains("k")) s.k = p.at("k").get<int64_t>();
    if (p.contains("frac")) s.frac = p.at("frac").get<double>();
    s.seed = p.value("seed", uint64_t(0));
    if (s.k > 0 || s.frac > 0) subs_.push_back(s);
  }
}

void StructureCollector::add(const Tensor& t) {
  using namespace structured;
  if (subs_.empty() || t.numel() == 0) return;
  const int64_t rows = t.rows(), cols = t.cols();
  std::vector<float> x;
  sanitize(t.values.data(), t.numel(), x);
  const VectorD ev = gram_eigenvalues(x.data(), rows, cols);
  const std::vector<double> e(ev.data(), ev.data() + ev.size());
  VectorD sigma(ev.size());
  for (Eigen::Index i = 0; i < ev.size(); ++i) sigma[i] = std::sqrt(ev[i]);
  const double erank = effective_rank(sigma);
  const double total = frobenius2(x.data(), t.numel());
  for (const Sub& s : subs_) {
    const int64_t k =
        s.k > 0 ? s.k : std::max<int64_t>(1, int64_t(std::floor(s.frac * double(cols) + 0.5)));
    std::string span, top;
    if (k <= cols) {
      auto& u = bases_[{cols, k, s.seed}];
      if (u.empty()) u = subspace_basis(cols, k, s.seed);
      span = fmt::format("{:.9g}", energy_in_span(x.data(), rows, cols, u, k));
      top = fmt::format("{:.9g}", topk_energy(e, k, total));
    }
    lines_ += fmt::format("{},{},{},{},{},{},{},{},{:.9g},{},{},{},{}\n", field(t.name),
                          known(t.meta.layer), field(t.meta.site), field(t.meta.direction),
                          known(t.meta.step), known(t.meta.tp_rank), rows, cols, erank,
                          field(s.variant), k, span, top);
  }
}

std::string StructureCollector::csv() const {
  return "tensor,layer,site,direction,step,tp_rank,rows,cols,effective_rank,variant,k,energy_span_"
         "u,energy_topk\n" +
         lines_;
}

}  // namespace taco::study
