#include "io/name_rules.hpp"

#include "core/error.hpp"
#include "io/meta_fields.hpp"
#include "io/readers.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <limits>
#include <optional>
#include <set>

namespace taco {
namespace {

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = char(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

bool all_digits(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// Digits as a number that fits `max`; nullopt for anything else (or too many digits).
std::optional<int64_t> number(std::string_view s, int64_t max) {
  if (!all_digits(s)) return std::nullopt;
  int64_t v = 0;
  const auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || ptr != s.data() + s.size() || v > max) return std::nullopt;
  return v;
}

// The text after `prefix` when w is prefix + digits (an optional '_' between them).
std::optional<int64_t> numbered(std::string_view w, std::string_view prefix, int64_t max) {
  if (w.size() <= prefix.size() || w.compare(0, prefix.size(), prefix) != 0) return std::nullopt;
  std::string_view rest = w.substr(prefix.size());
  if (rest.front() == '_') rest.remove_prefix(1);
  return number(rest, max);
}

constexpr int64_t kIntMax = std::numeric_limits<int>::max();
constexpr int64_t kStepMax = std::numeric_limits<int64_t>::max();

const std::set<std::string> kAttention = {"self_attention", "self_attn", "attn", "attention"};
const std::set<std::string> kMlp = {"mlp", "feed_forward", "ffn", "layernorm_mlp"};
const std::set<std::string> kLayerContainers = {"layers", "layer", "h", "blocks", "block"};

// Direction words, with the side of the block they name: 0 input side, 1 output side, -1 neither.
struct DirectionWord {
  const char* word;
  const char* direction;
  int side;
};
const DirectionWord kDirections[] = {
    {"fwd", "fwd", -1},        {"forward", "fwd", -1},     {"output", "fwd", 1},
    {"outputs", "fwd", 1},     {"input", "fwd", 0},        {"inputs", "fwd", 0},
    {"activation", "fwd", -1}, {"activations", "fwd", -1}, {"act", "fwd", -1},
    {"bwd", "bwd", -1},        {"backward", "bwd", -1},    {"grad", "bwd", 0},
    {"grads", "bwd", 0},       {"gradient", "bwd", 0},     {"input_grad", "bwd", 0},
    {"grad_input", "bwd", 0},  {"output_grad", "bwd", 1},  {"grad_output", "bwd", 1},
    {"dgrad", "bwd", 0}};

const std::pair<const char*, const char*> kCollectives[] = {
    {"all_reduce", "all_reduce"}, {"allreduce", "all_reduce"}, {"reduce_scatter", "reduce_scatter"},
    {"all_gather", "all_gather"}, {"allgather", "all_gather"}, {"all_to_all", "all_to_all"},
    {"alltoall", "all_to_all"},   {"send_recv", "send_recv"}};

// Module names that name a site whatever their parent.
const std::pair<const char*, const char*> kLeaves[] = {{"attn_out", "attn_out"},
                                                       {"mlp_out", "mlp_out"},
                                                       {"attn_qkv", "attn_qkv"},
                                                       {"mlp_fc1", "mlp_fc1"},
                                                       {"linear_proj", "attn_out"},
                                                       {"o_proj", "attn_out"},
                                                       {"out_proj", "attn_out"},
                                                       {"wo", "attn_out"},
                                                       {"linear_qkv", "attn_qkv"},
                                                       {"layernorm_qkv", "attn_qkv"},
                                                       {"qkv", "attn_qkv"},
                                                       {"qkv_proj", "attn_qkv"},
                                                       {"query_key_value", "attn_qkv"},
                                                       {"c_attn", "attn_qkv"},
                                                       {"wqkv", "attn_qkv"},
                                                       {"q_proj", "attn_qkv"},
                                                       {"k_proj", "attn_qkv"},
                                                       {"v_proj", "attn_qkv"},
                                                       {"wq", "attn_qkv"},
                                                       {"wk", "attn_qkv"},
                                                       {"wv", "attn_qkv"},
                                                       {"linear_fc1", "mlp_fc1"},
                                                       {"gate_proj", "mlp_fc1"},
                                                       {"up_proj", "mlp_fc1"},
                                                       {"gate_up_proj", "mlp_fc1"},
                                                       {"dense_h_to_4h", "mlp_fc1"},
                                                       {"fc1", "mlp_fc1"},
                                                       {"c_fc", "mlp_fc1"},
                                                       {"fc_in", "mlp_fc1"},
                                                       {"w1", "mlp_fc1"},
                                                       {"w3", "mlp_fc1"},
                                                       {"linear_fc2", "mlp_out"},
                                                       {"down_proj", "mlp_out"},
                                                       {"dense_4h_to_h", "mlp_out"},
                                                       {"fc2", "mlp_out"},
                                                       {"fc_out", "mlp_out"},
                                                       {"w2", "mlp_out"}};

// A name part or a peeled word that is not a module name: what it says.
struct Decoration {
  enum Kind { Rank, Step, Layer, Direction, Collective, Parameter } kind;
  int64_t value;
  std::string text;  // direction or collective
  int side;
  explicit Decoration(Kind k, int64_t v = -1, std::string t = {}, int s = -1)
      : kind(k), value(v), text(std::move(t)), side(s) {}
};

// `whole`: w is a whole part (short forms like r0, s571, l3 count only then).
std::optional<Decoration> decoration(const std::string& w, bool whole) {
  for (const DirectionWord& d : kDirections)
    if (w == d.word) return Decoration{Decoration::Direction, -1, d.direction, d.side};
  for (const auto& [word, canonical] : kCollectives)
    if (w == word) return Decoration{Decoration::Collective, -1, canonical};
  if (w == "weight" || w == "bias" || w == "weights") return Decoration{Decoration::Parameter};
  for (const char* p : {"tensor_model_parallel_rank", "tp_rank", "tprank", "mp_rank", "rank"}) {
    std::string_view rest = w;
    if (rest.rfind(p, 0) != 0) continue;
    rest.remove_prefix(std::char_traits<char>::length(p));
    if (!rest.empty() && rest.front() == '_') rest.remove_prefix(1);
    // mp_rank_00_001: tensor rank 00 of pipeline stage 001.
    const size_t us = rest.find('_');
    if (std::string_view(p) == "mp_rank" && us != std::string_view::npos &&
        all_digits(rest.substr(us + 1)))
      rest = rest.substr(0, us);
    if (const auto v = number(rest, kIntMax)) return Decoration{Decoration::Rank, *v};
  }
  for (const char* p : {"global_step", "iteration", "step", "iter"})
    if (const auto v = numbered(w, p, kStepMax)) return Decoration{Decoration::Step, *v};
  if (const auto v = numbered(w, "layer", kIntMax)) return Decoration{Decoration::Layer, *v};
  if (whole && w.size() >= 2) {
    const std::string_view rest = std::string_view(w).substr(1);
    if (w[0] == 'r')
      if (const auto v = number(rest, kIntMax)) return Decoration{Decoration::Rank, *v};
    if (w[0] == 's')
      if (const auto v = number(rest, kStepMax)) return Decoration{Decoration::Step, *v};
    if (w[0] == 'l')
      if (const auto v = number(rest, kIntMax)) return Decoration{Decoration::Layer, *v};
  }
  return std::nullopt;
}

struct Parsed {
  NameFields fields;
  int side = -1;                     // from the direction word, for whole blocks
  bool parameter = false;            // a weight or bias: no direction
  std::vector<std::string> modules;  // what is left of each part, in order ("" when all decoration)
};

void take(Parsed& p, const Decoration& d) {
  NameFields& f = p.fields;
  switch (d.kind) {
    case Decoration::Rank:
      if (f.tp_rank < 0) f.tp_rank = int(d.value);
      break;
    case Decoration::Step:
      if (f.step < 0) f.step = d.value;
      break;
    case Decoration::Layer:
      if (f.layer < 0) f.layer = int(d.value);
      break;
    case Decoration::Collective:
      if (f.collective.empty()) f.collective = d.text;
      break;
    case Decoration::Parameter:
      p.parameter = true;
      break;
    case Decoration::Direction:
      // "input_grad" after "fwd": the more specific word wins for the side, bwd wins over fwd.
      if (f.direction.empty() || d.text == "bwd") f.direction = d.text;
      if (d.side >= 0) p.side = d.side;
      break;
  }
}

bool known_module(const std::string& w) {
  for (const auto& [word, site] : kLeaves)
    if (w == word) return true;
  return kAttention.count(w) || kMlp.count(w);
}

// Peels trailing '_'-joined decorations off a part ("linear_fc2_output_rank0" -> "linear_fc2"),
// never off a module name the rules know ("feed_forward" is not "feed" + forward).
std::string peel(const std::string& part, Parsed& p) {
  std::string rest = part;
  if (known_module(rest)) return rest;
  for (;;) {
    bool peeled = false;
    // Try the longest suffix of 1..4 words first ("tp_rank_1", "input_grad", "step_000571").
    std::vector<size_t> cuts;
    for (size_t at = rest.find('_'); at != std::string::npos; at = rest.find('_', at + 1))
      cuts.push_back(at);
    const size_t n = cuts.size();
    for (size_t words = std::min<size_t>(4, n); words >= 1 && !peeled; --words) {
      const size_t cut = cuts[n - words];
      const std::string tail = rest.substr(cut + 1), head = rest.substr(0, cut);
      if (head.empty()) continue;
      if (known_module(rest)) return rest;
      if (const auto d = decoration(tail, false)) {
        take(p, *d);
        rest = head;
        peeled = true;
      }
    }
    if (!peeled) return rest;
  }
}

Parsed parse(std::string_view name) {
  Parsed p;
  std::vector<std::string> parts;
  std::string cur;
  for (char c : name) {
    if (c == '.' || c == '/' || c == ':') {
      if (!cur.empty()) parts.push_back(lower(cur));
      cur.clear();
    } else {
      cur += c;
    }
  }
  if (!cur.empty()) parts.push_back(lower(cur));
  for (size_t i = 0; i < parts.size(); ++i) {
    const std::string& part = parts[i];
    if (kLayerContainers.count(part) && i + 1 < parts.size()) {
      if (const auto v = number(parts[i + 1], kIntMax)) {
        if (p.fields.layer < 0) p.fields.layer = int(*v);
        p.modules.push_back("");
        p.modules.push_back("");
        ++i;
        continue;
      }
    }
    if (all_digits(part)) {  // an index (experts.3): never a module name
      p.modules.push_back("");
      continue;
    }
    if (const auto d = decoration(part, true)) {
      take(p, *d);
      p.modules.push_back("");
      continue;
    }
    p.modules.push_back(peel(part, p));
  }
  return p;
}

std::string leaf_site(const std::string& leaf, const std::string& parent) {
  for (const auto& [word, site] : kLeaves)
    if (leaf == word) return site;
  const bool attn = kAttention.count(parent) > 0, mlp = kMlp.count(parent) > 0;
  if ((leaf == "dense" || leaf == "proj" || leaf == "c_proj") && attn) return "attn_out";
  if ((leaf == "proj" || leaf == "c_proj") && mlp) return "mlp_out";
  if ((leaf == "query" || leaf == "key" || leaf == "value") && (attn || parent == "self"))
    return "attn_qkv";
  return "";
}

}  // namespace

std::string canonical_site(std::string_view word) {
  return leaf_site(lower(word), "");
}

std::string canonical_direction(std::string_view word) {
  const std::string w = lower(word);
  for (const DirectionWord& d : kDirections)
    if (w == d.word) return d.direction;
  return "";
}

NameFields fields_from_name(std::string_view name) {
  Parsed p = parse(name);
  if (p.parameter) p.fields.direction.clear();  // a weight is not a forward or backward message
  // The leaf: the last part with a module name left; its parent: the one before it.
  std::string leaf, parent;
  for (size_t i = p.modules.size(); i-- > 0;) {
    if (p.modules[i].empty()) continue;
    leaf = p.modules[i];
    for (size_t j = i; j-- > 0;)
      if (!p.modules[j].empty()) {
        parent = p.modules[j];
        break;
      }
    break;
  }
  p.fields.site = leaf_site(leaf, parent);
  if (p.fields.site.empty() && !p.fields.direction.empty()) {
    // A whole block: its output side forward, its input side backward, unless a word says which.
    const int side = p.side >= 0 ? p.side : (p.fields.direction == "fwd" ? 1 : 0);
    if (kAttention.count(leaf)) p.fields.site = side == 1 ? "attn_out" : "attn_qkv";
    if (kMlp.count(leaf)) p.fields.site = side == 1 ? "mlp_out" : "mlp_fc1";
  }
  return p.fields;
}

// ---- --name-map -----------------------------------------------------------------------

NameMap::NameMap(std::string regex) : text_(std::move(regex)) {
  const std::string ctx = fmt::format("--name-map '{}'", printable(text_));
  TACO_REQUIRE_INPUT(!text_.empty(), "--name-map: the expression is empty");
  static const std::set<std::string> kFields = {"layer",   "site", "direction", "rank",
                                                "tp_rank", "step", "tp_size",   "collective"};
  // std::regex has no named groups: strip the names, remembering each group's number.
  std::string plain;
  size_t group = 0;
  bool in_class = false;
  std::set<std::string> seen;
  for (size_t i = 0; i < text_.size(); ++i) {
    const char c = text_[i];
    if (c == '\\') {
      plain += c;
      if (i + 1 < text_.size()) plain += text_[++i];
      continue;
    }
    if (in_class) {
      in_class = c != ']';
      plain += c;
      continue;
    }
    if (c == '[') {
      in_class = true;
      plain += c;
      continue;
    }
    if (c != '(') {
      plain += c;
      continue;
    }
    const std::string_view rest = std::string_view(text_).substr(i + 1);
    size_t name_at = std::string_view::npos;
    if (rest.rfind("?P<", 0) == 0)
      name_at = 3;
    else if (rest.rfind("?<", 0) == 0 && rest.size() > 2 && rest[2] != '=' && rest[2] != '!')
      name_at = 2;
    if (name_at != std::string_view::npos) {
      const size_t close = rest.find('>', name_at);
      TACO_REQUIRE_INPUT(close != std::string_view::npos, "{}: unterminated group name", ctx);
      std::string field(rest.substr(name_at, close - name_at));
      TACO_REQUIRE_INPUT(kFields.count(field),
                         "{}: unknown group name '{}' (known: layer, site, direction, rank, step, "
                         "tp_size, collective)",
                         ctx, printable(field));
      if (field == "tp_rank") field = "rank";
      TACO_REQUIRE_INPUT(seen.insert(field).second, "{}: group '{}' appears twice", ctx, field);
      groups_.emplace_back(++group, field);
      plain += '(';
      i += close + 1;
      continue;
    }
    if (rest.empty() || rest.front() != '?') ++group;  // (?: (?= (?! do not capture
    plain += c;
  }
  TACO_REQUIRE_INPUT(!groups_.empty(),
                     "{}: no named group (e.g. (?P<layer>\\d+)); nothing would be taken", ctx);
  try {
    re_ = std::regex(plain, std::regex::ECMAScript);
  } catch (const std::regex_error& e) {
    throw_input_error("{}: not a valid regular expression ({})", ctx, e.what());
  }
  TACO_REQUIRE_INPUT(re_.mark_count() == group,
                     "{}: could not number the groups (found {}, counted {})", ctx,
                     re_.mark_count(), group);
}

bool NameMap::match(const std::string& name, NameFields& out) const {
  // std::regex recurses per character: very long names are not matched rather than risk the stack.
  constexpr size_t kMaxName = 4096;
  if (name.size() > kMaxName) return false;
  std::smatch m;
  bool found = false;
  try {
    found = std::regex_search(name, m, re_);
  } catch (const std::regex_error& e) {
    throw_input_error("--name-map '{}': matching '{}' failed ({})", printable(text_),
                      printable(name), e.what());
  }
  if (!found) return false;
  const std::string ctx = fmt::format("tensor '{}' (--name-map)", printable(name));
  for (const auto& [index, field] : groups_) {
    if (!m[index].matched) continue;
    const std::string v = m[index].str();
    if (field == "site") {
      const std::string c = canonical_site(v);
      out.site = c.empty() ? v : c;
    } else if (field == "direction") {
      const std::string c = canonical_direction(v);
      out.direction = c.empty() ? v : c;
    } else if (field == "collective") {
      out.collective = v;
    } else {
      const auto n = number(v, field == "step" ? kStepMax : kIntMax);
      TACO_REQUIRE_INPUT(n.has_value(), "{}: {} must be digits, got '{}'", ctx, field,
                         printable(v));
      if (field == "layer")
        out.layer = int(*n);
      else if (field == "rank")
        out.tp_rank = int(*n);
      else if (field == "tp_size")
        out.tp_size = int(*n);
      else
        out.step = *n;
    }
  }
  return true;
}

void apply_name_rules(const std::string& name, const std::string& file_hint, const NameMap* map,
                      TensorMeta& meta) {
  NameFields f = fields_from_name(name);
  if (!file_hint.empty()) {
    const NameFields h = fields_from_name(file_hint);
    if (f.tp_rank < 0) f.tp_rank = h.tp_rank;
    if (f.step < 0) f.step = h.step;
    if (f.direction.empty()) f.direction = h.direction;
  }
  if (meta.layer < 0) meta.layer = f.layer;
  if (meta.site.empty()) meta.site = f.site;
  if (meta.direction.empty()) meta.direction = f.direction;
  if (meta.collective.empty()) meta.collective = f.collective;
  if (meta.tp_rank < 0) meta.tp_rank = f.tp_rank;
  if (meta.step < 0) meta.step = f.step;
  // A rank read from a name beyond the TP degree the file records is not that rank: drop it.
  if (meta.tp_size > 0 && meta.tp_rank >= meta.tp_size) meta.tp_rank = -1;
  NameFields m;
  if (map && map->match(name, m)) {
    if (m.layer >= 0) meta.layer = m.layer;
    if (!m.site.empty()) meta.site = m.site;
    if (!m.direction.empty()) meta.direction = m.direction;
    if (!m.collective.empty()) meta.collective = m.collective;
    if (m.tp_rank >= 0) meta.tp_rank = m.tp_rank;
    if (m.tp_size > 0) meta.tp_size = m.tp_size;
    if (m.step >= 0) meta.step = m.step;
  }
  check_meta(meta, fmt::format("tensor '{}'", printable(name)));
}

}  // namespace taco
