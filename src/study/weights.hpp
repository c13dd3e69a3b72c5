#pragma once
// `taco study --weights`: the structure of 2-D weight matrices, to compare with the TP
// intermediate tensors on the same footing (methods.md 11b).
//
// For every 2-D tensor W (O x I, both >= 2) of the inputs:
//  * the singular values (Eigen BDCSVD in double)                -> DIR/spectra.csv
//  * the effective rank (Roy & Vetterli 2007: exp of the entropy of s / sum s)
//  * the TT unfolding ranks at rtol (default 1e-5) of the TT-matrix (MPO) layout of order D
//    (tt.hpp mpo_permute: O and I each split into D balanced factors, interleaved), i.e. the
//    TT ranks that represent W exactly up to rtol
//  * reconstruction error ||W - W^||_F / ||W||_F against the parameter count of
//      lowrank at ranks r = ceil(f min(O, I)) for each rank fraction f (Eckart-Young: the error
//        is sqrt(sum_{i > r} s_i^2) / ||s||, exact, from the spectrum), params r (O + I);
//      tt (TT-matrix, TT-SVD with every rank capped at R, for each R), params sum r_{k-1} n_k r_k,
//        error measured on the reconstruction                     -> DIR/weights.csv
// Other tensors (1-D norms and biases, >2-D) are listed as skipped.
#include "io/tensor_source.hpp"
#include "study/study.hpp"

#include <functional>
#include <map>
#include <string>
#include <tuple>
#include <vector>

namespace taco::study {

struct WeightsOptions {
  int tt_order = 3;
  double rtol = 1e-5;
  std::vector<double> rank_fracs = {1.0 / 64, 1.0 / 32, 1.0 / 16, 1.0 / 8, 1.0 / 4, 1.0 / 2};
  std::vector<int64_t> tt_ranks = {4, 8, 16, 32, 64, 128};
  TensorFilter filter;
  int64_t max_tensors = -1;
  std::function<void(const Progress&)> progress;
};

struct WeightSpectrum {
  size_t file_index = 0, tensor_index = 0;
  std::string tensor;
  int64_t rows = 0, cols = 0;
  std::vector<double> sigma;  // descending
  double effective_rank = 0;
  std::vector<int64_t> tt_modes;  // o_k i_k
  std::vector<int64_t> tt_unfolding_ranks;
};

struct WeightPoint {
  size_t spectrum = 0;            // index into WeightsResult::spectra
  std::string method;             // "lowrank" | "tt"
  int64_t rank = 0;               // lowrank: r; tt: the cap R
  std::vector<int64_t> tt_ranks;  // tt: r_1..r_{D-1} reached
  int64_t params = 0;
  double rel_fro_err = 0;
};

struct WeightsResult {
  std::vector<std::string> files;
  std::vector<WeightSpectrum> spectra;
  std::vector<WeightPoint> points;
  std::vector<Skipped> skipped;
  double seconds = 0;
};

WeightsResult run_weights_study(const std::vector<TensorSource*>& sources,
                                const WeightsOptions& opts);

// file,tensor,index,sigma
std::string spectra_csv(const WeightsResult& r);
// file,tensor,rows,cols,effective_rank,tt_order,tt_modes,tt_unfolding_ranks,method,rank,tt_ranks,
// params,compression_ratio,rel_fro_err   (lists are ';'-separated)
std::string weights_csv(const WeightsResult& r, int tt_order);
// The printed table: per tensor, effective rank and the error at each parameter budget.
std::string format_weights(const WeightsResult& r);

// The same measures on the TP tensors of a study (`taco study` with subspace variants): per
// tensor, the effective rank (from the Gram eigenvalues) and, per subspace variant (also inside
// ef:/aqsgd:), the fraction of ||x||_F^2 in span(U) and in the tensor's own top-k singular
// subspace (the best any k-dimensional projection keeps) -> DIR/structure.csv.
class StructureCollector {
 public:
  explicit StructureCollector(const std::vector<VariantInfo>& variants);
  bool active() const { return !subs_.empty(); }
  void add(const Tensor& t);  // every tensor the study reads, in any order
  // tensor,layer,site,direction,step,tp_rank,rows,cols,effective_rank,variant,k,energy_span_u,energy_topk
  std::string csv() const;

 private:
  struct Sub {
    std::string variant;
    int64_t k = 0;
    double frac = 0;
    uint64_t seed = 0;
  };
  std::vector<Sub> subs_;
  std::map<std::tuple<int64_t, int64_t, uint64_t>, std::vector<float>> bases_;  // (d, k, seed)
  std::string lines_;
};

}  // namespace taco::study
