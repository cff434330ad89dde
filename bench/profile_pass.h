// defines: MemoryBreakdown, RungProfile, profile_rung, write_rung_profile — the profiling pass of a
//          rung, separate from its timed repetitions so that profiling never perturbs them
#pragma once
#include <ATen/core/Tensor.h>
#include <nlohmann/json.hpp>

#include <string>

#include "bench/memory.h"
#include "bench/profiler.h"
#include "bench/step_spec.h"

namespace gpt2 {

struct MemoryBreakdown {
  int64_t parameters = 0, gradients = 0, optimizer_state = 0, buffers = 0;  // bytes
  int64_t activations_and_other = 0;  // peak allocated less the above, at the peak
  int64_t peak_allocated = 0, peak_reserved = 0;
};
nlohmann::json to_json(const MemoryBreakdown& m);

struct RungProfile {
  ProfileSummary summary;
  nlohmann::json trace;
  MemoryBreakdown memory;
};

// Builds the rung's step, takes `warmup` steps, times `steps` unprofiled steps, then `steps`
// profiled ones; the summary's overhead is the ratio of the two, less one.
RungProfile profile_rung(const StepSpec& spec, const DeviceInfo& dev, const at::Tensor& tokens, uint64_t seed,
                         int warmup, int steps, MemoryMeter& meter);
// DIR/profile/<rung>.json (summary + memory) and DIR/profile/<rung>.trace.json (Chrome trace).
void write_rung_profile(const std::string& dir, const std::string& rung, const RungProfile& p);

}  // namespace gpt2
