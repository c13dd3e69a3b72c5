#pragma once
// Internal to io/: a TensorSource whose reader runs in a child process. libhdf5 1.10 is not
// hardened against corrupt files: a flipped bit can make it crash (SIGSEGV in H5HG_read, an
// abort) or print to stderr. The HDF5 readers therefore run in a forked child that serves
// listings and tensors over a socket; a crash there becomes an InputError naming the file
// here, and its stderr never reaches the user.
//
// Protocol (child -> parent after the fork): the listing (format, every TensorInfo) or an
// error; then, per request (a tensor index, parent -> child), the tensor's values as float32
// or an error. The child ends when the parent closes its end or exits.
#include "io/tensor_source.hpp"

#include <functional>
#include <memory>
#include <string>

namespace taco {

// Forks a child that calls `open` (in the child) and serves the source it returns. InputError
// from the child arrives here as InputError, anything else as Error; a child killed by a
// signal is an InputError "<path>: the HDF5 library crashed ... (corrupt file?)".
std::unique_ptr<TensorSource> open_isolated(const std::string& path,
                                            std::function<std::unique_ptr<TensorSource>()> open);

}  // namespace taco
