#pragma once
// Metadata from tensor names as the common training stacks spell them, so that a dump taco did
// not write still groups by (layer, site, direction, TP rank, step). Every reader's tensors go
// through this (open_tensor_file); a field the file itself records is never overwritten by the
// built-in rules.
//
// Built-in rules (docs/inputs.md lists them with examples). The name is cut into parts at
// '.', '/' and ':', and a part's trailing '_word's are peeled off too ("linear_fc2_output"):
//   layer      the number after layers/layer/h/blocks/block ("decoder.layers.3",
//              "transformer.h.3"), or a part l<N> / layer<N> / layer_<N> ("l0", "layer1");
//   site       the last module name, in the project's names: attn_out (linear_proj, o_proj,
//              out_proj, dense/proj under attention, c_proj under attn, wo), attn_qkv (linear_qkv,
//              layernorm_qkv, qkv, qkv_proj, query_key_value, c_attn, q_proj/k_proj/v_proj,
//              wq/wk/wv), mlp_fc1 (linear_fc1, gate_proj, up_proj, gate_up_proj, dense_h_to_4h,
//              fc1, c_fc, fc_in, w1/w3), mlp_out (linear_fc2, down_proj, dense_4h_to_h, fc2,
//              fc_out, w2, c_proj/proj under mlp); a whole block (self_attention, self_attn,
//              attn, attention / mlp, feed_forward, layernorm_mlp) is its output side forward
//              (attn_out, mlp_out) and its input side backward (attn_qkv, mlp_fc1); the
//              project's own names attn_out, attn_qkv, mlp_fc1, mlp_out as they are;
//   direction  fwd from fwd/forward/output/outputs/input/inputs/activation(s)/act; bwd from
//              bwd/backward/grad/grads/gradient/input_grad/output_grad/grad_input/grad_output/dgrad;
//   TP rank    rank<N>, rank_<N>, tp_rank<N>, tp_rank_<N>, mp_rank_<N>, r<N>;
//   step       step<N>, step_<N>, iter<N>, iter_<N>, iteration<N>, global_step<N>, s<N>;
//   collective all_reduce/allreduce, reduce_scatter, all_gather/allgather, all_to_all.
// Rank, step and direction may also come from the file's path (its directory and stem, e.g.
// rank1/step_100.safetensors) when the name has none.
#include "core/tensor.hpp"

#include <memory>
#include <regex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace taco {

// What a name says; unknown fields as in TensorMeta (-1, "").
struct NameFields {
  int layer = -1, tp_rank = -1, tp_size = -1;
  int64_t step = -1;
  std::string site, direction, collective;
};

NameFields fields_from_name(std::string_view name);

// The project's name for a site or direction spelled another way ("linear_proj" -> "attn_out",
// "grad" -> "bwd"); "" when the word is not one the rules know.
std::string canonical_site(std::string_view word);
std::string canonical_direction(std::string_view word);

// --name-map REGEX: an ECMAScript regular expression with named groups (?P<name>...) or
// (?<name>...), names layer, site, direction, rank (or tp_rank), step, tp_size, collective.
// It is searched for in the name (anchor it with ^...$ to match the whole name). Captured
// sites and directions are made canonical when the rules know the word, kept as they are
// otherwise; layer, rank, step and tp_size must be digits.
class NameMap {
 public:
  explicit NameMap(std::string regex);  // InputError "--name-map '<re>': ..."
  // True when the expression matches; out gets the captured fields.
  bool match(const std::string& name, NameFields& out) const;
  const std::string& text() const { return text_; }

 private:
  std::string text_;
  std::regex re_;
  std::vector<std::pair<size_t, std::string>> groups_;  // capture group number -> field
};

// Fills the unknown fields of meta from the built-in rules (on the name, then rank, step and
// direction from file_hint), then sets every field that `map` (may be null) captures.
void apply_name_rules(const std::string& name, const std::string& file_hint, const NameMap* map,
                      TensorMeta& meta);

}  // namespace taco
