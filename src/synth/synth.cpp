#include "synth/synth.hpp"

#include "core/error.hpp"
#include "synth/det_math.hpp"
#include "synth/philox.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>
#include <unordered_map>

namespace taco::synth {
namespace {

// Purpose tags: the fourth Philox counter word, so different uses of one stream never share
// random bits.
constexpr uint32_t kTagValues = 1, kTagZero = 2, kTagPick = 3, kTagFactor = 4;
// Rejection samplers accept with probability pi/4 per attempt: 200 failures in a row has
// probability 1e-134. Reaching the cap means a bug, not bad luck: the sampler then returns
// NaN (it runs inside OpenMP loops, where it must not throw) and the caller raises Error.
constexpr uint32_t kMaxAttempts = 200;
constexpr double kFailed = std::numeric_limits<double>::quiet_NaN();

const std::vector<std::string> kSites{"attn_out", "mlp_out", "attn_qkv", "mlp_fc1"};

uint64_t stream_id(const std::string& name) {
  return fnv1a64(name.data(), name.size());
}

// Two independent N(0,1) from one accepted point of the unit disc (Marsaglia's polar method).
// u and v are odd multiples of 2^-52, never 0, so 0 < w.
std::pair<double, double> gaussian_pair(const Stream& s, uint64_t index) {
  for (uint32_t a = 0; a < kMaxAttempts; ++a) {
    const PhiloxCounter r = s.draw(index, a);
    const double u = 2.0 * uniform_open01(r[0], r[1]) - 1.0;
    const double v = 2.0 * uniform_open01(r[2], r[3]) - 1.0;
    const double w = u * u + v * v;
    if (w >= 1.0) continue;
    const double f = std::sqrt(-2.0 * detmath::log(w) / w);
    return {u * f, v * f};
  }
  return {kFailed, kFailed};
}

// Laplace(0, 1) by inversion: u uniform in (-1/2, 1/2), x = -sign(u) log(1 - 2|u|).
double laplace(const Stream& s, uint64_t index) {
  const PhiloxCounter r = s.draw(index);
  const double u = uniform_open01(r[0], r[1]) - 0.5;  // exact, never 0
  const double l = detmath::log(1.0 - 2.0 * std::fabs(u));
  return u > 0 ? -l : l;
}

// t(nu) by Bailey's polar method (Math. Comp. 62, 1994): accept (u, v) in the unit disc,
// t = u sqrt(nu (w^(-2/nu) - 1) / w). Only one variate per point: the pair is not independent.
double student_t(const Stream& s, uint64_t index, double nu) {
  for (uint32_t a = 0; a < kMaxAttempts; ++a) {
    const PhiloxCounter r = s.draw(index, a);
    const double u = 2.0 * uniform_open01(r[0], r[1]) - 1.0;
    const double v = 2.0 * uniform_open01(r[2], r[3]) - 1.0;
    const double w = u * u + v * v;
    if (w >= 1.0) continue;
    const double c = detmath::expm1((-2.0 / nu) * detmath::log(w));
    return u * std::sqrt(nu * c / w);
  }
  return kFailed;
}

// `count` distinct integers of [0, n), by a partial Fisher-Yates shuffle whose swaps live in
// a map (O(count) memory even for large n); sorted.
std::vector<int64_t> pick_distinct(const Stream& s, int64_t n, int64_t count) {
  std::unordered_map<int64_t, int64_t> moved;  // position -> value where it differs from identity
  auto at = [&](int64_t i) {
    const auto it = moved.find(i);
    return it == moved.end() ? i : it->second;
  };
  std::vector<int64_t> out;
  for (int64_t i = 0; i < count; ++i) {
    // u < 1, but u * (n - i) can round up to n - i: clamp.
    const int64_t j = std::min(n - 1, i + int64_t(s.uniform(uint64_t(i)) * double(n - i)));
    const int64_t vi = at(i), vj = at(j);
    moved[j] = vi;
    moved[i] = vj;
    out.push_back(vj);
  }
  std::sort(out.begin(), out.end());
  return out;
}

// Outlier factor for member `index`: log-uniform in [lo, hi].
double factor(const Stream& s, int64_t index, double lo, double hi) {
  const double u = s.uniform(uint64_t(index));
  return lo * detmath::exp(u * detmath::log(hi / lo));
}

float round_to(float v, DType store) {
  switch (store) {
    case DType::BF16:
      return bf16_to_float(float_to_bf16(v));
    case DType::F16:
      return fp16_to_float(float_to_fp16(v));
    case DType::F32:
      return v;
    default:
      throw_input_error("--store: cannot store synthetic values as {}", dtype_name(store));
  }
}

std::string channels_stream(int64_t layer) {
  return fmt::format("channels/layer={}", layer);
}
// The batch at a step: the step itself, or with --samples the sample it draws.
std::string tokens_stream(const SynthOptions& o, int64_t step) {
  return o.samples > 0 ? fmt::format("tokens/sample={}", step % o.samples)
                       : fmt::format("tokens/step={}", step);
}

template <typename T>
void require_unique(const std::vector<T>& v, const char* flag) {
  TACO_REQUIRE_INPUT(!v.empty(), "{}: needs at least one value", flag);
  const std::set<T> s(v.begin(), v.end());
  TACO_REQUIRE_INPUT(s.size() == v.size(), "{}: a value is listed twice", flag);
}

}  // namespace

std::pair<double, double> sample_gaussian_pair(uint64_t seed, uint64_t stream, uint64_t index) {
  const auto z = gaussian_pair(Stream(seed, stream, kTagValues), index);
  TACO_ASSERT(!std::isnan(z.first), "gaussian sampler: no point accepted in {} attempts",
              kMaxAttempts);
  return z;
}
double sample_laplace(uint64_t seed, uint64_t stream, uint64_t index) {
  return laplace(Stream(seed, stream, kTagValues), index);
}
double sample_student_t(uint64_t seed, uint64_t stream, uint64_t index, double nu) {
  const double t = student_t(Stream(seed, stream, kTagValues), index, nu);
  TACO_ASSERT(!std::isnan(t), "student-t sampler: no point accepted in {} attempts", kMaxAttempts);
  return t;
}

std::vector<int64_t> outlier_channels(const SynthOptions& o, const Recipe& r, int64_t layer) {
  if (r.outlier_channels == 0) return {};
  return pick_distinct(Stream(o.seed, stream_id(channels_stream(layer)), kTagPick), o.hidden,
                       r.outlier_channels);
}

std::vector<int64_t> outlier_tokens(const SynthOptions& o, const Recipe& r, int64_t step) {
  if (r.outlier_tokens == 0) return {};
  return pick_distinct(Stream(o.seed, stream_id(tokens_stream(o, step)), kTagPick), o.tokens,
                       r.outlier_tokens);
}

std::vector<TensorPlan> plan_trace(const SynthOptions& o) {
  TACO_REQUIRE_INPUT(o.hidden >= 1, "--hidden: must be >= 1, got {}", o.hidden);
  TACO_REQUIRE_INPUT(o.tokens >= 1, "--tokens: must be >= 1, got {}", o.tokens);
  TACO_REQUIRE_INPUT(o.layers >= 1, "--layers: must be >= 1, got {}", o.layers);
  // As taco study simulates at most (sim::kMaxTpDegree): no deployment is wider.
  TACO_REQUIRE_INPUT(o.tp >= 1 && o.tp <= 256, "--tp: must be in [1, 256], got {}", o.tp);
  TACO_REQUIRE_INPUT(o.hidden <= (int64_t(1) << 31) / o.tokens,
                     "--tokens x --hidden: {} x {} elements per tensor is more than 2^31", o.tokens,
                     o.hidden);
  TACO_REQUIRE_INPUT(o.store == DType::BF16 || o.store == DType::F16 || o.store == DType::F32,
                     "--store: must be bf16, f16 or f32, got {}", dtype_name(o.store));
  require_unique(o.steps, "--steps");
  for (int64_t s : o.steps) TACO_REQUIRE_INPUT(s >= 0, "--steps: step {} is negative", s);
  require_unique(o.sites, "--sites");
  for (const auto& s : o.sites)
    TACO_REQUIRE_INPUT(std::find(kSites.begin(), kSites.end(), s) != kSites.end(),
                       "--sites: unknown site '{}' (known: {})", s, fmt::join(kSites, ", "));
  require_unique(o.directions, "--directions");
  for (const auto& d : o.directions)
    TACO_REQUIRE_INPUT(d == "fwd" || d == "bwd", "--directions: '{}' is neither fwd nor bwd", d);
  if (o.sequence_parallel)
    TACO_REQUIRE_INPUT(o.tokens % o.tp == 0, "--sp: --tokens {} is not divisible by --tp {}",
                       o.tokens, o.tp);
  TACO_REQUIRE_INPUT(o.samples >= 0 && o.samples <= 1000000,
                     "--samples: must be 0 (off) to 1000000, got {}", o.samples);
  TACO_REQUIRE_INPUT(o.drift >= 0 && o.drift <= 1, "--drift: must be in [0, 1], got {}", o.drift);

  std::vector<TensorPlan> plan;
  for (int64_t step : o.steps) {
    for (const auto& dir : o.directions) {
      for (int64_t layer = 0; layer < o.layers; ++layer) {
        for (const auto& site : o.sites) {
          // Row-parallel outputs reduce forward; column-parallel input gradients reduce
          // backward. The other combination is an identity without SP, an all-gather with SP.
          const bool row_parallel = site == "attn_out" || site == "mlp_out";
          const bool reduces = row_parallel == (dir == "fwd");
          std::string collective;
          if (reduces) {
            collective = o.sequence_parallel ? "reduce_scatter" : "all_reduce";
          } else if (o.sequence_parallel) {
            collective = "all_gather";
          } else {
            continue;
          }
          for (int64_t rank = 0; rank < o.tp; ++rank) {
            TensorPlan p;
            p.name = fmt::format("step{}/layer{}/{}/{}/rank{}", step, layer, site, dir, rank);
            const bool shard = collective == "all_gather";
            p.shape = {shard ? o.tokens / o.tp : o.tokens, o.hidden};
            p.token_offset = shard ? rank * (o.tokens / o.tp) : 0;
            p.meta.layer = int(layer);
            p.meta.site = site;
            p.meta.direction = dir;
            p.meta.collective = collective;
            p.meta.tp_rank = int(rank);
            p.meta.tp_size = int(o.tp);
            p.meta.step = step;
            p.meta.model = "synth:" + o.dist.name;
            p.meta.extra["dist"] = o.dist.canonical();
            p.meta.extra["token_offset"] = std::to_string(p.token_offset);
            if (o.samples > 0) p.meta.extra["sample_id"] = std::to_string(step % o.samples);
            const Recipe r = recipe_for(o.dist, p.meta);
            TACO_REQUIRE_INPUT(r.outlier_channels <= o.hidden,
                               "--dist {}: {} outlier channels but --hidden is {}", o.dist.name,
                               r.outlier_channels, o.hidden);
            TACO_REQUIRE_INPUT(r.outlier_tokens <= o.tokens,
                               "--dist {}: {} outlier tokens but --tokens is {}", o.dist.name,
                               r.outlier_tokens, o.tokens);
            plan.push_back(std::move(p));
            // The trace format names datasets t000000..t999999.
            TACO_REQUIRE_INPUT(plan.size() <= 1000000,
                               "synth: more than 1,000,000 tensors requested");
          }
        }
      }
    }
  }
  TACO_REQUIRE_INPUT(!plan.empty(),
                     "--sites/--directions: no TP collective carries these without --sp "
                     "(forward: attn_out, mlp_out; backward: attn_qkv, mlp_fc1)");
  return plan;
}

Tensor synthesize_tensor(const SynthOptions& o, const TensorPlan& p) {
  TACO_ASSERT(p.shape.size() == 2, "synth tensors are 2-D, got {}", shape_string(p.shape));
  const Recipe rc = recipe_for(o.dist, p.meta);
  const int64_t rows = p.shape[0], cols = p.shape[1];

  std::vector<double> chf(size_t(cols), 1.0), tokf(size_t(rows), 1.0);
  {
    const Stream f(o.seed, stream_id(channels_stream(p.meta.layer)), kTagFactor);
    for (int64_t c : outlier_channels(o, rc, p.meta.layer))
      chf[size_t(c)] = factor(f, c, rc.channel_min, rc.channel_max);
  }
  double scale = rc.scale;
  {
    const Stream f(o.seed, stream_id(tokens_stream(o, p.meta.step)), kTagFactor);
    const std::vector<int64_t> outliers = outlier_tokens(o, rc, p.meta.step);
    double sum_sq = double(o.tokens - int64_t(outliers.size()));  // ordinary tokens: factor 1
    for (int64_t t : outliers) {                                  // sorted: a fixed summation order
      const double f_t = factor(f, t, rc.token_min, rc.token_max);
      sum_sq += f_t * f_t;
      if (t >= p.token_offset && t < p.token_offset + rows) tokf[size_t(t - p.token_offset)] = f_t;
    }
    if (rc.token_rms_normalized) scale /= std::sqrt(sum_sq / double(o.tokens));
  }

  const auto coordinates = [&](const std::string& what, int64_t value) {
    return stream_id(fmt::format("{}={}/layer={}/site={}/dir={}/rank={}", what, value, p.meta.layer,
                                 p.meta.site, p.meta.direction, p.meta.tp_rank));
  };
  // With samples, the values (and zeros) belong to the sample, plus a fresh part per step.
  const bool by_sample = o.samples > 0;
  const uint64_t id = by_sample ? coordinates("values/sample", p.meta.step % o.samples)
                                : coordinates("values/step", p.meta.step);
  const Stream values(o.seed, id, kTagValues), zeros(o.seed, id, kTagZero);
  const Stream fresh(o.seed, coordinates("drift/step", p.meta.step), kTagValues);
  const double keep = by_sample ? std::sqrt(1.0 - o.drift * o.drift) : 1.0,
               drift = by_sample ? o.drift : 0.0;
  switch (rc.base) {  // checked here: the loop below must not throw inside OpenMP
    case Base::Gaussian:
    case Base::Laplace:
    case Base::StudentT:
      break;
    default:
      throw_error("unhandled base distribution {}", int(rc.base));
  }
  (void)round_to(0.0f, o.store);  // same: reject an unsupported store dtype before the loop

  Tensor t;
  t.name = p.name;
  t.dtype = o.store;
  t.shape = p.shape;
  t.meta = p.meta;
  t.values.resize(size_t(rows * cols));
  const int nt = o.threads > 0 ? o.threads : omp_get_max_threads();
  int64_t failed = 0;
#pragma omp parallel for schedule(static) num_threads(nt) reduction(+ : failed)
  for (int64_t r = 0; r < rows; ++r) {
    // Elements 2k and 2k+1 share one polar draw (pair k), whichever row they are in.
    struct Pairs {
      std::pair<double, double> pair{0, 0};
      uint64_t index = ~uint64_t(0);
    } base_pairs, fresh_pairs;
    const auto draw = [&](const Stream& st, Pairs& pp, uint64_t e) {
      if (rc.base == Base::Gaussian) {
        if ((e >> 1) != pp.index) {
          pp.index = e >> 1;
          pp.pair = gaussian_pair(st, pp.index);
        }
        return (e & 1) ? pp.pair.second : pp.pair.first;
      }
      if (rc.base == Base::Laplace) return laplace(st, e);
      return student_t(st, e, rc.nu);
    };
    for (int64_t c = 0; c < cols; ++c) {
      const uint64_t e = uint64_t(r * cols + c);
      double z = draw(values, base_pairs, e);
      if (drift > 0) z = keep * z + drift * draw(fresh, fresh_pairs, e);
      failed += std::isnan(z);
      double v = scale * z * chf[size_t(c)] * tokf[size_t(r)];
      if (rc.p_zero > 0 && zeros.uniform(e) < rc.p_zero) v = 0;
      t.values[e] = round_to(float(v), o.store);
    }
  }
  TACO_ASSERT(failed == 0, "{}: a rejection sampler gave up after {} attempts", p.name,
              kMaxAttempts);
  return t;
}

std::string synth_command_line(const SynthOptions& o, const std::string& out) {
  return fmt::format(
      "taco synth --out {} --hidden {} --tokens {} --layers {} --tp {} --steps {} --sites {} "
      "--directions {}{} --dist {} --seed {} --store {}{}",
      out, o.hidden, o.tokens, o.layers, o.tp, fmt::join(o.steps, ","), fmt::join(o.sites, ","),
      fmt::join(o.directions, ","), o.sequence_parallel ? " --sp" : "", o.dist.canonical(), o.seed,
      dtype_name(o.store),
      o.samples > 0 ? fmt::format(" --samples {} --drift {}", o.samples, o.drift) : "");
}

}  // namespace taco::synth
