// Synthetic traces: PRNG known answers, fixed-recipe log/exp against libm, sampler
// distributions within tight statistical bounds, documented outlier structure, the trace
// plan, option errors, and golden hashes that pin the bits across machines and thread counts.
#include "catch.hpp"
#include "core/error.hpp"
#include "stats/tensor_stats.hpp"
#include "synth/det_math.hpp"
#include "synth/philox.hpp"
#include "synth/synth.hpp"

#include <algorithm>
#include <cmath>
#include <set>
#include <vector>

using namespace taco;
using Catch::Matchers::WithinRel;
using namespace taco::synth;

namespace {

struct Moments {
  double mean, var, kurt;
};
Moments moments(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x;
  const double mean = s / double(v.size());
  double m2 = 0, m4 = 0;
  for (double x : v) {
    const double d = x - mean;
    m2 += d * d;
    m4 += d * d * d * d;
  }
  return {mean, m2 / double(v.size()), double(v.size()) * m4 / (m2 * m2)};
}

double frac_below(const std::vector<double>& v, double t) {
  return double(std::count_if(v.begin(), v.end(), [t](double x) { return x < t; })) /
         double(v.size());
}

// FNV-1a over the float32 bit patterns of every value of a plan (for a bf16 store these are
// the bf16 values widened, so the hash pins the stored bits).
uint64_t trace_hash(const SynthOptions& o) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (const TensorPlan& p : plan_trace(o)) {
    const Tensor t = synthesize_tensor(o, p);
    for (float v : t.values) {
      const uint32_t b = float_bits(v);
      h = fnv1a64(&b, 4, h);
    }
  }
  return h;
}

SynthOptions small_options(const std::string& dist) {
  SynthOptions o;
  o.hidden = 256;
  o.tokens = 64;
  o.layers = 2;
  o.tp = 2;
  o.steps = {0, 3};
  o.sequence_parallel = true;
  o.dist = parse_dist(dist);
  o.seed = 7;
  return o;
}

const TensorPlan& find_plan(const std::vector<TensorPlan>& plan, const std::string& name) {
  for (const auto& p : plan)
    if (p.name == name) return p;
  FAIL("no tensor " << name);
  return plan.front();
}

}  // namespace

TEST_CASE("Philox4x32-10 reproduces the Random123 known-answer vectors", "[synth][prng]") {
  REQUIRE(philox4x32_10({0, 0, 0, 0}, {0, 0}) ==
          PhiloxCounter{0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8});
  REQUIRE(
      philox4x32_10({0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff}, {0xffffffff, 0xffffffff}) ==
      PhiloxCounter{0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd});
  REQUIRE(
      philox4x32_10({0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344}, {0xa4093822, 0x299f31d0}) ==
      PhiloxCounter{0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1});
  // The open-interval uniform never reaches 0 or 1.
  REQUIRE(uniform_open01(0, 0) == std::ldexp(1.0, -53));
  REQUIRE(uniform_open01(0xffffffff, 0xffffffff) == 1.0 - std::ldexp(1.0, -53));
  REQUIRE(uniform_open01(0xffffffff, 0xffffffff) < 1.0);
}

