// libFuzzer target: the .npy reader on arbitrary bytes, with both readings of 8/16-bit codes.
#include "fuzz_support.hpp"
#include "io/readers.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto bytes = taco::memory_source("fuzz.npy", {data, data + size});
  taco::fuzz::expect_only_input_errors(
      [&] { taco::fuzz::read_everything(*taco::open_npy(bytes, {})); });
  taco::fuzz::expect_only_input_errors([&] {
    taco::OpenOptions other;
    other.u16_as = taco::DType::F16;
    other.u8_as = taco::DType::F8E5M2;
    taco::fuzz::read_everything(*taco::open_npy(bytes, other));
  });
  return 0;
}
