// The HDF5 readers run in a child process (io/isolated_source.hpp): whatever happens to the
// child (a crash, an endless loop, an error) reaches the caller as one exception, and a
// corrupt file never takes taco down.
#include "core/error.hpp"
#include "io/isolated_source.hpp"
#include "io/readers.hpp"
#include "test_io_support.hpp"

#include <csignal>
#include <cstdlib>
#include <sstream>

using namespace taco;
using namespace taco::iotest;

namespace {

// A source that does what it is told, in the child.
class Scripted final : public TensorSource {
 public:
  explicit Scripted(int crash_on_read) : crash_on_read_(crash_on_read) {}
  const std::string& path() const override { return path_; }
  std::string format() const override { return "scripted"; }
  size_t size() const override { return 2; }
  TensorInfo info(size_t i) const override {
    TensorInfo t;
    t.name = i == 0 ? "ok" : "bad";
    t.shape = {2, 3};
    t.meta.site = "attn_out";
    t.meta.extra["k"] = "v";
    return t;
  }
  Tensor read(size_t i) override {
    if (i == 1 && crash_on_read_ == 1) std::raise(SIGSEGV);
    if (i == 1 && crash_on_read_ == 2) throw_input_error("bad tensor here");
    if (i == 1 && crash_on_read_ == 3) throw_error("internal trouble");
    if (i == 1 && crash_on_read_ == 4)
      for (volatile uint64_t spin = 0;; spin = spin + 1) {
      }
    Tensor t;
    t.name = info(i).name;
    t.shape = {2, 3};
    t.values = {1, 2, 3, 4, 5, float(i)};
    return t;
  }

 private:
  std::string path_ = "scripted.h5";
  int crash_on_read_;
};

}  // namespace

TEST_CASE("isolated source: listings and tensors cross the process boundary intact",
          "[io][isolation]") {
  auto src = open_isolated("scripted.h5", [] { return std::make_unique<Scripted>(0); });
  REQUIRE(src->format() == "scripted");
  REQUIRE(src->size() == 2);
  REQUIRE(src->info(1).name == "bad");
  REQUIRE(src->info(0).meta.extra.at("k") == "v");
  REQUIRE(src->read(0).values == std::vector<float>{1, 2, 3, 4, 5, 0});
  REQUIRE(src->read(1).values == std::vector<float>{1, 2, 3, 4, 5, 1});
}

TEST_CASE("isolated source: a crash in the child is one InputError naming the file",
          "[io][isolation]") {
  // While opening.
  const std::string open_msg = input_error_of([] {
    open_isolated("crash.h5", []() -> std::unique_ptr<TensorSource> {
      std::raise(SIGSEGV);
      return nullptr;
    });
  });
  REQUIRE_THAT(open_msg, Catch::Matchers::StartsWith(
                             "crash.h5: the HDF5 library crashed (SIGSEGV) opening it"));
  REQUIRE(open_msg.find('\n') == std::string::npos);
  // While reading a tensor; the source is then unusable, and says so.
  auto src = open_isolated("scripted.h5", [] { return std::make_unique<Scripted>(1); });
  REQUIRE(src->read(0).values.size() == 6);
  REQUIRE_THAT(input_error_of([&] { src->read(1); }),
               Catch::Matchers::Contains("crashed (SIGSEGV) reading tensor 'bad'"));
  REQUIRE_THAT(input_error_of([&] { src->read(0); }),
               Catch::Matchers::Contains("the reader process is gone"));
}

TEST_CASE("isolated source: errors keep their kind; the child serves on after an InputError",
          "[io][isolation]") {
  auto src = open_isolated("scripted.h5", [] { return std::make_unique<Scripted>(2); });
  REQUIRE(input_error_of([&] { src->read(1); }) == "bad tensor here");
  REQUIRE(src->read(0).values.size() == 6);
  auto other = open_isolated("scripted.h5", [] { return std::make_unique<Scripted>(3); });
  REQUIRE_THROWS_AS(other->read(1), Error);
  try {
    other->read(1);
  } catch (const InputError&) {
    FAIL("an internal error must not become an InputError");
  } catch (const Error& e) {
    REQUIRE(std::string(e.what()) == "internal trouble");
  }
  REQUIRE(input_error_of([] {
            open_isolated("x.h5", []() -> std::unique_ptr<TensorSource> {
              throw_input_error("x.h5: not good");
            });
          }) == "x.h5: not good");
}

TEST_CASE("isolated source: an endless loop in the child ends at its CPU-time budget",
          "[io][isolation]") {
  ::setenv("TACO_READER_CPU_SECONDS", "1", 1);
  auto src = open_isolated("loop.h5", [] { return std::make_unique<Scripted>(4); });
  const std::string msg = input_error_of([&] { src->read(1); });
  ::unsetenv("TACO_READER_CPU_SECONDS");
  REQUIRE_THAT(msg, Catch::Matchers::Contains(
                        "loop.h5: the HDF5 library ran out of its CPU-time budget reading "
                        "tensor 'bad'"));
}

TEST_CASE("a shipped trace with a flipped bit that crashes libhdf5 is one InputError",
          "[io][isolation]") {
  // The battery's case: byte 5054 of the SP sample, bit 2 (libhdf5 1.10 crashes in H5HG_read).
  std::ifstream in(
      std::string(TACO_SOURCE_DIR) + "/traces/samples/gpt6l512-tp2-sp-layer2-allgather.h5",
      std::ios::binary);
  Bytes b((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  REQUIRE(b.size() > 5054);
  b[5054] ^= 4;
  TempDir dir;
  write_bytes(dir.file("x.h5"), b);
  const std::string msg = input_error_of([&] { read_all(dir.file("x.h5")); });
  REQUIRE_THAT(msg, Catch::Matchers::StartsWith(dir.file("x.h5") + ": "));
  REQUIRE(msg.find('\n') == std::string::npos);
}

TEST_CASE("isolated source: many open sources keep a few reader processes, restarted on demand",
          "[io][isolation]") {
  std::vector<std::unique_ptr<TensorSource>> sources;
  for (int i = 0; i < 20; ++i)
    sources.push_back(open_isolated("many.h5", [] { return std::make_unique<Scripted>(0); }));
  // Every one still reads, in any order (its child restarted when another took its slot).
  for (int round = 0; round < 2; ++round)
    for (size_t i = sources.size(); i-- > 0;) REQUIRE(sources[i]->read(1).values.back() == 1);
  // The processes whose parent is this one: at most 8 readers.
  int children = 0;
  for (const auto& e : std::filesystem::directory_iterator("/proc")) {
    std::ifstream stat(e.path() / "stat");
    std::string line;
    if (!std::getline(stat, line) || line.rfind(')') == std::string::npos) continue;
    std::istringstream rest(line.substr(line.rfind(')') + 2));
    char state = 0;
    long ppid = 0;
    rest >> state >> ppid;
    children += ppid == long(::getpid());
  }
  REQUIRE(children >= 1);
  REQUIRE(children <= 8);
  sources.clear();
}
