// taco: the command line. Each subcommand lives in its own cmd_*.cpp.
#include "cli_main.hpp"
#include "command.hpp"
#include "core/error.hpp"
#include "core/version.hpp"

#include <fmt/format.h>

#include <algorithm>

int main(int argc, char** argv) {
  CLI::App app{"taco: study and speed up the compression of tensor-parallel communication", "taco"};
  app.set_version_flag("--version", fmt::format("taco {} ({})", taco::kVersion, taco::kGitCommit));
  app.require_subcommand(1);
  app.footer(
      "Examples:\n"
      "  taco synth --out trace.h5 --hidden 1024 --tokens 2048 --layers 2 --tp 2\n"
      "  taco info trace.h5\n"
      "  taco study trace.h5 --variants taco,fp8-g128,mxfp8 --out results/\n"
      "  taco model --paper --bench bench.json      # when does compressed TP communication pay?\n"
      "Run 'taco SUBCOMMAND --help' for a subcommand's options and examples.");

  auto& table = taco::cli::command_table();
  std::stable_sort(table.begin(), table.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  for (const auto& [order, add] : table) add(app);

  return taco::cli::run_main(app, "taco", argc, argv, [] {});
}
