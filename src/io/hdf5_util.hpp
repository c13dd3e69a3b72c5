#pragma once
// Internal to io/: thin RAII over the HDF5 1.10 C API, shared by the trace reader and writer
// and the test/fuzz file builder. Only .cpp files in io/ include this (it pulls in hdf5.h).
#include <hdf5.h>

#include <string>
#include <utility>
#include <vector>

namespace taco::h5 {

// Owns one HDF5 identifier and closes it with the matching H5?close function.
class Handle {
 public:
  using Closer = herr_t (*)(hid_t);
  Handle() = default;
  Handle(hid_t id, Closer closer) : id_(id), closer_(closer) {}
  ~Handle() { reset(); }
  Handle(Handle&& o) noexcept : id_(std::exchange(o.id_, H5I_INVALID_HID)), closer_(o.closer_) {}
  Handle& operator=(Handle&& o) noexcept {
    if (this != &o) {
      reset();
      id_ = std::exchange(o.id_, H5I_INVALID_HID);
      closer_ = o.closer_;
    }
    return *this;
  }
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;

  hid_t get() const { return id_; }
  // Closes now; false if HDF5 reported a failure (closing a file flushes it).
  bool close() {
    const bool ok = id_ < 0 || closer_(id_) >= 0;
    id_ = H5I_INVALID_HID;
    return ok;
  }
  void reset() {
    if (id_ >= 0) closer_(id_);
    id_ = H5I_INVALID_HID;
  }

 private:
  hid_t id_ = H5I_INVALID_HID;
  Closer closer_ = nullptr;
};

// While alive, HDF5 does not print its error stack to stderr (taco reports errors itself);
// the previous handler is restored afterwards.
class QuietErrors {
 public:
  QuietErrors();
  ~QuietErrors();
  QuietErrors(const QuietErrors&) = delete;
  QuietErrors& operator=(const QuietErrors&) = delete;

 private:
  H5E_auto2_t func_ = nullptr;
  void* data_ = nullptr;
};

// The most specific message on HDF5's error stack (e.g. "truncated file: eof = ..."), made
// one line; clears the stack. "" when the stack is empty.
std::string error_detail();

// Who to blame when an HDF5 call fails: the input (InputError, exit 2) or taco/the system
// (Error, exit 1).
enum class Blame { Input, Internal };

// Throws the Blame's exception with "<context>: <what> (<HDF5 detail>)".
[[noreturn]] void fail(Blame blame, const std::string& context, const std::string& what);

// Returns id, or fails when it is negative (HDF5's "invalid").
inline hid_t check(hid_t id, Blame blame, const std::string& context, const char* what) {
  if (id < 0) fail(blame, context, what);
  return id;
}

// Opening helpers: the object and its closer together.
inline Handle owned(hid_t id, Handle::Closer closer, Blame blame, const std::string& context,
                    const char* what) {
  return Handle(check(id, blame, context, what), closer);
}

// Checks how a dataset's bytes are stored, so that reading it can neither reach outside the
// file (external or virtual storage, unknown filter plugins) nor allocate far more memory than
// the file could hold (deflate's 1032:1, then check_expansion). Every chunk must be written:
// unwritten chunks would read back as fill values, silently. data_bytes = numel x stored
// element size.
void check_storage(hid_t ds, uint64_t numel, uint64_t data_bytes, uint64_t file_size,
                   const std::string& what);

// Names of an object's attributes, in name order.
std::vector<std::string> attribute_names(hid_t obj, Blame blame, const std::string& context);

// Reads an attribute holding one string (variable- or fixed-length). InputError naming
// `context` and the attribute if it is not one string.
std::string read_string_attr(hid_t obj, const std::string& name, const std::string& context);
// Reads an attribute holding one integer of any integer type.
int64_t read_int_attr(hid_t obj, const std::string& name, const std::string& context);
bool has_attr(hid_t obj, const std::string& name, const std::string& context);

// Writes a scalar variable-length UTF-8 string attribute / a scalar int64 attribute.
void write_string_attr(hid_t obj, const std::string& name, const std::string& value, Blame blame,
                       const std::string& context);
void write_int_attr(hid_t obj, const std::string& name, int64_t value, Blame blame,
                    const std::string& context);

}  // namespace taco::h5
