#include "codecs/structured/linalg.hpp"

#include "codecs/structured/rng.hpp"
#include "core/error.hpp"

#include <omp.h>

#include <algorithm>
#include <cmath>

namespace taco::structured {

namespace {
using RowMajorF = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

Eigen::Map<const RowMajorF> map_x(const float* x, int64_t m, int64_t n) {
  return Eigen::Map<const RowMajorF>(x, Eigen::Index(m), Eigen::Index(n));
}

MatrixD to_double(const float* x, int64_t m, int64_t n) {
  return map_x(x, m, n).cast<double>();
}
}  // namespace

SerialEigen::SerialEigen() : saved_(omp_get_max_threads()) {
  omp_set_num_threads(1);
}
SerialEigen::~SerialEigen() {
  omp_set_num_threads(saved_);
}

MatrixD householder_q(MatrixD a) {
  const Eigen::Index m = a.rows(), n = a.cols();
  TACO_ASSERT(m >= n, "householder_q needs a tall matrix, got {} x {}", m, n);
  MatrixD v = MatrixD::Zero(m, n);  // reflector j in v(j:m, j), unit norm
  std::vector<double> rdiag(size_t(n), 0.0);
  for (Eigen::Index j = 0; j < n; ++j) {
    double norm2 = 0;
    for (Eigen::Index i = j; i < m; ++i) norm2 += a(i, j) * a(i, j);
    const double norm = std::sqrt(norm2);
    if (norm == 0) {
      // Dependent column: reflect the j-th coordinate (H e_j = -e_j); R_jj = 0.
      v(j, j) = 1.0;
      rdiag[size_t(j)] = 0;
    } else {
      const double alpha = a(j, j) >= 0 ? -norm : norm;  // H x = alpha e_1, no cancellation
      double vnorm2 = 0;
      for (Eigen::Index i = j; i < m; ++i) {
        v(i, j) = a(i, j) - (i == j ? alpha : 0.0);
        vnorm2 += v(i, j) * v(i, j);
      }
      const double vinv = 1.0 / std::sqrt(vnorm2);
      for (Eigen::Index i = j; i < m; ++i) v(i, j) *= vinv;
      rdiag[size_t(j)] = alpha;
    }
    // A(j:m, j+1:n) -= 2 v (v^T A): columns are independent, each summed in row order.
#pragma omp parallel for schedule(static) if ((m - j) * (n - j) >= (1 << 16))
    for (Eigen::Index c = j + 1; c < n; ++c) {
      double dot = 0;
      for (Eigen::Index i = j; i < m; ++i) dot += v(i, j) * a(i, c);
      const double f = 2.0 * dot;
      for (Eigen::Index i = j; i < m; ++i) a(i, c) -= f * v(i, j);
    }
  }
  // Q = H_0 H_1 ... H_{n-1} applied to the first n columns of I, last reflector first.
  MatrixD q = MatrixD::Identity(m, n);
  for (Eigen::Index j = n - 1; j >= 0; --j) {
#pragma omp parallel for schedule(static) if ((m - j) * n >= (1 << 16))
    for (Eigen::Index c = 0; c < n; ++c) {
      double dot = 0;
      for (Eigen::Index i = j; i < m; ++i) dot += v(i, j) * q(i, c);
      const double f = 2.0 * dot;
      for (Eigen::Index i = j; i < m; ++i) q(i, c) -= f * v(i, j);
    }
  }
  // Q R with R_jj = alpha_j; flip columns with alpha_j < 0 so that diag(R) >= 0.
  for (Eigen::Index j = 0; j < n; ++j)
    if (rdiag[size_t(j)] < 0) q.col(j) = -q.col(j);
  return q;
}

MatrixD mul_x_b(const float* x, int64_t m, int64_t n, const MatrixD& b) {
  TACO_ASSERT(b.rows() == n, "mul_x_b: {} rows, expected {}", b.rows(), n);
  SerialEigen serial;
  return map_x(x, m, n).cast<double>() * b;
}

MatrixD mul_xt_q(const float* x, int64_t m, int64_t n, const MatrixD& q) {
  TACO_ASSERT(q.rows() == m, "mul_xt_q: {} rows, expected {}", q.rows(), m);
  SerialEigen serial;
  return map_x(x, m, n).cast<double>().transpose() * q;
}

double frobenius2(const float* x, int64_t n) {
  double s = 0;
  for (int64_t i = 0; i < n; ++i) s += double(x[i]) * double(x[i]);
  return s;
}

Svd exact_svd(const float* x, int64_t m, int64_t n) {
  SerialEigen serial;
  const MatrixD a = to_double(x, m, n);
  Eigen::BDCSVD<MatrixD> svd(a, Eigen::ComputeThinU | Eigen::ComputeThinV);
  Svd out;
  out.s = svd.singularValues();
  out.u = svd.matrixU();
  out.v = svd.matrixV();
  out.total_energy = frobenius2(x, m * n);
  return out;
}

VectorD singular_values(const float* x, int64_t m, int64_t n) {
  SerialEigen serial;
  const MatrixD a = to_double(x, m, n);
  Eigen::BDCSVD<MatrixD> svd(a);
  return svd.singularValues();
}

Svd randomized_svd(const float* x, int64_t m, int64_t n, int64_t l, int power, uint64_t seed) {
  TACO_ASSERT(l >= 1 && power >= 0, "randomized_svd: l = {}, power = {}", l, power);
  l = std::min({l, m, n});
  Rng rng(seed, RngStream::RsvdSketch);
  MatrixD omega(n, l);
  for (int64_t t = 0; t < n; ++t)
    for (int64_t j = 0; j < l; ++j) omega(t, j) = rng.gaussian();
  MatrixD q = householder_q(mul_x_b(x, m, n, omega));
  for (int p = 0; p < power; ++p) {
    const MatrixD z = householder_q(mul_xt_q(x, m, n, q));
    q = householder_q(mul_x_b(x, m, n, z));
  }
  const MatrixD bt = mul_xt_q(x, m, n, q);  // (Q^T X)^T, n x l
  SerialEigen serial;
  Eigen::BDCSVD<MatrixD> svd(bt, Eigen::ComputeThinU | Eigen::ComputeThinV);
  Svd out;
  out.s = svd.singularValues();
  out.u = q * svd.matrixV();  // B = Z S W^T with B^T = W S Z^T
  out.v = svd.matrixU();
  out.total_energy = frobenius2(x, m * n);
  return out;
}

VectorD gram_eigenvalues(const float* x, int64_t m, int64_t n) {
  SerialEigen serial;
  const MatrixD a = to_double(x, m, n);
  MatrixD g = m >= n ? MatrixD(a.transpose() * a) : MatrixD(a * a.transpose());
  Eigen::SelfAdjointEigenSolver<MatrixD> es(g, Eigen::EigenvaluesOnly);
  VectorD ev = es.eigenvalues().reverse();  // ascending -> descending
  for (Eigen::Index i = 0; i < ev.size(); ++i) ev[i] = std::max(ev[i], 0.0);
  return ev;
}

double effective_rank(const VectorD& s) {
  double sum = 0;
  for (Eigen::Index i = 0; i < s.size(); ++i) sum += std::fabs(s[i]);
  if (sum == 0) return 0;
  double h = 0;
  for (Eigen::Index i = 0; i < s.size(); ++i) {
    const double p = std::fabs(s[i]) / sum;
    if (p > 0) h -= p * std::log(p);
  }
  return std::exp(h);
}

int64_t rank_for_energy(const VectorD& energies, double total, double frac) {
  const double want = frac * total;
  double acc = 0;
  for (Eigen::Index i = 0; i < energies.size(); ++i) {
    if (acc >= want) return int64_t(i);
    acc += energies[i];
  }
  return int64_t(energies.size());
}

}  // namespace taco::structured
