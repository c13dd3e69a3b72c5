#pragma once
// Shared by the libFuzzer targets: read every tensor of a source and check what the readers
// promise. Bad input may only ever end in taco::InputError; any other exception, or a tensor
// whose values disagree with its shape, aborts (libFuzzer reports it as a crash).
#include "core/error.hpp"
#include "io/tensor_source.hpp"

#include <cstdio>
#include <cstdlib>
#include <exception>

namespace taco::fuzz {

[[noreturn]] inline void die(const char* what, const char* detail) {
  std::fprintf(stderr, "fuzz: %s: %s\n", what, detail);
  std::abort();
}

inline void read_everything(TensorSource& src) {
  for (size_t i = 0; i < src.size(); ++i) {
    const TensorInfo info = src.info(i);
    const Tensor t = src.read(i);
    if (t.numel() <= 0 || t.values.size() != size_t(t.numel()))
      die("invariant", "values do not match the shape");
    if (t.shape != info.shape || t.name != info.name || t.dtype != info.dtype)
      die("invariant", "read() != info()");
  }
}

// Runs f; InputError is an accepted outcome, anything else is a bug. With TACO_FUZZ_VERBOSE
// set, prints each outcome (to see what a corpus exercises: `fuzz_x -runs=0 corpus/`).
template <typename F>
void expect_only_input_errors(F&& f) {
  const bool verbose = std::getenv("TACO_FUZZ_VERBOSE") != nullptr;
  try {
    f();
    if (verbose) std::fprintf(stderr, "fuzz: read\n");
  } catch (const InputError& e) {
    if (verbose) std::fprintf(stderr, "fuzz: InputError: %s\n", e.what());
  } catch (const std::exception& e) {
    die("unexpected exception", e.what());
  } catch (...) {
    die("unexpected exception", "(not a std::exception)");
  }
}

}  // namespace taco::fuzz
