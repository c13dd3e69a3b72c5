// subspace:k=K: coefficients in a fixed random orthonormal basis (structured.hpp).
#include "codecs/structured/linalg.hpp"
#include "codecs/structured/rng.hpp"
#include "codecs/structured/specs.hpp"
#include "codecs/structured/structured.hpp"

#include <cmath>
#include <map>
#include <mutex>

namespace taco::structured {

namespace {
using RowMajorF = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
}

int64_t SubspaceSpec::k_for(int64_t cols) const {
  if (k > 0) return k;
  return std::max<int64_t>(1, int64_t(std::floor(frac * double(cols) + 0.5)));
}

int64_t subspace_wire_bytes(int64_t rows, int64_t k, NumFormat coef) {
  return int64_t(kHeaderBytes) + rows * k * num_format_bytes(coef) +
         (coef == NumFormat::E4M3 ? 4 * rows : 0);
}

std::vector<float> subspace_basis(int64_t d, int64_t k, uint64_t seed) {
  TACO_ASSERT(d >= 1 && k >= 1 && k <= d, "subspace_basis(d = {}, k = {})", d, k);
  Rng rng(seed, RngStream::SubspaceBasis);
  MatrixD g(d, k);
  for (int64_t t = 0; t < d; ++t)
    for (int64_t j = 0; j < k; ++j) g(t, j) = rng.gaussian();
  const MatrixD q = householder_q(std::move(g));
  std::vector<float> u(size_t(d * k));
  for (int64_t t = 0; t < d; ++t)
    for (int64_t j = 0; j < k; ++j) u[size_t(t * k + j)] = float(q(t, j));
  return u;
}

double energy_in_span(const float* x, int64_t rows, int64_t d, const std::vector<float>& u,
                      int64_t k) {
  TACO_ASSERT(int64_t(u.size()) == d * k, "energy_in_span: basis has {} values, expected {}",
              u.size(), d * k);
  const double total = frobenius2(x, rows * d);
  if (total == 0) return 0;
  MatrixD ud(d, k);
  for (int64_t t = 0; t < d; ++t)
    for (int64_t j = 0; j < k; ++j) ud(t, j) = u[size_t(t * k + j)];
  const MatrixD c = mul_x_b(x, rows, d, ud);
  return c.squaredNorm() / total;
}

double topk_energy(const std::vector<double>& sigma2_desc, int64_t k, double total) {
  if (total == 0) return 0;
  double s = 0;
  for (int64_t i = 0; i < k && i < int64_t(sigma2_desc.size()); ++i) s += sigma2_desc[size_t(i)];
  return std::min(1.0, s / total);
}

namespace {

class SubspaceCodec final : public Codec {
 public:
  SubspaceCodec(const SubspaceSpec& s, std::string name, std::string definition)
      : s_(s), name_(std::move(name)), definition_(std::move(definition)) {}

  const std::string& name() const override { return name_; }

  nlohmann::json params() const override {
    nlohmann::json p = {{"variant", name_},
                        {"definition", definition_},
                        {"family", "subspace"},
                        {"elem_format", std::string(num_format_name(s_.coef))},
                        {"scale_format", s_.coef == NumFormat::E4M3 ? "f32" : "none"},
                        {"granularity", s_.coef == NumFormat::E4M3 ? "row" : "none"},
                        {"group_size", nullptr},
                        {"transform", "subspace"},
                        {"seed", s_.seed},
                        {"coef", std::string(num_format_name(s_.coef))},
                        {"basis", "householder_q(gaussian d x k), xoshiro256**, never sent"}};
    if (s_.k > 0)
      p["k"] = s_.k;
    else
      p["frac"] = s_.frac;
    return p;
  }

