// Writing a synthetic trace: kept apart from synth.cpp so the generators link without io/.
#include "core/error.hpp"
#include "io/tensor_source.hpp"
#include "synth/synth.hpp"

#include <chrono>

namespace taco::synth {

SynthSummary write_synth_trace(const SynthOptions& o, const std::string& out,
                               const std::map<std::string, std::string>& extra_provenance) {
  using Clock = std::chrono::steady_clock;
  const auto t0 = Clock::now();
  const std::vector<TensorPlan> plan = plan_trace(o);  // all checks before a file is touched

  TraceWriter::Options wo;
  wo.store = o.store;
  wo.provenance = extra_provenance;
  wo.provenance["command"] = synth_command_line(o, out);
  wo.provenance["seed"] = std::to_string(o.seed);
  wo.provenance["generator"] = kGeneratorVersion;
  wo.provenance["dist"] = o.dist.canonical();
  TraceWriter writer(out, wo);

  SynthSummary sum;
  double gen = 0;
  for (const TensorPlan& p : plan) {
    const auto g0 = Clock::now();
    const Tensor t = synthesize_tensor(o, p);
    gen += std::chrono::duration<double>(Clock::now() - g0).count();
    writer.add(t);
    ++sum.tensors;
    sum.elements += t.numel();
  }
  writer.commit();
  sum.generate_seconds = gen;
  sum.total_seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  return sum;
}

}  // namespace taco::synth
