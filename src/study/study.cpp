#include "study/study.hpp"

#include "codecs/range.hpp"
#include "core/error.hpp"
#include "core/scratch.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <future>
#include <limits>
#include <set>

namespace taco::study {
namespace {

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  size_t start = 0;
  while (true) {
    const size_t p = s.find(sep, start);
    out.push_back(s.substr(start, p == std::string::npos ? std::string::npos : p - start));
    if (p == std::string::npos) return out;
    start = p + 1;
  }
}

std::string json_string(const nlohmann::json& params, const char* key) {
  const auto it = params.find(key);
  if (it == params.end() || it->is_null()) return "";
  if (it->is_string()) return it->get<std::string>();
  return it->dump();
}

// A tensor the study will read: where it is and what it is.
struct TensorRef {
  size_t file = 0, index = 0;
  TensorInfo info;
};

// The tensors processed together: one tensor, or the TP ranks of one (step, layer, site,
// direction) when collectives are simulated (members sorted by tp_rank).
struct Unit {
  std::vector<TensorRef> members;
};

uint64_t fnv1a(const std::string& s) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : s) h = (h ^ c) * 0x100000001b3ull;
  return h;
}

std::vector<Unit> make_units(const std::vector<TensorRef>& refs, bool group_ranks) {
  std::vector<Unit> units;
  if (!group_ranks) {
    for (const TensorRef& r : refs) units.push_back(Unit{{r}});
    return units;
  }
  // A rank joins the first group with its key that does not have that rank yet, so a trace
  // given twice forms two groups instead of one with duplicated ranks.
  using Key = std::tuple<int64_t, int, std::string, std::string>;
  std::map<Key, std::vector<size_t>> by_key;
  for (const TensorRef& r : refs) {
    const TensorMeta& m = r.info.meta;
    if (m.tp_rank < 0) {
      units.push_back(Unit{{r}});
      continue;
    }
    auto& candidates = by_key[Key{m.step, m.layer, m.site, m.direction}];
    bool placed = false;
    for (size_t u : candidates) {
      auto& mem = units[u].members;
      const bool has = std::any_of(mem.begin(), mem.end(), [&](const TensorRef& o) {
        return o.info.meta.tp_rank == m.tp_rank;
      });
      if (!has) {
        mem.push_back(r);
        placed = true;
        break;
      }
    }
    if (!placed) {
      candidates.push_back(units.size());
      units.push_back(Unit{{r}});
    }
  }
  for (Unit& u : units)
    std::stable_sort(u.members.begin(), u.members.end(),
                     [](const TensorRef& a, const TensorRef& b) {
                       return a.info.meta.tp_rank < b.info.meta.tp_rank;
                     });
  return units;
}

// A trace that says which collective carried a tensor gets only the algorithms of that
// collective; tensors without that metadata get every requested algorithm.
// The inputs of an all-reduce and of a reduce-scatter are the same thing, per-rank partial
// sums (sequence parallelism turns the one into the other), so every reducing algorithm takes
// both; an all-gather's inputs are shards, and only all_gather takes them.
bool algorithm_fits(Collective a, const std::string& collective) {
  if (collective.empty()) return true;
  if (a.coll == Coll::AllGather) return collective == "all_gather";
  return collective == "all_reduce" || collective == "reduce_scatter";
}

std::string human_bytes(uint64_t b) {
  if (b >= (uint64_t(1) << 30))
    return fmt::format("{:.1f} GiB", double(b) / double(uint64_t(1) << 30));
  return fmt::format("{:.1f} MiB", double(b) / double(uint64_t(1) << 20));
}

