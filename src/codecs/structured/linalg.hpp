#pragma once
// Dense linear algebra for the structured codecs and the weights study, in double.
//
// Determinism: everything here gives the same bits for any thread count.
//  * Products with the (large) input tensor are our own loops, parallel over independent
//    outputs with a fixed summation order (axpy form, which vectorizes without reassociation).
//  * Eigen (BDCSVD, SelfAdjointEigenSolver) runs on one thread: Eigen's parallel GEMM picks
//    its blocking from the thread count, which changes roundings. SerialEigen sets the calling
//    task's OpenMP thread count to 1 for its lifetime (a per-task ICV, restored on exit).
//  * The Householder QR is our own, with a fixed operation order.
#include <Eigen/Dense>

#include <cstdint>
#include <vector>

namespace taco::structured {

using MatrixD = Eigen::MatrixXd;  // column-major
using VectorD = Eigen::VectorXd;

class SerialEigen {
 public:
  SerialEigen();
  ~SerialEigen();
  SerialEigen(const SerialEigen&) = delete;
  SerialEigen& operator=(const SerialEigen&) = delete;

 private:
  int saved_;
};

// Thin Q (m x n, m >= n) of A = QR by Householder reflections, signs fixed so that diag(R) >= 0
// (Q is then a function of A alone). Columns of A that are linearly dependent get some unit
// vector orthogonal to the previous ones.
MatrixD householder_q(MatrixD a);

// Products with a row-major float matrix X (m x n). Parallel over output rows, fixed order.
MatrixD mul_x_b(const float* x, int64_t m, int64_t n, const MatrixD& b);   // X B, B: n x l
MatrixD mul_xt_q(const float* x, int64_t m, int64_t n, const MatrixD& q);  // X^T Q, Q: m x l

// A truncated SVD X ~ U diag(s) V^T with U: m x r, V: n x r, s descending.
struct Svd {
  VectorD s;
  MatrixD u, v;
  double total_energy = 0;  // ||X||_F^2 (exact sum of squares, not from s)
};

double frobenius2(const float* x, int64_t n);

// Exact thin SVD (Eigen BDCSVD in double) of the row-major float matrix X.
Svd exact_svd(const float* x, int64_t m, int64_t n);
// Singular values only (BDCSVD, no vectors), descending.
VectorD singular_values(const float* x, int64_t m, int64_t n);

// Randomized SVD (Halko, Martinsson & Tropp 2011, alg. 4.4 + 5.1): Gaussian sketch Omega (n x l)
// from (seed, RngStream::RsvdSketch) drawn row by row, Y = X Omega, `power` subspace iterations
// with re-orthonormalization (Q = qr(X qr(X^T Q))), B = Q^T X, SVD of B (BDCSVD), U = Q U_B.
// Returns rank min(l, m, n) (the caller truncates).
Svd randomized_svd(const float* x, int64_t m, int64_t n, int64_t l, int power, uint64_t seed);

// Eigenvalues of the smaller Gram matrix (X X^T or X^T X, in double), descending, clamped at 0:
// the squared singular values. Cheaper than an SVD when only energies are needed.
VectorD gram_eigenvalues(const float* x, int64_t m, int64_t n);

// Entropy-based effective rank (Roy & Vetterli 2007): p_i = s_i / sum s, exp(-sum p_i ln p_i).
// 0 for an all-zero spectrum.
double effective_rank(const VectorD& s);

// Smallest r with sum_{i < r} e_i >= frac * total, e = energies (descending), frac in [0, 1].
int64_t rank_for_energy(const VectorD& energies, double total, double frac);

}  // namespace taco::structured
