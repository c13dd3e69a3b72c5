#pragma once
// Tensor names often carry their TP metadata ("layers.3.mlp_out.fwd.rank1.step20"). A name
// pattern reads it back out:
//   layers.{layer}.{site}.{direction}.rank{tp_rank}.step{step}
// Placeholders: {layer} {tp_rank} {tp_size} {step} match a decimal integer (digits only);
// {site} {direction} {collective} {model} match one or more characters other than '.' and
// '/'; {extra.KEY} does too and stores the text in meta.extra[KEY]; {*} matches like a string
// and is dropped. Everything else must match literally, and the pattern must match the whole
// name. Two placeholders may not touch (they would be ambiguous), and each may appear once.
#include "core/tensor.hpp"

#include <string>
#include <vector>

namespace taco {

class NamePattern {
 public:
  // InputError "--name-pattern '<p>': ..." for an unknown placeholder, unbalanced braces,
  // touching or repeated placeholders.
  explicit NamePattern(std::string pattern);

  // If the whole name matches, sets the captured fields in meta and returns true; returns
  // false (meta untouched) otherwise. InputError if a captured integer is out of range.
  bool match(const std::string& name, TensorMeta& meta) const;
  const std::string& text() const { return text_; }

 private:
  enum class Kind { Literal, Integer, String, Ignore };
  struct Part {
    Kind kind;
    std::string text;  // the literal, or the field name the capture goes to
  };
  bool match_from(const std::string& name, size_t part, size_t pos,
                  std::vector<std::string>& captures, std::vector<uint8_t>& failed) const;

  std::string text_;
  std::vector<Part> parts_;
};

}  // namespace taco
