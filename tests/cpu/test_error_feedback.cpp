// Error feedback and AQ-SGD over sequences of tensors: the EF property (bounded residual, the
// time-averaged decoded signal converging to the input), the telescoping identity, keying by
// (layer, site, direction, tp_rank), step order, the AQ-SGD sample rule, and the CSV.
#include "catch.hpp"
#include "codecs/codec.hpp"
#include "codecs/structured/structured.hpp"
#include "core/error.hpp"
#include "study/error_feedback.hpp"

#include <cmath>
#include <random>

using namespace taco;
using namespace taco::study;

namespace {

std::vector<float> gaussian(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d;
  std::vector<float> x(n);
  for (float& v : x) v = d(rng);
  return x;
}

double norm(const std::vector<float>& x) {
  double s = 0;
  for (float v : x) s += double(v) * v;
  return std::sqrt(s);
}

std::unique_ptr<Codec> feedback(const std::string& v) {
  auto c = make_codec(v);
  REQUIRE(c->wrapped().has_value());
  return c;
}

Tensor tensor(const std::string& name, std::vector<float> v, int64_t rows, int64_t cols,
              int64_t step, int layer, int rank = 0) {
  Tensor t;
  t.name = name;
  t.shape = {rows, cols};
  t.values = std::move(v);
  t.meta.layer = layer;
  t.meta.site = "attn_out";
  t.meta.direction = "fwd";
  t.meta.tp_rank = rank;
  t.meta.step = step;
  return t;
}

}  // namespace

TEST_CASE("ef wraps any codec: names, params, stateless use is the first step", "[ef]") {
  const auto ef = feedback("ef:int4-g32");
  REQUIRE(ef->name() == "ef-int4-g32");
  REQUIRE(ef->params().at("family") == "ef");
  REQUIRE(ef->params().at("inner") == "int4-g32");
  REQUIRE(ef->params().at("elem_format") == ef->wrapped()->inner->params().at("elem_format"));
  REQUIRE(make_codec("ef:topk:frac=0.1")->name() == "ef:topk10");
  REQUIRE(make_codec("aqsgd:int4-g32")->params().at("family") == "aqsgd");
  const std::vector<float> x = gaussian(64 * 64, 1);
  REQUIRE(ef->encode(x.data(), 64, 64) == ef->wrapped()->inner->encode(x.data(), 64, 64));
}

// What a codec is comes from the contract (Codec::wrapped()), not its dynamic type: the study,
// variant_facts, the GPU factory and the binding read it.
TEST_CASE("wrapped() names the wrapper's kind and inner codec; nothing else is a wrapper", "[ef]") {
  for (const char* v : {"ef:int4-g32", "aqsgd:nvfp4", "ef:topk:frac=0.1", "ef-nvfp4"}) {
    CAPTURE(v);
    const auto c = make_codec(v);
    const std::optional<Wrapped> w = c->wrapped();
    REQUIRE(w.has_value());
    const std::string kind(feedback_kind_name(w->kind));
    REQUIRE(c->params().at("family") == kind);
    REQUIRE(c->params().at("inner") == w->inner->name());
    REQUIRE_FALSE(w->inner->wrapped().has_value());
  }
  REQUIRE(make_codec("aqsgd:int4-g32")->wrapped()->kind == FeedbackKind::AqSgd);
  for (const char* v :
       {"taco", "bf16", "int4-g32-had", "tahquant", "topk10", "lowrank:rank=4", "subspace:k=8"}) {
    CAPTURE(v);
    const auto c = make_codec(v);
    REQUIRE_FALSE(c->wrapped().has_value());
    REQUIRE_THROWS_AS(study::FeedbackState(*c), InputError);
  }
  REQUIRE_THROWS_AS(make_codec("ef:ef:int4-g32"), InputError);
}

