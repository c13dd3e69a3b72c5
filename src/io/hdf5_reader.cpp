// HDF5 files as people write them with h5py: every floating-point dataset anywhere in the file
// (any group depth, contiguous or chunked, gzip/shuffle/fletcher32), optionally only those whose
// path matches OpenOptions::datasets. A file whose root carries taco_format is a taco trace and
// goes to the trace reader, which checks the trace layout.
#include "core/error.hpp"
#include "io/hdf5_util.hpp"
#include "io/input_files.hpp"
#include "io/meta_fields.hpp"
#include "io/readers.hpp"

#include <fmt/format.h>
#include <fnmatch.h>

#include <algorithm>
#include <cctype>
#include <optional>

namespace taco {
namespace {

using h5::Blame;
using h5::Handle;
using h5::owned;

struct Found {
  std::vector<std::string> paths;  // "/group/dataset" of every dataset reached by a hard link
};

herr_t collect_dataset(hid_t group, const char* name, const H5L_info_t* link, void* out) {
  if (link->type != H5L_TYPE_HARD) return 0;  // soft and external links may leave the file
  H5O_info_t oi{};
  if (H5Oget_info_by_name(group, name, &oi, H5P_DEFAULT) < 0) return -1;
  if (oi.type == H5O_TYPE_DATASET)
    static_cast<Found*>(out)->paths.push_back(std::string("/") + name);
  return 0;
}

struct Dataset {
  std::string path;  // in the file
  TensorInfo info;
  bool raw16 = false;  // 16-bit patterns read as they are, then widened
};

// The element type of a float dataset taco can read, or nullopt (integers, strings, other float
// layouts). 16-bit floats are IEEE half or bfloat16 by their field layout; uint16 data counts
// when a dtype attribute says which ("bf16" or "f16", taco's convention).
std::optional<DType> float_type(hid_t ds, hid_t type, bool& raw16, const std::string& what) {
  raw16 = false;
  const H5T_class_t cls = H5Tget_class(type);
  const size_t size = H5Tget_size(type);
  if (cls == H5T_FLOAT) {
    if (size == 4) return DType::F32;
    if (size == 8) return DType::F64;
    if (size != 2) return std::nullopt;
    size_t spos = 0, epos = 0, esize = 0, mpos = 0, msize = 0;
    if (H5Tget_fields(type, &spos, &epos, &esize, &mpos, &msize) < 0) return std::nullopt;
    raw16 = true;
    if (spos == 15 && esize == 5 && msize == 10 && H5Tget_ebias(type) == 15) return DType::F16;
    if (spos == 15 && esize == 8 && msize == 7 && H5Tget_ebias(type) == 127) return DType::BF16;
    return std::nullopt;
  }
  if (cls == H5T_INTEGER && size == 2 && H5Tget_sign(type) == H5T_SGN_NONE &&
      h5::has_attr(ds, "dtype", what)) {
    Handle attr = owned(H5Aopen(ds, "dtype", H5P_DEFAULT), H5Aclose, Blame::Input, what,
                        "cannot open attribute");
    Handle at = owned(H5Aget_type(attr.get()), H5Tclose, Blame::Input, what,
                      "cannot read an attribute type");
    if (H5Tget_class(at.get()) != H5T_STRING) return std::nullopt;
    const std::string d = h5::read_string_attr(ds, "dtype", what);
    raw16 = true;
    if (d == "bf16") return DType::BF16;
    if (d == "f16") return DType::F16;
  }
  return std::nullopt;
}

// Metadata attributes of the right kind are taken; others are not metadata in a file taco did
// not write, and are ignored.
void read_meta(hid_t ds, TensorMeta& m, const std::string& what) {
  for (const char* key : {"site", "direction", "collective", "model"}) {
    if (!h5::has_attr(ds, key, what)) continue;
    try {
      set_meta_field(m, key, h5::read_string_attr(ds, key, what), what);
    } catch (const InputError&) {
    }
  }
  for (const char* key : {"layer", "tp_rank", "tp_size", "step"}) {
    if (!h5::has_attr(ds, key, what)) continue;
    try {
      set_meta_field(m, key, std::to_string(h5::read_int_attr(ds, key, what)), what);
    } catch (const InputError&) {
    }
  }
  try {
    check_meta(m, what);
  } catch (const InputError&) {
    m.tp_rank = m.tp_size = -1;
  }
}

class Hdf5Source final : public TensorSource {
 public:
  Hdf5Source(std::string path, Handle file, const OpenOptions& opts)
      : path_(std::move(path)), file_(std::move(file)) {
    h5::QuietErrors quiet;
    hsize_t file_size = 0;
    if (H5Fget_filesize(file_.get(), &file_size) < 0)
      h5::fail(Blame::Input, path_, "cannot read the file size");
    Found found;
    if (H5Lvisit(file_.get(), H5_INDEX_NAME, H5_ITER_INC, collect_dataset, &found) < 0)
      h5::fail(Blame::Input, path_, "cannot list the file's objects");
    std::sort(found.paths.begin(), found.paths.end(), natural_less);
    size_t other = 0, unmatched = 0;
    for (const std::string& p : found.paths) {
      if (!opts.datasets.empty() && ::fnmatch(opts.datasets.c_str(), p.c_str(), 0) != 0) {
        ++unmatched;
        continue;
      }
      const std::string what = fmt::format("{}: {}", path_, printable(p));
      Handle ds = owned(H5Dopen2(file_.get(), p.c_str(), H5P_DEFAULT), H5Dclose, Blame::Input, what,
                        "cannot open the dataset");
      Handle type =
          owned(H5Dget_type(ds.get()), H5Tclose, Blame::Input, what, "cannot read the datatype");
      Dataset d;
      const std::optional<DType> dt = float_type(ds.get(), type.get(), d.raw16, what);
      if (!dt) {
        ++other;
        continue;
      }
      d.path = p;
      d.info.name = p.substr(1);
      d.info.dtype = *dt;
      Handle space =
          owned(H5Dget_space(ds.get()), H5Sclose, Blame::Input, what, "cannot read the dataspace");
      const H5S_class_t space_class = H5Sget_simple_extent_type(space.get());
      TACO_REQUIRE_INPUT(space_class == H5S_SCALAR || space_class == H5S_SIMPLE,
                         "{}: the dataset has no shape", what);
      const int rank = H5Sget_simple_extent_ndims(space.get());
      TACO_REQUIRE_INPUT(rank >= 0, "{}: cannot read the shape", what);
      std::vector<hsize_t> dims(static_cast<size_t>(rank));
      if (rank > 0 && H5Sget_simple_extent_dims(space.get(), dims.data(), nullptr) < 0)
        h5::fail(Blame::Input, what, "cannot read the shape");
      for (hsize_t dim : dims) {
        TACO_REQUIRE_INPUT(dim <= uint64_t(INT64_MAX), "{}: dimension {} is too large", what, dim);
        d.info.shape.push_back(int64_t(dim));
      }
      const size_t elem = H5Tget_size(type.get());
      const uint64_t numel = checked_numel(d.info.shape, elem, what);
      require_nonempty(numel, d.info.shape, what);
      h5::check_storage(ds.get(), numel, numel * elem, file_size, what);
      read_meta(ds.get(), d.info.meta, what);
      datasets_.push_back(std::move(d));
    }
    if (datasets_.empty()) {
      if (!opts.datasets.empty())
        throw_input_error("{}: no float dataset matches --datasets '{}' ({} datasets in the file)",
                          path_, printable(opts.datasets), found.paths.size());
      throw_input_error(
          "{}: HDF5 file holds no float datasets ({} other datasets: integers, strings, ...)",
          path_, other);
    }
  }

