// Name patterns and metadata fields (what `taco import --name-pattern/--set/--sidecar` use).
#include "io/meta_fields.hpp"
#include "io/name_pattern.hpp"
#include "test_io_support.hpp"

using namespace taco;
using namespace taco::iotest;

TEST_CASE("name patterns capture integers and strings", "[io][pattern]") {
  const NamePattern p("layers.{layer}.{site}.{direction}.rank{tp_rank}.step{step}");
  TensorMeta m;
  REQUIRE(p.match("layers.12.mlp_out.bwd.rank3.step400", m));
  REQUIRE(m.layer == 12);
  REQUIRE(m.site == "mlp_out");
  REQUIRE(m.direction == "bwd");
  REQUIRE(m.tp_rank == 3);
  REQUIRE(m.step == 400);
  REQUIRE(m.tp_size == -1);  // untouched

  TensorMeta n;
  n.model = "kept";
  REQUIRE_FALSE(p.match("layers.x.mlp_out.bwd.rank3.step400", n));  // {layer} needs digits
  REQUIRE_FALSE(p.match("layers.1.mlp.out.bwd.rank3.step400", n));  // {site} cannot hold '.'
  REQUIRE_FALSE(
      p.match("layers.1.mlp_out.bwd.rank3.step400.extra", n));  // the whole name must match
  REQUIRE_FALSE(p.match("layers.1.mlp_out.bwd.rank.step400", n));
  REQUIRE(n.model == "kept");
  REQUIRE(n.layer == -1);  // a failed match changes nothing
}

TEST_CASE("name patterns: {*}, {extra.KEY}, separators, backtracking", "[io][pattern]") {
  TensorMeta m;
  REQUIRE(NamePattern("{*}/h{layer}_{site}").match("model.transformer/h7_attn_qkv", m) ==
          false);  // {*} stops at '.'
  REQUIRE(NamePattern("{model}/h{layer}_{site}").match("gpt2/h7_attn_qkv", m));
  REQUIRE(m.model == "gpt2");
  REQUIRE(m.layer == 7);
  REQUIRE(m.site == "attn_qkv");  // '_' inside: the first '_' after the digits separates
  TensorMeta e;
  REQUIRE(NamePattern("{extra.module}.{*}.{collective}").match("o_proj.input.all_reduce", e));
  REQUIRE(e.extra.at("module") == "o_proj");
  REQUIRE(e.collective == "all_reduce");
  // A string placeholder followed by a literal that also occurs inside it: backtracking finds
  // the split that lets the rest match.
  TensorMeta b;
  REQUIRE(NamePattern("{site}_out_{direction}").match("mlp_out_out_fwd", b));
  REQUIRE(b.site == "mlp_out");
  REQUIRE(b.direction == "fwd");
  // A long non-matching name finishes quickly (memoized matching).
  TensorMeta q;
  REQUIRE_FALSE(
      NamePattern("{site}a{direction}a{model}a{collective}b").match(std::string(5000, 'a'), q));
}

TEST_CASE("name patterns: bad patterns and out-of-range captures", "[io][pattern]") {
  auto bad = [](const std::string& pattern, const char* fragment) {
    const std::string msg = input_error_of([&] { NamePattern p(pattern); });
    INFO(msg);
    REQUIRE(msg.find("--name-pattern") != std::string::npos);
    REQUIRE(msg.find(fragment) != std::string::npos);
  };
  bad("layers.{layr}", "unknown placeholder {layr}");
  bad("layers.{layer", "without a matching");
  bad("layers.layer}", "without a matching");
  bad("{layer}{site}", "separated by literal text");
  bad("{layer}.{layer}", "appears twice");
  bad("", "empty");
  TensorMeta m;
  const std::string msg = input_error_of([&] { NamePattern("l{layer}").match("l99999999999", m); });
  REQUIRE(msg.find("layer = 99999999999 is out of range") != std::string::npos);
}

TEST_CASE("metadata fields from text", "[io][pattern]") {
  TensorMeta m;
  set_meta_field(m, "layer", "3", "ctx");
  set_meta_field(m, "step", "-1", "ctx");
  set_meta_field(m, "tp_size", "8", "ctx");
  set_meta_field(m, "site", "attn_out", "ctx");
  set_meta_field(m, "source_file", "a.pt", "ctx");
  REQUIRE(m.layer == 3);
  REQUIRE(m.step == -1);
  REQUIRE(m.tp_size == 8);
  REQUIRE(m.site == "attn_out");
  REQUIRE(m.extra.at("source_file") == "a.pt");
  REQUIRE(is_meta_field("collective"));
  REQUIRE_FALSE(is_meta_field("source_file"));
  for (const char* v : {"3.5", "", "+3", "0x10", "3 ", "-2"}) {
    INFO(v);
    REQUIRE(input_error_of([&] { set_meta_field(m, "layer", v, "ctx"); }).find("ctx") == 0);
  }
  REQUIRE(input_error_of([&] { set_meta_field(m, "tp_size", "0", "ctx"); }).find("at least 1") !=
          std::string::npos);
}
