#pragma once
// Builds arbitrary HDF5 files, including ones that are valid HDF5 but not valid taco traces
// (wrong attribute types, missing groups, odd storage), so that the tests and the
// structure-aware trace fuzzer can check that the trace reader refuses them with InputError.
// Not for producing traces: use TraceWriter. Failures throw taco::Error (never InputError).
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace taco {

class Hdf5Builder {
 public:
  enum class Elem {
    U16LE,
    U16BE,
    I16LE,
    U8,
    I32LE,
    I64LE,
    U64LE,
    F32LE,
    F32BE,
    F64LE,
    FixedString8
  };
  enum class Layout {
    Contiguous,
    Compact,
    Chunked,
    ChunkedGzip,
    ChunkedShuffleGzip,
    ChunkedFletcher32
  };

  explicit Hdf5Builder(const std::string& path);  // creates or truncates
  ~Hdf5Builder();
  Hdf5Builder(const Hdf5Builder&) = delete;
  Hdf5Builder& operator=(const Hdf5Builder&) = delete;

  static size_t elem_size(Elem e);

  void group(const std::string& path);
  // dims empty: a scalar dataspace; null_space: no dataspace extent at all. `data` holds
  // numel * elem_size bytes, or is empty to leave the dataset unwritten. chunk: per-dimension
  // chunk sizes for the chunked layouts (empty: whole dimensions).
  void dataset(const std::string& path, Elem elem, const std::vector<uint64_t>& dims, Layout layout,
               const std::vector<uint8_t>& data, const std::vector<uint64_t>& chunk = {},
               bool null_space = false);
  void attr_string(const std::string& object, const std::string& name, const std::string& value,
                   bool variable_length = true);
  void attr_int(const std::string& object, const std::string& name, int64_t value,
                Elem elem = Elem::I64LE);
  void attr_float(const std::string& object, const std::string& name, double value);
  void attr_ints(const std::string& object, const std::string& name,
                 const std::vector<int64_t>& values);
  void attr_null(const std::string& object, const std::string& name);  // an attribute with no value
  void soft_link(const std::string& target, const std::string& link);
  void external_link(const std::string& file, const std::string& object, const std::string& link);
  void close();  // flushes and closes the file

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace taco
