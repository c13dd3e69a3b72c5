// The readers return exactly the values the bytes encode (oracles: hand-picked bit patterns
// with known values, and NumPy's documented layouts), with names and metadata.
#include "core/dtype.hpp"
#include "io/readers.hpp"
#include "test_io_support.hpp"

#include <cmath>
#include <ctime>
#include <limits>

using namespace taco;
using namespace taco::iotest;

namespace {

bool same_float(float a, float b) {
  return float_bits(a) == float_bits(b) || (std::isnan(a) && std::isnan(b));
}

void require_values(const Tensor& t, const std::vector<float>& expect) {
  REQUIRE(t.values.size() == expect.size());
  for (size_t i = 0; i < expect.size(); ++i) {
    INFO("element " << i << ": got " << t.values[i] << ", expected " << expect[i]);
    REQUIRE(same_float(t.values[i], expect[i]));
  }
}

const float kInf = std::numeric_limits<float>::infinity();
const float kNaN = std::numeric_limits<float>::quiet_NaN();

}  // namespace

TEST_CASE("safetensors: every float dtype decodes to its exact value", "[io][safetensors]") {
  TempDir dir;
  // bf16 and f16 bit patterns with values from the format definitions.
  const std::vector<uint16_t> bf16 = {0x3f80, 0xc000, 0x0001, 0x7f80, 0x7fc0, 0x4049};
  const std::vector<float> bf16_v = {1.0f, -2.0f, std::ldexp(1.0f, -133), kInf, kNaN, 3.140625f};
  const std::vector<uint16_t> f16 = {0x3c00, 0x0001, 0x7bff, 0xfc00, 0x3555, 0x8000};
  const std::vector<float> f16_v = {1.0f,  std::ldexp(1.0f, -24), 65504.0f,
                                    -kInf, 0.333251953125f,       -0.0f};
  const std::vector<uint8_t> e4m3 = {0x38, 0x7e, 0x01, 0xb8, 0x7f, 0x39};
  const std::vector<float> e4m3_v = {1.0f, 448.0f, std::ldexp(1.0f, -9), -1.0f, kNaN, 1.125f};
  const std::vector<uint8_t> e5m2 = {0x3c, 0x7b, 0x01, 0x7c, 0xfc, 0x3d};
  const std::vector<float> e5m2_v = {1.0f, 57344.0f, std::ldexp(1.0f, -16), kInf, -kInf, 1.25f};
  const std::vector<float> f32_v = {0.1f, -7.5f, std::ldexp(1.0f, -149), kInf};
  const std::vector<double> f64 = {0.1, 1e300, -2.5, 1e-50};
  const std::vector<float> f64_v = {0.1f, kInf, -2.5f, 0.0f};  // narrowing rounds to nearest

  Bytes data;
  std::string header = "{";
  auto add = [&](const std::string& name, const std::string& dtype, const std::string& shape,
                 const Bytes& b) {
    header += "\"" + name + "\":{\"dtype\":\"" + dtype + "\",\"shape\":" + shape +
              ",\"data_offsets\":[" + std::to_string(data.size()) + "," +
              std::to_string(data.size() + b.size()) + "]},";
    append(data, b);
  };
  add("b", "BF16", "[2,3]", raw_bytes(bf16));
  add("h", "F16", "[6]", raw_bytes(f16));
  add("e4", "F8_E4M3", "[3,2]", raw_bytes(e4m3));
  add("e5", "F8_E5M2", "[1,6]", raw_bytes(e5m2));
  add("f", "F32", "[2,2]", raw_bytes(f32_v));
  add("d", "F64", "[4]", raw_bytes(f64));
  header +=
      "\"__metadata__\":{\"layer\":\"7\",\"site\":\"mlp_out\",\"direction\":\"bwd\",\"tp_rank\":"
      "\"1\","
      "\"tp_size\":\"4\",\"step\":\"120\",\"model\":\"llama\",\"collective\":\"all_reduce\","
      "\"format\":\"pt\"}}";
  write_bytes(dir.file("a.safetensors"), safetensors_bytes(header, data));

  auto src = open_tensor_file(dir.file("a.safetensors"));
  REQUIRE(src->format() == "safetensors");
  REQUIRE(src->size() == 6);
  // File order (by data offset), not header order.
  const std::vector<std::string> names = {"b", "h", "e4", "e5", "f", "d"};
  const std::vector<DType> dtypes = {DType::BF16,   DType::F16, DType::F8E4M3,
                                     DType::F8E5M2, DType::F32, DType::F64};
  for (size_t i = 0; i < names.size(); ++i) {
    REQUIRE(src->info(i).name == names[i]);
    REQUIRE(src->info(i).dtype == dtypes[i]);
  }
  REQUIRE(src->info(0).shape == std::vector<int64_t>{2, 3});
  const Tensor b = src->read(0);
  require_values(b, bf16_v);
  REQUIRE(b.meta.layer == 7);
  REQUIRE(b.meta.site == "mlp_out");
  REQUIRE(b.meta.direction == "bwd");
  REQUIRE(b.meta.tp_rank == 1);
  REQUIRE(b.meta.tp_size == 4);
  REQUIRE(b.meta.step == 120);
  REQUIRE(b.meta.model == "llama");
  REQUIRE(b.meta.collective == "all_reduce");
  REQUIRE(b.meta.extra == std::map<std::string, std::string>{{"format", "pt"}});
  require_values(src->read(1), f16_v);
  require_values(src->read(2), e4m3_v);
  require_values(src->read(3), e5m2_v);
  require_values(src->read(4), f32_v);
  require_values(src->read(5), f64_v);
}

