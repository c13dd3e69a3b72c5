#pragma once
// Tensor trains (Oseledets, "Tensor-Train Decomposition", SIAM J. Sci. Comput. 2011).
//
// A tensor A of order D with mode sizes n_1..n_D (row-major: the last index runs fastest) is
// A[i_1, ..., i_D] = G_1[i_1] G_2[i_2] ... G_D[i_D], where core G_k is r_{k-1} x n_k x r_k
// (stored row-major in that order) and r_0 = r_D = 1.
//
// TT-SVD: C <- A; for k = 1..D-1: view C as (r_{k-1} n_k) x (n_{k+1} ... n_D), SVD (Eigen
// BDCSVD in double), keep r_k singular triplets, G_k = U_k, C <- diag(s) V^T; G_D = C. With
// eps > 0, r_k is the smallest rank whose discarded tail sum_{i > r_k} s_i^2 <= delta^2,
// delta = eps ||A||_F / sqrt(D - 1), which guarantees ||A - A_TT||_F <= eps ||A||_F (Oseledets,
// Thm 2.2: the error is at most sqrt(sum_k delta_k^2)). A rank cap R limits every r_k to R
// (then there is no a-priori bound beyond that sum). Every r_k is at least 1.
#include "codecs/structured/linalg.hpp"

#include <cstdint>
#include <vector>

namespace taco::structured {

// n as the product of p factors that are as equal as the prime factorization allows: primes in
// descending order, each multiplied into the bin with the smallest product (ties: the first),
// bins then sorted in descending order. Factors of 1 appear when n has fewer than p primes.
// balanced_factors(4096, 3) = {16, 16, 16}; (2048, 2) = {64, 32}; (12, 2) = {4, 3}.
std::vector<int64_t> balanced_factors(int64_t n, int p);

// Mode sizes of the tt codec for a row-major [rows, cols] tensor: the first a modes factor rows,
// the other D - a factor cols (each by balanced_factors), so the row-major reshape needs no
// permutation. a = clamp(floor(D ln(rows) / ln(rows cols) + 1/2), 1, D - 1): modes are split in
// proportion to the logs of the sizes (detmath::log, so every machine gets the same split).
std::vector<int64_t> tt_codec_modes(int64_t rows, int64_t cols, int order);

struct TensorTrain {
  std::vector<int64_t> modes;              // n_1..n_D
  std::vector<int64_t> ranks;              // r_0..r_D (r_0 = r_D = 1)
  std::vector<std::vector<double>> cores;  // core k: r_{k-1} x n_k x r_k, row-major
  int64_t parameters() const;              // sum r_{k-1} n_k r_k
  double discarded2 = 0;                   // sum over k of the discarded tails sum s_i^2
};

struct TtOptions {
  int64_t max_rank = 0;  // 0: no cap
  double eps = 0;        // 0: no error-based truncation (only the cap)
};

// TT-SVD of the row-major tensor a (prod(modes) values).
TensorTrain tt_svd(const float* a, const std::vector<int64_t>& modes, const TtOptions& opt);
// The full tensor (row-major, prod(modes) values) from cores given as double.
std::vector<double> tt_full(const TensorTrain& tt);

// Exact ranks of the D-1 unfoldings (n_1..n_k) x (n_{k+1}..n_D) of a: the number of singular
// values > rtol * s_max (from the eigenvalues of the smaller Gram matrix, in double). These
// are the smallest TT ranks that represent a exactly (up to rtol).
std::vector<int64_t> unfolding_ranks(const float* a, const std::vector<int64_t>& modes,
                                     double rtol);

// TT-matrix (MPO) layout of a row-major weight W (O x I), as in TT-LLM: O = prod o_k,
// I = prod i_k (balanced_factors, D each); W reshaped to (o_1..o_D, i_1..i_D) and permuted to
// (o_1, i_1, ..., o_D, i_D), with each pair merged into one mode of size o_k i_k. Returns the
// permuted values; modes receives {o_k i_k}.
std::vector<float> mpo_permute(const float* w, int64_t o, int64_t i, int order,
                               std::vector<int64_t>* modes);
// The inverse permutation (back to W's row-major layout).
std::vector<float> mpo_unpermute(const double* t, int64_t o, int64_t i, int order);

}  // namespace taco::structured
