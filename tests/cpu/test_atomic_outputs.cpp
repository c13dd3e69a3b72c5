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

TEST_CASE("check_not_an_input refuses an output that is an input or holds one", "[core][outputs]") {
  namespace fs = std::filesystem;
  TempDir dir;
  write_bytes(dir.file("x.npy"), {1});
  write_bytes(dir.file("other.npy"), {1});
  auto refused = [](const std::string& out, const std::vector<std::string>& in, OutputKind kind) {
    return input_error_of([&] { check_not_an_input(out, in, "--out", kind); });
  };
  const std::string x = dir.file("x.npy");
  // The same file: by its path, another spelling of it, a symbolic link, a hard link.
  REQUIRE_THAT(refused(x, {x}, OutputKind::File), Catch::Matchers::Contains("is the input"));
  REQUIRE_THAT(refused(dir.path() + "/./x.npy", {x}, OutputKind::File),
               Catch::Matchers::Contains("is the input " + x));
  fs::create_symlink(x, dir.file("soft.npy"));
  fs::create_hard_link(x, dir.file("hard.npy"));
  for (const char* link : {"soft.npy", "hard.npy"})
    REQUIRE_THAT(refused(dir.file(link), {dir.file("other.npy"), x}, OutputKind::File),
                 Catch::Matchers::Contains("(the same file)"));
  // Another file, or a path that does not exist yet, replaces no input.
  check_not_an_input(dir.file("other.npy"), {x}, "--out", OutputKind::File);
  check_not_an_input(dir.file("new.npy"), {x}, "--out", OutputKind::File);
  // A directory output: an input at any depth in it, through a link to it too, or itself.
  fs::create_directories(dir.file("out/report"));
  write_bytes(dir.file("out/report/y.npy"), {1});
  fs::create_directory_symlink(dir.file("out"), dir.file("out-link"));
  REQUIRE_THAT(refused(dir.file("out"), {x, dir.file("out/report/y.npy")}, OutputKind::Directory),
               Catch::Matchers::Contains("holds the input " + dir.file("out/report/y.npy")));
  REQUIRE_THAT(refused(dir.file("out-link"), {dir.file("out/report/y.npy")}, OutputKind::Directory),
               Catch::Matchers::Contains("holds the input"));
  REQUIRE_THAT(refused(dir.file("out"), {dir.file("out-link/report")}, OutputKind::Directory),
               Catch::Matchers::Contains("holds the input"));
  REQUIRE_THAT(refused(dir.file("out"), {dir.file("out-link")}, OutputKind::Directory),
               Catch::Matchers::Contains("is the input"));
  // An output directory inside an input directory, or beside it, is fine.
  check_not_an_input(dir.file("out/report"), {dir.file("out")}, "--out", OutputKind::Directory);
  check_not_an_input(dir.file("out2"), {dir.file("out/report/y.npy")}, "--out",
                     OutputKind::Directory);
  // A file output never holds anything.
  check_not_an_input(x, {dir.file("out/report/y.npy")}, "--out", OutputKind::File);
}