TEST_CASE("fixed-recipe log, exp and expm1 agree with libm to a few ulp", "[synth][math]") {
  // libm is the independent oracle here; det_math only has to be close, and the same everywhere.
  const Stream s(99, 1, 1);
  double worst_log = 0, worst_exp = 0, worst_expm1 = 0;
  for (uint64_t i = 0; i < 200000; ++i) {
    const double u = s.uniform(i);
    const double x = std::ldexp(0.5 + u, int(i % 2000) - 1000);  // wide exponent range
    worst_log = std::max(worst_log, std::fabs(detmath::log(x) - std::log(x)) /
                                        std::max(1e-300, std::fabs(std::log(x))));
    const double y = (u - 0.5) * 1400.0;
    worst_exp = std::max(worst_exp, std::fabs(detmath::exp(y) - std::exp(y)) / std::exp(y));
    const double z = (u - 0.5) * 4.0 * std::ldexp(1.0, -int(i % 40));
    worst_expm1 = std::max(worst_expm1,
                           std::fabs(detmath::expm1(z) - std::expm1(z)) / std::fabs(std::expm1(z)));
  }
  CAPTURE(worst_log, worst_exp, worst_expm1);
  REQUIRE(worst_log < 4e-16);
  REQUIRE(worst_exp < 1e-15);
  REQUIRE(worst_expm1 < 1e-15);
  REQUIRE(detmath::log(1.0) == 0.0);
  REQUIRE(detmath::exp(0.0) == 1.0);
  REQUIRE(detmath::log(0.0) == -INFINITY);
  REQUIRE(std::isnan(detmath::log(-1.0)));
  REQUIRE_THAT(detmath::log(4.9e-324), WithinRel(std::log(4.9e-324), 1e-15));  // subnormal input
  REQUIRE_THAT(detmath::exp(-740.0), WithinRel(std::exp(-740.0), 1e-9));       // subnormal output
  REQUIRE(detmath::exp(800.0) == INFINITY);
  REQUIRE_THAT(detmath::pow(2.0, 10.0), WithinRel(1024.0, 1e-15));
}

TEST_CASE("gaussian sampler: mean, variance, kurtosis and mass within 1 sigma", "[synth][dist]") {
  std::vector<double> z;
  const size_t n = 1000000;
  z.reserve(n);
  double cross = 0;
  for (uint64_t i = 0; z.size() < n; ++i) {
    const auto [a, b] = sample_gaussian_pair(5, 77, i);
    z.push_back(a);
    z.push_back(b);
    cross += a * b;
  }
  const Moments m = moments(z);
  // Bounds are 5 standard errors: sqrt(1/n), sqrt(2/n), sqrt(24/n).
  REQUIRE(std::fabs(m.mean) < 5 * std::sqrt(1.0 / n));
  REQUIRE(std::fabs(m.var - 1) < 5 * std::sqrt(2.0 / n));
  REQUIRE(std::fabs(m.kurt - 3) < 5 * std::sqrt(24.0 / n));
  REQUIRE(std::fabs(cross / (n / 2)) < 5 * std::sqrt(2.0 / n));  // the two members are uncorrelated
  const double within1 = frac_below(z, 1.0) - frac_below(z, -1.0);
  REQUIRE(std::fabs(within1 - 0.6826894921370859) < 5 * std::sqrt(0.68 * 0.32 / n));
}

TEST_CASE("laplace sampler: variance 2, kurtosis 6, CDF", "[synth][dist]") {
  std::vector<double> x(1000000);
  for (size_t i = 0; i < x.size(); ++i) x[i] = sample_laplace(5, 78, i);
  const Moments m = moments(x);
  const double n = double(x.size());
  REQUIRE(std::fabs(m.mean) < 5 * std::sqrt(2.0 / n));
  REQUIRE(std::fabs(m.var - 2) < 5 * std::sqrt(20.0 / n));  // var(x^2) = 24 - 4
  REQUIRE(std::fabs(m.kurt - 6) < 0.35);                    // about 6 standard errors
  REQUIRE(std::fabs(frac_below(x, 1.0) - 0.8160602794142788) < 5 * std::sqrt(0.25 / n));
}

TEST_CASE("student-t sampler: variance, kurtosis and CDF for several nu", "[synth][dist]") {
  const size_t n = 1000000;
  std::vector<double> t(n);
  for (size_t i = 0; i < n; ++i) t[i] = sample_student_t(5, 79, i, 10.0);
  const Moments m = moments(t);
  REQUIRE(std::fabs(m.var - 1.25) < 0.01);  // nu / (nu - 2)
  REQUIRE(std::fabs(m.kurt - 4.0) < 0.25);  // 3 + 6 / (nu - 4)
  REQUIRE(std::fabs(frac_below(t, 1.0) - 0.8295534338489701) < 5 * std::sqrt(0.25 / n));
  // Heavy tails: the CDF is the robust check (SciPy: t.cdf(2, 3), t.cdf(1, 1)).
  for (size_t i = 0; i < n; ++i) t[i] = sample_student_t(5, 80, i, 3.0);
  REQUIRE(std::fabs(frac_below(t, 2.0) - 0.9303370157205785) < 5 * std::sqrt(0.25 / n));
  for (size_t i = 0; i < n; ++i) t[i] = sample_student_t(5, 81, i, 1.0);
  REQUIRE(std::fabs(frac_below(t, 1.0) - 0.75) < 5 * std::sqrt(0.25 / n));
}

