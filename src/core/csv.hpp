#pragma once
// The cells of every CSV a study writes (docs/results-schema.md): RFC 4180 quoting, numbers as
// %.9g, trace metadata's -1 ("unknown") as an empty cell.
#include <fmt/format.h>

#include <cstdint>
#include <string>

namespace taco::csv {

inline std::string field(const std::string& s) {
  if (s.find_first_of(",\"\n\r") == std::string::npos) return s;
  std::string out = "\"";
  for (char c : s) {
    if (c == '"') out += '"';
    out += c;
  }
  return out + "\"";
}

inline std::string num(double v) {
  return fmt::format("{:.9g}", v);
}

inline std::string known(int64_t v) {
  return v < 0 ? std::string() : std::to_string(v);
}

}  // namespace taco::csv
