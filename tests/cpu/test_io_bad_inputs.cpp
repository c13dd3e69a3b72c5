// Every kind of bad input ends in one InputError line that names the file and the problem:
// never a crash, a hang or a huge allocation. Each file is built here, in a temp dir.
#include "io/hdf5_builder.hpp"
#include "io/readers.hpp"
#include "test_io_support.hpp"

using namespace taco;
using namespace taco::iotest;

namespace {

const Bytes kFour = raw_bytes(std::vector<float>{1, 2, 3, 4});

std::string st_entry(const std::string& dtype, const std::string& shape,
                     const std::string& offsets) {
  return "{\"x\":{\"dtype\":\"" + dtype + "\",\"shape\":" + shape + ",\"data_offsets\":" + offsets +
         "}}";
}

}  // namespace

TEST_CASE("bad input: paths", "[io][bad]") {
  TempDir dir;
  REQUIRE_BAD_INPUT(dir.file("missing.safetensors"), "no such file");
  REQUIRE_BAD_INPUT(dir.path(), "is a directory");
  write_bytes(dir.file("empty.npy"), {});
  REQUIRE_BAD_INPUT(dir.file("empty.npy"), "file is empty");
  write_bytes(dir.file("text.txt"), bytes_of("hello, world\n"));
  REQUIRE_BAD_INPUT(dir.file("text.txt"), "unrecognized file format");
  write_bytes(dir.file("short.bin"), Bytes{0x93});
  REQUIRE_BAD_INPUT(dir.file("short.bin"), "unrecognized file format");
}