// Before any work: every algorithm asked for fits some group, and no simulation needs more
// memory than its inputs justify (tensor_source.hpp's rule over the group's input bytes, with
// a floor of 4 GiB).
void check_simulations(const std::vector<Unit>& units, const StudyOptions& opts) {
  std::set<std::string> seen;
  for (Collective a : opts.collectives) {
    bool fits = false;
    for (const Unit& u : units)
      fits = fits || algorithm_fits(a, u.members.front().info.meta.collective);
    if (fits) continue;
    for (const Unit& u : units) seen.insert(u.members.front().info.meta.collective);
    std::string kinds;
    for (const std::string& k : seen) kinds += (kinds.empty() ? "" : ", ") + k;
    throw_input_error(
        "--collectives {}: no input tensor is what it takes ({} takes {}; the inputs are {} "
        "tensors)",
        collective_name(a), collective_name(a),
        a == sim::kAllGather ? "all_gather shards" : "all_reduce or reduce_scatter partial sums",
        kinds);
  }
  // Simulations multiply their inputs by design (derived ranks, every rank's output), so their
  // floor is higher than a reader's.
  constexpr uint64_t kSimulationFloor = uint64_t(4) << 30;
  const uint64_t env = memory_limit_from_env();
  for (const Unit& u : units) {
    const TensorInfo& first = u.members.front().info;
    int64_t numel = 1;
    for (int64_t d : first.shape) numel *= d;
    const uint64_t input_bytes = uint64_t(numel) * sizeof(float) * u.members.size();
    const uint64_t limit = env > 0 ? env : std::max(kSimulationFloor, kMaxExpansion * input_bytes);
    std::vector<int> degrees = opts.tp;
    if (degrees.empty()) degrees.push_back(int(u.members.size()));
    for (int n : degrees)
      for (Collective a : opts.collectives) {
        if (!algorithm_fits(a, first.meta.collective)) continue;
        const uint64_t need = sim::memory_estimate(a, n, numel);
        TACO_REQUIRE_INPUT(
            need <= limit,
            "--tp {}: simulating {} over {} ranks of '{}' {} needs about {}, over the limit of {} "
            "({}; TACO_MEMORY_LIMIT sets another)",
            n, collective_name(a), n, first.name, shape_string(first.shape), human_bytes(need),
            human_bytes(limit),
            env > 0 ? "TACO_MEMORY_LIMIT"
                    : fmt::format("{}x the group's input, at least 4 GiB", kMaxExpansion));
      }
  }
}

// Adds the time from construction to destruction to `acc`.
struct AddElapsed {
  double& acc;
  std::chrono::steady_clock::time_point start = std::chrono::steady_clock::now();
  ~AddElapsed() {
    acc += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }
};

struct Measured {
  ErrorSums sums;
  int64_t saturated = 0, wire_bytes = 0, out_of_range = -1;
};

// Encode, decode and measure one tensor with one codec. xhat and wire are scratch buffers,
// reused from tensor to tensor (no allocation or page faults once they are large enough).
Measured measure(const Codec& codec, const Tensor& t, double tau, bool skip_nonfinite, int threads,
                 ScratchBuffer<float>& xhat_buf, std::vector<uint8_t>& wire) {
  Measured m;
  EncodeStats st;
  codec.encode_into(t.values.data(), t.rows(), t.cols(), wire, &st);
  float* xhat = xhat_buf.reserve(t.values.size());
  codec.decode(wire.data(), wire.size(), t.rows(), t.cols(), xhat);
  m.sums = error_sums(t.values.data(), xhat, t.numel(), tau, skip_nonfinite, threads);
  m.saturated = st.saturated;
  m.wire_bytes = int64_t(wire.size());
  if (const VariantSpec* spec = codec.variant_spec())
    m.out_of_range = out_of_range_blocks(*spec, t.values.data(), t.rows(), t.cols());
  return m;
}

}  // namespace

bool TensorFilter::matches(const TensorInfo& t, const std::string& file,
                           const std::string& source) const {
  for (const auto& [key, values] : terms) {
    if (key == "file") {
      const std::string base = std::filesystem::path(file).filename().string();
      const bool hit = std::any_of(values.begin(), values.end(), [&](const std::string& v) {
        return v == file || v == source || v == base;
      });
      if (!hit) return false;
      continue;
    }
    std::string v;
    if (key == "site")
      v = t.meta.site;
    else if (key == "direction")
      v = t.meta.direction;
    else if (key == "collective")
      v = t.meta.collective;
    else if (key == "layer")
      v = std::to_string(t.meta.layer);
    else if (key == "step")
      v = std::to_string(t.meta.step);
    else if (key == "tp_rank")
      v = std::to_string(t.meta.tp_rank);
    else if (key == "name")
      v = t.name;
    else
      throw_error("TensorFilter: unknown key '{}'", key);
    if (std::find(values.begin(), values.end(), v) == values.end()) return false;
  }
  return true;
}

