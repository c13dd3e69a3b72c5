#pragma once
// The one exit-code policy of the project's command-line programs: parse `app`, run `body`, and
// turn what escapes into one line on stderr ("PROG: error: ...") and an exit code: 0 done, 2 bad
// input (CLI11 parse errors, taco::InputError), 1 anything else. Help and version print and exit 0.
// Parse errors say what was meant where they can: an unknown subcommand or option gets the
// nearest known one, and an option given an empty value ("--variants ''") is refused.
#include <CLI/CLI.hpp>

#include <algorithm>
#include <cstdio>
#include <new>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "core/interrupt.hpp"

namespace taco::cli {

// Levenshtein distance (names are short).
inline size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

// The candidate nearest to `word` when it is near enough to be a typo ("" otherwise): within
// two edits (one for short words), or one is a prefix of the other.
inline std::string nearest(const std::string& word, const std::vector<std::string>& candidates) {
  std::string best;
  size_t best_d = std::string::npos;
  for (const std::string& c : candidates) {
    size_t d = edit_distance(word, c);
    const bool prefix = !word.empty() && (c.rfind(word, 0) == 0 || word.rfind(c, 0) == 0);
    if (prefix) d = std::min<size_t>(d, 1);
    if (d < best_d) {
      best_d = d;
      best = c;
    }
  }
  const size_t limit = word.size() <= 4 ? 1 : 2;
  return best_d <= limit ? best : std::string();
}

// "unknown command 'stduy'; did you mean 'study'?" for a first argument that is no subcommand.
inline std::string unknown_subcommand(CLI::App& app, int argc, char** argv) {
  if (argc < 2 || argv[1][0] == '-') return "";
  const std::string word = argv[1];
  std::vector<std::string> names;
  for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; })) {
    if (sub->get_name() == word) return "";
    names.push_back(sub->get_name());
  }
  const std::string near = nearest(word, names);
  if (!near.empty()) return fmt::format("unknown command '{}'; did you mean '{}'?", word, near);
  std::string all;
  for (const std::string& n : names) all += (all.empty() ? "" : ", ") + n;
  return fmt::format("unknown command '{}' (commands: {})", word, all);
}

// The innermost subcommand argv names ("taco codec encode ..." -> encode) and where its
// arguments start.
inline CLI::App* named_subcommand(CLI::App& app, int argc, char** argv, int& first_arg) {
  CLI::App* scope = &app;
  first_arg = 1;
  while (first_arg < argc) {
    CLI::App* next = nullptr;
    for (CLI::App* sub : scope->get_subcommands([](CLI::App*) { return true; }))
      if (sub->get_name() == argv[first_arg]) next = sub;
    if (!next) break;
    scope = next;
    ++first_arg;
  }
  return scope;
}

// "unknown option --variant; did you mean --variants?" for the first option-looking argument
// that the subcommand (or the root) does not have.
inline std::string unknown_option(CLI::App& app, int argc, char** argv) {
  int first_arg = 1;
  CLI::App* scope = named_subcommand(app, argc, argv, first_arg);
  std::vector<std::string> longs;
  for (const CLI::Option* o : scope->get_options()) {
    for (const std::string& n : o->get_lnames()) longs.push_back("--" + n);
    for (const std::string& n : o->get_snames()) longs.push_back("-" + n);
  }
  std::string command;
  for (int i = 1; i < first_arg; ++i) command += std::string(" ") + argv[i];
  for (int i = first_arg; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--") break;
    if (arg.size() < 2 || arg[0] != '-' || (arg[1] >= '0' && arg[1] <= '9') || arg[1] == '.')
      continue;
    arg = arg.substr(0, arg.find('='));
    if (arg.size() == 2 || arg.rfind("--", 0) == 0) {
      if (std::find(longs.begin(), longs.end(), arg) != longs.end()) continue;
    } else if (std::find(longs.begin(), longs.end(), arg.substr(0, 2)) != longs.end()) {
      continue;  // -n5, -qv: short options with their value or grouped
    }
    const std::string near = nearest(arg, longs);
    return near.empty() ? fmt::format("unknown option {} ('{}{} --help' lists the options)", arg,
                                      app.get_name(), command)
                        : fmt::format("unknown option {}; did you mean {}?", arg, near);
  }
  return "";
}

// An option given an empty value ("--variants ''", "--out ''") is a mistake, whatever its type.
inline void require_no_empty_values(const CLI::App& app) {
  for (const CLI::App* sub : app.get_subcommands()) {
    for (const CLI::Option* o : sub->get_options()) {
      if (o->count() == 0 || o->get_type_size() == 0) continue;  // absent, or a flag
      const std::string name = !o->get_lnames().empty()   ? "--" + o->get_lnames().front()
                               : !o->get_snames().empty() ? "-" + o->get_snames().front()
                                                          : o->get_name();
      for (const std::string& v : o->results())
        TACO_REQUIRE_INPUT(!v.empty(), "{}: empty value", name);
    }
    require_no_empty_values(*sub);
  }
}

template <class Body>
int run_main(CLI::App& app, const char* prog, int argc, char** argv, Body&& body) {
  install_interrupt_handlers(prog);  // an interrupted command leaves no partial output
  try {
    if (const std::string msg = unknown_subcommand(app, argc, argv); !msg.empty()) {
      std::fprintf(stderr, "%s: error: %s\n", prog, msg.c_str());
      return 2;
    }
    // Runs after parsing, before any subcommand's callback does work.
    app.parse_complete_callback([&app] { require_no_empty_values(app); });
    try {
      app.parse(argc, argv);
    } catch (const CLI::Success&) {
      throw;  // --help, --version
    } catch (const CLI::ParseError&) {
      // A mistyped option is the cause whatever CLI11 noticed first ("--variant is required"
      // after "--varient"): name it, and what was meant.
      if (const std::string msg = unknown_option(app, argc, argv); !msg.empty())
        throw InputError(msg);
      throw;
    }
    body();
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "%s: error: %s\n", prog, e.what());
    return 2;
  } catch (const taco::InputError& e) {
    std::fprintf(stderr, "%s: error: %s\n", prog, e.what());
    return 2;
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "%s: error: out of host memory\n", prog);
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: error: %s\n", prog, e.what());
    return 1;
  }
  return 0;
}

}  // namespace taco::cli