TEST_CASE("safetensors: padded header, holes between tensors, no metadata", "[io][safetensors]") {
  TempDir dir;
  const std::vector<float> v = {1.5f, -2.0f};
  Bytes data = raw_bytes(v);
  data.insert(data.begin(), 8, 0xee);  // 8 unused bytes before the tensor
  const std::string header =
      "{\"x\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,16]}}      ";
  write_bytes(dir.file("p.st"), safetensors_bytes(header, data));
  const auto t = read_all(dir.file("p.st"));
  REQUIRE(t.size() == 1);
  require_values(t[0], v);
  REQUIRE(t[0].meta.layer == -1);
  REQUIRE(t[0].meta.site.empty());
}

namespace {

// A header of n one-element tensors (what a dump of many small tensors looks like).
Bytes many_tensors(int n) {
  std::string header = "{";
  for (int i = 0; i < n; ++i)
    header += (i ? ",\"t" : "\"t") + std::to_string(i) +
              "\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[" + std::to_string(4 * i) +
              "," + std::to_string(4 * i + 4) + "]}";
  return safetensors_bytes(header + "}", Bytes(size_t(4 * n), 0));
}

// Fastest of three opens, in CPU seconds (what the parse costs, whatever else the machine runs).
double open_cpu_seconds(const Bytes& file) {
  double best = 1e30;
  for (int rep = 0; rep < 3; ++rep) {
    const std::clock_t c0 = std::clock();
    const auto src = open_safetensors(memory_source("many.safetensors", file), {});
    best = std::min(best, double(std::clock() - c0) / CLOCKS_PER_SEC);
    REQUIRE(src->size() > 0);
  }
  return best;
}

}  // namespace

TEST_CASE("safetensors: opening takes time linear in the number of tensors", "[io][safetensors]") {
  // 4x the tensors: about 4x the time when linear, 16x when quadratic (the JSON parse callback
  // rescanned the whole header object after each tensor: 100,000 tensors took 126 s).
  const Bytes small = many_tensors(10000), large = many_tensors(40000);
  REQUIRE(open_safetensors(memory_source("many.safetensors", large), {})->size() == 40000);
  const double t_small = open_cpu_seconds(small), t_large = open_cpu_seconds(large);
  INFO("10k tensors " << t_small << " s, 40k tensors " << t_large << " s");
  CHECK(t_large < 8 * t_small + 0.05);
}