TEST_CASE("EF on a stationary input: bounded residual, time average converges to x", "[ef]") {
  const int64_t rows = 32, cols = 64, n = rows * cols;
  const std::vector<float> x = gaussian(size_t(n), 2);
  const double xn = norm(x);
  for (const char* v :
       {"ef:int4-g32", "ef:topk:frac=0.05", "ef:lowrank:rank=2", "ef:randk:frac=0.1"}) {
    CAPTURE(v);
    const auto ef = feedback(v);
    // The plain codec's error: deterministic, so its time average is no better than one step.
    std::vector<float> plain(static_cast<size_t>(n));
    const auto w = ef->wrapped()->inner->encode(x.data(), rows, cols);
    ef->wrapped()->inner->decode(w.data(), w.size(), rows, cols, plain.data());
    std::vector<float> d(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) d[size_t(i)] = plain[size_t(i)] - x[size_t(i)];
    const double plain_err = norm(d) / xn;
    REQUIRE(plain_err > 0.01);

    FeedbackState st(*ef);
    std::vector<double> sum_hat(size_t(n), 0.0);
    std::vector<float> xhat(static_cast<size_t>(n));
    double max_res_first = 0, max_res_last = 0, err_at_20 = 0;
    const int steps = 200;
    for (int t = 1; t <= steps; ++t) {
      const FeedbackStep s = st.step("seq", x.data(), rows, cols, xhat.data());
      REQUIRE(s.visit == t);
      for (int64_t i = 0; i < n; ++i) sum_hat[size_t(i)] += xhat[size_t(i)];
      const double res = std::sqrt(s.state_norm2) / xn;
      (t <= steps / 2 ? max_res_first : max_res_last) =
          std::max(t <= steps / 2 ? max_res_first : max_res_last, res);
      // The time-averaged error, directly: || mean x^ - x || / ||x||.
      double e2 = 0;
      for (int64_t i = 0; i < n; ++i) {
        const double diff = sum_hat[size_t(i)] / t - x[size_t(i)];
        e2 += diff * diff;
      }
      const double avg = std::sqrt(e2) / xn;
      // ... which is ||e_t|| / (t ||x||): the residuals telescope.
      REQUIRE(avg == Approx(s.avg_err).epsilon(1e-3).margin(1e-7));
      if (t == 20) err_at_20 = avg;
      if (t == steps) {
        // 1/T decay from a bounded residual: after 200 steps the time average is an order of
        // magnitude better than any single step of the plain codec.
        REQUIRE(avg < plain_err / 10);
        REQUIRE(avg < err_at_20 / 5);
      }
    }
    // Bounded: the residual does not grow over the second hundred steps.
    REQUIRE(max_res_last <= 1.5 * max_res_first + 1e-9);
    REQUIRE(max_res_last < 50);
  }
}

TEST_CASE("EF cannot help a fixed subspace: the residual outside span(U) grows linearly", "[ef]") {
  // C = projection onto a fixed span(U) is not contractive on the complement, so e_t = t P x
  // (P: projection onto the complement): EF needs a compressor that eventually sends every
  // direction. This is why the study reports ef:subspace rows as diverging, not a bug.
  const int64_t rows = 8, cols = 32;
  const std::vector<float> x = gaussian(size_t(rows * cols), 9);
  const auto ef = feedback("ef:subspace:k=8:coef=f32");
  FeedbackState st(*ef);
  std::vector<float> xhat(x.size());
  const double r1 = std::sqrt(st.step("k", x.data(), rows, cols, xhat.data()).state_norm2);
  REQUIRE(r1 > 0.5 * norm(x));  // most of x is outside an 8-of-32 subspace
  double rt = 0;
  for (int t = 2; t <= 50; ++t)
    rt = std::sqrt(st.step("k", x.data(), rows, cols, xhat.data()).state_norm2);
  REQUIRE(rt == Approx(50 * r1).epsilon(1e-4));
}

