#pragma once
// Subcommands register themselves here: each cmd_*.cpp defines a function that adds its
// subcommand (options, help text with examples, callback) to the root app, and registers it
// with TACO_REGISTER_COMMAND(order, function). main() adds them in `order`.
#include <CLI/CLI.hpp>

#include <utility>
#include <vector>

namespace taco::cli {

using AddCommand = void (*)(CLI::App& root);

inline std::vector<std::pair<int, AddCommand>>& command_table() {
  static std::vector<std::pair<int, AddCommand>> table;
  return table;
}

struct CommandRegistration {
  CommandRegistration(int order, AddCommand add) { command_table().emplace_back(order, add); }
};

}  // namespace taco::cli

#define TACO_REGISTER_COMMAND(order, fn) \
  static const ::taco::cli::CommandRegistration taco_command_registration_##fn(order, fn)