  const std::string& path() const override { return path_; }
  std::string format() const override { return "hdf5"; }
  size_t size() const override { return datasets_.size(); }
  TensorInfo info(size_t i) const override {
    TACO_ASSERT(i < datasets_.size(), "tensor index {} of {}", i, datasets_.size());
    return datasets_[i].info;
  }

  Tensor read(size_t i) override {
    TACO_ASSERT(i < datasets_.size(), "tensor index {} of {}", i, datasets_.size());
    h5::QuietErrors quiet;
    const Dataset& d = datasets_[i];
    const std::string what = fmt::format("{}: {}", path_, printable(d.path));
    Handle ds = owned(H5Dopen2(file_.get(), d.path.c_str(), H5P_DEFAULT), H5Dclose, Blame::Input,
                      what, "cannot open the dataset");
    Tensor t;
    t.name = d.info.name;
    t.dtype = d.info.dtype;
    t.shape = d.info.shape;
    t.meta = d.info.meta;
    const auto n = size_t(t.numel());
    Handle space =
        owned(H5Dget_space(ds.get()), H5Sclose, Blame::Input, what, "cannot read the dataspace");
    const hssize_t points = H5Sget_simple_extent_npoints(space.get());
    TACO_REQUIRE_INPUT(points >= 0 && uint64_t(points) == n,
                       "{}: the dataset changed since the file was opened", what);
    t.values.resize(n);
    if (t.dtype == DType::F64) {  // rounded like every other reader's f64 (narrow_f64)
      std::vector<double> raw(n);
      if (H5Dread(ds.get(), H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, raw.data()) < 0)
        h5::fail(Blame::Input, what, "cannot read the data");
      narrow_f64(reinterpret_cast<const uint8_t*>(raw.data()), n, t.values.data());
      return t;
    }
    Handle mem;
    if (d.raw16) {
      // The 16-bit patterns as they are (little-endian), into the first half of the buffer.
      Handle file_type =
          owned(H5Dget_type(ds.get()), H5Tclose, Blame::Input, what, "cannot read the datatype");
      mem = owned(H5Tcopy(file_type.get()), H5Tclose, Blame::Internal, what, "H5Tcopy");
      if (H5Tset_order(mem.get(), H5T_ORDER_LE) < 0)
        h5::fail(Blame::Internal, what, "H5Tset_order");
    } else {
      mem = owned(H5Tcopy(H5T_NATIVE_FLOAT), H5Tclose, Blame::Internal, what, "H5Tcopy");
    }
    if (H5Dread(ds.get(), mem.get(), H5S_ALL, H5S_ALL, H5P_DEFAULT, t.values.data()) < 0)
      h5::fail(Blame::Input, what, "cannot read the data");
    if (d.raw16) widen_in_place(t.dtype, t.values.data(), n);
    return t;
  }

 private:
  std::string path_;
  Handle file_;
  std::vector<Dataset> datasets_;
};

}  // namespace

std::unique_ptr<TensorSource> open_hdf5(const std::string& path, const OpenOptions& opts) {
  h5::QuietErrors quiet;
  Handle file = owned(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT), H5Fclose, Blame::Input,
                      path, "cannot open the HDF5 file");
  if (h5::has_attr(file.get(), "taco_format", path)) {  // a taco trace: every tensor
    file.reset();
    return open_trace(path);
  }
  return std::make_unique<Hdf5Source>(path, std::move(file), opts);
}

}  // namespace taco
