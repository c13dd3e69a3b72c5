#include "io/hdf5_builder.hpp"

#include "core/error.hpp"
#include "io/hdf5_util.hpp"

namespace taco {
namespace {

using h5::Blame;
using h5::Handle;
using h5::owned;

hid_t file_type(Hdf5Builder::Elem e) {
  using E = Hdf5Builder::Elem;
  switch (e) {
    case E::U16LE:
      return H5T_STD_U16LE;
    case E::U16BE:
      return H5T_STD_U16BE;
    case E::I16LE:
      return H5T_STD_I16LE;
    case E::U8:
      return H5T_STD_U8LE;
    case E::I32LE:
      return H5T_STD_I32LE;
    case E::I64LE:
      return H5T_STD_I64LE;
    case E::U64LE:
      return H5T_STD_U64LE;
    case E::F32LE:
      return H5T_IEEE_F32LE;
    case E::F32BE:
      return H5T_IEEE_F32BE;
    case E::F64LE:
      return H5T_IEEE_F64LE;
    case E::FixedString8:
      return H5T_C_S1;  // resized by the caller
  }
  throw_error("Hdf5Builder: unknown element type {}", int(e));
}

// The type to create with: a copy, so string types can be resized.
Handle make_type(Hdf5Builder::Elem e, const std::string& ctx) {
  Handle t = owned(H5Tcopy(file_type(e)), H5Tclose, Blame::Internal, ctx, "H5Tcopy");
  if (e == Hdf5Builder::Elem::FixedString8 && H5Tset_size(t.get(), 8) < 0)
    h5::fail(Blame::Internal, ctx, "H5Tset_size");
  return t;
}

}  // namespace

struct Hdf5Builder::Impl {
  std::string path;
  Handle file;
};

Hdf5Builder::Hdf5Builder(const std::string& path) : impl_(std::make_unique<Impl>()) {
  h5::QuietErrors quiet;
  impl_->path = path;
  impl_->file = owned(H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT), H5Fclose,
                      Blame::Internal, path, "cannot create");
}

Hdf5Builder::~Hdf5Builder() {
  h5::QuietErrors quiet;
  impl_->file.reset();
}

size_t Hdf5Builder::elem_size(Elem e) {
  switch (e) {
    case Elem::U8:
      return 1;
    case Elem::U16LE:
    case Elem::U16BE:
    case Elem::I16LE:
      return 2;
    case Elem::I32LE:
    case Elem::F32LE:
    case Elem::F32BE:
      return 4;
    case Elem::I64LE:
    case Elem::U64LE:
    case Elem::F64LE:
    case Elem::FixedString8:
      return 8;
  }
  throw_error("Hdf5Builder: unknown element type {}", int(e));
}