TensorFilter parse_filter(const std::string& spec) {
  static const std::set<std::string> kKeys = {"site", "direction", "collective", "layer",
                                              "step", "tp_rank",   "name",       "file"};
  TensorFilter f;
  if (spec.empty()) return f;
  for (const std::string& term : split(spec, ',')) {
    const size_t eq = term.find('=');
    TACO_REQUIRE_INPUT(eq != std::string::npos && eq > 0,
                       "--filter: '{}' is not key=value (keys: site, direction, collective, layer, "
                       "step, tp_rank, name, file)",
                       term);
    const std::string key = term.substr(0, eq);
    TACO_REQUIRE_INPUT(kKeys.count(key),
                       "--filter: unknown key '{}' (keys: site, direction, "
                       "collective, layer, step, tp_rank, name, file)",
                       key);
    f.terms.emplace_back(key, split(term.substr(eq + 1), '|'));
  }
  return f;
}

VariantInfo describe_variant(const std::string& name, const Codec& codec) {
  VariantInfo v;
  v.name = name;
  v.params = codec.params();
  v.family = json_string(v.params, "family");
  v.elem_format = json_string(v.params, "elem_format");
  v.scale_format = json_string(v.params, "scale_format");
  v.granularity = json_string(v.params, "granularity");
  v.transform = json_string(v.params, "transform");
  const auto g = v.params.find("group_size");
  if (g != v.params.end() && g->is_number_integer()) v.group_size = g->get<int64_t>();
  v.facts = variant_facts(codec);
  return v;
}

double percentile(std::vector<double> v, double p) {
  TACO_ASSERT(!v.empty(), "percentile of nothing");
  std::sort(v.begin(), v.end());
  const double pos = p * double(v.size() - 1);
  const size_t lo = size_t(std::floor(pos));
  const size_t hi = std::min(lo + 1, v.size() - 1);
  const double frac = pos - double(lo);
  // Equal neighbours (also two infinities) need no interpolation.
  return (frac == 0 || v[lo] == v[hi]) ? v[lo] : v[lo] + (v[hi] - v[lo]) * frac;
}

