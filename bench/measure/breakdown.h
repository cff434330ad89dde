// defines: MemoryBreakdown, Breakdown, breakdown_rung, write_breakdown — the profiling pass of a
//          rung, separate from its timed repetitions so that profiling never perturbs them
#pragma once
#include <ATen/core/Tensor.h>
#include <nlohmann/json.hpp>

#include <string>

#include "bench/runtime/memory.h"
#include "bench/measure/profiler.h"
#include "bench/step/step_spec.h"

namespace gpt2 {

struct MemoryBreakdown {
  int64_t parameters = 0, gradients = 0, optimizer_state = 0, buffers = 0;  // bytes
  int64_t activations_and_other = 0;  // peak allocated less the above, at the peak
  int64_t peak_allocated = 0, peak_reserved = 0;
};
nlohmann::json to_json(const MemoryBreakdown& m);

struct Breakdown {
  int64_t batch = 0;  // sequences a step on this process (the pass's, with a searched batch the one chosen)
  ProfileSummary summary;
  nlohmann::json trace;
  MemoryBreakdown memory;
};

// Builds the rung's step, takes `warmup` steps, times `steps` unprofiled steps, then `steps`
// profiled ones; the summary's overhead is the ratio of the two, less one.
Breakdown breakdown_rung(const StepSpec& spec, const DeviceInfo& dev, const at::Tensor& tokens, uint64_t seed,
                         int warmup, int steps, MemoryMeter& meter);
// DIR/breakdown/<rung>.json (summary + memory) and DIR/breakdown/<rung>.trace.json (Chrome trace).
void write_breakdown(const std::string& dir, const std::string& rung, const Breakdown& p);

}  // namespace gpt2
