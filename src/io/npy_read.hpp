#pragma once
// Internal to io/: parsing NumPy .npy data from a sequential byte stream, shared by the .npy
// reader (a file) and the .npz reader (a zip member, stored or deflated).
#include "io/tensor_source.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace taco {

// Bytes read in order. read() delivers exactly n bytes or throws InputError.
class ByteStream {
 public:
  virtual ~ByteStream() = default;
  virtual void read(void* dst, size_t n) = 0;
};

struct NpyHeader {
  std::string descr;         // as written, e.g. "<f4", "<u2"
  DType dtype = DType::F32;  // what the elements are (u2/u1 bits mapped by OpenOptions)
  size_t elem_size = 4;      // bytes per stored element
  bool big_endian = false;
  bool fortran_order = false;
  std::vector<int64_t> shape;
  uint64_t numel = 0;
  uint64_t header_bytes = 0;  // magic + version + length + dict: where the data starts
  uint64_t data_bytes = 0;    // numel * elem_size
};

// Reads and checks the magic, version and header dict. total_bytes is the size of the whole
// npy (file or member): the data must fill it exactly. `what` names it in messages.
NpyHeader read_npy_header(ByteStream& in, uint64_t total_bytes, const OpenOptions& opts,
                          const std::string& what);

// Reads the data that follows the header and returns it as row-major floats.
std::vector<float> read_npy_values(ByteStream& in, const NpyHeader& h);

}  // namespace taco
