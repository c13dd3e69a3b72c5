// Reader throughput (hidden: run with `taco_tests "[perf]"`). Writes 256 MiB of bf16 tensors
// (normal-distributed values, 16 tensors of 8192 x 1024) as a safetensors file and as taco
// traces (gzip 4 with shuffle, the default; and uncompressed), then times opening and reading every
// tensor, warm page cache. Prints MB/s of bf16 data (1 MB = 1e6 bytes) and checks the values read
// back.
#include "core/dtype.hpp"
#include "test_io_support.hpp"

#include <chrono>
#include <cstdio>
#include <ctime>
#include <random>

using namespace taco;
using namespace taco::iotest;

namespace {

// Wall and CPU seconds of one full read. CPU time is reported too because the machines this
// runs on are often shared: CPU seconds are what the reader costs, wall seconds what it took.
struct Seconds {
  double wall, cpu;
};

Seconds read_seconds(const std::string& path, const std::vector<uint16_t>& expect_first) {
  const auto t0 = std::chrono::steady_clock::now();
  const std::clock_t c0 = std::clock();
  auto src = open_tensor_file(path);
  size_t checked = 0;
  for (size_t i = 0; i < src->size(); ++i) {
    const Tensor t = src->read(i);
    if (i == 0)
      for (size_t k = 0; k < expect_first.size(); ++k)
        checked += float_to_bf16(t.values[k]) == expect_first[k];
  }
  const Seconds s{std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(),
                  double(std::clock() - c0) / CLOCKS_PER_SEC};
  REQUIRE(checked == expect_first.size());
  return s;
}

}  // namespace

TEST_CASE("reader throughput: 256 MiB of bf16", "[.][perf][io]") {
  TempDir dir;
  constexpr int kTensors = 16;
  constexpr int64_t kRows = 8192, kCols = 1024;
  constexpr size_t kNumel = size_t(kRows * kCols);
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<uint16_t> bits(kNumel);
  for (auto& b : bits) b = float_to_bf16(normal(rng) * 0.02f);

  // safetensors: the same bits in every tensor (the reader does not care).
  std::string header = "{";
  for (int i = 0; i < kTensors; ++i)
    header += (i ? "," : "") + std::string("\"t") + std::to_string(i) +
              "\":{\"dtype\":\"BF16\",\"shape\":[" + std::to_string(kRows) + "," +
              std::to_string(kCols) + "],\"data_offsets\":[" +
              std::to_string(size_t(i) * kNumel * 2) + "," +
              std::to_string(size_t(i + 1) * kNumel * 2) + "]}";
  header += "}";
  {
    std::ofstream out(dir.file("big.safetensors"), std::ios::binary);
    Bytes len;
    put_le(len, header.size(), 8);
    out.write(reinterpret_cast<const char*>(len.data()), 8);
    out << header;
    for (int i = 0; i < kTensors; ++i)
      out.write(reinterpret_cast<const char*>(bits.data()), std::streamsize(kNumel * 2));
    REQUIRE(out.good());
  }
  for (int level : {4, 0}) {
    TraceWriter::Options o;
    o.compression_level = level;
    TraceWriter w(dir.file(level ? "big.h5" : "big-gzip0.h5"), o);
    Tensor t;
    t.shape = {kRows, kCols};
    t.values.resize(kNumel);
    for (size_t k = 0; k < kNumel; ++k) t.values[k] = bf16_to_float(bits[k]);
    for (int i = 0; i < kTensors; ++i) {
      t.name = "t" + std::to_string(i);
      w.add(t);
    }
    w.commit();
  }
  const std::vector<uint16_t> first(bits.begin(), bits.begin() + 4096);
  const double mb = double(kTensors) * double(kNumel) * 2 / 1e6;
  for (const char* name : {"big.safetensors", "big.h5", "big-gzip0.h5"}) {
    const std::string path = dir.file(name);
    const auto file_mb = double(std::filesystem::file_size(path)) / 1e6;
    read_seconds(path, first);  // warm the page cache
    Seconds best{1e30, 1e30};
    for (int rep = 0; rep < 3; ++rep) {
      const Seconds s = read_seconds(path, first);
      best = {std::min(best.wall, s.wall), std::min(best.cpu, s.cpu)};
    }
    std::printf(
        "perf: %-16s %6.1f MB on disk, %6.1f MB of bf16: wall %.3f s (%5.0f MB/s), cpu %.3f s "
        "(%5.0f MB/s)\n",
        name, file_mb, mb, best.wall, mb / best.wall, best.cpu, mb / best.cpu);
  }
}
