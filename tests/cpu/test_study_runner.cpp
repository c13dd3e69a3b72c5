// The study engine end to end on in-memory tensors with test codecs: rows and their values,
// byte-identical output for any thread count, filters, skipped shapes, collectives, selection
// and the selection file round trip.
#include "catch.hpp"
#include "core/atomic_file.hpp"
#include "study/report.hpp"
#include "study/selection.hpp"
#include "study/study.hpp"
#include "test_study_support.hpp"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

using namespace taco;
using namespace taco::study;
using taco::testing::make_tensor;
using taco::testing::make_test_codec;
using taco::testing::MemorySource;

namespace {

// A two-rank trace: layers 0 and 1, attn_out fwd and mlp_out bwd, 64 x 128 each.
MemorySource make_trace() {
  MemorySource src("trace.mem");
  uint32_t seed = 1;
  for (int layer = 0; layer < 2; ++layer)
    for (const char* site : {"attn_out", "mlp_out"})
      for (int rank = 0; rank < 2; ++rank) {
        const std::string dir = std::string(site) == "attn_out" ? "fwd" : "bwd";
        src.add(make_tensor(fmt::format("l{}.{}.r{}", layer, site, rank), 64, 128, seed++, site,
                            dir, rank, 2, layer));
      }
  return src;
}

StudyOptions base_options(std::vector<std::string> variants, int threads = 1) {
  StudyOptions o;
  o.variants = std::move(variants);
  o.codec_factory = make_test_codec;
  o.threads = threads;
  return o;
}

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace

TEST_CASE("one row per (tensor, variant) with independently known values", "[study]") {
  MemorySource src = make_trace();
  const StudyResult r = run_study({&src}, base_options({"identity", "bf16", "int8-g128"}));
  REQUIRE(r.rows.size() == 8 * 3);
  REQUIRE(r.tensors == 8);
  REQUIRE(src.reads == 8);  // every tensor read exactly once
  for (const TensorRow& row : r.rows) {
    const std::string& v = r.variants[row.variant_index].name;
    CAPTURE(row.tensor, v);
    REQUIRE(row.numel == 64 * 128);
    if (v == "identity") {
      REQUIRE(*row.metrics.rel_l2 == 0);
      REQUIRE(row.wire_bytes == row.numel * 4);
      REQUIRE(row.compression_ratio() == 0.5);  // bf16 input, 4-byte wire
    } else if (v == "bf16") {
      // The inputs are bf16 values already: bf16 rounding is exact.
      REQUIRE(*row.metrics.rel_l2 == 0);
      REQUIRE(row.bytes_per_elem() == 2);
      REQUIRE(row.compression_ratio() == 1);
    } else {
      REQUIRE(row.bytes_per_elem() == 1 + 4.0 / 128);
      REQUIRE(*row.metrics.rel_l2 > 0);
      REQUIRE(*row.metrics.rel_l2 < 0.05);
      // Every group's absmax codes to ±127: at least one saturated code per group.
      REQUIRE(row.saturated >= row.numel / 128);
    }
  }
  // Rows are in input order, variants in the order given.
  REQUIRE(r.rows[0].tensor == "l0.attn_out.r0");
  REQUIRE(r.variants[r.rows[0].variant_index].name == "identity");
  REQUIRE(r.variants[r.rows[2].variant_index].name == "int8-g128");
  REQUIRE(r.variants[2].group_size == 128);
  REQUIRE(r.variants[2].transform == "none");
}

TEST_CASE("bf16 codec on fp32 data gives exactly bf16 rounding error", "[study]") {
  MemorySource src("f32.mem");
  Tensor t;
  t.name = "x";
  t.dtype = DType::F32;
  t.shape = {3, 5};
  t.values = {0.1f,   -0.2f,    0.3f, 1e-3f, 7.0f,  1.0f / 3, -2.5e-5f, 0,
              100.5f, 3.14159f, -1,   2,     65504, 1e-30f,   0.7f};
  src.add(t);
  const StudyResult r = run_study({&src}, base_options({"bf16"}));
  REQUIRE(r.rows.size() == 1);
  long double ex2 = 0, ee2 = 0;
  for (float v : t.values) {
    const long double d = (long double)v - bf16_to_float(float_to_bf16(v));
    ex2 += (long double)v * v;
    ee2 += d * d;
  }
  REQUIRE(*r.rows[0].metrics.rel_l2 == Approx(double(std::sqrt(ee2 / ex2))).epsilon(1e-12));
  REQUIRE(r.rows[0].compression_ratio() == 2);
}

TEST_CASE("study outputs are byte-identical for any thread count", "[study]") {
  std::string csv1, hist1, coll1;
  for (int threads : {1, 2, 3}) {
    MemorySource src = make_trace();
    StudyOptions o = base_options({"bf16", "int8-g32", "int8-g32-h"}, threads);
    o.collectives = {sim::kOneShot, sim::kRing};
    o.tp = {2, 4};
    const StudyResult r = run_study({&src}, o);
    REQUIRE(!r.collective_rows.empty());
    if (threads == 1) {
      csv1 = results_csv(r);
      hist1 = histograms_csv(r);
      coll1 = collectives_csv(r);
    } else {
      CAPTURE(threads);
      REQUIRE(results_csv(r) == csv1);
      REQUIRE(histograms_csv(r) == hist1);
      REQUIRE(collectives_csv(r) == coll1);
    }
  }
}

TEST_CASE("collectives are simulated per (step, layer, site, direction) over TP ranks", "[study]") {
  MemorySource src = make_trace();
  StudyOptions o = base_options({"identity", "int8-g128"});
  o.collectives = {sim::kOneShot, sim::kTwoShot, sim::kRing};
  o.tp = {2, 4};
  const StudyResult r = run_study({&src}, o);
  // 4 groups x 2 variants x 3 algorithms x 2 degrees.
  REQUIRE(r.collective_rows.size() == 4 * 2 * 3 * 2);
  REQUIRE(src.reads == 8);  // still one read per tensor
  for (const CollectiveRow& c : r.collective_rows) {
    CAPTURE(c.tensor, c.tp_size, collective_name(c.algorithm));
    REQUIRE(c.trace_ranks == 2);
    REQUIRE(c.quantizations == sim::quantizations(c.algorithm, c.tp_size));
    REQUIRE(c.numel == 64 * 128);
    if (r.variants[c.variant_index].name == "identity") {
      // fp32 sums of bf16 values in a different order than the exact double sum: tiny error.
      REQUIRE(*c.metrics.rel_l2 < 1e-6);
    } else {
      REQUIRE(*c.metrics.rel_l2 > 1e-4);
    }
  }
  const std::string csv = collectives_csv(r);
  REQUIRE(
      csv.rfind("layer,site,direction,step,variant,algorithm,tp_size,quantizations,numel,rel_l2,"
                "mse,snr_db,max_abs_err,cosine,",
                0) == 0);
}

TEST_CASE("a group gets only the algorithms of the collective that carried it", "[study]") {
  MemorySource src("sp.mem");
  for (int rank = 0; rank < 2; ++rank) {
    Tensor ag =
        make_tensor(fmt::format("ag.r{}", rank), 32, 128, 10u + rank, "attn_qkv", "fwd", rank, 2);
    ag.meta.collective = "all_gather";
    src.add(ag);
    Tensor rs =
        make_tensor(fmt::format("rs.r{}", rank), 32, 128, 20u + rank, "attn_out", "fwd", rank, 2);
    rs.meta.collective = "reduce_scatter";
    src.add(rs);
  }
  StudyOptions o = base_options({"int8-g128"});
  o.collectives = {sim::kOneShot, sim::kRing, sim::kAllGather, sim::kReduceScatter};
  const StudyResult r = run_study({&src}, o);
  // Partial sums (reduce_scatter, like all_reduce) take every reducing algorithm; shards only
  // all_gather.
  REQUIRE(r.collective_rows.size() == 4);
  for (const CollectiveRow& c : r.collective_rows)
    REQUIRE((c.algorithm == sim::kAllGather) == (c.meta.collective == "all_gather"));
}

TEST_CASE("reduce_scatter on all-reduce inputs works; an algorithm no input takes says why",
          "[study]") {
  MemorySource src("ar.mem");
  for (int rank = 0; rank < 2; ++rank) {
    Tensor t =
        make_tensor(fmt::format("ar.r{}", rank), 32, 128, 30u + rank, "attn_out", "fwd", rank, 2);
    t.meta.collective = "all_reduce";
    src.add(t);
  }
  StudyOptions o = base_options({"int8-g128"});
  o.collectives = {sim::kReduceScatter};
  const StudyResult r = run_study({&src}, o);
  REQUIRE(r.collective_rows.size() == 1);
  REQUIRE(r.collective_rows[0].algorithm == sim::kReduceScatter);
  REQUIRE(r.collective_rows[0].quantizations == 1);
  o.collectives = {sim::kAllGather};
  REQUIRE_THROWS_WITH(run_study({&src}, o),
                      Catch::Matchers::Contains("--collectives all_gather: no input tensor") &&
                          Catch::Matchers::Contains("all_reduce"));
}

TEST_CASE("a simulation that would need far more memory than its inputs is refused", "[study]") {
  MemorySource src("big.mem");
  for (int rank = 0; rank < 2; ++rank)
    src.add(
        make_tensor(fmt::format("x.r{}", rank), 512, 512, 40u + rank, "attn_out", "fwd", rank, 2));
  StudyOptions o = base_options({"int8-g128"});
  o.collectives = {sim::kAllGather};
  o.tp = {128};  // 2 x 128^2 x 1 MiB of outputs and references for 2 MiB of input
  REQUIRE_THROWS_WITH(run_study({&src}, o),
                      Catch::Matchers::Contains("--tp 128: simulating all_gather") &&
                          Catch::Matchers::Contains("over the limit"));
  // Inputs and the executor's copies, outputs and references in floats; the plans' wires at
  // 1 B/elem: every rank holds all ranks' encodings in a one-shot, three of its own in a ring.
  REQUIRE(sim::memory_estimate(sim::kOneShot, 4, 1000) ==
          (2 * 4 * 1000 + 2 * 4 * 1000) * 4 + 4 * 4 * 1000);
  REQUIRE(sim::memory_estimate(sim::kRing, 4, 1000) ==
          (2 * 4 * 1000 + 2 * 4 * 1000) * 4 + 3 * 4 * 1000);
  REQUIRE(sim::memory_estimate(sim::kReduceScatter, 4, 1000) ==
          (2 * 4 * 1000 + 2 * 1000) * 4 + 3 * 4 * 1000);
}

TEST_CASE("a codec that refuses a collective's chunk shape skips that row, on any thread count",
          "[study]") {
  // 64 rows over 3 ranks cut into flat chunks of ~2730 elements, which TAH-Quant's 64-wide tiles
  // do not divide: an InputError inside the simulation (once an abort from its parallel region).
  MemorySource src("tah.mem");
  for (int rank = 0; rank < 2; ++rank)
    src.add(
        make_tensor(fmt::format("x.r{}", rank), 64, 128, 60u + rank, "attn_out", "fwd", rank, 2));
  for (int threads : {1, 2}) {
    StudyOptions o = base_options({"tahquant", "int8-g128"});
    o.codec_factory = [](const std::string& v) { return make_codec(v); };
    o.collectives = {sim::kOneShot, sim::kRing};
    o.tp = {2, 3};
    o.threads = threads;
    const StudyResult r = run_study({&src}, o);
    int tah_rows = 0, int8_rows = 0;
    for (const auto& c : r.collective_rows) (c.variant_index == 0 ? tah_rows : int8_rows) += 1;
    REQUIRE(int8_rows == 4);
    REQUIRE(tah_rows == 2);  // tp 2 only
    int refused = 0;
    for (const auto& k : r.skipped)
      if (k.reason.find("tp=3") != std::string::npos &&
          k.reason.find("not a multiple of the tile 64") != std::string::npos)
        ++refused;
    REQUIRE(refused == 2);
  }
}

TEST_CASE("single-rank inputs need --tp for collectives", "[study]") {
  MemorySource src("one.mem");
  src.add(make_tensor("x", 32, 64, 3, "attn_out", "fwd"));
  StudyOptions o = base_options({"int8-g32"});
  o.collectives = {sim::kRing};
  StudyResult r = run_study({&src}, o);
  REQUIRE(r.collective_rows.empty());
  REQUIRE(r.skipped.size() == 1);
  o.tp = {4};
  r = run_study({&src}, o);
  REQUIRE(r.collective_rows.size() == 1);
  REQUIRE(r.collective_rows[0].trace_ranks == 1);
  REQUIRE(r.collective_rows[0].tp_size == 4);
}

TEST_CASE("filters, --max-tensors and codecs that reject a shape", "[study]") {
  MemorySource src = make_trace();
  StudyOptions o = base_options({"identity"});
  o.filter = parse_filter("site=mlp_out,layer=1");
  StudyResult r = run_study({&src}, o);
  REQUIRE(r.rows.size() == 2);
  for (const TensorRow& row : r.rows) REQUIRE(row.tensor.rfind("l1.mlp_out", 0) == 0);
  o.filter = parse_filter("direction=fwd|bwd,tp_rank=1");
  REQUIRE(run_study({&src}, o).rows.size() == 4);
  o.filter = {};
  o.max_tensors = 3;
  REQUIRE(run_study({&src}, o).rows.size() == 3);

  REQUIRE_THROWS_AS(parse_filter("size=3"), InputError);
  REQUIRE_THROWS_AS(parse_filter("site"), InputError);

  MemorySource odd("odd.mem");
  odd.add(make_tensor("a", 2, 6, 1, "s", "fwd"));  // cols 6: grid-c4 rejects
  odd.add(make_tensor("b", 2, 8, 2, "s", "fwd"));
  r = run_study({&odd}, base_options({"grid-c4"}));
  REQUIRE(r.rows.size() == 1);
  REQUIRE(r.rows[0].tensor == "b");
  REQUIRE(r.skipped.size() == 1);
  REQUIRE(r.skipped[0].tensor == "a");
}

TEST_CASE("an unknown variant fails before any tensor is read", "[study]") {
  MemorySource src = make_trace();
  REQUIRE_THROWS_AS(run_study({&src}, base_options({"identity", "nope"})), InputError);
  REQUIRE(src.reads == 0);
}

TEST_CASE("saturation, NaN and Inf counts reach the rows", "[study]") {
  MemorySource src("sat.mem");
  Tensor t;
  t.name = "s";
  t.shape = {1, 6};
  t.values = {0.25f,
              5.0f,
              -9.0f,
              std::numeric_limits<float>::quiet_NaN(),
              std::numeric_limits<float>::infinity(),
              0.5f};
  src.add(t);
  const StudyResult r = run_study({&src}, base_options({"grid"}));  // step 0.25, codes clamp at ±8
  REQUIRE(r.rows.size() == 1);
  const TensorRow& row = r.rows[0];
  REQUIRE(row.nan_count == 1);
  REQUIRE(row.inf_count == 1);
  REQUIRE(row.saturated == 2);  // 5.0 and -9.0 clamp to ±2.0
  // Finite elements only: errors 0, 3, 7, 0 over 4 elements.
  REQUIRE(*row.metrics.mse == (9.0 + 49.0) / 4);
  REQUIRE(*row.metrics.max_abs_err == 7);
  const std::string csv = results_csv(r);
  REQUIRE(csv.find(",0.333333333,1,1,24,4,1,") !=
          std::string::npos);  // saturation 2/6, nan, inf, wire, bytes/elem, ratio
}

TEST_CASE("selection picks the best candidate within the budget, per site", "[study][select]") {
  MemorySource src = make_trace();
  const std::vector<std::string> cands = {"int8-g32", "int8-g128", "int8-g32-h", "int8-g128-h"};
  const StudyResult r = run_study({&src}, base_options(cands));
  const std::vector<Aggregate> agg = aggregate(r);

  // Budget 1.05: only G=128 fits (1.03125 bytes/elem).
  SelectOptions so;
  so.candidates = cands;
  so.budget = 1.05;
  Selection s = select_variants(r, so);
  REQUIRE(s.choices.size() == 2);
  REQUIRE(s.unmet.empty());
  for (const Choice& c : s.choices) {
    CAPTURE(c.site, c.direction, c.variant);
    REQUIRE(c.bytes_per_elem <= 1.05);
    // The choice is the lowest median among the fitting candidates (to the tie tolerance).
    for (const Aggregate& a : agg)
      if (a.site == c.site && a.direction == c.direction && a.mean_bytes_per_elem <= 1.05)
        REQUIRE(c.rel_l2 <= a.median_rel_l2 * (1 + so.tie_tolerance));
    // With sparse 50x outliers, spreading them with a Hadamard transform helps int8.
    REQUIRE(c.variant == "int8-g128-h");
    REQUIRE(c.hadamard);
    REQUIRE(r.variants[c.hadamard->with].name == "int8-g128-h");
    REQUIRE(r.variants[c.hadamard->without].name == "int8-g128");
    REQUIRE(c.hadamard->ratio() < 1);
  }
  // A bigger budget admits G=32 too: the choice is the argmin over all four.
  so.budget = 1.125;
  s = select_variants(r, so);
  REQUIRE(s.choices.size() == 2);
  for (const Choice& c : s.choices) {
    double best = 1e300;
    std::string best_name;
    for (const Aggregate& a : agg)
      if (a.site == c.site && a.direction == c.direction && a.median_rel_l2 < best) {
        best = a.median_rel_l2;
        best_name = r.variants[a.variant_index].name;
      }
    REQUIRE(c.variant == best_name);
  }
  // A budget nothing fits.
  so.budget = 1.0;
  s = select_variants(r, so);
  REQUIRE(s.choices.empty());
  REQUIRE(s.unmet.size() == 2);
}

TEST_CASE("selection prefers fewer bytes among medians within the tie tolerance",
          "[study][select]") {
  // bf16 and identity are both exact on bf16 data (rel_l2 0): the 2-byte one wins.
  MemorySource src = make_trace();
  const StudyResult r = run_study({&src}, base_options({"identity", "bf16", "int8-g128"}));
  SelectOptions so;
  so.candidates = {"identity", "bf16", "int8-g128"};
  so.budget = 4;
  Selection s = select_variants(r, so);
  REQUIRE(s.choices.size() == 2);
  for (const Choice& c : s.choices) REQUIRE(c.variant == "bf16");
  // G=32 has the lower error; with a tolerance wide enough to cover the gap, G=128 (fewer
  // bytes) wins, and without one G=32 does.
  MemorySource src2 = make_trace();
  const StudyResult r2 = run_study({&src2}, base_options({"int8-g32", "int8-g128"}));
  so.candidates = {"int8-g32", "int8-g128"};
  so.tie_tolerance = 0;
  s = select_variants(r2, so);
  for (const Choice& c : s.choices) REQUIRE(c.variant == "int8-g32");
  so.tie_tolerance = 10;
  s = select_variants(r2, so);
  for (const Choice& c : s.choices) REQUIRE(c.variant == "int8-g128");
}

TEST_CASE("selection.json round-trips into --config", "[study][select]") {
  MemorySource src = make_trace();
  const std::vector<std::string> cands = {"int8-g32", "int8-g128", "int8-g128-h"};
  const StudyResult r = run_study({&src}, base_options(cands));
  SelectOptions so;
  so.candidates = cands;
  so.budget = 1.05;
  const Selection s = select_variants(r, so);
  const nlohmann::json j = selection_json(s, r);
  REQUIRE(j["budget_bytes_per_elem"] == 1.05);
  REQUIRE(j["choices"].size() == 2);
  REQUIRE(j["choices"][0].contains("hadamard_effect"));

  const auto dir =
      std::filesystem::temp_directory_path() / fmt::format("taco-study-test-{}", ::getpid());
  std::filesystem::create_directories(dir);
  const std::string path = (dir / "selection.json").string();
  write_file_atomically(path, j.dump(1));
  const auto per_site = load_selection(path);
  REQUIRE(per_site.size() == 2);
  REQUIRE(per_site.at({"attn_out", "fwd"}) == "int8-g128-h");

  // Applying it: each site gets its chosen variant (and only that one).
  StudyOptions o = base_options({});
  o.per_site = per_site;
  o.per_site[{"mlp_out", "bwd"}] = "int8-g32";
  const StudyResult applied = run_study({&src}, o);
  REQUIRE(applied.rows.size() == 8);
  for (const TensorRow& row : applied.rows)
    REQUIRE(applied.variants[row.variant_index].name ==
            (row.meta.site == "attn_out" ? "int8-g128-h" : "int8-g32"));

  // Bad selection files are input errors naming the file.
  write_file_atomically(path, "{\"choices\": [{\"site\": \"a\"}]}");
  REQUIRE_THROWS_AS(load_selection(path), InputError);
  write_file_atomically(path, "not json");
  REQUIRE_THROWS_AS(load_selection(path), InputError);
  REQUIRE_THROWS_AS(load_selection((dir / "missing.json").string()), InputError);
  std::filesystem::remove_all(dir);
}

TEST_CASE("study files follow docs/results-schema.md", "[study]") {
  MemorySource src = make_trace();
  StudyOptions o = base_options({"identity", "int8-g128-h"});
  o.collectives = {sim::kTwoShot};
  const StudyResult r = run_study({&src}, o);
  Provenance p;
  p.taco_version = "0.1.0";
  p.git_commit = "abc";
  p.command = "taco study trace.mem";
  p.inputs = {{"trace.mem", "00", 1}};
  const auto dir =
      std::filesystem::temp_directory_path() / fmt::format("taco-study-out-{}", ::getpid());
  write_study_outputs(r, p, dir.string());
  const std::string csv = slurp((dir / "results.csv").string());
  REQUIRE(csv.rfind("file,tensor,layer,site,direction,collective,tp_rank,tp_size,step,shape,numel,"
                    "in_dtype,variant,family,elem_format,scale_format,granularity,group_size,"
                    "transform,rel_l2,mse,snr_db,cosine,max_abs_err,max_rel_err,underflow_frac,"
                    "saturation_frac,nan_count,inf_count,wire_bytes,bytes_per_elem,"
                    "compression_ratio,calc_diff,source,out_of_range_groups\n",
                    0) == 0);
  REQUIRE(csv.find(
              "trace.mem,l0.attn_out.r0,0,attn_out,fwd,,0,2,0,\"[64, 128]\",8192,bf16,identity,") !=
          std::string::npos);
  const nlohmann::json j = nlohmann::json::parse(slurp((dir / "results.json").string()));
  REQUIRE(j["provenance"]["inputs"][0]["sha256"] == "00");
  REQUIRE(j["rows"].size() == r.rows.size());
  REQUIRE(j["rows"][0]["rel_l2"] == 0.0);
  REQUIRE(j["rows"][0]["snr_db"].is_null());  // +inf has no JSON spelling
  // Test codecs have no variant spec, so no range: no count (a real one: test_codec_range.cpp).
  REQUIRE(j["rows"][0]["out_of_range_groups"].is_null());
  REQUIRE(j["variants"]["int8-g128-h"]["group_size"] == 128);
  // A test codec is no known variant: facts from its name and params only.
  const nlohmann::json& facts = j["variant_facts"]["int8-g128-h"];
  REQUIRE(facts["canonical"] == "int8-g128-h");
  REQUIRE(facts["has_transform"] == true);
  REQUIRE(facts["twin"].is_null());
  REQUIRE(facts["group_size"] == 128);
  REQUIRE(j["variant_facts"].size() == 2);
  const std::string hist = slurp((dir / "histograms.csv").string());
  REQUIRE(hist.rfind("site,direction,scope,bin_lo_log2,bin_hi_log2,count\n", 0) == 0);
  REQUIRE(hist.find("attn_out,fwd,group128,,,0\n") != std::string::npos);
  REQUIRE(std::filesystem::exists(dir / "collectives.csv"));
  // No temporary files left behind.
  for (const auto& e : std::filesystem::directory_iterator(dir))
    REQUIRE(e.path().filename().string().find(".tmp-") == std::string::npos);
  // A later run without collectives or histograms into the same directory does not leave the
  // earlier run's files next to its own.
  MemorySource src2 = make_trace();
  StudyOptions o2 = base_options({"identity"});
  o2.histograms = false;
  write_study_outputs(run_study({&src2}, o2), p, dir.string());
  REQUIRE(std::filesystem::exists(dir / "results.csv"));
  REQUIRE_FALSE(std::filesystem::exists(dir / "collectives.csv"));
  REQUIRE_FALSE(std::filesystem::exists(dir / "histograms.csv"));
  std::filesystem::remove_all(dir);

  const std::string summary = format_summary(r);
  REQUIRE(summary.find("site=attn_out direction=fwd") != std::string::npos);
  REQUIRE(summary.find("two_shot") != std::string::npos);
}

TEST_CASE("provenance quotes the command line and hashes inputs", "[study]") {
  REQUIRE(shell_join({"taco", "study", "a b.npy", "--filter", "site=x|y", "it's"}) ==
          "taco study 'a b.npy' --filter 'site=x|y' 'it'\\''s'");
  const auto path =
      std::filesystem::temp_directory_path() / fmt::format("taco-prov-{}", ::getpid());
  write_file_atomically(path.string(), "abc");
  const Provenance p = make_provenance({path.string()}, {"taco"}, 5, 2);
  REQUIRE(p.inputs[0].sha256 == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  REQUIRE(p.inputs[0].bytes == 3);
  REQUIRE(p.date.size() == 20);
  std::filesystem::remove(path);
  REQUIRE_THROWS_AS(make_provenance({path.string()}, {"taco"}, 0, 1), InputError);
}

TEST_CASE("results.json names each variant's preset, twin and series as the user spelled it",
          "[study]") {
  MemorySource src = make_trace();
  StudyOptions o = base_options(
      {"e4m3:g128:had:dual", "taco-g64", "e4m3:g64:had", "lowrank:rank=4", "ef:int4-g32"});
  o.codec_factory = [](const std::string& v) { return make_codec(v); };
  const StudyResult r = run_study({&src}, o);
  const nlohmann::json j = results_json(r, Provenance{});
  const nlohmann::json& f = j["variant_facts"];
  REQUIRE(f.size() == 5);
  // Keyed by the study's spelling (the variant column), named canonically inside.
  CHECK(f["e4m3:g128:had:dual"]["canonical"] == "taco");
  CHECK(f["e4m3:g128:had:dual"]["preset"] == "taco");
  CHECK(f["e4m3:g128:had:dual"]["twin"] == "taco-noh");
  CHECK(f["taco-g64"]["twin"] == "taco-noh-g64");
  CHECK(f["taco-g64"]["group_series"] == "taco");
  CHECK(f["taco-g64"]["group_size"] == 64);
  CHECK(f["e4m3:g64:had"]["preset"].is_null());
  CHECK(f["e4m3:g64:had"]["twin"] == "e4m3:g64");
  CHECK(f["e4m3:g64:had"]["nearest_preset"] == "fp8-g128-had");
  CHECK(f["lowrank:rank=4"]["family"] == "lowrank");
  CHECK(f["lowrank:rank=4"]["twin"].is_null());
  CHECK(f["lowrank:rank=4"]["nearest_preset"].is_null());
  CHECK(f["ef:int4-g32"]["canonical"] == "ef-int4-g32");
  CHECK(f["ef:int4-g32"]["preset"] == "ef-int4-g32");
  CHECK(f["ef:int4-g32"]["group_series"] == "ef-int4-g32");
  // Every row's variant has its facts.
  for (const auto& row : j["rows"]) CHECK(f.contains(row["variant"].get<std::string>()));
}

TEST_CASE("the twin results.json names is the variant the study pairs for its Hadamard ratio",
          "[study]") {
  // Two derivations that must agree: transform_twin compares codec params, variant_facts the
  // parsed specs.
  const std::vector<std::string> names = {
      "taco",     "taco-noh",      "taco-rht",  "taco-g32",        "e4m3:g32:dual", "e4m3:g64:had",
      "e4m3:g64", "int8-g128-had", "int8-g128", "ef:int4-g32-had", "ef:int4-g32"};
  std::vector<VariantInfo> infos;
  for (const std::string& n : names) infos.push_back(describe_variant(n, *make_codec(n)));
  int paired = 0;
  for (size_t i = 0; i < infos.size(); ++i) {
    INFO(names[i]);
    if (!has_transform(infos[i])) {
      CHECK_FALSE(infos[i].facts.twin);
      continue;
    }
    const std::optional<size_t> twin = transform_twin(infos, i);
    REQUIRE(twin);
    REQUIRE(infos[i].facts.twin);
    CHECK(*infos[i].facts.twin == infos[*twin].facts.canonical);
    ++paired;
  }
  CHECK(paired == 6);
}