TEST_CASE("bad input: safetensors", "[io][bad][safetensors]") {
  TempDir dir;
  const std::string p = dir.file("bad.safetensors");
  auto check = [&](const Bytes& file, const char* fragment) {
    write_bytes(p, file);
    REQUIRE_BAD_INPUT(p, fragment);
  };
  const std::string good = st_entry("F32", "[2,2]", "[0,16]");
  write_bytes(p, safetensors_bytes(good, kFour));
  REQUIRE(read_all(p).size() == 1);  // the base case is fine

  SECTION("truncated header") {
    Bytes b = safetensors_bytes(good, kFour);
    b.resize(8 + good.size() / 2);
    check(b, "truncated safetensors header");
    check(Bytes{0x10, 0, 0, 0, 0, 0, 0, 0, '{'}, "truncated safetensors header");
  }
  SECTION("truncated data") {
    Bytes b = safetensors_bytes(good, kFour);
    b.resize(b.size() - 1);
    check(b, "truncated data");
  }
  SECTION("oversized header length") {
    Bytes b = safetensors_bytes(good, kFour);
    const uint64_t huge = uint64_t(1) << 40;
    for (int i = 0; i < 8; ++i) b[size_t(i)] = uint8_t(huge >> (8 * i));
    check(b, "exceeds the limit");
  }
  SECTION("malformed header JSON") {
    check(safetensors_bytes("{\"x\": {\"dtype\": \"F32\",", kFour),
          "malformed safetensors header JSON");
    check(safetensors_bytes("{\"x\"\x01\n: 3}", kFour), "malformed safetensors header JSON");
    check(safetensors_bytes("{\"x\": " + std::string(100000, '[') + std::string(100000, ']') + "}",
                            kFour),
          "nested deeper than 16 levels");
  }
  SECTION("header JSON not an object") {
    // Starts with '{' for the magic, but as a whole it is not one JSON object.
    check(safetensors_bytes("{}[1, 2]", kFour), "malformed safetensors header JSON");
    Bytes arr = safetensors_bytes("[1, 2, 3, 4, 5, 6]", kFour);
    check(arr, "");  // not recognized as safetensors at all (no '{')
    REQUIRE(sniff_format(*memory_source("x", safetensors_bytes("[1]", {}))).empty());
    auto msg = input_error_of(
        [&] { open_safetensors(memory_source("arr.st", safetensors_bytes("[1]", {})), {}); });
    REQUIRE(msg.find("not a JSON object") != std::string::npos);
    check(safetensors_bytes("{\"x\": 5}", kFour), "entry is not a JSON object");
  }
  SECTION("unknown and unsupported dtypes") {
    check(safetensors_bytes(st_entry("F33", "[2,2]", "[0,16]"), kFour), "unknown dtype 'F33'");
    check(safetensors_bytes(st_entry("I32", "[2,2]", "[0,16]"), kFour),
          "dtype I32 is not supported");
  }
  SECTION("shape/dtype/byte-count mismatch") {
    check(safetensors_bytes(st_entry("F32", "[2,3]", "[0,16]"), kFour), "byte-count mismatch");
    check(safetensors_bytes(st_entry("BF16", "[2,2]", "[0,16]"), kFour), "byte-count mismatch");
    check(safetensors_bytes(st_entry("F32", "[2,2]", "[16,0]"), kFour), "end before they begin");
    check(safetensors_bytes(st_entry("F32", "[2,2]", "[4,20]"), kFour), "truncated data");
    check(safetensors_bytes(st_entry("F32", "[2,2]", "[0]"), kFour),
          "data_offsets must be [begin, end]");
    check(safetensors_bytes(st_entry("F32", "[2,2]", "[-1,15]"), kFour), "negative value");
  }
  SECTION("negative and overflowing dimensions") {
    check(safetensors_bytes(st_entry("F32", "[-2,-2]", "[0,16]"), kFour), "negative dimension");
    check(safetensors_bytes(st_entry("F32", "[4294967296,4294967296]", "[0,16]"), kFour),
          "too large");
    check(safetensors_bytes(st_entry("F32", "[1e30]", "[0,16]"), kFour),
          "not a non-negative integer");
    check(safetensors_bytes(st_entry("F32", "[18446744073709551615]", "[0,16]"), kFour),
          "too large");
  }
  SECTION("empty tensor") {
    check(safetensors_bytes(st_entry("F32", "[0,4]", "[0,0]"), kFour), "empty tensor");
    check(safetensors_bytes("{\"__metadata__\":{}}", kFour), "holds no tensors");
  }
  SECTION("overlapping tensors") {
    check(safetensors_bytes("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
                            "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}",
                            kFour),
          "overlap");
  }
  SECTION("bad metadata") {
    check(safetensors_bytes("{\"__metadata__\":{\"layer\":3}," + good.substr(1), kFour),
          "is not a string");
    check(safetensors_bytes("{\"__metadata__\":{\"layer\":\"three\"}," + good.substr(1), kFour),
          "layer must be an integer");
    check(safetensors_bytes(
              "{\"__metadata__\":{\"tp_rank\":\"4\",\"tp_size\":\"4\"}," + good.substr(1), kFour),
          "tp_rank 4 is not below tp_size 4");
  }
}

