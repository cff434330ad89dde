// defines: sdpa_chooser, pick_sdpa_backend, choose_sdpa_backend, sdpa_attention_key — settings.sdpa_backend:
//          fastest, the SDPA kernel chosen for a rung by timing each one on its attention (bench/measure/choice.h).
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "bench/measure/choice.h"
#include "bench/runtime/device_info.h"
#include "bench/step/step_spec.h"

namespace gpt2 {

// The kernels tried, in this order: flash, efficient (memory-efficient), cudnn, math.
const std::vector<SdpaBackend>& sdpa_candidates();

// time_candidates over the kernels, with `trial(b)` run with only kernel b allowed; where b cannot run, ATen's
// warnings (which say why) are kept with the error. PyTorch's own choice is kept unless another is faster by more
// than `margin` (a fraction: the measurement's noise).
Choice pick_sdpa_backend(const std::string& pytorch_choice, double margin, int rounds,
                         const std::function<double(SdpaBackend)>& trial);

// The same on the device, for the step's attention: its batch, heads, context, head size, dtype (the one its math
// runs in) and dropout, q/k/v laid out as the model makes them; each round's time the mean of `iters` forward +
// backward passes.
Choice choose_sdpa_backend(const StepSpec& spec, const DeviceInfo& dev, int rounds = 9, int iters = 10);

// What choose_sdpa_backend times, in words ("B=4 H=12 T=256 D=64 BFloat16 dropout=0"): rungs with the same
// attention share one timing, so that the kernel does not change from rung to rung with the timing's noise
// (on a 2-core CPU, flash's median moved 12% between rungs of one run and math won three of them).
std::string sdpa_attention_key(const StepSpec& spec);

// settings.sdpa_backend: fastest on an SDPA attention, timed at the planned batch (a batch search then runs with
// the kernel chosen).
Chooser sdpa_chooser();

}  // namespace gpt2