TEST_CASE("dist option parsing: defaults, canonical form and errors", "[synth][dist]") {
  const DistSpec d = parse_dist("laplace:b=0.25");
  REQUIRE(d.canonical() == "laplace:b=0.25");
  REQUIRE(parse_dist("gradient").canonical() == "gradient:rms=1e-07,nu=4");
  REQUIRE(parse_dist("outlier_channels:max=500,count=3").get("count") == 3);
  REQUIRE(parse_dist("outlier_channels:max=500,count=3").get("min") == 100);
  for (const char* bad :
       {"normal", "gaussian:", "gaussian:sigma", "gaussian:sigma=x", "gaussian:sigma=-1",
        "gaussian:mu=0", "gaussian:sigma=1,sigma=2", "sparse:p=1", "gradient:nu=2",
        "outlier_channels:count=1.5", "outlier_channels:min=500,max=200", "student_t:nu=inf",
        "realistic:ch_min=0.5"}) {
    CAPTURE(bad);
    REQUIRE_THROWS_AS(parse_dist(bad), InputError);
  }
  for (const DistInfo& info : dist_catalog()) REQUIRE(parse_dist(info.name).name == info.name);
}

TEST_CASE("the trace plan follows Megatron TP with and without SP", "[synth][plan]") {
  SynthOptions o;
  o.hidden = 64;
  o.tokens = 48;
  o.layers = 3;
  o.tp = 4;
  o.steps = {0, 5};
  std::vector<TensorPlan> plan = plan_trace(o);
  // Without SP: fwd attn_out, mlp_out and bwd attn_qkv, mlp_fc1, per rank.
  REQUIRE(plan.size() == 2 * 3 * 4 * 4);
  std::set<std::string> names;
  for (const auto& p : plan) {
    names.insert(p.name);
    REQUIRE(p.meta.collective == "all_reduce");
    REQUIRE(p.shape == std::vector<int64_t>{48, 64});
    const bool row_parallel = p.meta.site == "attn_out" || p.meta.site == "mlp_out";
    REQUIRE(row_parallel == (p.meta.direction == "fwd"));
    REQUIRE(p.meta.tp_size == 4);
    REQUIRE(p.meta.model == "synth:realistic");
  }
  REQUIRE(names.size() == plan.size());
  REQUIRE(plan.front().name == "step0/layer0/attn_out/fwd/rank0");

  o.sequence_parallel = true;
  plan = plan_trace(o);
  REQUIRE(plan.size() == 2 * 3 * 8 * 4);
  const TensorPlan& ag = find_plan(plan, "step5/layer2/mlp_fc1/fwd/rank3");
  REQUIRE(ag.meta.collective == "all_gather");
  REQUIRE(ag.shape == std::vector<int64_t>{12, 64});
  REQUIRE(ag.token_offset == 36);
  REQUIRE(find_plan(plan, "step5/layer2/mlp_fc1/bwd/rank3").meta.collective == "reduce_scatter");
  REQUIRE(find_plan(plan, "step0/layer1/attn_out/bwd/rank0").meta.collective == "all_gather");

  SECTION("errors name the flag") {
    auto expect = [&](SynthOptions bad, const std::string& flag) {
      try {
        plan_trace(bad);
        FAIL("no error for " << flag);
      } catch (const InputError& e) {
        REQUIRE(std::string(e.what()).rfind(flag, 0) == 0);
      }
    };
    SynthOptions b = o;
    b.tokens = 50;
    expect(b, "--sp");
    b = o;
    b.sites = {"attn_out", "attn_out"};
    expect(b, "--sites");
    b = o;
    b.sites = {"qkv"};
    expect(b, "--sites");
    b = o;
    b.directions = {"up"};
    expect(b, "--directions");
    b = o;
    b.sequence_parallel = false;
    b.sites = {"attn_qkv"};
    b.directions = {"fwd"};
    expect(b, "--sites/--directions");
    b = o;
    b.hidden = 0;
    expect(b, "--hidden");
    b = o;
    b.hidden = 1 << 20;
    b.tokens = 1 << 20;
    expect(b, "--tokens x --hidden");
    b = o;
    b.steps = {};
    expect(b, "--steps");
    b = o;
    b.store = DType::F8E4M3;
    expect(b, "--store");
    b = o;
    b.dist = parse_dist("outlier_channels:count=65");
    expect(b, "--dist");
  }
}