TEST_CASE("bad input: npy", "[io][bad][npy]") {
  TempDir dir;
  const std::string p = dir.file("bad.npy");
  auto check = [&](const Bytes& file, const char* fragment) {
    write_bytes(p, file);
    REQUIRE_BAD_INPUT(p, fragment);
  };
  const Bytes good = npy_bytes(npy_dict("<f4", "(2, 2)"), kFour);
  SECTION("truncated header") {
    check(Bytes(good.begin(), good.begin() + 9), "truncated npy header");
    check(Bytes(good.begin(), good.begin() + 40), "truncated npy header");
  }
  SECTION("truncated data") {
    check(Bytes(good.begin(), good.end() - 1), "truncated npy data");
  }
  SECTION("oversized header length") {
    Bytes b = npy_bytes(npy_dict("<f4", "(2, 2)"), kFour, 2);
    b[8] = b[9] = b[10] = b[11] = 0xff;
    check(b, "exceeds the limit");
  }
  SECTION("unsupported version") {
    Bytes b = good;
    b[6] = 4;
    check(b, "unsupported npy format version 4.0");
  }
  SECTION("malformed header") {
    check(npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 2), ", kFour),
          "malformed npy header");
    check(npy_bytes("{'descr': '<f4', 'fortran_order': Maybe, 'shape': (2, 2), }", kFour),
          "malformed npy header");
    check(npy_bytes("{'descr': '<f4', 'fortran_order': False}", kFour), "no 'shape' tuple");
    check(npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (4,), 'extra': 'x'}", kFour),
          "keys other");
    check(
        npy_bytes("{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (4,)}", kFour),
        "repeats key");
    check(npy_bytes("{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (4,)}", kFour),
          "structured");
    check(npy_bytes("[1, 2]", kFour), "expected '{'");
  }
  SECTION("unknown dtype") {
    check(npy_bytes(npy_dict("<i4", "(2, 2)"), kFour), "npy dtype '<i4' is not supported");
    check(npy_bytes(npy_dict("zz", "(2, 2)"), kFour), "unknown npy dtype");
    check(npy_bytes(npy_dict("|f4", "(2, 2)"), kFour), "lacks a byte order");
  }
  SECTION("shape/dtype/byte-count mismatch") {
    check(npy_bytes(npy_dict("<f4", "(2, 3)"), kFour), "truncated npy data");
    check(npy_bytes(npy_dict("<f2", "(2, 2)"), kFour), "byte-count mismatch");
  }
  SECTION("negative and overflowing dimensions") {
    check(npy_bytes(npy_dict("<f4", "(-2, 2)"), kFour), "negative dimension");
    check(npy_bytes(npy_dict("<f4", "(4294967296, 4294967296)"), kFour), "too large");
    check(npy_bytes(npy_dict("<f4", "(99999999999999999999,)"), kFour), "too large");
  }
  SECTION("empty tensor") {
    check(npy_bytes(npy_dict("<f4", "(0, 2)"), {}), "empty tensor");
  }
}

