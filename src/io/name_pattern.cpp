#include "io/name_pattern.hpp"

#include "core/error.hpp"
#include "io/meta_fields.hpp"

#include <fmt/format.h>

#include <set>

namespace taco {

NamePattern::NamePattern(std::string pattern) : text_(std::move(pattern)) {
  const std::string ctx = fmt::format("--name-pattern '{}'", text_);
  TACO_REQUIRE_INPUT(!text_.empty(), "--name-pattern: the pattern is empty");
  std::set<std::string> seen;
  size_t i = 0;
  while (i < text_.size()) {
    if (text_[i] == '}') throw_input_error("{}: '}}' without a matching '{{'", ctx);
    if (text_[i] != '{') {
      const size_t next = text_.find_first_of("{}", i);
      const size_t end = next == std::string::npos ? text_.size() : next;
      parts_.push_back({Kind::Literal, text_.substr(i, end - i)});
      i = end;
      continue;
    }
    const size_t close = text_.find('}', i);
    TACO_REQUIRE_INPUT(close != std::string::npos, "{}: '{{' without a matching '}}'", ctx);
    const std::string field = text_.substr(i + 1, close - i - 1);
    TACO_REQUIRE_INPUT(field.find('{') == std::string::npos, "{}: nested '{{'", ctx);
    Kind kind;
    if (field == "layer" || field == "tp_rank" || field == "tp_size" || field == "step") {
      kind = Kind::Integer;
    } else if (field == "site" || field == "direction" || field == "collective" ||
               field == "model" || (field.rfind("extra.", 0) == 0 && field.size() > 6)) {
      kind = Kind::String;
    } else if (field == "*") {
      kind = Kind::Ignore;
    } else {
      throw_input_error(
          "{}: unknown placeholder {{{}}} (known: layer, tp_rank, tp_size, step, site, direction, "
          "collective, model, "
          "extra.KEY, *)",
          ctx, field);
    }
    TACO_REQUIRE_INPUT(kind == Kind::Ignore || seen.insert(field).second,
                       "{}: {{{}}} appears twice", ctx, field);
    TACO_REQUIRE_INPUT(parts_.empty() || parts_.back().kind == Kind::Literal,
                       "{}: placeholders must be separated by literal text (before {{{}}})", ctx,
                       field);
    parts_.push_back({kind, field});
    i = close + 1;
  }
}

bool NamePattern::match_from(const std::string& name, size_t part, size_t pos,
                             std::vector<std::string>& captures,
                             std::vector<uint8_t>& failed) const {
  if (part == parts_.size()) return pos == name.size();
  // Each (part, position) is tried at most once, which keeps matching polynomial.
  uint8_t& memo = failed[part * (name.size() + 1) + pos];
  if (memo) return false;
  const Part& p = parts_[part];
  if (p.kind == Kind::Literal) {
    if (name.compare(pos, p.text.size(), p.text) == 0 &&
        match_from(name, part + 1, pos + p.text.size(), captures, failed))
      return true;
    memo = 1;
    return false;
  }
  // The longest run this placeholder could take, then shorter ones.
  size_t end = pos;
  if (p.kind == Kind::Integer)
    while (end < name.size() && name[end] >= '0' && name[end] <= '9') ++end;
  else
    while (end < name.size() && name[end] != '.' && name[end] != '/') ++end;
  for (size_t stop = end; stop > pos; --stop) {
    if (match_from(name, part + 1, stop, captures, failed)) {
      captures[part] = name.substr(pos, stop - pos);
      return true;
    }
  }
  memo = 1;
  return false;
}

bool NamePattern::match(const std::string& name, TensorMeta& meta) const {
  std::vector<std::string> captures(parts_.size());
  std::vector<uint8_t> failed(parts_.size() * (name.size() + 1), 0);
  if (!match_from(name, 0, 0, captures, failed)) return false;
  TensorMeta out = meta;
  const std::string ctx = fmt::format("tensor '{}' (--name-pattern)", name);
  for (size_t k = 0; k < parts_.size(); ++k) {
    const Part& p = parts_[k];
    if (p.kind == Kind::Integer || p.kind == Kind::String) {
      const bool extra = p.text.rfind("extra.", 0) == 0;
      if (extra)
        out.extra[p.text.substr(6)] = captures[k];
      else
        set_meta_field(out, p.text, captures[k], ctx);
    }
  }
  meta = std::move(out);
  return true;
}

}  // namespace taco
