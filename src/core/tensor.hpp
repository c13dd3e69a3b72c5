#pragma once
// The trace data model: a tensor record is a name, the dtype it had on disk, a shape,
// the values (widened exactly to float), and TP metadata.
#include "core/dtype.hpp"

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace taco {

// Where a tensor sits in TP training. Unknown fields keep their defaults (-1 / "").
struct TensorMeta {
  int layer = -1;
  std::string site;        // attn_out, mlp_out, attn_qkv, mlp_fc1, or any string
  std::string direction;   // fwd | bwd
  std::string collective;  // all_reduce | reduce_scatter | all_gather | all_to_all | send_recv
  int tp_rank = -1;
  int tp_size = -1;
  int64_t step = -1;
  std::string model;                         // source model or generator
  std::map<std::string, std::string> extra;  // anything else a source carried (kept verbatim)
};

struct Tensor {
  std::string name;
  DType dtype = DType::F32;    // dtype in the source (values below are its exact widening)
  std::vector<int64_t> shape;  // row-major
  std::vector<float> values;   // numel() values
  TensorMeta meta;

  int64_t numel() const {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    return n;
  }
  // Codecs see a tensor as [rows, cols]: cols is the last (hidden) dimension.
  int64_t cols() const { return shape.empty() ? 1 : shape.back(); }
  int64_t rows() const { return cols() == 0 ? 0 : numel() / cols(); }
};

// What can be known about a tensor without reading its values.
struct TensorInfo {
  std::string name;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  TensorMeta meta;
};

std::string shape_string(const std::vector<int64_t>& shape);  // "[4096, 1024]"

}  // namespace taco