TEST_CASE("bad input: npz", "[io][bad][npz]") {
  TempDir dir;
  const std::string p = dir.file("bad.npz");
  auto check = [&](const Bytes& file, const char* fragment) {
    write_bytes(p, file);
    REQUIRE_BAD_INPUT(p, fragment);
  };
  const Bytes npy = npy_bytes(npy_dict("<f4", "(2, 2)"), kFour);
  const Bytes big_npy =
      npy_bytes(npy_dict("<f4", "(256,)"), raw_bytes(std::vector<float>(256, 0.5f)));
  SECTION("member is not an npy") {
    check(zip_bytes({{"a.npy", npy}, {"notes.txt", bytes_of("just some text, not an array")}}),
          "not an npy file");
    check(zip_bytes({{"tiny.npy", Bytes{1, 2}}}), "truncated npy header");
  }
  SECTION("corrupted deflate data") {
    ZipMember m{"a.npy", npy, true};
    m.garble_stream = true;
    check(zip_bytes({m}), "corrupted deflate data");
  }
  SECTION("CRC mismatch (found when the tensor is read)") {
    for (bool deflate : {false, true}) {
      ZipMember m{"a.npy", npy, deflate};
      m.crc_xor = 1;
      write_bytes(p, zip_bytes({m}));
      REQUIRE(open_tensor_file(p)->size() == 1);  // opening reads only the header
      REQUIRE_BAD_INPUT(p, "CRC mismatch");
    }
  }
  SECTION("declared size disagrees with the data") {
    ZipMember longer{"a.npy", big_npy, true};
    longer.uncomp_override = int64_t(big_npy.size()) + 4;
    check(zip_bytes({longer}), "byte-count mismatch");
    ZipMember shorter{"a.npy", big_npy, true};
    shorter.uncomp_override = int64_t(big_npy.size()) - 4;
    check(zip_bytes({shorter}), "truncated npy data");
    ZipMember stored{"a.npy", npy, false};
    stored.uncomp_override = int64_t(npy.size()) + 1;
    check(zip_bytes({stored}), "stored member has");
    // The npy header agrees with the declared size, but the deflate stream ends 4 bytes early.
    Bytes short_npy =
        npy_bytes(npy_dict("<f4", "(256,)"), raw_bytes(std::vector<float>(255, 0.5f)));
    ZipMember early{"a.npy", short_npy, true};
    early.uncomp_override = int64_t(short_npy.size()) + 4;
    check(zip_bytes({early}), "deflate data ends before");
  }
  SECTION("a deflate ratio no real stream reaches") {
    ZipMember bomb{"a.npy", npy, true};
    bomb.uncomp_override = int64_t(1) << 40;
    check(zip_bytes({bomb}, true), "beyond what deflate can encode");
  }
  SECTION("deflate stream with more data than declared") {
    // The member's npy says 4 floats but the deflated stream holds 4 more bytes.
    Bytes plus = npy;
    append(plus, Bytes{1, 2, 3, 4});
    ZipMember m{"a.npy", plus, true};
    m.uncomp_override = int64_t(npy.size());
    check(zip_bytes({m}), "more than the declared");
  }
  SECTION("unsupported compression method") {
    ZipMember m{"a.npy", npy, false};
    m.method_override = 12;  // bzip2
    check(zip_bytes({m}), "unsupported zip compression method 12");
  }
  SECTION("truncated archive") {
    const Bytes z = zip_bytes({{"a.npy", npy}, {"b.npy", npy, true}});
    check(Bytes(z.begin(), z.end() - 10), "no end-of-central-directory record");
    check(Bytes(z.begin(), z.begin() + 60), "no end-of-central-directory record");
    // Cut out the middle: the end record survives but points past the data.
    Bytes cut(z.begin(), z.begin() + 40);
    cut.insert(cut.end(), z.end() - 22, z.end());
    check(cut, "central directory");
  }
  SECTION("duplicate members and empty archives") {
    check(zip_bytes({{"a.npy", npy}, {"a.npy", npy}}), "holds this member twice");
    check(zip_bytes({}), "holds no tensors");
  }
  SECTION("bad npy inside a good zip") {
    check(zip_bytes({{"a.npy", npy_bytes(npy_dict("<f4", "(0,)"), {})}}), "empty tensor");
    check(zip_bytes({{"a.npy", npy_bytes(npy_dict("<f4", "(-1,)"), {})}}), "negative dimension");
  }
}