StudyResult run_study(const std::vector<TensorSource*>& sources, const StudyOptions& opts) {
  TACO_ASSERT(bool(opts.codec_factory), "run_study needs a codec factory");
  const auto t0 = std::chrono::steady_clock::now();
  const int threads = std::max(1, opts.threads);
  StudyResult res;
  TACO_ASSERT(opts.source_labels.empty() || opts.source_labels.size() == sources.size(),
              "{} sources, {} labels", sources.size(), opts.source_labels.size());
  for (size_t f = 0; f < sources.size(); ++f) {
    res.files.push_back(sources[f]->path());
    res.sources.push_back(opts.source_labels.empty() ? sources[f]->path() : opts.source_labels[f]);
  }

  // Build every codec up front: an unknown variant fails before any work or output.
  std::vector<std::string> names;
  auto add_name = [&](const std::string& n) {
    if (std::find(names.begin(), names.end(), n) == names.end()) names.push_back(n);
  };
  for (const std::string& v : opts.variants) add_name(v);
  for (const auto& [key, v] : opts.per_site) add_name(v);
  TACO_REQUIRE_INPUT(!names.empty(), "--variants: no variants to run");
  std::vector<std::unique_ptr<Codec>> codecs;
  for (const std::string& n : names) {
    codecs.push_back(opts.codec_factory(n));
    TACO_ASSERT(codecs.back() != nullptr, "codec factory returned null for '{}'", n);
    res.variants.push_back(describe_variant(n, *codecs.back()));
  }
  const size_t n_common = [&] {
    size_t k = 0;
    for (const std::string& n : names)
      if (std::find(opts.variants.begin(), opts.variants.end(), n) != opts.variants.end()) ++k;
    return k;
  }();
  auto variants_for = [&](const TensorMeta& m) {
    std::vector<size_t> vs;
    for (size_t i = 0; i < n_common; ++i) vs.push_back(i);
    const auto it = opts.per_site.find(SiteKey{m.site, m.direction});
    if (it != opts.per_site.end()) {
      const size_t idx = size_t(std::find(names.begin(), names.end(), it->second) - names.begin());
      if (std::find(vs.begin(), vs.end(), idx) == vs.end()) vs.push_back(idx);
    }
    return vs;
  };

  // Which tensors: metadata only, nothing read yet.
  std::vector<TensorRef> refs;
  for (size_t f = 0; f < sources.size(); ++f) {
    for (size_t i = 0; i < sources[f]->size(); ++i) {
      if (opts.max_tensors >= 0 && int64_t(refs.size()) >= opts.max_tensors) break;
      TensorInfo info = sources[f]->info(i);
      if (opts.filter.matches(info, res.files[f], res.sources[f]))
        refs.push_back(TensorRef{f, i, std::move(info)});
    }
  }
  const bool simulate = !opts.collectives.empty();
  std::vector<Unit> units = make_units(refs, simulate);
  if (simulate) check_simulations(units, opts);

  // ef:/aqsgd: variants carry state from step to step (error_feedback.hpp): one state per
  // variant, and the tensors in step order (stable, so file order within a step).
  std::vector<std::unique_ptr<FeedbackState>> feedback(codecs.size());
  for (size_t i = 0; i < codecs.size(); ++i)
    if (codecs[i]->wrapped()) feedback[i] = std::make_unique<FeedbackState>(*codecs[i]);
  SampleIndex samples;
  std::map<std::pair<size_t, size_t>, std::string> stream_of;  // (file, index) -> state key
  if (std::any_of(feedback.begin(), feedback.end(), [](const auto& f) { return f != nullptr; })) {
    std::stable_sort(units.begin(), units.end(), [](const Unit& a, const Unit& b) {
      return a.members.front().info.meta.step < b.members.front().info.meta.step;
    });
    std::vector<const TensorInfo*> ordered;
    std::vector<TensorInfo> infos;
    for (const Unit& u : units)
      for (const TensorRef& r : u.members) {
        ordered.push_back(&r.info);
        infos.push_back(r.info);
      }
    const std::vector<std::string> keys = stream_keys(ordered);
    size_t k = 0;
    for (const Unit& u : units)
      for (const TensorRef& r : u.members) stream_of[{r.file, r.index}] = keys[k++];
    samples = SampleIndex(infos, keys);
  }

  std::vector<float> xhat;        // error-feedback variants
  ScratchBuffer<float> xhat_buf;  // all others
  std::vector<uint8_t> wire;
  int64_t done = 0;
  // While one unit is processed, the next one is read on another thread (reading is mostly
  // waiting on I/O and page faults): at most two units are in memory. Reads stay sequential,
  // one at a time, so sources need not be thread-safe.
  auto read_unit = [&sources, &units](size_t u) {
    std::vector<Tensor> out;
    for (const TensorRef& r : units[u].members) out.push_back(sources[r.file]->read(r.index));
    return out;
  };
  std::future<std::vector<Tensor>> next;
  if (!units.empty()) next = std::async(std::launch::async, read_unit, size_t(0));
  for (size_t u = 0; u < units.size(); ++u) {
    const Unit& unit = units[u];
    const std::vector<Tensor> tensors = next.get();
    if (u + 1 < units.size()) next = std::async(std::launch::async, read_unit, u + 1);
    for (size_t mi = 0; mi < unit.members.size(); ++mi) {
      const TensorRef& r = unit.members[mi];
      const Tensor& t = tensors[mi];
      TACO_ASSERT(int64_t(t.values.size()) == t.numel(), "{}: {} values for shape {}", t.name,
                  t.values.size(), shape_string(t.shape));
      const InputScan scan = scan_input(t.values.data(), t.numel(), threads);
      if (opts.on_tensor) opts.on_tensor(t);
      if (opts.histograms) {
        auto [it, inserted] = res.histograms.try_emplace(SiteKey{t.meta.site, t.meta.direction});
        it->second.add_tensor(t.values.data(), t.numel(), scan.absmax, threads);
      }
      const double tau = opts.tau_rel * scan.absmax;
      for (size_t v : variants_for(t.meta)) {
        if (t.numel() == 0) {
          res.skipped.push_back({res.files[r.file], t.name, names[v], "empty tensor"});
          continue;
        }
        TensorRow row;
        row.file_index = r.file;
        row.tensor_index = r.index;
        row.variant_index = v;
        row.tensor = t.name;
        row.shape = t.shape;
        row.numel = t.numel();
        row.in_dtype = t.dtype;
        row.meta = t.meta;
        row.nan_count = scan.nan_count;
        row.inf_count = scan.inf_count;
        try {
          if (feedback[v]) {
            const FeedbackMeasure m =
                measure_feedback(*feedback[v], samples, r.info, stream_of.at({r.file, r.index}), t,
                                 tau, !scan.all_finite(), threads, xhat);
            row.metrics = finish_metrics(m.sums);
            row.saturated = m.step.stats.saturated;
            row.wire_bytes = m.step.wire_bytes;
            FeedbackRow fr;
            fr.file_index = r.file;
            fr.tensor_index = r.index;
            fr.variant_index = v;
            fr.file = res.files[r.file];
            fr.tensor = t.name;
            fr.variant = names[v];
            fr.family = res.variants[v].family;
            fr.key = m.key;
            fr.meta = t.meta;
            fr.visit = m.step.visit;
            fr.rel_l2 = row.metrics.rel_l2.value_or(0.0);
            fr.state_rel =
                m.step.x_norm2 > 0 ? std::sqrt(m.step.state_norm2 / m.step.x_norm2) : 0.0;
            fr.avg_err = m.step.avg_err;
            res.feedback_rows.push_back(std::move(fr));
          } else {
            const Measured m =
                measure(*codecs[v], t, tau, !scan.all_finite(), threads, xhat_buf, wire);
            row.metrics = finish_metrics(m.sums);
            row.saturated = m.saturated;
            row.wire_bytes = m.wire_bytes;
            row.out_of_range = m.out_of_range;
          }
        } catch (const InputError& e) {
          // The codec does not take this shape (e.g. tile sizes): record it and go on.
          res.skipped.push_back({res.files[r.file], t.name, names[v], e.what()});
          continue;
        }
        res.rows.push_back(std::move(row));
        res.elements += t.numel();
      }
      ++done;
      if (opts.progress) {
        Progress p;
        p.done = done;
        p.total = int64_t(refs.size());
        p.tensor = t.name;
        p.elements = res.elements;
        p.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() -
                    res.collective_seconds;
        opts.progress(p);
      }
    }
    if (!simulate) continue;
    const AddElapsed collective_timing{res.collective_seconds};

    // ---- simulated collectives over the ranks of this group ----
    const Tensor& first = tensors.front();
    const TensorRef& first_ref = unit.members.front();
    const bool same_shape = std::all_of(tensors.begin(), tensors.end(),
                                        [&](const Tensor& t) { return t.shape == first.shape; });
    const int k = int(tensors.size());
    auto skip_group = [&](const std::string& why) {
      res.skipped.push_back({res.files[first_ref.file], first.name, "", "collectives: " + why});
    };
    if (!same_shape) {
      skip_group("TP ranks have different shapes");
      continue;
    }
    if (first.numel() == 0) continue;
    std::vector<int> degrees = opts.tp;
    if (degrees.empty()) {
      if (k < 2) {
        skip_group("only one TP rank in the input; give --tp N to simulate more");
        continue;
      }
      degrees.push_back(k);
    }
    const int64_t rows = first.rows(), cols = first.cols();
    for (int N : degrees) {
      // Ranks beyond those in the trace are derived from them (documented in sim::derive_rank).
      std::vector<std::vector<float>> derived;
      std::vector<const float*> inputs;
      for (int r = 0; r < N; ++r) {
        if (r < k) {
          inputs.push_back(tensors[size_t(r)].values.data());
        } else {
          const uint64_t seed = opts.seed ^ fnv1a(first.name) ^ (uint64_t(first_ref.file) << 48);
          derived.push_back(
              sim::derive_rank(tensors[size_t(r % k)].values.data(), rows, cols, seed, r));
        }
      }
      for (auto& d : derived) inputs.push_back(d.data());
      // The exact results depend only on the kind of collective (all-reduce algorithms share
      // one), and for all-reduce and all-gather every rank's is the same: compute and scan
      // each distinct one once.
      struct Reference {
        std::vector<std::vector<float>> out;
        std::vector<InputScan> scans;  // per rank
        bool same_for_all_ranks = false;
      };
      std::map<Coll, Reference> references;  // every all-reduce algorithm has the same exact result
      auto reference = [&](Collective a) -> const Reference& {
        auto [it, fresh] = references.try_emplace(a.coll);
        Reference& ref = it->second;
        if (fresh) {
          ref.out = sim::reference_outputs(a, inputs, rows, cols);
          ref.same_for_all_ranks = a != sim::kReduceScatter;
          for (size_t r = 0; r < ref.out.size(); ++r)
            ref.scans.push_back(
                r > 0 && ref.same_for_all_ranks
                    ? ref.scans[0]
                    : scan_input(ref.out[r].data(), int64_t(ref.out[r].size()), threads));
        }
        return ref;
      };
      for (Collective a : opts.collectives) {
        if (!algorithm_fits(a, first.meta.collective)) continue;
        const Reference& ref = reference(a);
        for (size_t v : variants_for(first.meta)) {
          CollectiveRow row;
          row.file_index = first_ref.file;
          row.tensor_index = first_ref.index;
          row.variant_index = v;
          row.tensor = first.name;
          row.meta = first.meta;
          row.algorithm = a;
          row.tp_size = N;
          row.trace_ranks = std::min(k, N);
          row.numel = first.numel();
          try {
            const sim::SimulatedCommunicator comm(N, *codecs[v], threads);
            const sim::CollectiveResult out = comm.run(a, inputs, rows, cols);
            // All ranks' outputs against their exact results, as one set of sums. A rank whose
            // output and reference equal rank 0's contributes rank 0's sums again.
            ErrorSums sums, first_rank;
            for (size_t r = 0; r < out.outputs.size(); ++r) {
              const std::vector<float>& x = ref.out[r];
              TACO_ASSERT(x.size() == out.outputs[r].size(), "collective output size");
              const ErrorSums s =
                  r > 0 && ref.same_for_all_ranks && out.outputs[r] == out.outputs[0]
                      ? first_rank
                      : error_sums(x.data(), out.outputs[r].data(), int64_t(x.size()),
                                   opts.tau_rel * ref.scans[r].absmax, !ref.scans[r].all_finite(),
                                   threads);
              if (r == 0) first_rank = s;
              sums.combine(s);
            }
            row.metrics = finish_metrics(sums);
            row.quantizations = out.quantizations;
            double bytes = 0;
            for (int64_t b : out.bytes_sent) bytes += double(b);
            row.bytes_sent_per_rank = bytes / double(N);
          } catch (const InputError& e) {
            res.skipped.push_back(
                {res.files[first_ref.file], first.name, names[v],
                 fmt::format("collectives {} tp={}: {}", collective_name(a), N, e.what())});
            continue;
          }
          res.collective_rows.push_back(std::move(row));
        }
      }
    }
  }
  std::stable_sort(res.rows.begin(), res.rows.end(), [](const TensorRow& a, const TensorRow& b) {
    return std::tie(a.file_index, a.tensor_index, a.variant_index) <
           std::tie(b.file_index, b.tensor_index, b.variant_index);
  });
  res.tensors = done;
  res.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return res;
}

