// Writes a taco trace (HDF5, layout in traces/README.md) to "<path>.tmp-<pid>" and renames it
// over <path> in commit(), so a failed or interrupted import never leaves a half-written trace.
#include "core/atomic_file.hpp"
#include "core/error.hpp"
#include "core/interrupt.hpp"
#include "core/version.hpp"
#include "io/hdf5_util.hpp"
#include "io/meta_fields.hpp"
#include "io/readers.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <memory>
#include <set>

namespace taco {
namespace {

using h5::Blame;
using h5::Handle;
using h5::owned;

constexpr int64_t kTraceVersion = 1;
constexpr uint64_t kChunkBytes = uint64_t(1) << 20;

void require_no_nul(const std::string& s, const std::string& what, const char* field) {
  TACO_REQUIRE_INPUT(s.find('\0') == std::string::npos, "{}: {} contains a NUL byte", what, field);
}

}  // namespace

std::vector<uint64_t> trace_chunk_shape(const std::vector<int64_t>& shape, size_t elem_size) {
  TACO_ASSERT(!shape.empty() && elem_size > 0, "chunk shape of a {}-d tensor", shape.size());
  std::vector<uint64_t> chunk(shape.size(), 1);
  const auto cols = uint64_t(shape.back());
  if (cols * elem_size > kChunkBytes) {
    chunk.back() = kChunkBytes / elem_size;
    return chunk;
  }
  chunk.back() = cols;
  uint64_t rows_left = kChunkBytes / (cols * elem_size);
  for (size_t k = shape.size() - 1; k-- > 0;) {
    const auto dim = uint64_t(shape[k]);
    if (rows_left >= dim) {
      chunk[k] = dim;
      rows_left /= dim;
    } else {
      chunk[k] = rows_left > 0 ? rows_left : 1;
      break;
    }
  }
  return chunk;
}

struct TraceWriter::Impl {
  std::string path, tmp;
  Options opts;
  std::unique_ptr<RemoveOnInterrupt> cleanup;
  Handle file, tensors;
  std::set<std::string> names;
  bool committed = false;

