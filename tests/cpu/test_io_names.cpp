// Metadata from tensor names (io/name_rules.hpp), --name-map, and which files a directory
// input stands for (io/input_files.hpp).
#include "core/error.hpp"
#include "io/input_files.hpp"
#include "io/name_rules.hpp"
#include "test_io_support.hpp"

#include <tuple>

using namespace taco;
using namespace taco::iotest;

namespace {

struct Expect {
  const char* name;
  int layer;
  const char* site;
  const char* direction;
  int rank;
  int64_t step;
};

}  // namespace

TEST_CASE("names as the common stacks write them map to layer, site, direction, rank, step",
          "[io][names]") {
  const Expect cases[] = {
      // Megatron-LM (with or without TransformerEngine modules)
      {"decoder.layers.3.self_attention.linear_proj", 3, "attn_out", "", -1, -1},
      {"decoder.layers.3.self_attention.linear_qkv", 3, "attn_qkv", "", -1, -1},
      {"decoder.layers.11.mlp.linear_fc1", 11, "mlp_fc1", "", -1, -1},
      {"decoder.layers.11.mlp.linear_fc2.output", 11, "mlp_out", "fwd", -1, -1},
      {"module.decoder.layers.0.self_attention.linear_qkv.input_grad.tp_rank_1.iter100", 0,
       "attn_qkv", "bwd", 1, 100},
      {"language_model.encoder.layers.2.self_attention.dense", 2, "attn_out", "", -1, -1},
      {"language_model.encoder.layers.2.mlp.dense_h_to_4h", 2, "mlp_fc1", "", -1, -1},
      {"language_model.encoder.layers.2.mlp.dense_4h_to_h/grad_output/rank0", 2, "mlp_out", "bwd",
       0, -1},
      // Hugging Face Llama / Qwen / Mistral
      {"model.layers.7.self_attn.o_proj", 7, "attn_out", "", -1, -1},
      {"model.layers.7.self_attn.q_proj", 7, "attn_qkv", "", -1, -1},
      {"model.layers.7.self_attn.k_proj.weight", 7, "attn_qkv", "", -1, -1},
      {"model.layers.7.self_attn.v_proj", 7, "attn_qkv", "", -1, -1},
      {"model.layers.7.mlp.gate_proj", 7, "mlp_fc1", "", -1, -1},
      {"model.layers.7.mlp.up_proj", 7, "mlp_fc1", "", -1, -1},
      {"model.layers.7.mlp.down_proj.output.step_000571", 7, "mlp_out", "fwd", -1, 571},
      {"step_200/rank1/model.layers.1.self_attn.o_proj.output", 1, "attn_out", "fwd", 1, 200},
      {"model.layers.0.mlp.down_proj_fwd_rank3", 0, "mlp_out", "fwd", 3, -1},
      // GPT-2
      {"transformer.h.5.attn.c_proj", 5, "attn_out", "", -1, -1},
      {"transformer.h.5.attn.c_attn", 5, "attn_qkv", "", -1, -1},
      {"transformer.h.5.mlp.c_fc", 5, "mlp_fc1", "", -1, -1},
      {"transformer.h.5.mlp.c_proj", 5, "mlp_out", "", -1, -1},
      // GPT-NeoX, Falcon, OPT, Meta Llama
      {"gpt_neox.layers.4.attention.dense", 4, "attn_out", "", -1, -1},
      {"gpt_neox.layers.4.attention.query_key_value", 4, "attn_qkv", "", -1, -1},
      {"model.decoder.layers.4.self_attn.out_proj", 4, "attn_out", "", -1, -1},
      {"model.decoder.layers.4.fc2", 4, "mlp_out", "", -1, -1},
      {"layers.4.feed_forward.w2", 4, "mlp_out", "", -1, -1},
      {"layers.4.attention.wq", 4, "attn_qkv", "", -1, -1},
      // TransformerEngine TransformerLayer
      {"layers.2.self_attention.layernorm_qkv", 2, "attn_qkv", "", -1, -1},
      {"layers.2.self_attention.proj", 2, "attn_out", "", -1, -1},
      {"layers.2.layernorm_mlp.fc1_weight", 2, "mlp_fc1", "", -1, -1},
      {"layers.2.layernorm_mlp.fc2_weight", 2, "mlp_out", "", -1, -1},
      // whole blocks: output side forward, input side backward
      {"model.layers.3.self_attn.output", 3, "attn_out", "fwd", -1, -1},
      {"model.layers.3.self_attn.grad", 3, "attn_qkv", "bwd", -1, -1},
      {"model.layers.3.mlp.forward", 3, "mlp_out", "fwd", -1, -1},
      {"model.layers.3.mlp.input", 3, "mlp_fc1", "fwd", -1, -1},
      {"model.layers.3.mlp.output_grad", 3, "mlp_out", "bwd", -1, -1},
      // this project's capture and synth names
      {"s571.l0.attn_out.fwd.all_reduce.r0", 0, "attn_out", "fwd", 0, 571},
      {"step3/layer1/mlp_fc1/bwd/rank1", 1, "mlp_fc1", "bwd", 1, 3},
      // nothing to read
      {"model.embed_tokens.weight", -1, "", "", -1, -1},
      {"model.layers.3.input_layernorm.weight", 3, "", "", -1, -1},
      {"tensor17", -1, "", "", -1, -1},
      {"model.layers.3.self_attn.rotary_emb.inv_freq", 3, "", "", -1, -1},
  };
  for (const Expect& e : cases) {
    INFO(e.name);
    const NameFields f = fields_from_name(e.name);
    CHECK(f.layer == e.layer);
    CHECK(f.site == e.site);
    CHECK(f.direction == e.direction);
    CHECK(f.tp_rank == e.rank);
    CHECK(f.step == e.step);
  }
  REQUIRE(fields_from_name("s571.l0.attn_out.fwd.all_reduce.r0").collective == "all_reduce");
  REQUIRE(fields_from_name("x.reduce_scatter.y").collective == "reduce_scatter");
  REQUIRE(fields_from_name("mp_rank_03_001/model.layers.0.mlp.down_proj").tp_rank == 3);
}