TEST_CASE("npy: versions 1.0/2.0/3.0, dtypes, byte orders", "[io][npy]") {
  TempDir dir;
  const std::vector<float> f = {0.5f, -3.25f, kInf, kNaN, 1e-40f, 7.0f};
  for (int major : {1, 2, 3}) {
    const std::string p = dir.file("v" + std::to_string(major) + ".npy");
    write_bytes(p, npy_bytes(npy_dict("<f4", "(2, 3)"), raw_bytes(f), major));
    const auto t = read_all(p);
    REQUIRE(t.size() == 1);
    REQUIRE(t[0].name == "v" + std::to_string(major));
    REQUIRE(t[0].shape == std::vector<int64_t>{2, 3});
    REQUIRE(t[0].dtype == DType::F32);
    require_values(t[0], f);
  }
  SECTION("f2, f8, big-endian f4") {
    write_bytes(dir.file("h.npy"),
                npy_bytes(npy_dict("<f2", "(3,)"),
                          raw_bytes(std::vector<uint16_t>{0x3c00, 0xc400, 0x0001})));
    require_values(read_all(dir.file("h.npy"))[0], {1.0f, -4.0f, std::ldexp(1.0f, -24)});
    write_bytes(dir.file("d.npy"),
                npy_bytes(npy_dict("<f8", "(2,)"), raw_bytes(std::vector<double>{0.1, -1e300})));
    const Tensor d = read_all(dir.file("d.npy"))[0];
    REQUIRE(d.dtype == DType::F64);
    require_values(d, {0.1f, -kInf});
    // 1.0f big-endian is 3f 80 00 00.
    write_bytes(dir.file("be.npy"),
                npy_bytes(npy_dict(">f4", "(1,)"), Bytes{0x3f, 0x80, 0x00, 0x00}));
    require_values(read_all(dir.file("be.npy"))[0], {1.0f});
    write_bytes(dir.file("be2.npy"), npy_bytes(npy_dict(">f2", "(1,)"), Bytes{0x3c, 0x00}));
    require_values(read_all(dir.file("be2.npy"))[0], {1.0f});
  }
  SECTION("<u2 / <V2 hold bf16 or f16 bits, |u1 / <V1 hold fp8 bits, as the options say") {
    const Bytes bits = raw_bytes(std::vector<uint16_t>{0x3f80, 0x3c00});
    write_bytes(dir.file("u2.npy"), npy_bytes(npy_dict("<u2", "(2,)"), bits));
    write_bytes(dir.file("v2.npy"), npy_bytes(npy_dict("<V2", "(2,)"), bits));
    for (const char* file : {"u2.npy", "v2.npy"}) {
      const Tensor as_bf16 = read_all(dir.file(file))[0];
      REQUIRE(as_bf16.dtype == DType::BF16);
      require_values(as_bf16, {1.0f, bf16_to_float(0x3c00)});
      OpenOptions o;
      o.u16_as = DType::F16;
      const Tensor as_f16 = read_all(dir.file(file), o)[0];
      REQUIRE(as_f16.dtype == DType::F16);
      require_values(as_f16, {fp16_to_float(0x3f80), 1.0f});
    }
    write_bytes(dir.file("u1.npy"), npy_bytes(npy_dict("|u1", "(2,)"), Bytes{0x38, 0x3c}));
    require_values(read_all(dir.file("u1.npy"))[0], {1.0f, 1.5f});  // e4m3: 0x3c = 1.5
    OpenOptions o;
    o.u8_as = DType::F8E5M2;
    require_values(read_all(dir.file("u1.npy"), o)[0], {0.5f, 1.0f});  // e5m2: 0x38 = 0.5
  }
  SECTION("old-style header: double quotes, long integers, no trailing comma") {
    write_bytes(dir.file("old.npy"),
                npy_bytes("{\"descr\": \"<f4\", \"shape\": (2L, 1L), \"fortran_order\": False}",
                          raw_bytes(std::vector<float>{1, 2})));
    const Tensor t = read_all(dir.file("old.npy"))[0];
    REQUIRE(t.shape == std::vector<int64_t>{2, 1});
    require_values(t, {1.0f, 2.0f});
  }
  SECTION("0-d array") {
    write_bytes(dir.file("s.npy"),
                npy_bytes(npy_dict("<f4", "()"), raw_bytes(std::vector<float>{4.0f})));
    const Tensor t = read_all(dir.file("s.npy"))[0];
    REQUIRE(t.shape.empty());
    require_values(t, {4.0f});
  }
}