void Hdf5Builder::group(const std::string& path) {
  h5::QuietErrors quiet;
  Handle g =
      owned(H5Gcreate2(impl_->file.get(), path.c_str(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT),
            H5Gclose, Blame::Internal, path, "cannot create group");
}

void Hdf5Builder::dataset(const std::string& path, Elem elem, const std::vector<uint64_t>& dims,
                          Layout layout, const std::vector<uint8_t>& data,
                          const std::vector<uint64_t>& chunk, bool null_space) {
  h5::QuietErrors quiet;
  std::vector<hsize_t> d(dims.begin(), dims.end());
  Handle space = owned(null_space  ? H5Screate(H5S_NULL)
                       : d.empty() ? H5Screate(H5S_SCALAR)
                                   : H5Screate_simple(int(d.size()), d.data(), nullptr),
                       H5Sclose, Blame::Internal, path, "cannot make the dataspace");
  Handle dcpl = owned(H5Pcreate(H5P_DATASET_CREATE), H5Pclose, Blame::Internal, path, "H5Pcreate");
  herr_t st = 0;
  switch (layout) {
    case Layout::Contiguous:
      st = H5Pset_layout(dcpl.get(), H5D_CONTIGUOUS);
      break;
    case Layout::Compact:
      st = H5Pset_layout(dcpl.get(), H5D_COMPACT);
      break;
    case Layout::Chunked:
    case Layout::ChunkedGzip:
    case Layout::ChunkedShuffleGzip:
    case Layout::ChunkedFletcher32: {
      std::vector<hsize_t> c = chunk.empty() ? d : std::vector<hsize_t>(chunk.begin(), chunk.end());
      st = H5Pset_chunk(dcpl.get(), int(c.size()), c.data());
      if (st >= 0 && layout == Layout::ChunkedShuffleGzip) st = H5Pset_shuffle(dcpl.get());
      if (st >= 0 && (layout == Layout::ChunkedGzip || layout == Layout::ChunkedShuffleGzip))
        st = H5Pset_deflate(dcpl.get(), 1);
      if (st >= 0 && layout == Layout::ChunkedFletcher32) st = H5Pset_fletcher32(dcpl.get());
      break;
    }
    default:
      throw_error("Hdf5Builder: unknown layout {}", int(layout));
  }
  if (st < 0) h5::fail(Blame::Internal, path, "cannot set the layout");
  Handle type = make_type(elem, path);
  Handle ds = owned(H5Dcreate2(impl_->file.get(), path.c_str(), type.get(), space.get(),
                               H5P_DEFAULT, dcpl.get(), H5P_DEFAULT),
                    H5Dclose, Blame::Internal, path, "cannot create the dataset");
  if (!data.empty()) {
    const hssize_t n = H5Sget_simple_extent_npoints(space.get());
    if (n < 0 || data.size() != uint64_t(n) * elem_size(elem))
      throw_error("{}: Hdf5Builder needs {} data bytes, got {}", path,
                  uint64_t(n) * elem_size(elem), data.size());
    // The bytes are the file's representation: write them with the file type as memory type.
    if (H5Dwrite(ds.get(), type.get(), H5S_ALL, H5S_ALL, H5P_DEFAULT, data.data()) < 0)
      h5::fail(Blame::Internal, path, "cannot write the data");
  }
}

void Hdf5Builder::attr_string(const std::string& object, const std::string& name,
                              const std::string& value, bool variable_length) {
  h5::QuietErrors quiet;
  Handle obj = owned(H5Oopen(impl_->file.get(), object.c_str(), H5P_DEFAULT), H5Oclose,
                     Blame::Internal, object, "cannot open");
  if (variable_length)
    return h5::write_string_attr(obj.get(), name, value, Blame::Internal, object);
  Handle type = owned(H5Tcopy(H5T_C_S1), H5Tclose, Blame::Internal, object, "H5Tcopy");
  if (H5Tset_size(type.get(), value.empty() ? 1 : value.size()) < 0)
    h5::fail(Blame::Internal, object, "H5Tset_size");
  Handle space = owned(H5Screate(H5S_SCALAR), H5Sclose, Blame::Internal, object, "H5Screate");
  Handle attr =
      owned(H5Acreate2(obj.get(), name.c_str(), type.get(), space.get(), H5P_DEFAULT, H5P_DEFAULT),
            H5Aclose, Blame::Internal, object, "cannot create attribute");
  std::string padded = value.empty() ? std::string(1, '\0') : value;
  if (H5Awrite(attr.get(), type.get(), padded.data()) < 0)
    h5::fail(Blame::Internal, object, "cannot write attribute");
}

namespace {

void write_attr(hid_t file, const std::string& object, const std::string& name, hid_t type,
                hid_t mem_type, const void* value, const std::vector<hsize_t>& dims,
                bool null_space) {
  Handle obj = owned(H5Oopen(file, object.c_str(), H5P_DEFAULT), H5Oclose, Blame::Internal, object,
                     "cannot open");
  Handle space = owned(null_space     ? H5Screate(H5S_NULL)
                       : dims.empty() ? H5Screate(H5S_SCALAR)
                                      : H5Screate_simple(int(dims.size()), dims.data(), nullptr),
                       H5Sclose, Blame::Internal, object, "H5Screate");
  Handle attr =
      owned(H5Acreate2(obj.get(), name.c_str(), type, space.get(), H5P_DEFAULT, H5P_DEFAULT),
            H5Aclose, Blame::Internal, object, "cannot create attribute");
  if (value && H5Awrite(attr.get(), mem_type, value) < 0)
    h5::fail(Blame::Internal, object, "cannot write attribute");
}

}  // namespace

void Hdf5Builder::attr_int(const std::string& object, const std::string& name, int64_t value,
                           Elem elem) {
  h5::QuietErrors quiet;
  Handle type = make_type(elem, object);
  // For an unsigned 64-bit attribute the value's bits are stored as they are (so -1 gives
  // 2^64 - 1, which readers must refuse), not clipped by a conversion.
  const uint64_t bits = static_cast<uint64_t>(value);
  const bool u64 = elem == Elem::U64LE;
  write_attr(impl_->file.get(), object, name, type.get(),
             u64 ? H5T_NATIVE_UINT64 : H5T_NATIVE_INT64,
             u64 ? static_cast<const void*>(&bits) : static_cast<const void*>(&value), {}, false);
}

void Hdf5Builder::attr_float(const std::string& object, const std::string& name, double value) {
  h5::QuietErrors quiet;
  write_attr(impl_->file.get(), object, name, H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, &value, {}, false);
}

void Hdf5Builder::attr_ints(const std::string& object, const std::string& name,
                            const std::vector<int64_t>& values) {
  h5::QuietErrors quiet;
  write_attr(impl_->file.get(), object, name, H5T_STD_I64LE, H5T_NATIVE_INT64, values.data(),
             {values.size()}, false);
}

void Hdf5Builder::attr_null(const std::string& object, const std::string& name) {
  h5::QuietErrors quiet;
  write_attr(impl_->file.get(), object, name, H5T_STD_I64LE, H5T_NATIVE_INT64, nullptr, {}, true);
}

void Hdf5Builder::soft_link(const std::string& target, const std::string& link) {
  h5::QuietErrors quiet;
  if (H5Lcreate_soft(target.c_str(), impl_->file.get(), link.c_str(), H5P_DEFAULT, H5P_DEFAULT) < 0)
    h5::fail(Blame::Internal, link, "cannot create soft link");
}

void Hdf5Builder::external_link(const std::string& file, const std::string& object,
                                const std::string& link) {
  h5::QuietErrors quiet;
  if (H5Lcreate_external(file.c_str(), object.c_str(), impl_->file.get(), link.c_str(), H5P_DEFAULT,
                         H5P_DEFAULT) < 0)
    h5::fail(Blame::Internal, link, "cannot create external link");
}

void Hdf5Builder::close() {
  h5::QuietErrors quiet;
  if (!impl_->file.close()) h5::fail(Blame::Internal, impl_->path, "cannot close");
}

}  // namespace taco
