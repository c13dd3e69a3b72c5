#pragma once
// Errors. Library code throws; only the CLI's main() catches, prints one line and exits.
//   InputError  -> bad input (file, flag, shape, dtype): exit code 2
//   Error       -> anything else that went wrong: exit code 1
#include <fmt/format.h>

#include <stdexcept>
#include <string>

namespace taco {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A problem with what the user gave us. Messages name the file (or flag) and the problem.
class InputError : public Error {
 public:
  using Error::Error;
};

template <typename... Args>
[[noreturn]] void throw_input_error(fmt::format_string<Args...> f, Args&&... args) {
  throw InputError(fmt::format(f, std::forward<Args>(args)...));
}

template <typename... Args>
[[noreturn]] void throw_error(fmt::format_string<Args...> f, Args&&... args) {
  throw Error(fmt::format(f, std::forward<Args>(args)...));
}

}  // namespace taco

// Internal invariant: a failure is a bug in taco, not bad input.
#define TACO_ASSERT(cond, ...)                                                                \
  do {                                                                                        \
    if (!(cond))                                                                              \
      ::taco::throw_error("{}:{}: internal check '{}' failed: {}", __FILE__, __LINE__, #cond, \
                          ::fmt::format(__VA_ARGS__));                                        \
  } while (0)

// Validation of user input: throws InputError with the formatted message.
#define TACO_REQUIRE_INPUT(cond, ...)                    \
  do {                                                   \
    if (!(cond)) ::taco::throw_input_error(__VA_ARGS__); \
  } while (0)
