#pragma once
// Small codecs and an in-memory tensor source for the study and simulated-collective tests, so
// those tests depend only on the Codec and TensorSource interfaces, not on the real codecs or
// readers. Each codec's result is known independently (identity, bf16 rounding, a fixed grid,
// per-group int8 with an optional Walsh-Hadamard transform).
#include "codecs/codec.hpp"
#include "core/dtype.hpp"
#include "core/error.hpp"
#include "io/tensor_source.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

namespace taco::testing {

// Wire = the fp32 bytes: exact, 4 bytes/elem.
class IdentityCodec : public Codec {
 public:
  const std::string& name() const override { return name_; }
  nlohmann::json params() const override { return {{"family", "test"}, {"elem_format", "f32"}}; }
  std::vector<uint8_t> encode(const float* x, int64_t rows, int64_t cols,
                              EncodeStats*) const override {
    std::vector<uint8_t> w(static_cast<size_t>(rows * cols) * 4);
    std::memcpy(w.data(), x, w.size());
    return w;
  }
  WireSize wire_size(int64_t rows, int64_t cols) const override { return {4 * rows * cols, true}; }
  void decode(const uint8_t* w, size_t n, int64_t rows, int64_t cols, float* out) const override {
    if (n != size_t(rows * cols) * 4) throw InputError("identity: wrong wire size");
    std::memcpy(out, w, n);
  }

 private:
  std::string name_ = "identity";
};

// Decodes to x + 1 exactly (integer inputs): counts how many codec round trips a value took.
class PlusOneCodec : public IdentityCodec {
 public:
  void decode(const uint8_t* w, size_t n, int64_t rows, int64_t cols, float* out) const override {
    IdentityCodec::decode(w, n, rows, cols, out);
    for (int64_t i = 0; i < rows * cols; ++i) out[i] += 1.0f;
  }
};

// bf16 round-to-nearest-even: 2 bytes/elem.
class Bf16Codec : public Codec {
 public:
  const std::string& name() const override { return name_; }
  nlohmann::json params() const override { return {{"family", "test"}, {"elem_format", "bf16"}}; }
  std::vector<uint8_t> encode(const float* x, int64_t rows, int64_t cols,
                              EncodeStats*) const override {
    std::vector<uint8_t> w(static_cast<size_t>(rows * cols) * 2);
    for (int64_t i = 0; i < rows * cols; ++i) {
      const uint16_t h = float_to_bf16(x[i]);
      std::memcpy(&w[size_t(i) * 2], &h, 2);
    }
    return w;
  }
  WireSize wire_size(int64_t rows, int64_t cols) const override { return {2 * rows * cols, true}; }
  void decode(const uint8_t* w, size_t n, int64_t rows, int64_t cols, float* out) const override {
    if (n != size_t(rows * cols) * 2) throw InputError("bf16: wrong wire size");
    for (int64_t i = 0; i < rows * cols; ++i) {
      uint16_t h;
      std::memcpy(&h, &w[size_t(i) * 2], 2);
      out[i] = bf16_to_float(h);
    }
  }

 private:
  std::string name_ = "bf16";
};

// Rounds to the nearest multiple of `step`, codes clamped to ±max_code (those count as
// saturated); int32 codes, 4 bytes/elem. Rejects shapes whose cols are not a multiple of
// `col_multiple` (to exercise the study's skip path).
class GridCodec : public Codec {
 public:
  GridCodec(float step, int max_code, int col_multiple = 1)
      : step_(step), max_code_(max_code), col_multiple_(col_multiple) {}
  const std::string& name() const override { return name_; }
  nlohmann::json params() const override { return {{"family", "test"}, {"step", step_}}; }
  std::vector<uint8_t> encode(const float* x, int64_t rows, int64_t cols,
                              EncodeStats* st) const override {
    if (cols % col_multiple_ != 0) throw InputError("grid: cols not a multiple");
    std::vector<uint8_t> w(static_cast<size_t>(rows * cols) * 4);
    for (int64_t i = 0; i < rows * cols; ++i) {
      float c = std::nearbyint(std::isfinite(x[i]) ? x[i] / step_ : 0.0f);
      c = std::clamp(c, float(-max_code_), float(max_code_));
      if (st && std::fabs(c) == float(max_code_)) ++st->saturated;
      const int32_t code = int32_t(c);
      std::memcpy(&w[size_t(i) * 4], &code, 4);
    }
    return w;
  }
  WireSize wire_size(int64_t rows, int64_t cols) const override {
    if (cols % col_multiple_ != 0) throw InputError("grid: cols not a multiple");
    return {4 * rows * cols, true};
  }
  void decode(const uint8_t* w, size_t n, int64_t rows, int64_t cols, float* out) const override {
    if (n != size_t(rows * cols) * 4) throw InputError("grid: wrong wire size");
    for (int64_t i = 0; i < rows * cols; ++i) {
      int32_t code;
      std::memcpy(&code, &w[size_t(i) * 4], 4);
      out[i] = float(code) * step_;
    }
  }

