#pragma once
// Internal to io/: the readers behind open_tensor_file(), the limits they enforce, and the
// helpers they share. Fuzzers and tests call the readers directly on bytes held in memory.
#include "io/byte_source.hpp"
#include "io/tensor_source.hpp"

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace taco {

// A header (safetensors JSON, npy dict) larger than this is refused before it is read.
inline constexpr uint64_t kMaxHeaderBytes = 100'000'000;
// More dimensions than NumPy allows (64) is a corrupt header.
inline constexpr size_t kMaxRank = 64;
// Deflate cannot expand data by more than 1032:1, so a zip member (or HDF5 chunk) that
// claims more is corrupt or hostile; refusing it bounds allocations by the file size.
inline constexpr uint64_t kMaxDeflateRatio = 1032;

std::unique_ptr<TensorSource> open_safetensors(std::shared_ptr<ByteSource> src,
                                               const OpenOptions& opts);
std::unique_ptr<TensorSource> open_npy(std::shared_ptr<ByteSource> src, const OpenOptions& opts);
std::unique_ptr<TensorSource> open_npz(std::shared_ptr<ByteSource> src, const OpenOptions& opts);
std::unique_ptr<TensorSource> open_trace(const std::string& path);
// Any HDF5 file, in this process: a taco trace (root attribute taco_format) or else every
// floating-point dataset anywhere in the file (hdf5_reader.cpp). open_tensor_file runs this
// in a child process (isolated_source.hpp); tests and fuzzers may call it directly on files
// built with the library.
std::unique_ptr<TensorSource> open_hdf5(const std::string& path, const OpenOptions& opts);

// The chunk shape TraceWriter uses: about 1 MiB of whole rows (the last dimension whole, then
// as many of the dimensions before it as fit); a single row over 1 MiB is split.
std::vector<uint64_t> trace_chunk_shape(const std::vector<int64_t>& shape, size_t elem_size);

// The file format named by the first bytes: "taco-hdf5", "safetensors", "npy", "npz", or ""
// when none matches. Reads at most a few KiB.
std::string sniff_format(const ByteSource& src);

// Element count of a shape. InputError "<what>: ..." for a negative dimension, more than
// kMaxRank dimensions, or numel * max(elem_size, 4) overflowing 2^62 bytes. Zero is returned
// as is; callers reject empty tensors with require_nonempty().
uint64_t checked_numel(const std::vector<int64_t>& shape, size_t elem_size,
                       const std::string& what);
void require_nonempty(uint64_t numel, const std::vector<int64_t>& shape, const std::string& what);

// Widens n elements of type src (little-endian, at the start of buf's bytes) to floats in
// place: the raw elements are no wider than a float, so walking backwards never overwrites
// an element before it is read. src: F32, BF16, F16, F8E4M3, F8E5M2.
void widen_in_place(DType src, float* buf, size_t n);
// Narrows n doubles to floats (round to nearest even, as the hardware does).
void narrow_f64(const uint8_t* raw_le, size_t n, float* out);
// Reverses the byte order of n elements of elem_size bytes (big-endian npy data).
void byteswap_elements(void* data, size_t n, size_t elem_size);
// Reorders values of a column-major (Fortran-order) array of `shape` into row-major order.
void fortran_to_row_major(const std::vector<int64_t>& shape, std::vector<float>& values);

// Makes text from a file safe for a one-line message: control bytes and bytes that are not
// UTF-8 become '?', and text longer than max_chars is cut with "...".
std::string printable(std::string_view text, size_t max_chars = 120);
// Length of the UTF-8 sequence starting at s[i] (1..4), or 0 when it is not valid UTF-8
// (overlong forms, surrogates and code points past U+10FFFF included).
size_t utf8_sequence_length(std::string_view s, size_t i);

}  // namespace taco
