// taco report: every figure a results directory can feed, plus an index.html with captions and
// provenance. The drawing is done by analysis/report.py (matplotlib); this command finds the
// scripts, runs them with the right interpreter, and turns their outcome into taco's exit codes
// (2 = bad input, 1 = anything else). See docs/report.md.
#include "command.hpp"
#include "core/atomic_file.hpp"
#include "core/error.hpp"
#include "core/version.hpp"

#include <fcntl.h>
#include <poll.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fmt/format.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <system_error>
#include <vector>

extern char** environ;

namespace {

namespace fs = std::filesystem;

struct ReportArgs {
  std::string results_dir;
  std::string out;  // default: RESULTS_DIR/report
  bool quiet = false;
};

// Where analysis/report.py lives: $TACO_ANALYSIS_DIR, else the source tree this binary was
// built from, else next to the binary (bin/analysis, bin/../analysis, bin/../share/taco/analysis).
std::string find_analysis_dir() {
  if (const char* env = std::getenv("TACO_ANALYSIS_DIR"); env != nullptr && *env != '\0') {
    std::error_code ec;
    TACO_REQUIRE_INPUT(fs::is_regular_file(fs::path(env) / "report.py", ec),
                       "TACO_ANALYSIS_DIR='{}' has no report.py", env);
    return env;
  }
  std::vector<fs::path> candidates;
#ifdef TACO_SOURCE_DIR
  candidates.emplace_back(fs::path(TACO_SOURCE_DIR) / "analysis");
#endif
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    const fs::path bin = exe.parent_path();
    candidates.push_back(bin / "analysis");
    candidates.push_back(bin.parent_path() / "analysis");
    candidates.push_back(bin.parent_path() / "share" / "taco" / "analysis");
  }
  for (const auto& c : candidates) {
    if (fs::is_regular_file(c / "report.py", ec)) return c.string();
  }
  taco::throw_error(
      "cannot find analysis/report.py (looked in the source tree and next to the binary); "
      "set TACO_ANALYSIS_DIR to the analysis/ folder of a taco checkout");
}

// Closes a file descriptor once.
struct Fd {
  int fd = -1;
  ~Fd() { reset(); }
  void reset() {
    if (fd >= 0) ::close(fd);
    fd = -1;
  }
};

struct ChildResult {
  int status = 0;
  std::string out;         // the child's stdout
  std::string error_line;  // its "report: error: ..." line, prefix removed
};

// Runs argv with stdout and stderr piped back. stderr lines are passed through to our stderr as
// they arrive, except the one error line, which is kept for taco's own message.
ChildResult run_child(const std::vector<std::string>& argv, const std::string& tool_env) {
  int out_pipe[2], err_pipe[2];
  if (::pipe2(out_pipe, O_CLOEXEC) != 0) taco::throw_error("pipe: {}", std::strerror(errno));
  Fd out_r{out_pipe[0]}, out_w{out_pipe[1]};
  if (::pipe2(err_pipe, O_CLOEXEC) != 0) taco::throw_error("pipe: {}", std::strerror(errno));
  Fd err_r{err_pipe[0]}, err_w{err_pipe[1]};

  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, out_w.fd, STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&fa, err_w.fd, STDERR_FILENO);

  std::vector<std::string> env_store;
  for (char** e = environ; *e != nullptr; ++e) {
    if (std::strncmp(*e, "TACO_REPORT_TOOL=", 17) != 0) env_store.emplace_back(*e);
  }
  env_store.push_back("TACO_REPORT_TOOL=" + tool_env);
  std::vector<char*> envp, args;
  for (auto& s : env_store) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::vector<std::string> argv_store = argv;
  for (auto& s : argv_store) args.push_back(s.data());
  args.push_back(nullptr);

  pid_t pid = -1;
  const int rc = posix_spawnp(&pid, args[0], &fa, nullptr, args.data(), envp.data());
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) {
    taco::throw_error(
        "cannot run the Python interpreter '{}': {} (set PYTHON to one with "
        "numpy and matplotlib)",
        argv[0], std::strerror(rc));
  }
  out_w.reset();
  err_w.reset();

  ChildResult res;
  std::string err_buf;
  const std::string prefix = "report: error: ";
  auto flush_lines = [&](bool all) {
    size_t start = 0, nl;
    while ((nl = err_buf.find('\n', start)) != std::string::npos ||
           (all && start < err_buf.size())) {
      if (nl == std::string::npos) nl = err_buf.size();
      const std::string line = err_buf.substr(start, nl - start);
      if (line.rfind(prefix, 0) == 0) {
        res.error_line = line.substr(prefix.size());
      } else {
        std::fprintf(stderr, "%s\n", line.c_str());
      }
      start = nl + 1;
    }
    err_buf.erase(0, std::min(start, err_buf.size()));
  };

  pollfd fds[2] = {{out_r.fd, POLLIN, 0}, {err_r.fd, POLLIN, 0}};
  int open_fds = 2;
  char buf[4096];
  while (open_fds > 0) {
    if (::poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      taco::throw_error("poll: {}", std::strerror(errno));
    }
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || (fds[i].revents & (POLLIN | POLLHUP | POLLERR)) == 0) continue;
      const ssize_t n = ::read(fds[i].fd, buf, sizeof buf);
      if (n > 0) {
        (i == 0 ? res.out : err_buf).append(buf, static_cast<size_t>(n));
        if (i == 1) flush_lines(false);
      } else if (n == 0 || errno != EINTR) {
        fds[i].fd = -1;
        --open_fds;
      }
    }
  }
  flush_lines(true);
  while (::waitpid(pid, &res.status, 0) < 0) {
    if (errno != EINTR) taco::throw_error("waitpid: {}", std::strerror(errno));
  }
  return res;
}

