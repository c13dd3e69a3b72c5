#pragma once
// Reading tensors from files people already have, one tensor at a time, so memory stays
// bounded by the largest tensor rather than the file. One entry point picks the reader by
// the file's magic bytes (not its extension).
#include "core/tensor.hpp"

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace taco {

class TensorSource {
 public:
  virtual ~TensorSource() = default;
  virtual const std::string& path() const = 0;
  virtual std::string format() const = 0;       // "taco-hdf5", "hdf5", "safetensors", "npy", "npz"
  virtual size_t size() const = 0;              // number of tensors
  virtual TensorInfo info(size_t i) const = 0;  // cheap: no values read
  virtual Tensor read(size_t i) = 0;            // values widened to float; InputError on bad data
};
// NaN and Inf inside tensors are data, not errors: read() returns them as they are (the
// commands that care count them from the values). A TensorSource is not thread-safe, and the
// HDF5 library underneath the trace reader is not either: read from one thread at a time.

// How to read element types that NumPy cannot name: dumps store bf16/fp16 and fp8 tensors as
// their bit patterns (<u2 or ml_dtypes' <V2; |u1 or <V1). These say what the bits are.
// How much memory taco lets one tensor's values (or one simulated collective) take, to bound
// what a small hostile file can make it allocate: kMaxExpansion times the bytes the input
// stores for it, and at least kExpansionFloor. The environment variable TACO_MEMORY_LIMIT
// (bytes, or with K/M/G) replaces the rule with a plain limit; memory_limit_from_env() returns
// it, 0 when unset (InputError for a value that is not a size).
inline constexpr uint64_t kMaxExpansion = 64;
inline constexpr uint64_t kExpansionFloor = uint64_t(256) << 20;
uint64_t memory_limit_from_env();
// The rule for one tensor of numel float32 values that `stored_bytes` of input expand to (a
// compressed tensor, a decoded wire): kMaxExpansion times the stored bytes or kExpansionFloor,
// whichever is more, or TACO_MEMORY_LIMIT. (Deflate alone allows 1032:1: a 3 MB archive of
// zeros could make taco allocate 3 GB.) InputError naming `what` otherwise.
void check_expansion(uint64_t numel, uint64_t stored_bytes, const std::string& what);

class NameMap;
struct OpenOptions {
  DType u16_as = DType::BF16;   // BF16 or F16
  DType u8_as = DType::F8E4M3;  // F8E4M3 or F8E5M2
  // HDF5 files other than taco traces: only the datasets whose path ("/group/name") matches
  // this shell pattern (fnmatch; '*' matches '/' too). Empty: every float dataset. Other
  // formats and taco traces ignore it.
  std::string datasets;
  // Metadata the file does not record is read from tensor names (io/name_rules.hpp), and
  // name_map (--name-map), when set, overrides what it captures.
  bool infer_from_names = true;
  std::shared_ptr<const NameMap> name_map;
};

// Opens any supported file: taco HDF5 trace, any other HDF5 file, safetensors, .npy, .npz.
// HDF5 is parsed in a child process (io/isolated_source.hpp), so a corrupt file that crashes
// libhdf5 is an InputError here. Tensor names must be UTF-8 text without control characters.
// Throws InputError that names the file and the problem (missing, empty, wrong magic,
// truncated, malformed header...).
std::unique_ptr<TensorSource> open_tensor_file(const std::string& path);
std::unique_ptr<TensorSource> open_tensor_file(const std::string& path, const OpenOptions& opts);

// Writes a taco trace (HDF5). Data goes to "<path>.tmp-<pid>" and is renamed over <path> only
// by commit(); a writer destroyed without commit() removes the temporary file, so a failure
// never leaves a half-written trace behind.
class TraceWriter {
 public:
  struct Options {
    DType store = DType::BF16;  // dtype to store values in (bf16 as uint16 bits; f16; f32)
    int compression_level = 4;  // gzip (deflate) level for chunked datasets, 0 = none
    std::map<std::string, std::string> provenance;  // file-level attributes (command, seed, ...)
  };
  TraceWriter(const std::string& path, Options opts);
  ~TraceWriter();
  TraceWriter(const TraceWriter&) = delete;
  TraceWriter& operator=(const TraceWriter&) = delete;

  // Stores t.values converted to opts.store with round-to-nearest-even (exact when the values
  // came from that dtype). Throws InputError on an empty tensor or a duplicate name.
  void add(const Tensor& t);
  // Same, storing this tensor as `store` (BF16, F16 or F32) instead of opts.store.
  void add(const Tensor& t, DType store);
  size_t size() const;  // tensors added so far
  void commit();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace taco
