#include "study/error_feedback.hpp"

#include "core/csv.hpp"
#include "core/error.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <numeric>

namespace taco::study {

namespace {
const char* const kAqOnce = "aqsgd: this sample occurs once (no cache to delta against)";
const char* const kAqNone =
    "aqsgd: the inputs have no repeated samples (no extra.sample_id, no tensor name at two steps); "
    "nothing to "
    "delta against";
}  // namespace

std::string feedback_sequence(const TensorMeta& m) {
  return fmt::format("layer={}/site={}/direction={}/tp_rank={}", m.layer, m.site, m.direction,
                     m.tp_rank);
}

std::string feedback_stream(const TensorInfo& t) {
  return t.meta.site.empty() ? "name=" + t.name : feedback_sequence(t.meta);
}

std::vector<std::string> stream_keys(const std::vector<const TensorInfo*>& in_step_order) {
  std::map<std::pair<std::string, int64_t>, int> seen;
  std::vector<std::string> keys;
  for (const TensorInfo* t : in_step_order) {
    std::string stream = feedback_stream(*t);
    const int copy = seen[{stream, t->meta.step}]++;
    keys.push_back(copy == 0 ? stream : fmt::format("{}/copy={}", stream, copy));
  }
  return keys;
}

SampleIndex::SampleIndex(const std::vector<TensorInfo>& infos,
                         const std::vector<std::string>& streams) {
  TACO_ASSERT(infos.size() == streams.size(), "{} tensors, {} stream keys", infos.size(),
              streams.size());
  std::map<std::string, std::set<int64_t>> steps_of_name;
  for (const TensorInfo& t : infos)
    if (!t.meta.extra.count("sample_id")) steps_of_name[t.name].insert(t.meta.step);
  for (const auto& [name, steps] : steps_of_name)
    if (steps.size() >= 2) multi_step_names_.insert(name);
  std::map<std::string, int> count;
  for (size_t i = 0; i < infos.size(); ++i)
    if (const auto s = sample_of(infos[i], multi_step_names_)) ++count[streams[i] + "/" + *s];
  for (const auto& [key, n] : count)
    if (n >= 2) repeated_.insert(key);
}

std::optional<std::string> SampleIndex::sample_of(const TensorInfo& t,
                                                  const std::set<std::string>& multi_step_names) {
  const auto it = t.meta.extra.find("sample_id");
  if (it != t.meta.extra.end()) return "sample_id=" + it->second;
  if (multi_step_names.count(t.name)) return "name=" + t.name;
  return std::nullopt;
}

std::optional<std::string> SampleIndex::cache_key(const TensorInfo& t,
                                                  const std::string& stream) const {
  const auto s = sample_of(t, multi_step_names_);
  if (!s) return std::nullopt;
  std::string key = stream + "/" + *s;
  if (!repeated_.count(key)) return std::nullopt;
  return key;
}

const std::vector<float>* FeedbackState::state(const std::string& key) const {
  const auto it = mem_.find(key);
  return it == mem_.end() ? nullptr : &it->second.mem;
}

FeedbackState::FeedbackState(const Codec& codec) : codec_(&codec) {
  const std::optional<Wrapped> w = codec.wrapped();
  TACO_REQUIRE_INPUT(w.has_value(), "{}: not an ef: or aqsgd: codec", codec.name());
  wrapped_ = *w;
}

FeedbackStep FeedbackState::step(const std::string& key, const float* x, int64_t rows, int64_t cols,
                                 float* xhat) {
  TACO_REQUIRE_INPUT(rows > 0 && cols > 0, "{}: unusable shape [{}, {}] for {}", codec_->name(),
                     rows, cols, key);
  const int64_t n = rows * cols;
  Entry& e = mem_[key];
  if (e.visits == 0) {
    e.rows = rows;
    e.cols = cols;
    e.mem.assign(size_t(n), 0.0f);
  }
  TACO_REQUIRE_INPUT(
      e.rows == rows && e.cols == cols,
      "{}: {} changes shape from [{}, {}] to [{}, {}] between steps; its {} does not fit",
      codec_->name(), key, e.rows, e.cols, rows, cols,
      wrapped_.kind == FeedbackKind::ErrorFeedback ? "residual" : "cache");
  FeedbackStep out;
  // What goes into the codec: x + e (EF) or x - m (AQ-SGD); non-finite x counts as 0.
  std::vector<float> v(static_cast<size_t>(n));
  const bool ef = wrapped_.kind == FeedbackKind::ErrorFeedback;
  for (int64_t i = 0; i < n; ++i) {
    float xi = x[i];
    if (!std::isfinite(xi)) {
      xi = 0.0f;
      ++out.nonfinite_inputs;
    }
    out.x_norm2 += double(xi) * double(xi);
    v[size_t(i)] = ef ? xi + e.mem[size_t(i)] : xi - e.mem[size_t(i)];
  }
  const std::vector<uint8_t> wire = wrapped_.inner->encode(v.data(), rows, cols, &out.stats);
  out.wire_bytes = int64_t(wire.size());
  wrapped_.inner->decode(wire.data(), wire.size(), rows, cols, xhat);
  for (int64_t i = 0; i < n; ++i) {
    // A decoded non-finite value (a codec's NaN) must not poison every later step.
    const float d = std::isfinite(xhat[i]) ? xhat[i] : 0.0f;
    float& m = e.mem[size_t(i)];
    if (ef) {
      m = v[size_t(i)] - d;  // e' = v - D(C(v)); the receiver uses D(C(v))
    } else {
      m = m + d;  // m' = m + D(C(x - m)); the receiver uses m'
      xhat[i] = m;
    }
    out.state_norm2 += double(m) * double(m);
  }
  ++e.visits;
  out.visit = e.visits;
  e.sum_x_norm += std::sqrt(out.x_norm2);
  if (ef) out.avg_err = e.sum_x_norm > 0 ? std::sqrt(out.state_norm2) / e.sum_x_norm : 0.0;
  return out;
}

FeedbackMeasure measure_feedback(FeedbackState& state, const SampleIndex& samples,
                                 const TensorInfo& info, const std::string& stream, const Tensor& t,
                                 double tau, bool skip_nonfinite, int threads,
                                 std::vector<float>& xhat) {
  FeedbackMeasure m;
  if (state.kind() == FeedbackKind::AqSgd) {
    const auto key = samples.cache_key(info, stream);
    TACO_REQUIRE_INPUT(key.has_value(), "{}", samples.any_repeated() ? kAqOnce : kAqNone);
    m.key = *key;
  } else {
    m.key = stream;
  }
  xhat.resize(t.values.size());
  m.step = state.step(m.key, t.values.data(), t.rows(), t.cols(), xhat.data());
  m.sums = error_sums(t.values.data(), xhat.data(), t.numel(), tau, skip_nonfinite, threads);
  return m;
}

std::vector<size_t> step_order(const std::vector<int64_t>& steps) {
  std::vector<size_t> order(steps.size());
  std::iota(order.begin(), order.end(), size_t(0));
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return steps[a] < steps[b]; });
  return order;
}

