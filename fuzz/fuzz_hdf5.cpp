// libFuzzer target: arbitrary bytes as an HDF5 file, opened the way every taco command opens an
// input (open_tensor_file). libhdf5 1.10 is not hardened against corrupt files: some of these
// inputs crash it, loop, or make it print. The property under test is that none of that
// reaches taco: libhdf5 runs in a child process (io/isolated_source.hpp), and each input is
// read or refused with one InputError. (fuzz_trace covers the reader's checks on well-formed
// files built with the library; this target covers corrupt bytes.)
//
// The child's coverage is not visible to libFuzzer, so this is mostly random mutation of the
// seeds (small traces and h5py files); the first 8 bytes are kept an HDF5 signature so that the
// inputs reach libhdf5.
#include "fuzz_support.hpp"

#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>

namespace {

const std::string& scratch_path() {
  static const std::string path = "/tmp/taco-fuzz-hdf5-" + std::to_string(::getpid()) + ".h5";
  return path;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  ::setenv("TACO_READER_CPU_SECONDS", "2", 1);  // a looping libhdf5 costs 2 s, not a minute
  std::atexit([] { std::remove(scratch_path().c_str()); });
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const uint8_t kMagic[8] = {0x89, 'H', 'D', 'F', '\r', '\n', 0x1a, '\n'};
  {
    std::ofstream out(scratch_path(), std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(kMagic), 8);
    if (size > 8) out.write(reinterpret_cast<const char*>(data) + 8, std::streamsize(size - 8));
  }
  taco::fuzz::expect_only_input_errors([] {
    auto src = taco::open_tensor_file(scratch_path());
    taco::fuzz::read_everything(*src);
  });
  return 0;
}
