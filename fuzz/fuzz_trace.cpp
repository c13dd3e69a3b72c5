// libFuzzer target for the taco trace reader, structure-aware. libhdf5's own parser is not
// hardened against corrupt files, so the fuzz bytes never reach it as a file. Instead they
// choose the structure of a *valid* HDF5 file (root attributes and their types, the /tensors
// group or something else in its place, datasets with their element types, shapes, storage
// layouts and data, metadata attributes of right and wrong types, links), which is written
// with the HDF5 library and then opened with the taco reader. The reader must read it or
// refuse it with InputError.
#include "fuzz_support.hpp"
#include "io/hdf5_builder.hpp"

#include <fuzzer/FuzzedDataProvider.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <string>

namespace {

using taco::Hdf5Builder;
using Elem = Hdf5Builder::Elem;
using Layout = Hdf5Builder::Layout;

constexpr Elem kElems[] = {Elem::U16LE, Elem::U16BE, Elem::I16LE,       Elem::U8,
                           Elem::I32LE, Elem::I64LE, Elem::U64LE,       Elem::F32LE,
                           Elem::F32BE, Elem::F64LE, Elem::FixedString8};
constexpr Layout kLayouts[] = {
    Layout::Contiguous,         Layout::Compact,          Layout::Chunked, Layout::ChunkedGzip,
    Layout::ChunkedShuffleGzip, Layout::ChunkedFletcher32};
const char* const kDtypes[] = {"bf16", "f16", "f32", "f64", "BF16", "", "f8e4m3"};

std::string short_text(FuzzedDataProvider& in) {
  return in.ConsumeRandomLengthString(24);
}

// Most choices are the well-formed one, so that files often get deep into the reader; each
// field deviates with probability `odd`.
bool deviate(FuzzedDataProvider& in, float odd) {
  return in.ConsumeProbability<float>() < odd;
}

// An attribute that is meant to be a string: usually one, sometimes absent or of the wrong kind.
void string_attr(Hdf5Builder& b, FuzzedDataProvider& in, const std::string& obj,
                 const std::string& name, const std::string& usual, float odd = 0.08f) {
  if (!deviate(in, odd)) return b.attr_string(obj, name, usual, in.ConsumeBool());
  switch (in.ConsumeIntegralInRange(0, 4)) {
    case 0:
      return;  // absent
    case 1:
      return b.attr_string(obj, name, short_text(in), in.ConsumeBool());
    case 2:
      return b.attr_int(obj, name, in.ConsumeIntegral<int64_t>());
    case 3:
      return b.attr_null(obj, name);
    default:
      return b.attr_float(obj, name, 0.5);
  }
}

// An attribute that is meant to be an integer.
void int_attr(Hdf5Builder& b, FuzzedDataProvider& in, const std::string& obj,
              const std::string& name, int64_t usual, float odd = 0.08f) {
  if (!deviate(in, odd))
    return b.attr_int(obj, name, usual, in.ConsumeBool() ? Elem::I64LE : Elem::I32LE);
  switch (in.ConsumeIntegralInRange(0, 6)) {
    case 0:
      return;
    case 1:
      return b.attr_int(obj, name, in.ConsumeIntegralInRange<int64_t>(-3, 40),
                        in.PickValueInArray(kElems));
    case 2:
      return b.attr_int(obj, name, in.ConsumeIntegral<int64_t>(),
                        in.ConsumeBool() ? Elem::U64LE : Elem::I64LE);
    case 3:
      return b.attr_string(obj, name, std::to_string(usual));
    case 4:
      return b.attr_float(obj, name, double(usual));
    case 5:
      return b.attr_ints(obj, name, {usual, usual});
    default:
      return b.attr_null(obj, name);
  }
}

void add_dataset(Hdf5Builder& b, FuzzedDataProvider& in, const std::string& path) {
  const Elem elem = !deviate(in, 0.2f) ? (in.ConsumeBool() ? Elem::U16LE : Elem::F32LE)
                                       : in.PickValueInArray(kElems);
  const int rank = in.ConsumeIntegralInRange(0, 4);
  std::vector<uint64_t> dims, chunk;
  uint64_t numel = 1;
  for (int k = 0; k < rank; ++k) {
    // Mostly small; sometimes huge (only ever left unwritten: the input cannot hold the data).
    const uint64_t d = deviate(in, 0.03f)
                           ? in.ConsumeIntegralInRange<uint64_t>(1, uint64_t(1) << 40)
                           : in.ConsumeIntegralInRange<uint64_t>(deviate(in, 0.05f) ? 0 : 1, 9);
    dims.push_back(d);
    numel = numel > 4096 || d > 4096 ? 4097 : numel * d;
    chunk.push_back(
        in.ConsumeIntegralInRange<uint64_t>(1, std::max<uint64_t>(1, std::min<uint64_t>(d, 16))));
  }
  Layout layout = in.PickValueInArray(kLayouts);
  if (rank == 0 && layout != Layout::Compact)
    layout = Layout::Contiguous;  // HDF5 cannot chunk a scalar
  const bool null_space = deviate(in, 0.03f);
  std::vector<uint8_t> data;
  if (!null_space && numel <= 4096 && !deviate(in, 0.08f)) {
    data = in.ConsumeBytes<uint8_t>(size_t(numel) * Hdf5Builder::elem_size(elem));
    data.resize(size_t(numel) * Hdf5Builder::elem_size(elem), 0);
  }
  if (numel == 0) data.clear();
  b.dataset(path, elem, dims, layout, data, in.ConsumeBool() ? std::vector<uint64_t>{} : chunk,
            null_space);

  const std::string usual_dtype =
      elem == Elem::F32LE || elem == Elem::F32BE ? "f32" : (in.ConsumeBool() ? "bf16" : "f16");
  if (!deviate(in, 0.1f)) {
    b.attr_string(path, "dtype", usual_dtype, in.ConsumeBool());
  } else if (in.ConsumeBool()) {
    b.attr_string(path, "dtype", in.PickValueInArray(kDtypes), in.ConsumeBool());
  } else if (in.ConsumeBool()) {
    b.attr_int(path, "dtype", 1);
  }  // else: no dtype attribute
  // Optional metadata: each one present with a well-formed value most of the time.
  if (in.ConsumeBool()) string_attr(b, in, path, "name", short_text(in), 0.03f);
  for (const char* key : {"site", "direction", "collective", "model"})
    if (in.ConsumeBool()) string_attr(b, in, path, key, short_text(in), 0.03f);
  const int64_t tp_size = deviate(in, 0.05f) ? 0 : in.ConsumeIntegralInRange<int64_t>(1, 8);
  for (const auto& [key, value] :
       {std::pair<const char*, int64_t>{"layer", in.ConsumeIntegralInRange<int64_t>(-1, 80)},
        {"tp_size", tp_size},
        {"tp_rank", in.ConsumeIntegralInRange<int64_t>(-1, 8)},
        {"step", in.ConsumeIntegralInRange<int64_t>(-1, 1 << 20)}})
    if (in.ConsumeBool()) int_attr(b, in, path, key, value, 0.03f);
  if (in.ConsumeBool())
    string_attr(b, in, path, "extra." + short_text(in).substr(0, 8), short_text(in), 0.05f);
}

void build(const std::string& file, FuzzedDataProvider& in) {
  Hdf5Builder b(file);
  string_attr(b, in, "/", "taco_format", deviate(in, 0.03f) ? short_text(in) : "taco-trace", 0.03f);
  int_attr(b, in, "/", "taco_format_version",
           deviate(in, 0.03f) ? in.ConsumeIntegral<int64_t>() : 1, 0.03f);
  if (in.ConsumeBool()) b.attr_string("/", "created_by", short_text(in));
  if (!deviate(in, 0.05f)) {
    b.group("/tensors");
  } else {
    switch (in.ConsumeIntegralInRange(0, 3)) {
      case 0:
        break;  // no /tensors
      case 1:
        b.dataset("/tensors", Elem::F32LE, {1}, Layout::Contiguous, {0, 0, 0, 0});
        break;
      case 2:
        b.group("/elsewhere");
        b.soft_link("/elsewhere", "/tensors");
        break;
      default:
        b.external_link("missing-file.h5", "/tensors", "/tensors");
        break;
    }
  }
  const int count = in.ConsumeIntegralInRange(0, 4);
  for (int i = 0; i < count; ++i) {
    std::string name = "t" + std::to_string(1000000 + i).substr(1);
    if (deviate(in, 0.1f)) name = "x" + std::to_string(in.ConsumeIntegralInRange(0, 99));
    const std::string path = "/tensors/" + name;
    if (!deviate(in, 0.05f))
      add_dataset(b, in, path);
    else if (in.ConsumeBool())
      b.group(path);
    else
      b.soft_link("/tensors/t000000", path);
  }
  b.close();
}

const std::string& scratch_file() {
  static const std::string path = (std::filesystem::temp_directory_path() /
                                   ("taco-fuzz-trace-" + std::to_string(::getpid()) + ".h5"))
                                      .string();
  return path;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider in(data, size);
  const std::string& file = scratch_file();
  try {
    build(file, in);
  } catch (const taco::Error&) {
    // HDF5 refused this structure (e.g. a chunk larger than a fixed dimension): not a file.
    std::remove(file.c_str());
    return 0;
  }
  taco::fuzz::expect_only_input_errors(
      [&] { taco::fuzz::read_everything(*taco::open_tensor_file(file)); });
  std::remove(file.c_str());
  return 0;
}
