// defines: find_batch — batch_scaling's search for the largest batch that fits.
#pragma once
#include <ATen/core/Tensor.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdint>

#include "bench/runtime/device_info.h"
#include "bench/runtime/memory.h"
#include "bench/step/step_spec.h"

namespace gpt2 {

// The largest power-of-two batch from the profile's up to settings.max_batch whose step runs two steps without
// running out of memory (a CPU: within cpu_memory_budget), each try in `trace`. Under a time budget it also stops
// before a batch whose rung would take over `seconds` at `floor_steps` steps, judged from the last probe.
int64_t find_batch(const StepSpec& spec, const DeviceInfo& dev, const at::Tensor& tokens, uint64_t seed,
                   MemoryMeter& meter, nlohmann::json& trace, double seconds = INFINITY, int64_t floor_steps = 0);

}  // namespace gpt2