std::vector<Aggregate> aggregate(const StudyResult& r) {
  struct Acc {
    std::vector<double> rel, snr;
    double bytes = 0;
    int64_t n = 0;
  };
  std::map<std::tuple<std::string, std::string, size_t>, Acc> acc;
  for (const TensorRow& row : r.rows) {
    if (!row.metrics.rel_l2) continue;
    Acc& a = acc[{row.meta.site, row.meta.direction, row.variant_index}];
    // A NaN error (a codec that produced NaN) ranks last.
    const double rel = std::isnan(*row.metrics.rel_l2) ? std::numeric_limits<double>::infinity()
                                                       : *row.metrics.rel_l2;
    a.rel.push_back(rel);
    a.snr.push_back(row.metrics.snr_db ? *row.metrics.snr_db : 0.0);
    a.bytes += row.bytes_per_elem();
    ++a.n;
  }
  std::vector<Aggregate> out;
  for (const auto& [key, a] : acc) {
    Aggregate g;
    std::tie(g.site, g.direction, g.variant_index) = key;
    g.tensors = a.n;
    g.median_rel_l2 = percentile(a.rel, 0.5);
    g.p99_rel_l2 = percentile(a.rel, 0.99);
    double sum = 0;
    for (double x : a.rel) sum += x;
    g.mean_rel_l2 = sum / double(a.n);
    g.mean_bytes_per_elem = a.bytes / double(a.n);
    g.median_snr_db = percentile(a.snr, 0.5);
    out.push_back(g);
  }
  std::stable_sort(out.begin(), out.end(), [](const Aggregate& a, const Aggregate& b) {
    return std::tie(a.site, a.direction, a.median_rel_l2, a.mean_bytes_per_elem, a.variant_index) <
           std::tie(b.site, b.direction, b.median_rel_l2, b.mean_bytes_per_elem, b.variant_index);
  });
  return out;
}

}  // namespace taco::study
