#include "io/meta_fields.hpp"

#include "core/error.hpp"
#include "io/readers.hpp"

#include <charconv>
#include <limits>

namespace taco {
namespace {

int64_t parse_meta_int(std::string_view key, std::string_view value, int64_t max,
                       std::string_view context) {
  int64_t v = 0;
  const char* end = value.data() + value.size();
  const auto [ptr, ec] = std::from_chars(value.data(), end, v);
  TACO_REQUIRE_INPUT(!value.empty() && ec == std::errc() && ptr == end,
                     "{}: {} must be an integer, got '{}'", context, key, printable(value));
  TACO_REQUIRE_INPUT(v >= -1 && v <= max, "{}: {} = {} is out of range (-1 for unknown, or 0..{})",
                     context, key, v, max);
  return v;
}

}  // namespace

bool is_meta_field(std::string_view k) {
  return k == "layer" || k == "site" || k == "direction" || k == "collective" || k == "tp_rank" ||
         k == "tp_size" || k == "step" || k == "model";
}

void set_meta_field(TensorMeta& m, std::string_view key, std::string_view value,
                    std::string_view context) {
  constexpr int64_t kIntMax = std::numeric_limits<int>::max();
  if (key == "layer") {
    m.layer = int(parse_meta_int(key, value, kIntMax, context));
  } else if (key == "tp_rank") {
    m.tp_rank = int(parse_meta_int(key, value, kIntMax, context));
  } else if (key == "tp_size") {
    m.tp_size = int(parse_meta_int(key, value, kIntMax, context));
    TACO_REQUIRE_INPUT(m.tp_size != 0, "{}: tp_size must be at least 1 (or -1 for unknown)",
                       context);
  } else if (key == "step") {
    m.step = parse_meta_int(key, value, std::numeric_limits<int64_t>::max(), context);
  } else if (key == "site") {
    m.site = value;
  } else if (key == "direction") {
    m.direction = value;
  } else if (key == "collective") {
    m.collective = value;
  } else if (key == "model") {
    m.model = value;
  } else {
    m.extra[std::string(key)] = value;
  }
}

void check_meta(const TensorMeta& m, std::string_view context) {
  TACO_REQUIRE_INPUT(m.tp_size != 0, "{}: tp_size must be at least 1 (or -1 for unknown)", context);
  if (m.tp_rank >= 0 && m.tp_size > 0)
    TACO_REQUIRE_INPUT(m.tp_rank < m.tp_size, "{}: tp_rank {} is not below tp_size {}", context,
                       m.tp_rank, m.tp_size);
}

}  // namespace taco
