// Reads a taco trace (HDF5, layout in traces/README.md). Everything the layout promises is
// checked at open (format and version, one plain dataset per tensor, dtype attribute against
// the stored type, metadata types, stored bytes against the shape), so read() only reads.
#include "core/error.hpp"
#include "io/hdf5_util.hpp"
#include "io/meta_fields.hpp"
#include "io/readers.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <limits>

namespace taco {
namespace {

using h5::Blame;
using h5::Handle;
using h5::owned;

constexpr int64_t kTraceVersion = 1;

struct Dataset {
  std::string link;  // name in /tensors
  TensorInfo info;
};

herr_t collect_link(hid_t, const char* name, const H5L_info_t* info, void* out) {
  static_cast<std::vector<std::pair<std::string, H5L_type_t>>*>(out)->emplace_back(name,
                                                                                   info->type);
  return 0;
}

class TraceSource final : public TensorSource {
 public:
  explicit TraceSource(std::string path) : path_(std::move(path)) {
    h5::QuietErrors quiet;
    file_ = owned(H5Fopen(path_.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT), H5Fclose, Blame::Input,
                  path_, "cannot open the HDF5 file");
    hsize_t file_size = 0;
    if (H5Fget_filesize(file_.get(), &file_size) < 0)
      h5::fail(Blame::Input, path_, "cannot read the file size");
    file_size_ = file_size;
    check_root();

    TACO_REQUIRE_INPUT(H5Lexists(file_.get(), "tensors", H5P_DEFAULT) > 0,
                       "{}: taco trace has no /tensors group", path_);
    H5L_info_t link{};
    if (H5Lget_info(file_.get(), "tensors", &link, H5P_DEFAULT) < 0)
      h5::fail(Blame::Input, path_, "cannot read /tensors");
    TACO_REQUIRE_INPUT(link.type == H5L_TYPE_HARD, "{}: /tensors is a link, not a group", path_);
    Handle group = owned(H5Oopen(file_.get(), "tensors", H5P_DEFAULT), H5Oclose, Blame::Input,
                         path_, "cannot open /tensors");
    TACO_REQUIRE_INPUT(H5Iget_type(group.get()) == H5I_GROUP, "{}: /tensors is not a group", path_);

    std::vector<std::pair<std::string, H5L_type_t>> links;
    hsize_t idx = 0;
    if (H5Literate(group.get(), H5_INDEX_NAME, H5_ITER_INC, &idx, collect_link, &links) < 0)
      h5::fail(Blame::Input, path_, "cannot list /tensors");
    // t000000, t000001, ...: shorter names first keeps the numeric order past t999999.
    std::sort(links.begin(), links.end(), [](const auto& a, const auto& b) {
      return a.first.size() != b.first.size() ? a.first.size() < b.first.size() : a.first < b.first;
    });
    for (const auto& [name, type] : links) {
      const std::string what = fmt::format("{}: /tensors/{}", path_, printable(name));
      TACO_REQUIRE_INPUT(type == H5L_TYPE_HARD, "{}: soft and external links are not supported",
                         what);
      datasets_.push_back(read_info(group.get(), name, what));
    }
    TACO_REQUIRE_INPUT(!datasets_.empty(), "{}: taco trace holds no tensors", path_);
  }

  const std::string& path() const override { return path_; }
  std::string format() const override { return "taco-hdf5"; }
  size_t size() const override { return datasets_.size(); }
  TensorInfo info(size_t i) const override {
    TACO_ASSERT(i < datasets_.size(), "tensor index {} of {}", i, datasets_.size());
    return datasets_[i].info;
  }

  Tensor read(size_t i) override {
    TACO_ASSERT(i < datasets_.size(), "tensor index {} of {}", i, datasets_.size());
    h5::QuietErrors quiet;
    const Dataset& d = datasets_[i];
    const std::string what = fmt::format("{}: /tensors/{}", path_, printable(d.link));
    Handle ds = owned(H5Dopen2(file_.get(), ("tensors/" + d.link).c_str(), H5P_DEFAULT), H5Dclose,
                      Blame::Input, what, "cannot open the dataset");
    Tensor t;
    t.name = d.info.name;
    t.dtype = d.info.dtype;
    t.shape = d.info.shape;
    t.meta = d.info.meta;
    const auto n = size_t(t.numel());
    // The file is held open, but check the shape again before writing into a buffer sized by it.
    Handle space =
        owned(H5Dget_space(ds.get()), H5Sclose, Blame::Input, what, "cannot read the dataspace");
    const hssize_t points = H5Sget_simple_extent_npoints(space.get());
    TACO_REQUIRE_INPUT(points >= 0 && uint64_t(points) == n,
                       "{}: the dataset changed since the file was opened", what);
    t.values.resize(n);
    // 16-bit patterns land in the first half of the float buffer and are widened in place.
    const hid_t mem = t.dtype == DType::F32 ? H5T_NATIVE_FLOAT : H5T_NATIVE_UINT16;
    if (H5Dread(ds.get(), mem, H5S_ALL, H5S_ALL, H5P_DEFAULT, t.values.data()) < 0)
      h5::fail(Blame::Input, what, "cannot read the data");
    widen_in_place(t.dtype, t.values.data(), n);
    return t;
  }

