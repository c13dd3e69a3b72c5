// Outputs appear whole or not at all: files (AtomicFile), directories of outputs
// (AtomicDirectory), and the checks that keep --out from replacing what it must not.
#include "core/atomic_file.hpp"
#include "core/error.hpp"
#include "test_io_support.hpp"

#include <sys/stat.h>

using namespace taco;
using namespace taco::iotest;

namespace {

std::string slurp(const std::string& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

}  // namespace

TEST_CASE("check_output_file refuses directories, devices, a missing directory and ''",
          "[core][outputs]") {
  TempDir dir;
  REQUIRE_THAT(input_error_of([&] { check_output_file(dir.path(), "--out"); }),
               Catch::Matchers::Contains("is a directory"));
  REQUIRE_THAT(input_error_of([&] { check_output_file("/dev/null", "--out"); }),
               Catch::Matchers::Contains("not a regular file"));
  REQUIRE_THAT(input_error_of([&] { check_output_file(dir.file("no/such/x.h5"), "--out"); }),
               Catch::Matchers::Contains("does not exist"));
  REQUIRE_THAT(input_error_of([&] { check_output_file("", "--out"); }),
               Catch::Matchers::Contains("empty"));
  REQUIRE(::mkfifo(dir.file("fifo").c_str(), 0600) == 0);
  REQUIRE_THAT(input_error_of([&] { check_output_file(dir.file("fifo"), "--out"); }),
               Catch::Matchers::Contains("not a regular file"));
  write_bytes(dir.file("old.h5"), {1});
  check_output_file(dir.file("old.h5"), "--out");  // a regular file may be replaced
  check_output_file(dir.file("new.h5"), "--out");
  // AtomicFile applies the same checks, and leaves nothing when not committed.
  REQUIRE_THROWS_AS(write_file_atomically(dir.file("fifo"), "x"), InputError);
  {
    AtomicFile f(dir.file("a.txt"));
    f.stream() << "half";
  }
  REQUIRE_FALSE(std::filesystem::exists(dir.file("a.txt")));
}

TEST_CASE("AtomicDirectory swaps a whole set in, and never mixes two runs", "[core][outputs]") {
  TempDir dir;
  const std::string out = dir.file("out");
  const std::vector<std::string> owned = {"a.csv", "b.csv", "report"};
  {
    AtomicDirectory d(out, owned, "--out");
    write_file_atomically(d.staging() + "/a.csv", "1");
    write_file_atomically(d.staging() + "/b.csv", "1");
    d.commit();
  }
  REQUIRE(slurp(out + "/a.csv") == "1");
  std::filesystem::create_directories(out + "/report");  // what a later command adds
  {
    // The second run writes only a.csv: b.csv and report/ of the first must not survive.
    AtomicDirectory d(out, owned, "--out");
    write_file_atomically(d.staging() + "/a.csv", "2");
    d.commit();
  }
  REQUIRE(slurp(out + "/a.csv") == "2");
  REQUIRE_FALSE(std::filesystem::exists(out + "/b.csv"));
  REQUIRE_FALSE(std::filesystem::exists(out + "/report"));
  {
    // Not committed (an error midway): the old set stays as it was, no temp dir remains.
    AtomicDirectory d(out, owned, "--out");
    write_file_atomically(d.staging() + "/a.csv", "3");
  }
  REQUIRE(slurp(out + "/a.csv") == "2");
  REQUIRE(dir.listing() == std::vector<std::string>{"out"});
  // A directory holding anything else is refused up front, and left alone.
  write_bytes(out + "/mine.txt", {7});
  REQUIRE_THAT(input_error_of([&] { AtomicDirectory(out, owned, "--out"); }),
               Catch::Matchers::Contains("holds 'mine.txt', which this command did not write"));
  REQUIRE(std::filesystem::exists(out + "/mine.txt"));
  write_bytes(dir.file("file"), {1});
  REQUIRE_THAT(input_error_of([&] { AtomicDirectory(dir.file("file"), owned, "--out"); }),
               Catch::Matchers::Contains("exists and is not a directory"));
  REQUIRE_THAT(input_error_of([&] { AtomicDirectory("", owned, "--out"); }),
               Catch::Matchers::Contains("empty"));
  // A trailing slash names the same directory; missing parents are created.
  {
    AtomicDirectory d(dir.file("deep/er/out2/"), owned, "--out");
    write_file_atomically(d.staging() + "/a.csv", "4");
    d.commit();
  }
  REQUIRE(slurp(dir.file("deep/er/out2/a.csv")) == "4");
}
