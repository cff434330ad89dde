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

// The largest power-of-two batch that fits, trying upwards from the profile's (as a power of two) to
// settings.max_batch. "Fits" means no out-of-memory error over two steps of the rung's own step (a CUDA-graph step
// captures and replays): on the CPU, within settings.cpu_memory_budget. Each try goes into `trace`; the rung then
// checks the answer (backoff.h). Under a time budget (`seconds` finite) the search also stops before a batch whose
// rung would take more than `seconds` at the floor of `floor_steps` steps, judged from the last probe's step time.
int64_t find_batch(const StepSpec& spec, const DeviceInfo& dev, const at::Tensor& tokens, uint64_t seed,
                   MemoryMeter& meter, nlohmann::json& trace, double seconds = INFINITY, int64_t floor_steps = 0);

}  // namespace gpt2
