#include "io/hdf5_util.hpp"

#include "core/error.hpp"
#include "io/readers.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>

namespace taco::h5 {
namespace {

// HDF5 registers an exit handler that closes every open file. After a file failed to close
// (a full disk, the file-size limit), that handler loops, prints "infinite loop closing
// library" and crashes. taco closes its files itself, so the handler is never wanted.
[[maybe_unused]] const bool kNoExitHandler = (H5dont_atexit(), true);

}  // namespace

QuietErrors::QuietErrors() {
  H5Eget_auto2(H5E_DEFAULT, &func_, &data_);
  H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
}

QuietErrors::~QuietErrors() {
  H5Eset_auto2(H5E_DEFAULT, func_, data_);
}

namespace {

// The errno of a failed system call on HDF5's error stack ("..., errno = 28, error message =
// ..."), 0 when there is none.
herr_t find_errno(unsigned, const H5E_error2_t* err, void* out) {
  const char* at = err->desc ? std::strstr(err->desc, "errno = ") : nullptr;
  if (at && *static_cast<int*>(out) == 0) *static_cast<int*>(out) = std::atoi(at + 8);
  return 0;
}

herr_t innermost(unsigned n, const H5E_error2_t* err, void* out) {
  // Walking upward, the first entry is the deepest (most specific) one.
  if (n == 0 && err->desc) *static_cast<std::string*>(out) = err->desc;
  return 0;
}

herr_t collect_name(hid_t, const char* name, const H5A_info_t*, void* out) {
  static_cast<std::vector<std::string>*>(out)->emplace_back(name);
  return 0;
}

// An opened attribute with its type and dataspace, checked to hold exactly one value.
struct OneValueAttr {
  Handle attr, type, space;
  OneValueAttr(hid_t obj, const std::string& name, const std::string& context) {
    attr = owned(H5Aopen(obj, name.c_str(), H5P_DEFAULT), H5Aclose, Blame::Input, context,
                 fmt::format("cannot open attribute '{}'", printable(name)).c_str());
    type = owned(H5Aget_type(attr.get()), H5Tclose, Blame::Input, context,
                 "cannot read an attribute type");
    space = owned(H5Aget_space(attr.get()), H5Sclose, Blame::Input, context,
                  "cannot read an attribute dataspace");
    const hssize_t n = H5Sget_simple_extent_npoints(space.get());
    TACO_REQUIRE_INPUT(n == 1, "{}: attribute '{}' must hold one value, it holds {}", context,
                       printable(name), n);
  }
};

}  // namespace

std::string error_detail() {
  std::string msg;
  H5Ewalk2(H5E_DEFAULT, H5E_WALK_UPWARD, innermost, &msg);
  H5Eclear2(H5E_DEFAULT);
  return printable(msg, 200);
}

void fail(Blame blame, const std::string& context, const std::string& what) {
  // A write the system refused is about where the output goes, not a bug: report it as such.
  int err = 0;
  H5Ewalk2(H5E_DEFAULT, H5E_WALK_UPWARD, find_errno, &err);
  if (err == ENOSPC || err == EFBIG || err == EDQUOT || err == EROFS || err == EACCES ||
      err == EIO) {
    H5Eclear2(H5E_DEFAULT);
    throw InputError(fmt::format("{}: cannot write ({})", context, std::strerror(err)));
  }
  std::string detail = error_detail();
  // The reader process's memory is bounded by the file's size (io/isolated_source.cpp): a
  // request over that is the file claiming more than it holds.
  if (detail.find("allocation failed") != std::string::npos)
    detail += "; more memory than the file can hold: refused to bound memory (corrupt file?)";
  std::string msg = detail.empty() ? fmt::format("{}: {}", context, what)
                                   : fmt::format("{}: {} (HDF5: {})", context, what, detail);
  if (blame == Blame::Input) throw InputError(msg);
  throw Error(msg);
}

void check_storage(hid_t ds, uint64_t numel, uint64_t data_bytes, uint64_t file_size,
                   const std::string& what) {
  Handle dcpl = owned(H5Dget_create_plist(ds), H5Pclose, Blame::Input, what,
                      "cannot read the creation properties");
  const H5D_layout_t layout = H5Pget_layout(dcpl.get());
  TACO_REQUIRE_INPUT(layout == H5D_CONTIGUOUS || layout == H5D_CHUNKED || layout == H5D_COMPACT,
                     "{}: unsupported HDF5 storage layout (virtual or unknown)", what);
  const int external = H5Pget_external_count(dcpl.get());
  TACO_REQUIRE_INPUT(external == 0, "{}: data in external files is not supported", what);
  const int nfilters = H5Pget_nfilters(dcpl.get());
  if (nfilters < 0) fail(Blame::Input, what, "cannot read the filter pipeline");
  bool compressed = false;
  for (int f = 0; f < nfilters; ++f) {
    unsigned flags = 0, config = 0;
    size_t nvalues = 8;
    unsigned values[8] = {};
    char name[64] = {};
    const H5Z_filter_t id = H5Pget_filter2(dcpl.get(), unsigned(f), &flags, &nvalues, values,
                                           sizeof name, name, &config);
    TACO_REQUIRE_INPUT(
        id == H5Z_FILTER_DEFLATE || id == H5Z_FILTER_SHUFFLE || id == H5Z_FILTER_FLETCHER32,
        "{}: HDF5 filter {} is not supported (taco reads gzip, shuffle, fletcher32)", what,
        int(id));
    compressed = compressed || id == H5Z_FILTER_DEFLATE;
  }
  const hsize_t stored = H5Dget_storage_size(ds);
  TACO_REQUIRE_INPUT(stored > 0, "{}: the dataset holds no data (never written)", what);
  TACO_REQUIRE_INPUT(stored <= file_size,
                     "{}: the dataset claims {} stored bytes in a {}-byte file", what, stored,
                     file_size);
  if (compressed) {
    TACO_REQUIRE_INPUT(data_bytes / kMaxDeflateRatio <= stored,
                       "{}: {} bytes cannot come from {} compressed bytes: corrupt dataset", what,
                       data_bytes, stored);
    check_expansion(numel, stored, what);
  } else {
    TACO_REQUIRE_INPUT(stored >= data_bytes, "{}: only {} of {} data bytes are stored", what,
                       stored, data_bytes);
  }
  if (layout == H5D_CHUNKED) {
    // Unwritten chunks would read back as fill values, silently.
    Handle space =
        owned(H5Dget_space(ds), H5Sclose, Blame::Input, what, "cannot read the dataspace");
    hsize_t chunks = 0;
    if (H5Dget_num_chunks(ds, space.get(), &chunks) < 0)
      fail(Blame::Input, what, "cannot count chunks");
    const int rank = H5Sget_simple_extent_ndims(space.get());
    std::vector<hsize_t> dims(size_t(std::max(rank, 0))), chunk(dims.size());
    H5Sget_simple_extent_dims(space.get(), dims.data(), nullptr);
    TACO_REQUIRE_INPUT(H5Pget_chunk(dcpl.get(), rank, chunk.data()) == rank,
                       "{}: cannot read the chunk shape", what);
    uint64_t expected = 1;
    for (size_t k = 0; k < dims.size(); ++k) {
      TACO_REQUIRE_INPUT(chunk[k] > 0, "{}: zero chunk dimension", what);
      expected *= (dims[k] + chunk[k] - 1) / chunk[k];  // <= numel, no overflow
    }
    TACO_REQUIRE_INPUT(chunks == expected, "{}: only {} of {} chunks are stored", what, chunks,
                       expected);
  }
}

std::vector<std::string> attribute_names(hid_t obj, Blame blame, const std::string& context) {
  std::vector<std::string> names;
  hsize_t idx = 0;
  if (H5Aiterate2(obj, H5_INDEX_NAME, H5_ITER_INC, &idx, collect_name, &names) < 0)
    fail(blame, context, "cannot list attributes");
  return names;
}

bool has_attr(hid_t obj, const std::string& name, const std::string& context) {
  const htri_t r = H5Aexists(obj, name.c_str());
  if (r < 0)
    fail(Blame::Input, context, fmt::format("cannot look up attribute '{}'", printable(name)));
  return r > 0;
}

std::string read_string_attr(hid_t obj, const std::string& name, const std::string& context) {
  OneValueAttr a(obj, name, context);
  TACO_REQUIRE_INPUT(H5Tget_class(a.type.get()) == H5T_STRING, "{}: attribute '{}' is not a string",
                     context, printable(name));
  const H5T_cset_t cset = H5Tget_cset(a.type.get());
  const htri_t variable = H5Tis_variable_str(a.type.get());
  if (variable < 0) fail(Blame::Input, context, "cannot inspect a string attribute");
  Handle mem = owned(H5Tcopy(H5T_C_S1), H5Tclose, Blame::Internal, context, "H5Tcopy");
  if (variable > 0) {
    if (H5Tset_size(mem.get(), H5T_VARIABLE) < 0 || H5Tset_cset(mem.get(), cset) < 0)
      fail(Blame::Internal, context, "cannot make a string type");
    char* p = nullptr;
    if (H5Aread(a.attr.get(), mem.get(), &p) < 0)
      fail(Blame::Input, context, fmt::format("cannot read attribute '{}'", printable(name)));
    std::string s = p ? p : "";
    H5free_memory(p);
    return s;
  }
  // Fixed length: read the bytes, stop at the first NUL (null-terminated or null-padded).
  const size_t size = H5Tget_size(a.type.get());
  constexpr size_t kMaxFixedString = size_t(1) << 24;
  TACO_REQUIRE_INPUT(size > 0 && size <= kMaxFixedString,
                     "{}: attribute '{}' has a string size of {} bytes", context, printable(name),
                     size);
  if (H5Tset_size(mem.get(), size) < 0 || H5Tset_cset(mem.get(), cset) < 0 ||
      H5Tset_strpad(mem.get(), H5T_STR_NULLPAD) < 0)
    fail(Blame::Internal, context, "cannot make a string type");
  std::string s(size, '\0');
  if (H5Aread(a.attr.get(), mem.get(), s.data()) < 0)
    fail(Blame::Input, context, fmt::format("cannot read attribute '{}'", printable(name)));
  s.resize(s.find('\0') == std::string::npos ? s.size() : s.find('\0'));
  if (H5Tget_strpad(a.type.get()) == H5T_STR_SPACEPAD)
    while (!s.empty() && s.back() == ' ') s.pop_back();
  return s;
}

int64_t read_int_attr(hid_t obj, const std::string& name, const std::string& context) {
  OneValueAttr a(obj, name, context);
  TACO_REQUIRE_INPUT(H5Tget_class(a.type.get()) == H5T_INTEGER,
                     "{}: attribute '{}' is not an integer", context, printable(name));
  TACO_REQUIRE_INPUT(H5Tget_size(a.type.get()) <= 8,
                     "{}: attribute '{}' is an integer wider than 64 bits", context,
                     printable(name));
  int64_t v = 0;
  if (H5Aread(a.attr.get(), H5T_NATIVE_INT64, &v) < 0)
    fail(Blame::Input, context, fmt::format("cannot read attribute '{}'", printable(name)));
  // An unsigned value above INT64_MAX is clipped by HDF5's conversion; refuse it.
  if (H5Tget_sign(a.type.get()) == H5T_SGN_NONE && H5Tget_size(a.type.get()) == 8) {
    uint64_t u = 0;
    if (H5Aread(a.attr.get(), H5T_NATIVE_UINT64, &u) < 0)
      fail(Blame::Input, context, fmt::format("cannot read attribute '{}'", printable(name)));
    TACO_REQUIRE_INPUT(u <= uint64_t(INT64_MAX), "{}: attribute '{}' = {} is out of range", context,
                       printable(name), u);
  }
  return v;
}

void write_string_attr(hid_t obj, const std::string& name, const std::string& value, Blame blame,
                       const std::string& context) {
  Handle type = owned(H5Tcopy(H5T_C_S1), H5Tclose, Blame::Internal, context, "H5Tcopy");
  if (H5Tset_size(type.get(), H5T_VARIABLE) < 0 || H5Tset_cset(type.get(), H5T_CSET_UTF8) < 0)
    fail(Blame::Internal, context, "cannot make a string type");
  Handle space = owned(H5Screate(H5S_SCALAR), H5Sclose, Blame::Internal, context, "H5Screate");
  Handle attr = owned(
      H5Acreate2(obj, name.c_str(), type.get(), space.get(), H5P_DEFAULT, H5P_DEFAULT), H5Aclose,
      blame, context, fmt::format("cannot create attribute '{}'", printable(name)).c_str());
  const char* p = value.c_str();
  if (H5Awrite(attr.get(), type.get(), &p) < 0)
    fail(blame, context, fmt::format("cannot write attribute '{}'", printable(name)));
  if (!attr.close())
    fail(blame, context, fmt::format("cannot write attribute '{}'", printable(name)));
}

void write_int_attr(hid_t obj, const std::string& name, int64_t value, Blame blame,
                    const std::string& context) {
  Handle space = owned(H5Screate(H5S_SCALAR), H5Sclose, Blame::Internal, context, "H5Screate");
  Handle attr = owned(
      H5Acreate2(obj, name.c_str(), H5T_STD_I64LE, space.get(), H5P_DEFAULT, H5P_DEFAULT), H5Aclose,
      blame, context, fmt::format("cannot create attribute '{}'", printable(name)).c_str());
  if (H5Awrite(attr.get(), H5T_NATIVE_INT64, &value) < 0)
    fail(blame, context, fmt::format("cannot write attribute '{}'", printable(name)));
  if (!attr.close())
    fail(blame, context, fmt::format("cannot write attribute '{}'", printable(name)));
}

}  // namespace taco::h5