 private:
  float step_;
  int max_code_, col_multiple_;
  std::string name_ = "grid";
};

// Per group of G consecutive (flat) elements: optional orthonormal Walsh-Hadamard transform,
// then symmetric int8 with scale absmax/127. Wire: numel int8 codes, then one fp32 scale per
// group: 1 + 4/G bytes/elem. numel must be a multiple of G.
class GroupInt8Codec : public Codec {
 public:
  GroupInt8Codec(int group, bool hadamard)
      : g_(group), h_(hadamard), name_("int8-g" + std::to_string(group) + (hadamard ? "-h" : "")) {}
  const std::string& name() const override { return name_; }
  nlohmann::json params() const override {
    return {{"family", "quant"},     {"elem_format", "int8"},
            {"scale_format", "f32"}, {"granularity", "group"},
            {"group_size", g_},      {"transform", h_ ? "hadamard" : "none"}};
  }
  std::vector<uint8_t> encode(const float* x, int64_t rows, int64_t cols,
                              EncodeStats* st) const override {
    const int64_t n = rows * cols;
    if (n % g_ != 0) throw InputError("int8 group codec: numel not a multiple of the group");
    const int64_t groups = n / g_;
    std::vector<uint8_t> w(static_cast<size_t>(n + 4 * groups));
    std::vector<float> y(static_cast<size_t>(g_));
    for (int64_t g = 0; g < groups; ++g) {
      std::copy(x + g * g_, x + (g + 1) * g_, y.begin());
      if (h_) fwht(y);
      float m = 0;
      for (float v : y) m = std::max(m, std::fabs(v));
      const float scale = m > 0 ? m / 127.0f : 1.0f;
      for (int64_t i = 0; i < g_; ++i) {
        const float c = std::clamp(std::nearbyint(y[size_t(i)] / scale), -127.0f, 127.0f);
        if (st && std::fabs(c) == 127.0f) ++st->saturated;
        w[size_t(g * g_ + i)] = uint8_t(int8_t(c));
      }
      std::memcpy(&w[size_t(n + 4 * g)], &scale, 4);
    }
    return w;
  }
  WireSize wire_size(int64_t rows, int64_t cols) const override {
    if (rows * cols % g_ != 0)
      throw InputError("int8 group codec: numel not a multiple of the group");
    return {rows * cols + 4 * (rows * cols / g_), true};
  }
  void decode(const uint8_t* w, size_t nbytes, int64_t rows, int64_t cols,
              float* out) const override {
    const int64_t n = rows * cols, groups = n / g_;
    if (n % g_ != 0 || nbytes != size_t(n + 4 * groups))
      throw InputError("int8 group codec: wrong wire size");
    std::vector<float> y(static_cast<size_t>(g_));
    for (int64_t g = 0; g < groups; ++g) {
      float scale;
      std::memcpy(&scale, &w[size_t(n + 4 * g)], 4);
      for (int64_t i = 0; i < g_; ++i) y[size_t(i)] = float(int8_t(w[size_t(g * g_ + i)])) * scale;
      if (h_) fwht(y);
      std::copy(y.begin(), y.end(), out + g * g_);
    }
  }

 private:
  static void fwht(std::vector<float>& y) {
    for (size_t s = 1; s < y.size(); s *= 2)
      for (size_t i = 0; i < y.size(); ++i)
        if ((i & s) == 0) {
          const float a = y[i], b = y[i + s];
          y[i] = a + b;
          y[i + s] = a - b;
        }
    const float k = float(1.0 / std::sqrt(double(y.size())));
    for (float& v : y) v *= k;
  }
  int g_;
  bool h_;
  std::string name_;
};

// Builds the codecs above by name, like make_codec.
inline std::unique_ptr<Codec> make_test_codec(const std::string& v) {
  if (v == "identity") return std::make_unique<IdentityCodec>();
  if (v == "plus1") return std::make_unique<PlusOneCodec>();
  if (v == "bf16") return std::make_unique<Bf16Codec>();
  if (v == "grid") return std::make_unique<GridCodec>(0.25f, 8);
  if (v == "grid-c4") return std::make_unique<GridCodec>(0.25f, 1000, 4);
  if (v == "int8-g32") return std::make_unique<GroupInt8Codec>(32, false);
  if (v == "int8-g128") return std::make_unique<GroupInt8Codec>(128, false);
  if (v == "int8-g32-h") return std::make_unique<GroupInt8Codec>(32, true);
  if (v == "int8-g128-h") return std::make_unique<GroupInt8Codec>(128, true);
  throw InputError("unknown test variant '" + v + "'");
}

// Tensors held in memory.
class MemorySource : public TensorSource {
 public:
  explicit MemorySource(std::string path) : path_(std::move(path)) {}
  void add(Tensor t) { tensors_.push_back(std::move(t)); }
  const std::string& path() const override { return path_; }
  std::string format() const override { return "memory"; }
  size_t size() const override { return tensors_.size(); }
  TensorInfo info(size_t i) const override {
    const Tensor& t = tensors_.at(i);
    return TensorInfo{t.name, t.dtype, t.shape, t.meta};
  }
  Tensor read(size_t i) override {
    ++reads;
    return tensors_.at(i);
  }
  int reads = 0;

 private:
  std::string path_;
  std::vector<Tensor> tensors_;
};

inline Tensor make_tensor(const std::string& name, int64_t rows, int64_t cols, uint32_t seed,
                          const std::string& site, const std::string& direction, int tp_rank = -1,
                          int tp_size = -1, int layer = 0) {
  Tensor t;
  t.name = name;
  t.dtype = DType::BF16;
  t.shape = {rows, cols};
  t.meta.site = site;
  t.meta.direction = direction;
  t.meta.layer = layer;
  t.meta.tp_rank = tp_rank;
  t.meta.tp_size = tp_size;
  t.meta.step = 0;
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.0f, 0.02f);
  t.values.resize(size_t(rows * cols));
  // bf16 values (as a bf16 trace would hold), with a sparse 50x outlier.
  for (size_t i = 0; i < t.values.size(); ++i) {
    float v = nd(rng);
    if (i % 97 == 5) v *= 50.0f;
    t.values[i] = bf16_to_float(float_to_bf16(v));
  }
  return t;
}

}  // namespace taco::testing
