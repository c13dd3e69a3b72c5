#pragma once
// Reading tensors from files people already have, one tensor at a time, so memory stays
// bounded by the largest tensor rather than the file. One entry point picks the reader by
// the file's magic bytes (not its extension).
#include "core/tensor.hpp"

#include <memory>
#include <string>
#include <vector>

namespace taco {

class TensorSource {
 public:
  virtual ~TensorSource() = default;
  virtual const std::string& path() const = 0;
  virtual std::string format() const = 0;            // "taco-hdf5", "safetensors", "npy", "npz"
  virtual size_t size() const = 0;                   // number of tensors
  virtual TensorInfo info(size_t i) const = 0;       // cheap: no values read
  virtual Tensor read(size_t i) = 0;                 // values widened to float; InputError on bad data
};

// Opens any supported file: taco HDF5 trace, safetensors, .npy, .npz. Throws InputError that
// names the file and the problem (missing, empty, wrong magic, truncated, malformed header...).
std::unique_ptr<TensorSource> open_tensor_file(const std::string& path);

// Writes a taco trace (HDF5). Data goes to "<path>.tmp-<pid>" and is renamed over <path> only
// by commit(); a writer destroyed without commit() removes the temporary file, so a failure
// never leaves a half-written trace behind.
class TraceWriter {
 public:
  struct Options {
    DType store = DType::BF16;      // dtype to store values in (bf16 as uint16 bits; f16; f32)
    int compression_level = 4;      // gzip (deflate) level for chunked datasets, 0 = none
    std::map<std::string, std::string> provenance;  // file-level attributes (command, seed, ...)
  };
  TraceWriter(const std::string& path, Options opts);
  ~TraceWriter();
  TraceWriter(const TraceWriter&) = delete;
  TraceWriter& operator=(const TraceWriter&) = delete;

  // Stores t.values converted to opts.store with round-to-nearest-even (exact when the values
  // came from that dtype). Throws InputError on an empty tensor or a duplicate name.
  void add(const Tensor& t);
  void commit();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace taco