 private:
  void check_root() {
    const hid_t root = file_.get();
    TACO_REQUIRE_INPUT(h5::has_attr(root, "taco_format", path_),
                       "{}: HDF5 file is not a taco trace (no taco_format attribute on /)", path_);
    const std::string format = h5::read_string_attr(root, "taco_format", path_);
    TACO_REQUIRE_INPUT(format == "taco-trace",
                       "{}: HDF5 file is not a taco trace (taco_format is '{}')", path_,
                       printable(format));
    TACO_REQUIRE_INPUT(h5::has_attr(root, "taco_format_version", path_),
                       "{}: taco trace has no taco_format_version", path_);
    const int64_t version = h5::read_int_attr(root, "taco_format_version", path_);
    TACO_REQUIRE_INPUT(version == kTraceVersion,
                       "{}: unsupported taco_format_version {} (this taco reads version {}; a "
                       "newer taco may read it)",
                       path_, version, kTraceVersion);
  }

  Dataset read_info(hid_t group, const std::string& link, const std::string& what) const {
    Handle obj = owned(H5Oopen(group, link.c_str(), H5P_DEFAULT), H5Oclose, Blame::Input, what,
                       "cannot open");
    TACO_REQUIRE_INPUT(H5Iget_type(obj.get()) == H5I_DATASET, "{}: not a dataset", what);
    const hid_t ds = obj.get();
    Dataset d;
    d.link = link;
    TensorInfo& info = d.info;

    TACO_REQUIRE_INPUT(h5::has_attr(ds, "dtype", what), "{}: no dtype attribute", what);
    const std::string dtype = h5::read_string_attr(ds, "dtype", what);
    Handle type = owned(H5Dget_type(ds), H5Tclose, Blame::Input, what, "cannot read the datatype");
    auto is = [&](hid_t t) { return H5Tequal(type.get(), t) > 0; };
    if (dtype == "bf16" || dtype == "f16") {
      info.dtype = dtype == "bf16" ? DType::BF16 : DType::F16;
      TACO_REQUIRE_INPUT(is(H5T_STD_U16LE) || is(H5T_STD_U16BE),
                         "{}: dtype attribute says {} but the data is not stored as uint16 "
                         "(dtype/storage mismatch)",
                         what, dtype);
    } else if (dtype == "f32") {
      info.dtype = DType::F32;
      TACO_REQUIRE_INPUT(
          is(H5T_IEEE_F32LE) || is(H5T_IEEE_F32BE),
          "{}: dtype attribute says f32 but the data is not stored as IEEE float32 (dtype/storage "
          "mismatch)",
          what);
    } else {
      throw_input_error("{}: unknown dtype '{}' (a trace stores bf16, f16 or f32)", what,
                        printable(dtype));
    }

    Handle space =
        owned(H5Dget_space(ds), H5Sclose, Blame::Input, what, "cannot read the dataspace");
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
      info.shape.push_back(int64_t(dim));
    }
    const uint64_t numel = checked_numel(info.shape, dtype_size(info.dtype), what);
    require_nonempty(numel, info.shape, what);
    h5::check_storage(ds, numel, numel * dtype_size(info.dtype), file_size_, what);

    info.name = h5::has_attr(ds, "name", what) ? h5::read_string_attr(ds, "name", what) : link;
    TensorMeta& m = info.meta;
    for (const char* key : {"site", "direction", "collective", "model"})
      if (h5::has_attr(ds, key, what))
        set_meta_field(m, key, h5::read_string_attr(ds, key, what), what);
    for (const char* key : {"layer", "tp_rank", "tp_size", "step"})
      if (h5::has_attr(ds, key, what))
        set_meta_field(m, key, std::to_string(h5::read_int_attr(ds, key, what)), what);
    check_meta(m, what);
    for (const std::string& attr : h5::attribute_names(ds, Blame::Input, what))
      if (attr.rfind("extra.", 0) == 0)
        m.extra[attr.substr(6)] = h5::read_string_attr(ds, attr, what);
    return d;
  }

  std::string path_;
  Handle file_;
  uint64_t file_size_ = 0;
  std::vector<Dataset> datasets_;
};

}  // namespace

std::unique_ptr<TensorSource> open_trace(const std::string& path) {
  return std::make_unique<TraceSource>(path);
}

}  // namespace taco