TEST_CASE("run_feedback keys residuals by sequence and processes steps in order", "[ef]") {
  const int64_t rows = 16, cols = 32;
  const auto ef = feedback("ef:int4-g32");
  // Two layers, three steps, given in reverse step order and interleaved.
  std::vector<Tensor> ts;
  for (int step = 2; step >= 0; --step)
    for (int layer = 0; layer < 2; ++layer)
      ts.push_back(tensor(fmt::format("s{}l{}", step, layer),
                          gaussian(size_t(rows * cols), uint32_t(10 * step + layer)), rows, cols,
                          step, layer));
  std::vector<const Tensor*> ptrs;
  for (const Tensor& t : ts) ptrs.push_back(&t);
  const std::vector<FeedbackOutcome> out = run_feedback(*ef, ptrs);
  // Reference: each layer's sequence on its own, in step order.
  for (int layer = 0; layer < 2; ++layer) {
    FeedbackState st(*ef);
    for (int step = 0; step <= 2; ++step) {
      const size_t i = size_t((2 - step) * 2 + layer);
      std::vector<float> xhat(size_t(rows * cols));
      const FeedbackStep s = st.step("k", ts[i].values.data(), rows, cols, xhat.data());
      REQUIRE(out[i].measured);
      REQUIRE(out[i].xhat == xhat);
      REQUIRE(out[i].step.visit == step + 1);
      REQUIRE(out[i].step.state_norm2 == s.state_norm2);
      REQUIRE(out[i].key == feedback_sequence(ts[i].meta));
    }
  }
  // The first step of each sequence is the plain codec.
  std::vector<float> plain(size_t(rows * cols));
  const auto w = ef->wrapped()->inner->encode(ts[4].values.data(), rows, cols);
  ef->wrapped()->inner->decode(w.data(), w.size(), rows, cols, plain.data());
  REQUIRE(out[4].xhat == plain);
  REQUIRE(step_order({3, 1, 2, 1, -1}) == std::vector<size_t>{4, 1, 3, 2, 0});
}

TEST_CASE("EF rejects a sequence whose shape changes", "[ef]") {
  const auto ef = feedback("ef:int4-g32");
  FeedbackState st(*ef);
  const std::vector<float> x = gaussian(64, 3);
  std::vector<float> y(64);
  st.step("k", x.data(), 4, 16, y.data());
  REQUIRE_THROWS_AS(st.step("k", x.data(), 8, 8, y.data()), InputError);
  REQUIRE(st.entries() == 1);
}

TEST_CASE("AQ-SGD: the sample rule and the cache converging on a repeated sample", "[ef]") {
  const int64_t rows = 16, cols = 64;
  const auto aq = feedback("aqsgd:int4-g32");
  const std::vector<float> a = gaussian(size_t(rows * cols), 5),
                           b = gaussian(size_t(rows * cols), 6);

  SECTION("no repeated samples: everything skipped, and the reason says why") {
    std::vector<Tensor> ts = {tensor("step0/x", a, rows, cols, 0, 0),
                              tensor("step1/x", b, rows, cols, 1, 0)};
    const auto out = run_feedback(*aq, {&ts[0], &ts[1]});
    for (const auto& o : out) {
      REQUIRE_FALSE(o.measured);
      REQUIRE_THAT(o.skip_reason, Catch::Matchers::Contains("no repeated samples"));
    }
  }
  SECTION("extra.sample_id, and equal names across steps, identify samples") {
    std::vector<Tensor> ts;
    for (int epoch = 0; epoch < 6; ++epoch) {
      // Sample A by id (names differ), sample B by its name recurring at every step.
      Tensor ta = tensor(fmt::format("e{}/a", epoch), a, rows, cols, 2 * epoch, 0);
      ta.meta.extra["sample_id"] = "17";
      ts.push_back(ta);
      ts.push_back(tensor("b", b, rows, cols, 2 * epoch + 1, 0));
    }
    ts.push_back(tensor("once", a, rows, cols, 99, 0));  // appears once: skipped
    std::vector<const Tensor*> ptrs;
    for (const Tensor& t : ts) ptrs.push_back(&t);
    const auto out = run_feedback(*aq, ptrs);
    REQUIRE_FALSE(out.back().measured);
    REQUIRE_THAT(out.back().skip_reason, Catch::Matchers::Contains("occurs once"));
    // The first visit is the plain codec; later visits send the delta and the cache converges.
    std::vector<float> plain(size_t(rows * cols));
    const auto w = aq->wrapped()->inner->encode(a.data(), rows, cols);
    aq->wrapped()->inner->decode(w.data(), w.size(), rows, cols, plain.data());
    REQUIRE(out[0].xhat == plain);
    REQUIRE_THAT(out[0].key, Catch::Matchers::Contains("sample_id=17"));
    REQUIRE_THAT(out[1].key, Catch::Matchers::Contains("name=b"));
    for (size_t s : {size_t(0), size_t(1)}) {
      const std::vector<float>& x = s == 0 ? a : b;
      double prev = 1e9;
      for (int epoch = 0; epoch < 6; ++epoch) {
        const FeedbackOutcome& o = out[size_t(2 * epoch) + s];
        REQUIRE(o.measured);
        REQUIRE(o.step.visit == epoch + 1);
        std::vector<float> d(x.size());
        for (size_t i = 0; i < x.size(); ++i) d[i] = o.xhat[i] - x[i];
        const double e = norm(d) / norm(x);
        if (epoch == 0) REQUIRE(e > 0.05);
        REQUIRE(e < prev);  // each visit quantizes a smaller delta
        prev = e;
      }
      REQUIRE(prev < 1e-4);  // about 10x per visit for 4-bit groups
    }
  }
}