TEST_CASE("npy: Fortran order is transposed to row-major", "[io][npy]") {
  TempDir dir;
  // A 2x3 array a[i][j] = 10*i + j, stored column-major: a00 a10 a01 a11 a02 a12.
  write_bytes(dir.file("f2.npy"), npy_bytes(npy_dict("<f4", "(2, 3)", true),
                                            raw_bytes(std::vector<float>{0, 10, 1, 11, 2, 12})));
  require_values(read_all(dir.file("f2.npy"))[0], {0, 1, 2, 10, 11, 12});
  // 2x3x4, a[i][j][k] = 100i + 10j + k; column-major means i runs fastest, then j, then k.
  std::vector<float> col_major, row_major;
  for (int k = 0; k < 4; ++k)
    for (int j = 0; j < 3; ++j)
      for (int i = 0; i < 2; ++i) col_major.push_back(float(100 * i + 10 * j + k));
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j)
      for (int k = 0; k < 4; ++k) row_major.push_back(float(100 * i + 10 * j + k));
  write_bytes(dir.file("f3.npy"),
              npy_bytes(npy_dict("<f4", "(2, 3, 4)", true), raw_bytes(col_major)));
  const Tensor t = read_all(dir.file("f3.npy"))[0];
  REQUIRE(t.shape == std::vector<int64_t>{2, 3, 4});
  require_values(t, row_major);
  // Fortran order with bf16 bits and a 1-d array (same in both orders).
  write_bytes(dir.file("f1.npy"), npy_bytes(npy_dict("<u2", "(2,)", true),
                                            raw_bytes(std::vector<uint16_t>{0x3f80, 0x4000})));
  require_values(read_all(dir.file("f1.npy"))[0], {1.0f, 2.0f});
}

TEST_CASE("npz: stored, deflated and zip64 members", "[io][npz]") {
  TempDir dir;
  const std::vector<float> a = {1, 2, 3, 4, 5, 6};
  const std::vector<uint16_t> b(1000, 0x3f80);  // compresses well
  const Bytes npy_a = npy_bytes(npy_dict("<f4", "(3, 2)"), raw_bytes(a));
  const Bytes npy_b =
      npy_bytes(npy_dict("<f2", "(10, 100)"), raw_bytes(std::vector<uint16_t>(1000, 0x3c00)));
  const Bytes npy_c = npy_bytes(npy_dict("<u2", "(1000,)"), raw_bytes(b));
  for (bool zip64 : {false, true}) {
    DYNAMIC_SECTION("zip64 " << zip64) {
      const std::string p = dir.file(zip64 ? "z64.npz" : "z.npz");
      write_bytes(p, zip_bytes({{"layers.0.a.npy", npy_a, false},
                                {"sub/", {}, false},
                                {"b.npy", npy_b, true},
                                {"c.npy", npy_c, true}},
                               zip64));
      auto src = open_tensor_file(p);
      REQUIRE(src->format() == "npz");
      REQUIRE(src->size() == 3);  // the directory entry is skipped
      REQUIRE(src->info(0).name == "layers.0.a");
      REQUIRE(src->info(1).name == "b");
      REQUIRE(src->info(1).dtype == DType::F16);
      REQUIRE(src->info(1).shape == std::vector<int64_t>{10, 100});
      require_values(src->read(0), a);
      require_values(src->read(1), std::vector<float>(1000, 1.0f));
      const Tensor c = src->read(2);
      REQUIRE(c.dtype == DType::BF16);
      require_values(c, std::vector<float>(1000, 1.0f));
      // Reading again (and out of order) gives the same values.
      require_values(src->read(0), a);
    }
  }
}

