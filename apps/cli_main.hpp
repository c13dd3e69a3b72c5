#pragma once
// The one exit-code policy of the project's command-line programs: parse `app`, run `body`, and
// turn what escapes into one line on stderr ("PROG: error: ...") and an exit code: 0 done, 2 bad
// input (CLI11 parse errors, taco::InputError), 1 anything else. Help and version print and exit 0.
#include <CLI/CLI.hpp>

#include <cstdio>
#include <new>

#include "core/error.hpp"
#include "core/interrupt.hpp"

namespace taco::cli {

template <class Body>
int run_main(CLI::App& app, const char* prog, int argc, char** argv, Body&& body) {
  install_interrupt_handlers(prog);  // an interrupted command leaves no partial output
  try {
    app.parse(argc, argv);
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