TEST_CASE("name rules fill only what the file does not record; the file path adds rank and step",
          "[io][names]") {
  TensorMeta m;
  m.site = "custom";
  m.layer = 9;
  apply_name_rules("model.layers.2.mlp.down_proj.output", "rank3/step_40", nullptr, m);
  REQUIRE(m.site == "custom");
  REQUIRE(m.layer == 9);
  REQUIRE(m.direction == "fwd");
  REQUIRE(m.tp_rank == 3);
  REQUIRE(m.step == 40);
  // A rank past the recorded TP degree is not that rank.
  TensorMeta sized;
  sized.tp_size = 2;
  apply_name_rules("x.rank5", "", nullptr, sized);
  REQUIRE(sized.tp_rank == -1);
}

TEST_CASE(
    "a name map (--name-map): named groups override the rules; bad expressions are InputError",
    "[io][names]") {
  const NameMap map(
      R"(^act_(?P<layer>\d+)_(?P<site>[a-z_]+?)_(?<direction>fwd|grad)_r(?P<rank>\d+)(?:_s(?P<step>\d+))?$)");
  NameFields f;
  REQUIRE(map.match("act_12_linear_proj_grad_r3_s77", f));
  REQUIRE(f.layer == 12);
  REQUIRE(f.site == "attn_out");  // the rules' word for linear_proj
  REQUIRE(f.direction == "bwd");
  REQUIRE(f.tp_rank == 3);
  REQUIRE(f.step == 77);
  NameFields g;
  REQUIRE(map.match("act_1_mysite_fwd_r0", g));
  REQUIRE(g.site == "mysite");  // unknown words are kept
  REQUIRE(g.step == -1);
  REQUIRE_FALSE(map.match("something else", g));
  TensorMeta m;
  m.site = "from_file";
  apply_name_rules("act_4_mlp_out_fwd_r1", "", &map, m);
  REQUIRE(m.site == "mlp_out");  // the map overrides the file
  REQUIRE(m.layer == 4);

  auto error_of = [](const std::string& re) { return input_error_of([&] { NameMap m2(re); }); };
  REQUIRE_THAT(error_of("(?P<colour>x)"), Catch::Matchers::Contains("unknown group name 'colour'"));
  REQUIRE_THAT(error_of("(?P<layer>x)(?P<layer>y)"), Catch::Matchers::Contains("appears twice"));
  REQUIRE_THAT(error_of("layers\\.(\\d+)"), Catch::Matchers::Contains("no named group"));
  REQUIRE_THAT(error_of("(?P<layer>[0-9"),
               Catch::Matchers::Contains("not a valid regular expression"));
  REQUIRE_THAT(error_of(""), Catch::Matchers::Contains("empty"));
  // Groups that do not capture are not counted: (?:...) before a named group.
  const NameMap nc(R"((?:a|b)(x)(?P<step>\d+))");
  NameFields h;
  REQUIRE(nc.match("bx42", h));
  REQUIRE(h.step == 42);
  // A layer that is not digits is an InputError naming the tensor.
  const NameMap loose(R"(L(?P<layer>\w+))");
  NameFields k;
  REQUIRE_THAT(input_error_of([&] { loose.match("Lxyz", k); }),
               Catch::Matchers::Contains("layer must be digits"));
}

TEST_CASE("a directory stands for its tensor files, recursively, in natural order", "[io][names]") {
  TempDir dir;
  const std::string d = dir.path();
  std::filesystem::create_directories(d + "/rank10");
  std::filesystem::create_directories(d + "/rank2");
  std::filesystem::create_directories(d + "/.hidden");
  for (const char* f : {"/rank10/a.npy", "/rank2/a.NPY", "/rank2/b.safetensors", "/top.h5",
                        "/.hidden/x.npy", "/notes.txt", "/rank2/.x.npy"})
    write_bytes(d + f, {1});
  const std::vector<InputFile> files = expand_inputs({d, d + "/notes.txt"});
  std::vector<std::string> got;
  for (const InputFile& f : files) got.push_back(f.path.substr(d.size()));
  REQUIRE(got == std::vector<std::string>{"/rank2/a.NPY", "/rank2/b.safetensors", "/rank10/a.npy",
                                          "/top.h5", "/notes.txt"});
  REQUIRE(files.front().source == d);
  REQUIRE(files.back().source == d + "/notes.txt");
  std::filesystem::create_directories(d + "/empty");
  REQUIRE_THAT(input_error_of([&] { expand_inputs({d + "/empty"}); }),
               Catch::Matchers::Contains("holds no tensor files"));
  REQUIRE(natural_less("layers.2", "layers.10"));
  REQUIRE_FALSE(natural_less("layers.10", "layers.2"));
  REQUIRE(natural_less("a007", "a10"));
  REQUIRE(natural_less("a", "a0"));
}