TEST_CASE("feedback.csv: header and one row", "[ef]") {
  FeedbackRow r;
  r.file = "t.h5";
  r.tensor = "step0/layer1/attn_out/fwd/rank0";
  r.variant = "ef-int4-g32";
  r.family = "ef";
  r.key = "layer=1/site=attn_out/direction=fwd/tp_rank=0";
  r.meta.layer = 1;
  r.meta.site = "attn_out";
  r.meta.direction = "fwd";
  r.meta.tp_rank = 0;
  r.meta.step = 0;
  r.visit = 1;
  r.rel_l2 = 0.125;
  r.state_rel = 0.25;
  r.avg_err = 0.5;
  REQUIRE(feedback_csv({r}) ==
          "file,tensor,layer,site,direction,tp_rank,step,variant,family,key,visit,rel_l2,state_rel,"
          "avg_err\n"
          "t.h5,step0/layer1/attn_out/fwd/rank0,1,attn_out,fwd,0,0,ef-int4-g32,ef,"
          "layer=1/site=attn_out/direction=fwd/tp_rank=0,1,0.125,0.25,0.5\n");
  r.family = "aqsgd";
  REQUIRE_THAT(feedback_csv({r}), Catch::Matchers::EndsWith(",0.125,0.25,\n"));
}

TEST_CASE("tensors without a stream identity never share state; repeats at one step are copies",
          "[ef]") {
  const int64_t rows = 16, cols = 32;
  const auto ef = feedback("ef:int4-g32");
  // Unrelated tensors of a dump taco could not read (no site), all at one step: each is its own
  // stream, so EF on them is the plain codec.
  std::vector<Tensor> ts;
  for (int i = 0; i < 4; ++i) {
    Tensor t = tensor(fmt::format("tensor{}", i), gaussian(size_t(rows * cols), uint32_t(100 + i)),
                      rows, cols, -1, -1);
    t.meta.site.clear();
    t.meta.direction.clear();
    t.meta.tp_rank = -1;
    ts.push_back(t);
  }
  std::vector<const Tensor*> ptrs;
  for (const Tensor& t : ts) ptrs.push_back(&t);
  const auto out = run_feedback(*ef, ptrs);
  for (size_t i = 0; i < ts.size(); ++i) {
    std::vector<float> plain(size_t(rows * cols));
    const auto w = ef->wrapped()->inner->encode(ts[i].values.data(), rows, cols);
    ef->wrapped()->inner->decode(w.data(), w.size(), rows, cols, plain.data());
    REQUIRE(out[i].xhat == plain);
    REQUIRE(out[i].step.visit == 1);
    REQUIRE(out[i].key == fmt::format("name=tensor{}", i));
  }
  // The same name at two steps (one file per step) is one stream.
  Tensor a = ts[0], b = ts[0];
  a.meta.step = 1;
  b.meta.step = 2;
  const auto two = run_feedback(*ef, {&b, &a});
  REQUIRE(two[1].step.visit == 1);
  REQUIRE(two[0].step.visit == 2);
  // A stream given twice at the same steps (the same trace twice) is two copies, each in order.
  Tensor s0 = tensor("x", gaussian(size_t(rows * cols), 7), rows, cols, 0, 0);
  Tensor s1 = tensor("x", gaussian(size_t(rows * cols), 8), rows, cols, 1, 0);
  const auto copies = run_feedback(*ef, {&s0, &s1, &s0, &s1});
  REQUIRE(copies[0].key == feedback_sequence(s0.meta));
  REQUIRE(copies[2].key == feedback_sequence(s0.meta) + "/copy=1");
  REQUIRE(copies[3].key == feedback_sequence(s0.meta) + "/copy=1");
  REQUIRE(copies[1].step.visit == 2);
  REQUIRE(copies[3].step.visit == 2);
  REQUIRE(copies[3].xhat == copies[1].xhat);  // the copy saw the same sequence
  REQUIRE(stream_keys({}).empty());
}