TEST_CASE("bad input: taco HDF5 traces", "[io][bad][trace]") {
  TempDir dir;
  const std::string p = dir.file("bad.h5");
  const std::vector<uint8_t> bf16_data =
      raw_bytes(std::vector<uint16_t>{0x3f80, 0x4000, 0x4040, 0x4080});
  // A valid trace, then one mutation per case.
  auto build = [&](auto&& mutate) {
    Hdf5Builder b(p);
    bool root_attrs = true;
    mutate(b, root_attrs);
    b.close();
  };
  auto standard_root = [](Hdf5Builder& b) {
    b.attr_string("/", "taco_format", "taco-trace");
    b.attr_int("/", "taco_format_version", 1);
    b.group("/tensors");
  };
  auto standard_dataset = [&](Hdf5Builder& b, const std::string& dtype = "bf16") {
    b.dataset("/tensors/t000000", Hdf5Builder::Elem::U16LE, {2, 2},
              Hdf5Builder::Layout::ChunkedShuffleGzip, bf16_data);
    b.attr_string("/tensors/t000000", "dtype", dtype);
  };
  build([&](Hdf5Builder& b, bool&) {
    standard_root(b);
    standard_dataset(b);
  });
  REQUIRE(read_all(p)[0].values == std::vector<float>{1, 2, 3, 4});  // the base case is fine

  SECTION("unknown version") {
    build([&](Hdf5Builder& b, bool&) {
      b.attr_string("/", "taco_format", "taco-trace");
      b.attr_int("/", "taco_format_version", 2);
      b.group("/tensors");
      standard_dataset(b);
    });
    REQUIRE_BAD_INPUT(p, "unsupported taco_format_version 2");
  }
  SECTION("not a taco trace") {
    // Without taco_format it is any HDF5 file: its float datasets are the tensors.
    build([&](Hdf5Builder& b, bool&) { b.group("/tensors"); });
    REQUIRE_BAD_INPUT(p, "holds no float datasets");
    build([&](Hdf5Builder& b, bool&) {
      b.attr_string("/", "taco_format", "something-else");
      b.attr_int("/", "taco_format_version", 1);
    });
    REQUIRE_BAD_INPUT(p, "taco_format is 'something-else'");
    build([&](Hdf5Builder& b, bool&) {
      b.attr_int("/", "taco_format", 1);
      b.attr_int("/", "taco_format_version", 1);
    });
    REQUIRE_BAD_INPUT(p, "'taco_format' is not a string");
    build([&](Hdf5Builder& b, bool&) {
      b.attr_string("/", "taco_format", "taco-trace");
      b.attr_string("/", "taco_format_version", "1");
    });
    REQUIRE_BAD_INPUT(p, "'taco_format_version' is not an integer");
    build([&](Hdf5Builder& b, bool&) {
      b.attr_string("/", "taco_format", "taco-trace");
      b.attr_ints("/", "taco_format_version", {1, 1});
    });
    REQUIRE_BAD_INPUT(p, "must hold one value");
  }
  SECTION("no or odd /tensors") {
    build([&](Hdf5Builder& b, bool&) {
      b.attr_string("/", "taco_format", "taco-trace");
      b.attr_int("/", "taco_format_version", 1);
    });
    REQUIRE_BAD_INPUT(p, "no /tensors group");
    build([&](Hdf5Builder& b, bool&) {
      b.attr_string("/", "taco_format", "taco-trace");
      b.attr_int("/", "taco_format_version", 1);
      b.dataset("/tensors", Hdf5Builder::Elem::F32LE, {1}, Hdf5Builder::Layout::Contiguous,
                kFour.size() ? Bytes(4, 0) : Bytes{});
    });
    REQUIRE_BAD_INPUT(p, "/tensors is not a group");
    build([&](Hdf5Builder& b, bool&) {
      standard_root(b);
      b.group("/tensors/t000000");
    });
    REQUIRE_BAD_INPUT(p, "not a dataset");
    build([&](Hdf5Builder& b, bool&) {
      standard_root(b);
      b.external_link(dir.file("other.h5"), "/x", "/tensors/t000000");
    });
    REQUIRE_BAD_INPUT(p, "soft and external links");
    build([&](Hdf5Builder& b, bool&) { standard_root(b); });
    REQUIRE_BAD_INPUT(p, "holds no tensors");
  }
  SECTION("unknown dtype and dtype/storage mismatch") {
    build([&](Hdf5Builder& b, bool&) {
      standard_root(b);
      standard_dataset(b, "f64");
    });
    REQUIRE_BAD_INPUT(p, "unknown dtype 'f64'");
    build([&](Hdf5Builder& b, bool&) {
      standard_root(b);
      standard_dataset(b, "f32");
    });
    REQUIRE_BAD_INPUT(p, "dtype/storage mismatch");
    build([&](Hdf5Builder& b, bool&) {
      standard_root(b);
      b.dataset("/tensors/t000000", Hdf5Builder::Elem::I16LE, {2, 2},
                Hdf5Builder::Layout::Contiguous, bf16_data);
      b.attr_string("/tensors/t000000", "dtype", "bf16");
    });
    REQUIRE_BAD_INPUT(p, "dtype/storage mismatch");
    build([&](Hdf5Builder& b, bool&) {
      standard_root(b);
      b.dataset("/tensors/t000000", Hdf5Builder::Elem::F32LE, {2, 2},
                Hdf5Builder::Layout::Contiguous, kFour);
    });
    REQUIRE_BAD_INPUT(p, "no dtype attribute");
  }
  SECTION("empty, shapeless and unwritten datasets") {
    build([&](Hdf5Builder& b, bool&) {
      standard_root(b);
      b.dataset("/tensors/t000000", Hdf5Builder::Elem::U16LE, {0, 4},
                Hdf5Builder::Layout::Contiguous, {});
      b.attr_string("/tensors/t000000", "dtype", "bf16");
    });
    REQUIRE_BAD_INPUT(p, "empty tensor");
    build([&](Hdf5Builder& b, bool&) {
      standard_root(b);
      b.dataset("/tensors/t000000", Hdf5Builder::Elem::U16LE, {}, Hdf5Builder::Layout::Contiguous,
                {}, {}, true);
      b.attr_string("/tensors/t000000", "dtype", "bf16");
    });
    REQUIRE_BAD_INPUT(p, "has no shape");
    build([&](Hdf5Builder& b, bool&) {
      standard_root(b);
      b.dataset("/tensors/t000000", Hdf5Builder::Elem::U16LE, {1000, 1000},
                Hdf5Builder::Layout::ChunkedGzip, {});
      b.attr_string("/tensors/t000000", "dtype", "bf16");
    });
    REQUIRE_BAD_INPUT(p, "holds no data");
  }
  SECTION("metadata of the wrong type or range") {
    auto with = [&](auto&& attrs) {
      build([&](Hdf5Builder& b, bool&) {
        standard_root(b);
        standard_dataset(b);
        attrs(b);
      });
    };
    with([](Hdf5Builder& b) { b.attr_float("/tensors/t000000", "layer", 1.5); });
    REQUIRE_BAD_INPUT(p, "'layer' is not an integer");
    with([](Hdf5Builder& b) { b.attr_int("/tensors/t000000", "layer", -5); });
    REQUIRE_BAD_INPUT(p, "layer = -5 is out of range");
    with([](Hdf5Builder& b) { b.attr_int("/tensors/t000000", "layer", int64_t(1) << 40); });
    REQUIRE_BAD_INPUT(p, "out of range");
    with([](Hdf5Builder& b) {
      b.attr_int("/tensors/t000000", "step", -1, Hdf5Builder::Elem::U64LE);
    });
    REQUIRE_BAD_INPUT(p, "out of range");
    with([](Hdf5Builder& b) {
      b.attr_int("/tensors/t000000", "tp_rank", 2);
      b.attr_int("/tensors/t000000", "tp_size", 2);
    });
    REQUIRE_BAD_INPUT(p, "tp_rank 2 is not below tp_size 2");
    with([](Hdf5Builder& b) { b.attr_int("/tensors/t000000", "site", 3); });
    REQUIRE_BAD_INPUT(p, "'site' is not a string");
    with([](Hdf5Builder& b) { b.attr_int("/tensors/t000000", "extra.note", 3); });
    REQUIRE_BAD_INPUT(p, "'extra.note' is not a string");
    with([](Hdf5Builder& b) { b.attr_null("/tensors/t000000", "name"); });
    REQUIRE_BAD_INPUT(p, "must hold one value");
  }
  SECTION("truncated HDF5 file") {
    std::ifstream in(p, std::ios::binary);
    Bytes whole((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    write_bytes(p, Bytes(whole.begin(), whole.begin() + std::ptrdiff_t(whole.size() / 2)));
    REQUIRE_BAD_INPUT(p, "cannot open the HDF5 file");
  }
}

TEST_CASE("bad input: a safetensors key given twice would silently lose a tensor",
          "[io][bad][safetensors]") {
  TempDir dir;
  const std::string p = dir.file("dup.safetensors");
  const std::string entry = "{\"dtype\":\"F32\",\"shape\":[2,2],\"data_offsets\":[0,16]}";
  write_bytes(p, safetensors_bytes("{\"x\":" + entry + ",\"x\":" + entry + "}", kFour));
  REQUIRE_BAD_INPUT(p, "has the key 'x' twice");
  // Inside an entry too.
  write_bytes(
      p,
      safetensors_bytes(
          "{\"x\":{\"dtype\":\"F32\",\"dtype\":\"F16\",\"shape\":[2,2],\"data_offsets\":[0,16]}}",
          kFour));
  REQUIRE_BAD_INPUT(p, "has the key 'dtype' twice");
  // The same key in two different objects is fine.
  write_bytes(p, safetensors_bytes("{\"x\":" + entry + ",\"__metadata__\":{\"x\":\"1\"}}", kFour));
  REQUIRE(read_all(p).size() == 1);
}

TEST_CASE("bad input: tensor names must be UTF-8 text without control characters", "[io][bad]") {
  TempDir dir;
  const std::string p = dir.file("names.npz");
  const Bytes npy = npy_bytes(npy_dict("<f4", "(2, 2)"), kFour);
  write_bytes(p, zip_bytes({{"caf\xc3\xa9.npy", npy}}));
  REQUIRE(read_all(p)[0].name == "caf\xc3\xa9");  // UTF-8 is fine
  write_bytes(p, zip_bytes({{"caf\xff.npy", npy}}));
  REQUIRE_BAD_INPUT(p, "is not UTF-8 text (byte 0xff at 3)");
  write_bytes(p, zip_bytes({{"\xc0\xae.npy", npy}}));  // an overlong '.'
  REQUIRE_BAD_INPUT(p, "is not UTF-8 text");
  write_bytes(p, zip_bytes({{std::string("a\0b.npy", 7), npy}}));
  REQUIRE_BAD_INPUT(p, "contains a control character (byte 0x00)");
  write_bytes(p, zip_bytes({{"a\nb.npy", npy}}));
  REQUIRE_BAD_INPUT(p, "contains a control character (byte 0x0a)");
}

TEST_CASE("bad input: compressed tensors may not expand past the memory rule", "[io][bad]") {
  // 64x the stored bytes, at least 256 MiB of float32 values.
  check_expansion(uint64_t(1) << 26, 1 << 20, "x");  // 256 MiB from 1 MiB: the floor allows it
  check_expansion(uint64_t(1) << 28, 1 << 24, "x");  // 1 GiB from 16 MiB: 64x allows it
  REQUIRE_THAT(input_error_of([] {
                 check_expansion((uint64_t(1) << 26) + 1, 1 << 20, "big.npz: member 'a'");
               }),
               Catch::Matchers::Contains(
                   "big.npz: member 'a': 256.0 MiB of values from 1.0 MiB stored (more than "
                   "64x): refused to bound memory; set TACO_MEMORY_LIMIT"));
  // TACO_MEMORY_LIMIT replaces the rule, both ways.
  ::setenv("TACO_MEMORY_LIMIT", "512", 1);
  TempDir dir;
  const std::string p = dir.file("a.npz");
  const Bytes big_npy =
      npy_bytes(npy_dict("<f4", "(256,)"), raw_bytes(std::vector<float>(256, 0.5f)));
  write_bytes(p, zip_bytes({{"a.npy", big_npy, true}}));
  const std::string msg = input_error_of([&] { read_all(p); });
  ::setenv("TACO_MEMORY_LIMIT", "64G", 1);
  check_expansion(uint64_t(1) << 32, 1, "x");
  ::setenv("TACO_MEMORY_LIMIT", "lots", 1);
  const std::string bad = input_error_of([] { check_expansion(1, 1, "x"); });
  ::unsetenv("TACO_MEMORY_LIMIT");
  REQUIRE_THAT(msg,
               Catch::Matchers::Contains(
                   "its values take 1024 bytes in memory, over TACO_MEMORY_LIMIT (512 bytes)"));
  REQUIRE_THAT(bad, Catch::Matchers::Contains("TACO_MEMORY_LIMIT='lots': expected a size"));
}