std::vector<FeedbackOutcome> run_feedback(const Codec& codec,
                                          const std::vector<const Tensor*>& tensors) {
  std::vector<TensorInfo> infos;
  std::vector<int64_t> steps;
  for (const Tensor* t : tensors) {
    infos.push_back(TensorInfo{t->name, t->dtype, t->shape, t->meta});
    steps.push_back(t->meta.step);
  }
  TACO_REQUIRE_INPUT(codec.wrapped(), "{}: not an ef: or aqsgd: codec", codec.name());
  const bool aq = codec.wrapped()->kind == FeedbackKind::AqSgd;
  const std::vector<size_t> order = step_order(steps);
  std::vector<const TensorInfo*> ordered;
  for (size_t i : order) ordered.push_back(&infos[i]);
  const std::vector<std::string> ordered_keys = stream_keys(ordered);
  std::vector<std::string> streams(tensors.size());
  for (size_t k = 0; k < order.size(); ++k) streams[order[k]] = ordered_keys[k];
  SampleIndex samples;
  if (aq) samples = SampleIndex(infos, streams);
  FeedbackState state(codec);
  std::vector<FeedbackOutcome> out(tensors.size());
  for (size_t i : order) {
    const Tensor& t = *tensors[i];
    FeedbackOutcome& o = out[i];
    if (aq) {
      const auto key = samples.cache_key(infos[i], streams[i]);
      if (!key) {
        o.skip_reason = samples.any_repeated() ? kAqOnce : kAqNone;
        continue;
      }
      o.key = *key;
    } else {
      o.key = streams[i];
    }
    o.xhat.resize(t.values.size());
    o.step = state.step(o.key, t.values.data(), t.rows(), t.cols(), o.xhat.data());
    o.measured = true;
  }
  return out;
}

using csv::field;
using csv::known;
using csv::num;

std::string feedback_csv(const std::vector<FeedbackRow>& rows) {
  std::string out =
      "file,tensor,layer,site,direction,tp_rank,step,variant,family,key,visit,rel_l2,state_rel,avg_"
      "err\n";
  for (const FeedbackRow& r : rows) {
    const std::vector<std::string> f = {
        field(r.file),           field(r.tensor),
        known(r.meta.layer),     field(r.meta.site),
        field(r.meta.direction), known(r.meta.tp_rank),
        known(r.meta.step),      field(r.variant),
        field(r.family),         field(r.key),
        std::to_string(r.visit), num(r.rel_l2),
        num(r.state_rel),        r.family == "ef" ? num(r.avg_err) : std::string()};
    for (size_t i = 0; i < f.size(); ++i) {
      if (i) out += ',';
      out += f[i];
    }
    out += '\n';
  }
  return out;
}

}  // namespace taco::study