TEST_CASE("open_tensor_file dispatches on content, not on the extension", "[io]") {
  TempDir dir;
  write_bytes(dir.file("really_npy.safetensors"),
              npy_bytes(npy_dict("<f4", "(1,)"), raw_bytes(std::vector<float>{2})));
  REQUIRE(open_tensor_file(dir.file("really_npy.safetensors"))->format() == "npy");
  write_bytes(dir.file("really_st.npy"),
              safetensors_bytes("{\"x\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}",
                                raw_bytes(std::vector<float>{2})));
  REQUIRE(open_tensor_file(dir.file("really_st.npy"))->format() == "safetensors");
  write_bytes(
      dir.file("zip.bin"),
      zip_bytes({{"x.npy", npy_bytes(npy_dict("<f4", "(1,)"), raw_bytes(std::vector<float>{2}))}}));
  REQUIRE(open_tensor_file(dir.file("zip.bin"))->format() == "npz");
}

TEST_CASE("in-memory sources give the same result as files", "[io]") {
  const std::vector<float> v = {3, 4};
  auto src =
      open_npy(memory_source("mem.npy", npy_bytes(npy_dict("<f4", "(2,)"), raw_bytes(v))), {});
  REQUIRE(src->read(0).values == v);
  REQUIRE(src->read(0).name == "mem");
}

TEST_CASE("widening is exact for every f16, bf16 and fp8 code, small and large tensors", "[io]") {
  TempDir dir;
  // 65536 codes reach the table path for f16; the 8-bit codes are checked against the field
  // definitions directly (E4M3: bias 7, 0x7f/0xff NaN; E5M2: bias 15, IEEE-like).
  std::vector<uint16_t> codes(65536);
  for (uint32_t h = 0; h < 65536; ++h) codes[h] = uint16_t(h);
  write_bytes(dir.file("h.npy"), npy_bytes(npy_dict("<f2", "(256, 256)"), raw_bytes(codes)));
  write_bytes(dir.file("b.npy"), npy_bytes(npy_dict("<u2", "(65536,)"), raw_bytes(codes)));
  const Tensor h = read_all(dir.file("h.npy"))[0];
  const Tensor b = read_all(dir.file("b.npy"))[0];
  for (uint32_t c = 0; c < 65536; ++c) {
    REQUIRE(same_float(h.values[c], fp16_to_float(uint16_t(c))));
    REQUIRE(float_bits(b.values[c]) == c << 16);
  }
  std::vector<uint8_t> bytes(256);
  for (int c = 0; c < 256; ++c) bytes[size_t(c)] = uint8_t(c);
  write_bytes(dir.file("e.npy"), npy_bytes(npy_dict("|u1", "(256,)"), raw_bytes(bytes)));
  OpenOptions e5;
  e5.u8_as = DType::F8E5M2;
  const Tensor e4m3 = read_all(dir.file("e.npy"))[0], e5m2 = read_all(dir.file("e.npy"), e5)[0];
  for (int c = 0; c < 256; ++c) {
    const double sign = c & 0x80 ? -1 : 1;
    const int e4 = (c >> 3) & 15, m4 = c & 7, e5e = (c >> 2) & 31, m5 = c & 3;
    if (e4 == 15 && m4 == 7)
      REQUIRE(std::isnan(e4m3.values[size_t(c)]));
    else
      REQUIRE(double(e4m3.values[size_t(c)]) ==
              sign * (e4 ? std::ldexp(8.0 + m4, e4 - 10) : std::ldexp(double(m4), -9)));
    if (e5e == 31)
      REQUIRE(
          (m5 ? std::isnan(e5m2.values[size_t(c)]) : e5m2.values[size_t(c)] == float(sign) * kInf));
    else
      REQUIRE(double(e5m2.values[size_t(c)]) ==
              sign * (e5e ? std::ldexp(4.0 + m5, e5e - 17) : std::ldexp(double(m5), -16)));
  }
}
