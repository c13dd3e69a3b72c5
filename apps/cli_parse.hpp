#pragma once
// Helpers shared by the subcommands: comma-separated lists and byte sizes as nccl-tests writes
// them (4096, 512K, 32M, 1G; K/M/G are binary; KB/KiB and B accepted), and the process's own
// command line for provenance.
#include "core/error.hpp"

#include <CLI/CLI.hpp>

#include <cctype>
#include <cstdint>
#include <fstream>
#include <string>
#include <vector>

namespace taco::cli {

// For unsigned options: CLI11 would take "-1" as 2^64 - 1.
inline CLI::Validator non_negative() {
  return CLI::Validator(
      [](std::string& s) {
        return s.rfind('-', 0) == 0 ? "must be a non-negative integer, got " + s : std::string();
      },
      "UINT", "non_negative");
}

// For counts where 0 and negatives mean nothing (an unset option keeps its own default).
inline CLI::Validator positive() {
  return CLI::Validator(
      [](std::string& s) {
        const bool zero = s.find_first_not_of('0') == std::string::npos;
        return s.rfind('-', 0) == 0 || zero ? "must be a positive integer, got " + s
                                            : std::string();
      },
      "N>0", "positive");
}

// More threads than this is a typo, not a machine: libgomp fails or crashes well before 65536.
inline constexpr int kMaxThreads = 1024;

// "a, b,c" -> {"a", "b", "c"}: entries trimmed; an empty entry is an InputError naming the flag.
inline std::vector<std::string> split_list(const std::string& s, const char* flag) {
  std::vector<std::string> out;
  std::string cur;
  for (char c : s + ",") {
    if (c != ',') {
      cur += c;
      continue;
    }
    while (!cur.empty() && std::isspace(static_cast<unsigned char>(cur.back()))) cur.pop_back();
    size_t b = 0;
    while (b < cur.size() && std::isspace(static_cast<unsigned char>(cur[b]))) ++b;
    cur = cur.substr(b);
    TACO_REQUIRE_INPUT(!cur.empty(), "{} '{}': empty list entry", flag, s);
    out.push_back(cur);
    cur.clear();
  }
  return out;
}

inline int64_t parse_bytes(const std::string& s, const char* flag) {
  TACO_REQUIRE_INPUT(!s.empty(), "{}: empty size", flag);
  size_t i = 0;
  while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i]))) ++i;
  TACO_REQUIRE_INPUT(i > 0 && i < 16, "{} '{}': expected a size like 4096, 512K, 32M or 1G", flag,
                     s);
  int64_t v = std::stoll(s.substr(0, i));
  std::string suf = s.substr(i);
  for (auto& c : suf) c = char(std::toupper(static_cast<unsigned char>(c)));
  if (suf == "K" || suf == "KB" || suf == "KIB")
    v <<= 10;
  else if (suf == "M" || suf == "MB" || suf == "MIB")
    v <<= 20;
  else if (suf == "G" || suf == "GB" || suf == "GIB")
    v <<= 30;
  else
    TACO_REQUIRE_INPUT(suf.empty() || suf == "B", "{} '{}': unknown unit '{}' (K, M, G)", flag, s,
                       suf);
  TACO_REQUIRE_INPUT(v > 0, "{} '{}': must be positive", flag, s);
  return v;
}

// The command line as the kernel saw it, argv[0] included (Linux: /proc/self/cmdline); empty
// where that cannot be read.
inline std::vector<std::string> self_argv() {
  std::ifstream in("/proc/self/cmdline", std::ios::binary);
  std::vector<std::string> argv;
  std::string arg;
  while (std::getline(in, arg, '\0')) argv.push_back(arg);
  return argv;
}

}  // namespace taco::cli
