// libFuzzer target: the safetensors reader on arbitrary bytes.
#include "fuzz_support.hpp"
#include "io/readers.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  taco::fuzz::expect_only_input_errors([&] {
    auto src =
        taco::open_safetensors(taco::memory_source("fuzz.safetensors", {data, data + size}), {});
    taco::fuzz::read_everything(*src);
  });
  return 0;
}
