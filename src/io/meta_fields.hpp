#pragma once
// The TP metadata fields by name, shared by everything that fills TensorMeta from strings:
// safetensors __metadata__, `taco import --set/--sidecar/--name-pattern`.
#include "core/tensor.hpp"

#include <string>
#include <string_view>

namespace taco {

// True for layer, site, direction, collective, tp_rank, tp_size, step, model.
bool is_meta_field(std::string_view key);

// Sets the field `key` from its text form; a key that is not a field goes to meta.extra.
// Integers must be plain decimal and >= -1 (-1 = unknown); tp_size must be >= 1 when known.
// InputError "<context>: ..." names the key and the bad value.
void set_meta_field(TensorMeta& meta, std::string_view key, std::string_view value,
                    std::string_view context);

// Checks relations between fields (tp_rank < tp_size when both are known).
void check_meta(const TensorMeta& meta, std::string_view context);

}  // namespace taco