  std::vector<uint8_t> encode(const float* x, int64_t rows, int64_t cols,
                              EncodeStats* stats) const override {
    const int64_t n = checked_numel(name_, rows, cols);
    const int64_t k = s_.k_for(cols);
    TACO_REQUIRE_INPUT(k <= cols, "codec {}: k = {} exceeds the hidden size {}", name_, k, cols);
    std::vector<float> xs;
    const int64_t bad = sanitize(x, n, xs);
    if (stats) stats->nonfinite += bad;
    const auto u = basis(cols, k);
    RowMajorF c;
    {
      SerialEigen serial;
      const Eigen::Map<const RowMajorF> xm(xs.data(), rows, cols);
      const Eigen::Map<const RowMajorF> um(u->data(), cols, k);
      c = xm * um;
    }
    ByteWriter w(size_t(subspace_wire_bytes(rows, k, s_.coef)));
    write_header(w, {kMagicSubspace, s_.coef, 0, uint32_t(k)});
    const int eb = num_format_bytes(s_.coef);
    uint8_t* codes = w.extend(size_t(rows * k * eb));
    std::vector<float> scales(size_t(rows), 1.0f);
    int64_t sat = 0;
    for (int64_t i = 0; i < rows; ++i)
      scales[size_t(i)] = encode_values(c.data() + i * k, k, s_.coef, codes + i * k * eb, &sat);
    if (s_.coef == NumFormat::E4M3)
      for (float sc : scales) w.f32(sc);
    if (stats) stats->saturated += sat;
    TACO_ASSERT(int64_t(w.size()) == subspace_wire_bytes(rows, k, s_.coef), "subspace wire size");
    return w.take();
  }

  WireSize wire_size(int64_t rows, int64_t cols) const override {
    checked_numel(name_, rows, cols);
    const int64_t k = s_.k_for(cols);
    TACO_REQUIRE_INPUT(k <= cols, "codec {}: k = {} exceeds the hidden size {}", name_, k, cols);
    return {subspace_wire_bytes(rows, k, s_.coef), true};
  }

  void decode(const uint8_t* wire, size_t nbytes, int64_t rows, int64_t cols,
              float* out) const override {
    checked_numel(name_, rows, cols);
    const int64_t k = s_.k_for(cols);
    TACO_REQUIRE_INPUT(k <= cols, "codec {}: k = {} exceeds the hidden size {}", name_, k, cols);
    const int64_t want = subspace_wire_bytes(rows, k, s_.coef);
    TACO_REQUIRE_INPUT(int64_t(nbytes) == want,
                       "codec {}: wire buffer has {} bytes, but [{}, {}] encodes to {}", name_,
                       nbytes, rows, cols, want);
    ByteReader r(wire, nbytes, name_);
    const Header h = read_header(r, kMagicSubspace, name_);
    TACO_REQUIRE_INPUT(h.format == s_.coef && int64_t(h.b) == k && h.a == 0,
                       "codec {}: header says k = {}, format {}; expected k = {}, format {}", name_,
                       h.b, num_format_name(h.format), k, num_format_name(s_.coef));
    const int eb = num_format_bytes(s_.coef);
    const uint8_t* codes = r.bytes(size_t(rows * k * eb));
    std::vector<float> scales(size_t(rows), 1.0f);
    if (s_.coef == NumFormat::E4M3)
      for (float& sc : scales) sc = r.f32();
    RowMajorF c(rows, k);
    for (int64_t i = 0; i < rows; ++i)
      decode_values(codes + i * k * eb, k, s_.coef, scales[size_t(i)], c.data() + i * k);
    const auto u = basis(cols, k);
    SerialEigen serial;
    const Eigen::Map<const RowMajorF> um(u->data(), cols, k);
    Eigen::Map<RowMajorF> om(out, rows, cols);
    om.noalias() = c * um.transpose();
  }

 private:
  // The basis for a hidden size, built once per codec and size (bases are pure functions of
  // (d, k, seed), so the cache only saves time).
  std::shared_ptr<const std::vector<float>> basis(int64_t d, int64_t k) const {
    std::lock_guard<std::mutex> lock(mu_);
    auto& slot = cache_[{d, k}];
    if (!slot) slot = std::make_shared<const std::vector<float>>(subspace_basis(d, k, s_.seed));
    return slot;
  }

  SubspaceSpec s_;
  std::string name_, definition_;
  mutable std::mutex mu_;
  mutable std::map<std::pair<int64_t, int64_t>, std::shared_ptr<const std::vector<float>>> cache_;
};

}  // namespace

std::unique_ptr<Codec> make_subspace_codec(const SubspaceSpec& s, std::string name,
                                           std::string definition) {
  return std::make_unique<SubspaceCodec>(s, std::move(name), std::move(definition));
}

}  // namespace taco::structured
