// TraceWriter and the trace reader: exact round trips, metadata, chunking, atomic commit, and
// traces written by other tools (fixed-length strings, big-endian data, 32-bit attributes).
#include "core/dtype.hpp"
#include "io/hdf5_builder.hpp"
#include "io/readers.hpp"
#include "test_io_support.hpp"

#include <cmath>
#include <limits>

using namespace taco;
using namespace taco::iotest;

namespace {

Tensor make_tensor(const std::string& name, std::vector<int64_t> shape, std::vector<float> values) {
  Tensor t;
  t.name = name;
  t.shape = std::move(shape);
  t.values = std::move(values);
  return t;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (float_bits(a[i]) != float_bits(b[i]) && !(std::isnan(a[i]) && std::isnan(b[i])))
      return false;
  return true;
}

}  // namespace

TEST_CASE("trace round trip: bf16, f16 and f32 are exact, with metadata", "[io][trace]") {
  TempDir dir;
  const std::string p = dir.file("t.h5");
  // Every bf16 bit pattern once: the bf16 store must give them all back.
  std::vector<float> all_bf16(65536);
  for (uint32_t h = 0; h < 65536; ++h) all_bf16[h] = bf16_to_float(uint16_t(h));
  std::vector<float> all_f16(65536);
  for (uint32_t h = 0; h < 65536; ++h) all_f16[h] = fp16_to_float(uint16_t(h));
  std::vector<float> f32 = {0.1f,    -1e-45f, std::numeric_limits<float>::infinity(),
                            3.4e38f, -0.0f,   1.0f};

  Tensor a = make_tensor("layers.0.attn_out/rank0", {256, 256}, all_bf16);
  a.dtype = DType::BF16;
  a.meta.layer = 0;
  a.meta.site = "attn_out";
  a.meta.direction = "fwd";
  a.meta.collective = "all_reduce";
  a.meta.tp_rank = 1;
  a.meta.tp_size = 2;
  a.meta.step = 1234567890123;
  a.meta.model = "llama-3-8b";
  a.meta.extra = {{"module", "model.layers.0.self_attn.o_proj"}, {"weird key/with.dots", "v"}};
  Tensor b = make_tensor("f16", {2, 128, 256}, all_f16);
  Tensor c = make_tensor("f32", {6}, f32);
  Tensor s = make_tensor("scalar", {}, {2.5f});
  {
    TraceWriter::Options o;
    o.provenance = {{"command", "taco test"}, {"seed", "7"}};
    TraceWriter w(p, o);
    w.add(a);  // default store: bf16
    w.add(b, DType::F16);
    w.add(c, DType::F32);
    w.add(s, DType::F32);
    REQUIRE(w.size() == 4);
    w.commit();
  }
  auto src = open_tensor_file(p);
  REQUIRE(src->format() == "taco-hdf5");
  REQUIRE(src->size() == 4);
  const TensorInfo ia = src->info(0);
  REQUIRE(ia.name == a.name);
  REQUIRE(ia.dtype == DType::BF16);
  REQUIRE(ia.shape == a.shape);
  REQUIRE(ia.meta.layer == 0);
  REQUIRE(ia.meta.site == "attn_out");
  REQUIRE(ia.meta.direction == "fwd");
  REQUIRE(ia.meta.collective == "all_reduce");
  REQUIRE(ia.meta.tp_rank == 1);
  REQUIRE(ia.meta.tp_size == 2);
  REQUIRE(ia.meta.step == 1234567890123);
  REQUIRE(ia.meta.model == "llama-3-8b");
  REQUIRE(ia.meta.extra == a.meta.extra);
  REQUIRE(same_bits(src->read(0).values, all_bf16));
  const Tensor rb = src->read(1);
  REQUIRE(rb.dtype == DType::F16);
  REQUIRE(rb.shape == b.shape);
  REQUIRE(same_bits(rb.values, all_f16));
  REQUIRE(rb.meta.layer == -1);
  REQUIRE(rb.meta.site.empty());
  REQUIRE(rb.meta.extra.empty());
  REQUIRE(same_bits(src->read(2).values, f32));
  const Tensor rs = src->read(3);
  REQUIRE(rs.shape.empty());
  REQUIRE(rs.values == std::vector<float>{2.5f});
}