TEST_CASE("outlier channels are where documented, shared within a layer", "[synth][dist]") {
  SynthOptions o;
  o.hidden = 1024;
  o.tokens = 256;
  o.layers = 2;
  o.tp = 2;
  o.steps = {0, 1};
  o.dist = parse_dist("outlier_channels:count=6");
  const auto plan = plan_trace(o);
  const Recipe rc = recipe_for(o.dist, plan.front().meta);
  const std::vector<int64_t> ch0 = outlier_channels(o, rc, 0), ch1 = outlier_channels(o, rc, 1);
  REQUIRE(ch0.size() == 6);
  REQUIRE(ch0 != ch1);
  StatsOptions so;
  so.top_k = 6;
  for (const auto& p : plan) {
    const Tensor t = synthesize_tensor(o, p);
    const TensorStats s = compute_stats(t, so);
    std::vector<int64_t> top;
    for (const auto& c : s.top_channels) top.push_back(c.index);
    std::sort(top.begin(), top.end());
    CAPTURE(p.name);
    REQUIRE(top == (p.meta.layer == 0 ? ch0 : ch1));
    // Factors are >= 100: the weakest outlier channel still dwarfs the median channel.
    REQUIRE(s.top_channels.back().absmax > 30 * s.col_absmax_median);
    REQUIRE(s.rms > 1);
  }
}

TEST_CASE("outlier tokens follow the global token index across SP shards", "[synth][dist]") {
  SynthOptions o;
  o.hidden = 512;
  o.tokens = 128;
  o.layers = 1;
  o.tp = 4;
  o.sequence_parallel = true;
  o.sites = {"attn_out"};
  o.directions = {"bwd"};  // attn_out bwd with SP: all-gather shards of 32 tokens
  o.dist = parse_dist("outlier_tokens:count=3,min=200,max=300");
  const auto plan = plan_trace(o);
  REQUIRE(plan.size() == 4);
  const std::vector<int64_t> tok = outlier_tokens(o, recipe_for(o.dist, plan[0].meta), 0);
  REQUIRE(tok.size() == 3);
  std::vector<int64_t> found;
  for (const auto& p : plan) {
    const Tensor t = synthesize_tensor(o, p);
    const TensorStats s = compute_stats(t);
    for (const auto& r : s.top_tokens)
      if (r.absmax > 50 * s.row_absmax_median) found.push_back(r.index + p.token_offset);
  }
  std::sort(found.begin(), found.end());
  REQUIRE(found == tok);
}