void run_report(const ReportArgs& a) {
  std::error_code ec;
  TACO_REQUIRE_INPUT(fs::exists(a.results_dir, ec), "RESULTS_DIR '{}' does not exist",
                     a.results_dir);
  TACO_REQUIRE_INPUT(fs::is_directory(a.results_dir, ec), "RESULTS_DIR '{}' is not a directory",
                     a.results_dir);
  const std::string out = a.out.empty() ? (fs::path(a.results_dir) / "report").string() : a.out;
  TACO_REQUIRE_INPUT(!fs::exists(out, ec) || fs::is_directory(out, ec),
                     "--out '{}' exists and is not a directory", out);
  // The report's files (report.json, index.html, figures/) must not land over its inputs.
  taco::check_not_an_input(out, {a.results_dir}, "--out", taco::OutputKind::Directory);

  const std::string analysis = find_analysis_dir();
  const char* py_env = std::getenv("PYTHON");
  const std::string python = (py_env != nullptr && *py_env != '\0') ? py_env : "python3";
  std::vector<std::string> argv = {python, (fs::path(analysis) / "report.py").string(),
                                   a.results_dir, out};
  if (a.quiet) argv.push_back("--quiet");

  const ChildResult r =
      run_child(argv, fmt::format("taco {} ({}) report", taco::kVersion, taco::kGitCommit));
  if (WIFSIGNALED(r.status)) {
    taco::throw_error("{} was killed by signal {}", argv[1], WTERMSIG(r.status));
  }
  const int code = WIFEXITED(r.status) ? WEXITSTATUS(r.status) : 1;
  if (code == 2) {
    throw taco::InputError(r.error_line.empty() ? fmt::format("{} rejected its input", argv[1])
                                                : r.error_line);
  }
  if (code != 0) {
    taco::throw_error("{} failed (exit status {}){}", argv[1], code,
                      code == 1 ? "; is matplotlib installed for " + python + "?" : "");
  }
  const fs::path index = fs::path(out) / "index.html";
  if (!fs::is_regular_file(index, ec)) {
    taco::throw_error("{} finished but wrote no {}", argv[1], index.string());
  }
  std::printf("%s\n", index.string().c_str());
}

void add_report(CLI::App& root) {
  auto args = std::make_shared<ReportArgs>();
  CLI::App* sub = root.add_subcommand(
      "report", "Draw every figure the results directory can feed, with an index.html");
  sub->add_option("RESULTS_DIR", args->results_dir,
                  "Directory with taco study outputs (results.csv, collectives.csv, "
                  "histograms.csv, selection.json) and any taco bench/comm --json files")
      ->required();
  sub->add_option("--out,-o", args->out,
                  "Output directory (default: RESULTS_DIR/report); gets index.html, report.json "
                  "and figures/NAME.{png,pdf,json}");
  sub->add_flag("--quiet,-q", args->quiet, "No progress lines on stderr");
  sub->footer(
      "Figures whose input is absent are skipped (index.html lists them); a malformed input is "
      "an error (exit 2) and leaves the output directory as it was. Prints the path of "
      "index.html.\n"
      "Environment: PYTHON (interpreter, default python3; needs numpy and matplotlib),\n"
      "  TACO_ANALYSIS_DIR (folder holding report.py; default: the source tree's analysis/).\n"
      "Examples:\n"
      "  taco study trace.h5 --variants taco,fp8-g128,mxfp8 --out results/\n"
      "  taco report results/                      # -> results/report/index.html\n"
      "  taco report results/ --out paper-figs/\n"
      "  PYTHON=.venv/bin/python taco report results/");
  sub->callback([args] { run_report(*args); });
}

}  // namespace

TACO_REGISTER_COMMAND(70, add_report);