TEST_CASE("trace store rounds to nearest even", "[io][trace]") {
  TempDir dir;
  const std::string p = dir.file("r.h5");
  const float tie_down = 1.0f + std::ldexp(1.0f, -8);    // halfway 1 and 1+2^-7: to even (1)
  const float tie_up = 1.0f + 3 * std::ldexp(1.0f, -8);  // halfway 1+2^-7 and 1+2^-6: to even (up)
  const float f16_tie = 1.0f + std::ldexp(1.0f, -11);    // halfway in f16: to even (1)
  {
    TraceWriter w(p, {});
    w.add(make_tensor("bf", {2}, {tie_down, tie_up}), DType::BF16);
    w.add(make_tensor("h", {2}, {f16_tie, 70000.0f}), DType::F16);
    w.commit();
  }
  const auto t = read_all(p);
  REQUIRE(t[0].values == std::vector<float>{1.0f, 1.0f + std::ldexp(1.0f, -6)});
  REQUIRE(t[1].values[0] == 1.0f);
  REQUIRE(std::isinf(t[1].values[1]));  // beyond f16's range
}

TEST_CASE("trace files appear whole or not at all", "[io][trace]") {
  TempDir dir;
  const std::string p = dir.file("atomic.h5");
  SECTION("no commit: nothing is left behind") {
    {
      TraceWriter w(p, {});
      w.add(make_tensor("x", {4}, {1, 2, 3, 4}));
      REQUIRE(dir.listing().size() == 1);  // the temporary file only
      REQUIRE(dir.listing()[0] != "atomic.h5");
    }
    REQUIRE(dir.listing().empty());
  }
  SECTION("an existing file is replaced only by commit()") {
    auto contents = [&] {
      std::ifstream in(p, std::ios::binary);
      return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    };
    write_bytes(p, bytes_of("old contents"));
    {
      TraceWriter w(p, {});
      w.add(make_tensor("x", {4}, {1, 2, 3, 4}));
      REQUIRE(input_error_of([&] {
                w.add(make_tensor("x", {1}, {1}));
              }).find("duplicate tensor name") != std::string::npos);
      REQUIRE(contents() == "old contents");
    }  // abandoned after the error: the old file stays
    REQUIRE(contents() == "old contents");
    REQUIRE(dir.listing() == std::vector<std::string>{"atomic.h5"});
    {
      TraceWriter w(p, {});
      w.add(make_tensor("x", {4}, {1, 2, 3, 4}));
      REQUIRE(contents() == "old contents");
      w.commit();
    }
    REQUIRE(read_all(p)[0].values == std::vector<float>{1, 2, 3, 4});
  }
  SECTION("commit") {
    {
      TraceWriter w(p, {});
      w.add(make_tensor("x", {4}, {1, 2, 3, 4}));
      w.commit();
    }
    REQUIRE(dir.listing() == std::vector<std::string>{"atomic.h5"});
    REQUIRE(read_all(p)[0].values == std::vector<float>{1, 2, 3, 4});
  }
}

TEST_CASE("trace writer refuses bad tensors with InputError", "[io][trace]") {
  TempDir dir;
  const std::string p = dir.file("w.h5");
  TraceWriter w(p, {});
  auto msg = [&](const Tensor& t) { return input_error_of([&] { w.add(t); }); };
  REQUIRE(msg(make_tensor("e", {0, 3}, {})).find("empty tensor") != std::string::npos);
  REQUIRE(msg(make_tensor("m", {2, 3}, {1, 2})).find("2 values for shape [2, 3]") !=
          std::string::npos);
  REQUIRE(msg(make_tensor("n", {-1}, {1})).find("negative dimension") != std::string::npos);
  REQUIRE(msg(make_tensor(std::string("nul\0name", 8), {1}, {1})).find("NUL") != std::string::npos);
  Tensor bad_rank = make_tensor("r", {1}, {1});
  bad_rank.meta.tp_rank = 3;
  bad_rank.meta.tp_size = 2;
  REQUIRE(msg(bad_rank).find("tp_rank 3 is not below tp_size 2") != std::string::npos);
  REQUIRE(input_error_of([&] {
            w.add(make_tensor("s", {1}, {1}), DType::F8E4M3);
          }).find("stores bf16, f16 or f32") != std::string::npos);
  REQUIRE(input_error_of([&] {
            TraceWriter(dir.file("no/such/dir/x.h5"), {});
          }).find("does not exist") != std::string::npos);
  TraceWriter::Options reserved;
  reserved.provenance = {{"taco_format", "x"}};
  REQUIRE(input_error_of([&] { TraceWriter(dir.file("r.h5"), reserved); }).find("reserved") !=
          std::string::npos);
}

