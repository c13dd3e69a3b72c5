#pragma once
// Strict access to JSON inputs of the step model: every missing key, wrong type or value out of
// range is an InputError whose one line names the file, the path inside it and what was found.
#include "core/error.hpp"

#include <nlohmann/json.hpp>

#include <cmath>
#include <fstream>
#include <initializer_list>
#include <set>
#include <sstream>
#include <string>

namespace taco::model::jc {

using nlohmann::json;

inline std::string show(const json& v) {
  std::string s = v.dump();
  return s.size() > 40 ? s.substr(0, 37) + "..." : s;
}

inline json load(const std::string& path, const char* what) {
  std::ifstream in(path, std::ios::binary);
  TACO_REQUIRE_INPUT(in.good(), "{}: cannot open {}", path, what);
  std::stringstream ss;
  ss << in.rdbuf();
  json j;
  try {
    j = json::parse(ss.str());
  } catch (const json::parse_error& e) {
    std::string msg = e.what();
    const auto nl = msg.find('\n');
    if (nl != std::string::npos) msg = msg.substr(0, nl);
    throw_input_error("{}: not valid JSON ({})", path, msg);
  }
  TACO_REQUIRE_INPUT(j.is_object(), "{}: the top level of {} is not an object", path, what);
  return j;
}

inline const json& member(const json& o, const std::string& key, const std::string& where) {
  TACO_REQUIRE_INPUT(o.is_object(), "{}: expected an object, got {}", where, show(o));
  auto it = o.find(key);
  TACO_REQUIRE_INPUT(it != o.end(), "{}: missing key \"{}\"", where, key);
  return *it;
}

inline double number(const json& o, const std::string& key, const std::string& where) {
  const json& v = member(o, key, where);
  TACO_REQUIRE_INPUT(v.is_number(), "{}.{}: expected a number, got {}", where, key, show(v));
  const double x = v.get<double>();
  TACO_REQUIRE_INPUT(std::isfinite(x), "{}.{}: not a finite number", where, key);
  return x;
}

inline double positive(const json& o, const std::string& key, const std::string& where) {
  const double x = number(o, key, where);
  TACO_REQUIRE_INPUT(x > 0, "{}.{}: must be > 0, got {}", where, key, show(o.at(key)));
  return x;
}

inline double non_negative(const json& o, const std::string& key, const std::string& where) {
  const double x = number(o, key, where);
  TACO_REQUIRE_INPUT(x >= 0, "{}.{}: must be >= 0, got {}", where, key, show(o.at(key)));
  return x;
}

inline int64_t integer(const json& o, const std::string& key, const std::string& where,
                       int64_t min_value) {
  const json& v = member(o, key, where);
  TACO_REQUIRE_INPUT(v.is_number_integer(), "{}.{}: expected an integer, got {}", where, key,
                     show(v));
  const int64_t x = v.get<int64_t>();
  TACO_REQUIRE_INPUT(x >= min_value, "{}.{}: must be >= {}, got {}", where, key, min_value, x);
  return x;
}

inline std::string string(const json& o, const std::string& key, const std::string& where) {
  const json& v = member(o, key, where);
  TACO_REQUIRE_INPUT(v.is_string(), "{}.{}: expected a string, got {}", where, key, show(v));
  return v.get<std::string>();
}

inline std::string one_of(const json& o, const std::string& key, const std::string& where,
                          std::initializer_list<const char*> allowed) {
  const std::string s = string(o, key, where);
  std::string list;
  for (const char* a : allowed) {
    if (s == a) return s;
    list += list.empty() ? a : std::string(", ") + a;
  }
  throw_input_error("{}.{}: \"{}\" is not one of {}", where, key, s, list);
}

inline bool boolean(const json& o, const std::string& key, const std::string& where) {
  const json& v = member(o, key, where);
  TACO_REQUIRE_INPUT(v.is_boolean(), "{}.{}: expected true or false, got {}", where, key, show(v));
  return v.get<bool>();
}

// Keys of `o` must be among `allowed` (typos in a hand-edited file are caught, not ignored).
inline void only_keys(const json& o, const std::string& where,
                      const std::set<std::string>& allowed) {
  for (auto it = o.begin(); it != o.end(); ++it)
    TACO_REQUIRE_INPUT(allowed.count(it.key()) > 0, "{}: unknown key \"{}\"", where, it.key());
}

}  // namespace taco::model::jc