  ~Impl() {
    if (committed) return;
    h5::QuietErrors quiet;
    tensors.reset();
    file.reset();
    std::remove(tmp.c_str());
  }
};

TraceWriter::TraceWriter(const std::string& path, Options opts) : impl_(std::make_unique<Impl>()) {
  Impl& w = *impl_;
  w.path = path;
  w.opts = std::move(opts);
  TACO_REQUIRE_INPUT(
      w.opts.store == DType::BF16 || w.opts.store == DType::F16 || w.opts.store == DType::F32,
      "{}: a trace stores bf16, f16 or f32, not {}", path, dtype_name(w.opts.store));
  TACO_REQUIRE_INPUT(w.opts.compression_level >= 0 && w.opts.compression_level <= 9,
                     "{}: gzip level {} is not in 0..9", path, w.opts.compression_level);
  for (const auto& [key, value] : w.opts.provenance) {
    TACO_REQUIRE_INPUT(
        !key.empty() && key != "taco_format" && key != "taco_format_version" && key != "created_by",
        "{}: provenance key '{}' is reserved", path, key);
    require_no_nul(key, path, "a provenance key");
    require_no_nul(value, path, "a provenance value");
  }
  check_output_file(path, "--out");
  w.tmp = fmt::format("{}.tmp-{}", path, ::getpid());
  w.cleanup = std::make_unique<RemoveOnInterrupt>(w.tmp);
  h5::QuietErrors quiet;
  w.file = owned(H5Fcreate(w.tmp.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT), H5Fclose,
                 Blame::Input, path, "cannot create the trace file");
  const hid_t root = w.file.get();
  h5::write_string_attr(root, "taco_format", "taco-trace", Blame::Internal, path);
  h5::write_int_attr(root, "taco_format_version", kTraceVersion, Blame::Internal, path);
  h5::write_string_attr(root, "created_by", fmt::format("taco {} ({})", kVersion, kGitCommit),
                        Blame::Internal, path);
  for (const auto& [key, value] : w.opts.provenance)
    h5::write_string_attr(root, key, value, Blame::Internal, path);
  w.tensors = owned(H5Gcreate2(root, "tensors", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), H5Gclose,
                    Blame::Internal, path, "cannot create /tensors");
}

TraceWriter::~TraceWriter() = default;

size_t TraceWriter::size() const {
  return impl_->names.size();
}

void TraceWriter::add(const Tensor& t) {
  add(t, impl_->opts.store);
}

void TraceWriter::add(const Tensor& t, DType store) {
  Impl& w = *impl_;
  TACO_ASSERT(!w.committed, "TraceWriter::add after commit ({})", w.path);
  const std::string what = fmt::format("{}: tensor '{}'", w.path, printable(t.name));
  TACO_REQUIRE_INPUT(store == DType::BF16 || store == DType::F16 || store == DType::F32,
                     "{}: a trace stores bf16, f16 or f32, not {}", what, dtype_name(store));
  const uint64_t numel = checked_numel(t.shape, dtype_size(store), what);
  require_nonempty(numel, t.shape, what);
  TACO_REQUIRE_INPUT(t.values.size() == numel, "{}: {} values for shape {}", what, t.values.size(),
                     shape_string(t.shape));
  TACO_REQUIRE_INPUT(t.shape.size() <= H5S_MAX_RANK, "{}: {} dimensions (HDF5 allows {})", what,
                     t.shape.size(), H5S_MAX_RANK);
  require_no_nul(t.name, what, "the name");
  for (const std::string* s : {&t.meta.site, &t.meta.direction, &t.meta.collective, &t.meta.model})
    require_no_nul(*s, what, "a metadata value");
  for (const auto& [key, value] : t.meta.extra) {
    require_no_nul(key, what, "an extra key");
    require_no_nul(value, what, "an extra value");
  }
  check_meta(t.meta, what);
  TACO_REQUIRE_INPUT(!w.names.count(t.name),
                     "{}: duplicate tensor name (names in a trace are unique)", what);

  h5::QuietErrors quiet;
  const std::string dataset = fmt::format("t{:06d}", w.names.size());
  const std::string where = fmt::format("{}: /tensors/{}", w.path, dataset);
  std::vector<hsize_t> dims(t.shape.begin(), t.shape.end());
  Handle space = owned(dims.empty() ? H5Screate(H5S_SCALAR)
                                    : H5Screate_simple(int(dims.size()), dims.data(), nullptr),
                       H5Sclose, Blame::Internal, where, "cannot make the dataspace");
  Handle dcpl = owned(H5Pcreate(H5P_DATASET_CREATE), H5Pclose, Blame::Internal, where, "H5Pcreate");
  // Every byte is written right away, so skip writing fill values first.
  if (H5Pset_fill_time(dcpl.get(), H5D_FILL_TIME_NEVER) < 0)
    h5::fail(Blame::Internal, where, "H5Pset_fill_time");
  if (!dims.empty()) {  // a 0-d (scalar) tensor is stored contiguously: HDF5 cannot chunk it
    const std::vector<uint64_t> chunk64 = trace_chunk_shape(t.shape, dtype_size(store));
    const std::vector<hsize_t> chunk(chunk64.begin(), chunk64.end());
    if (H5Pset_chunk(dcpl.get(), int(chunk.size()), chunk.data()) < 0)
      h5::fail(Blame::Internal, where, "H5Pset_chunk");
    if (w.opts.compression_level > 0 &&
        (H5Pset_shuffle(dcpl.get()) < 0 ||
         H5Pset_deflate(dcpl.get(), unsigned(w.opts.compression_level)) < 0))
      h5::fail(Blame::Internal, where, "cannot set up compression");
  }
  const hid_t file_type = store == DType::F32 ? H5T_IEEE_F32LE : H5T_STD_U16LE;
  Handle ds = owned(H5Dcreate2(w.tensors.get(), dataset.c_str(), file_type, space.get(),
                               H5P_DEFAULT, dcpl.get(), H5P_DEFAULT),
                    H5Dclose, Blame::Internal, where, "cannot create the dataset");
  herr_t status = 0;
  if (store == DType::F32) {
    status = H5Dwrite(ds.get(), H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, t.values.data());
  } else {
    std::vector<uint16_t> bits(t.values.size());
    if (store == DType::BF16)
      for (size_t i = 0; i < bits.size(); ++i) bits[i] = float_to_bf16(t.values[i]);
    else
      for (size_t i = 0; i < bits.size(); ++i) bits[i] = float_to_fp16(t.values[i]);
    status = H5Dwrite(ds.get(), H5T_NATIVE_UINT16, H5S_ALL, H5S_ALL, H5P_DEFAULT, bits.data());
  }
  if (status < 0) h5::fail(Blame::Internal, where, "cannot write the data");

  const hid_t d = ds.get();
  const TensorMeta& m = t.meta;
  h5::write_string_attr(d, "name", t.name, Blame::Internal, where);
  h5::write_string_attr(d, "dtype", std::string(dtype_name(store)), Blame::Internal, where);
  h5::write_int_attr(d, "layer", m.layer, Blame::Internal, where);
  h5::write_string_attr(d, "site", m.site, Blame::Internal, where);
  h5::write_string_attr(d, "direction", m.direction, Blame::Internal, where);
  h5::write_string_attr(d, "collective", m.collective, Blame::Internal, where);
  h5::write_int_attr(d, "tp_rank", m.tp_rank, Blame::Internal, where);
  h5::write_int_attr(d, "tp_size", m.tp_size, Blame::Internal, where);
  h5::write_int_attr(d, "step", m.step, Blame::Internal, where);
  h5::write_string_attr(d, "model", m.model, Blame::Internal, where);
  for (const auto& [key, value] : m.extra)
    h5::write_string_attr(d, "extra." + key, value, Blame::Internal, where);
  if (!ds.close()) h5::fail(Blame::Internal, where, "cannot finish the dataset");
  w.names.insert(t.name);
}

void TraceWriter::commit() {
  Impl& w = *impl_;
  TACO_ASSERT(!w.committed, "TraceWriter::commit twice ({})", w.path);
  h5::QuietErrors quiet;
  if (!w.tensors.close()) h5::fail(Blame::Internal, w.path, "cannot finish /tensors");
  if (!w.file.close()) h5::fail(Blame::Internal, w.path, "cannot finish writing the trace");
  check_output_file(w.path, "--out");  // still not a directory or a device
  if (std::rename(w.tmp.c_str(), w.path.c_str()) != 0) throw_write_error(w.path, errno);
  w.committed = true;
}

}  // namespace taco