TEST_CASE("trace chunks hold about 1 MiB of whole rows", "[io][trace]") {
  auto bytes = [](const std::vector<uint64_t>& c, size_t e) {
    uint64_t n = e;
    for (uint64_t d : c) n *= d;
    return n;
  };
  // 8192 x 4096 bf16: rows of 8 KiB, 128 rows per chunk.
  REQUIRE(trace_chunk_shape({8192, 4096}, 2) == std::vector<uint64_t>{128, 4096});
  // Small tensors are one chunk.
  REQUIRE(trace_chunk_shape({3, 5}, 4) == std::vector<uint64_t>{3, 5});
  // 3-d: whole [*, 1024] rows; 512 rows per MiB of f16 -> 4 x 128 x 1024? (128 rows fit 4 times)
  REQUIRE(trace_chunk_shape({16, 128, 1024}, 2) == std::vector<uint64_t>{4, 128, 1024});
  REQUIRE(trace_chunk_shape({16, 300, 1024}, 2) == std::vector<uint64_t>{1, 300, 1024});
  REQUIRE(trace_chunk_shape({16, 1000, 1024}, 2) == std::vector<uint64_t>{1, 512, 1024});
  // A row longer than 1 MiB is split.
  REQUIRE(trace_chunk_shape({2, 1 << 20}, 4) == std::vector<uint64_t>{1, 1 << 18});
  for (const auto& shape :
       std::vector<std::vector<int64_t>>{{7, 3000}, {5, 9, 11, 13}, {100000}, {1, 1, 1}}) {
    const auto c = trace_chunk_shape(shape, 2);
    REQUIRE(c.back() == uint64_t(shape.back()));  // whole rows
    REQUIRE(bytes(c, 2) <= (1u << 20));
    for (size_t k = 0; k < c.size(); ++k) REQUIRE((c[k] >= 1 && c[k] <= uint64_t(shape[k])));
  }
}

TEST_CASE("traces written by other tools are read too", "[io][trace]") {
  // h5py-style or hand-made traces may use fixed-length strings, big-endian storage,
  // 32-bit integer attributes, contiguous or compact storage, and omit optional attributes.
  TempDir dir;
  const std::string p = dir.file("other.h5");
  {
    Hdf5Builder b(p);
    b.attr_string("/", "taco_format", "taco-trace", false);
    b.attr_int("/", "taco_format_version", 1, Hdf5Builder::Elem::I32LE);
    b.group("/tensors");
    // Big-endian float32 1.0, -2.0: 3f800000, c0000000.
    b.dataset("/tensors/t000001", Hdf5Builder::Elem::F32BE, {2}, Hdf5Builder::Layout::Contiguous,
              Bytes{0x3f, 0x80, 0, 0, 0xc0, 0, 0, 0});
    b.attr_string("/tensors/t000001", "dtype", "f32", false);
    b.attr_string("/tensors/t000001", "name", "second", false);
    b.attr_int("/tensors/t000001", "layer", 5, Hdf5Builder::Elem::I32LE);
    // Big-endian u16 bf16 bits 0x3f80 (1.0), stored compact.
    b.dataset("/tensors/t000000", Hdf5Builder::Elem::U16BE, {1, 1}, Hdf5Builder::Layout::Compact,
              Bytes{0x3f, 0x80});
    b.attr_string("/tensors/t000000", "dtype", "bf16");
    b.attr_string("/tensors/t000000", "extra.origin", "hand-made");
    // Chunked with fletcher32 checksums.
    b.dataset("/tensors/t000010", Hdf5Builder::Elem::U16LE, {4, 2},
              Hdf5Builder::Layout::ChunkedFletcher32, raw_bytes(std::vector<uint16_t>(8, 0x3c00)),
              {2, 2});
    b.attr_string("/tensors/t000010", "dtype", "f16");
    b.close();
  }
  auto src = open_tensor_file(p);
  REQUIRE(src->size() == 3);
  const Tensor t0 = src->read(0);
  REQUIRE(t0.name == "t000000");  // no name attribute: the dataset name
  REQUIRE(t0.values == std::vector<float>{1.0f});
  REQUIRE(t0.meta.extra.at("origin") == "hand-made");
  const Tensor t1 = src->read(1);
  REQUIRE(t1.name == "second");
  REQUIRE(t1.meta.layer == 5);
  REQUIRE(t1.values == std::vector<float>{1.0f, -2.0f});
  REQUIRE(src->read(2).values == std::vector<float>(8, 1.0f));  // t000010 sorts after t000001
}