TEST_CASE("gradient, sparse and realistic have their documented scale", "[synth][dist]") {
  SynthOptions o;
  o.hidden = 1024;
  o.tokens = 1024;
  o.layers = 1;
  o.tp = 1;
  o.store = DType::F32;
  o.dist = parse_dist("gradient");
  const auto plan = plan_trace(o);
  TensorStats s = compute_stats(synthesize_tensor(o, plan[0]));
  REQUIRE(s.rms > 0.8e-7);
  REQUIRE(s.rms < 1.25e-7);
  REQUIRE(s.kurtosis > 6);  // heavy tails (t with nu = 4 has infinite kurtosis)
  REQUIRE(s.zero_count == 0);

  o.dist = parse_dist("sparse:p=0.75,sigma=2");
  s = compute_stats(synthesize_tensor(o, plan[0]));
  const double n = double(s.numel);
  REQUIRE(std::fabs(s.zero_frac - 0.75) < 5 * std::sqrt(0.75 * 0.25 / n));
  REQUIRE_THAT(s.rms, WithinRel(2 * std::sqrt(0.25), 0.01));

  // realistic backward: grad_rms is the rms with the outlier tokens included.
  o.dist = parse_dist("realistic");
  const TensorPlan& bwd = plan.back();
  REQUIRE(bwd.meta.direction == "bwd");
  s = compute_stats(synthesize_tensor(o, bwd));
  REQUIRE(s.rms > 0.8e-7);
  REQUIRE(s.rms < 1.25e-7);
  std::vector<int64_t> top;
  for (const auto& t : s.top_tokens) top.push_back(t.index);
  std::sort(top.begin(), top.end());
  REQUIRE(top == outlier_tokens(o, recipe_for(o.dist, bwd.meta), 0));

  // realistic: forward partial sums at act_sigma with outlier channels; backward at grad_rms.
  o.dist = parse_dist("realistic:channels=0,tokens=0");
  for (const auto& p : plan) {
    s = compute_stats(synthesize_tensor(o, p));
    CAPTURE(p.name);
    if (p.meta.direction == "fwd") {
      REQUIRE_THAT(s.rms, WithinRel(0.5, 0.01));
      REQUIRE(std::fabs(s.kurtosis - 3) < 0.03);
    } else {
      REQUIRE(s.rms > 0.8e-7);
      REQUIRE(s.rms < 1.25e-7);
    }
  }
}

TEST_CASE("stored values are exact in the store dtype", "[synth]") {
  SynthOptions o = small_options("realistic");
  const auto plan = plan_trace(o);
  for (DType d : {DType::BF16, DType::F16}) {
    o.store = d;
    const Tensor t = synthesize_tensor(o, plan[0]);
    REQUIRE(t.dtype == d);
    for (float v : t.values) {
      if (d == DType::BF16)
        REQUIRE(bf16_to_float(float_to_bf16(v)) == v);
      else
        REQUIRE(fp16_to_float(float_to_fp16(v)) == v);
    }
  }
}

TEST_CASE("golden hashes: the same bits for 1 and 2 threads and on every machine",
          "[synth][golden]") {
  // Recorded from taco-synth/1 (GCC 12, x86-64). A change to the generator that alters these
  // must bump kGeneratorVersion; a machine or compiler that gives other values breaks the
  // determinism promise (docs/synth.md).
  struct Golden {
    std::string dist;
    DType store;
    uint64_t hash;
  };
  const std::vector<Golden> golden = {
      {"realistic", DType::BF16, 0x4d1f7b8ec48cafffULL},
      {"realistic", DType::F32, 0x773424351e64a913ULL},
      {"laplace:b=0.01", DType::F32, 0x5614142ccb4fbf5aULL},
      {"sparse:p=0.5", DType::F32, 0x6cbc502f973afeefULL},
      {"student_t:nu=3,scale=0.1", DType::F32, 0x7cd39e2ccadd6133ULL},
      {"outlier_tokens", DType::F16, 0x0917e9c66d53e02eULL},
  };
  for (const auto& [dist, store, expect] : golden) {
    SynthOptions o = small_options(dist);
    o.store = store;
    o.threads = 1;
    const uint64_t h1 = trace_hash(o);
    o.threads = 2;
    const uint64_t h2 = trace_hash(o);
    CAPTURE(dist, dtype_name(store), h1);
    REQUIRE(h1 == h2);
    CHECK(h1 == expect);
  }
}
