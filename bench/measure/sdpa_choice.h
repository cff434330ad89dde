// defines: SdpaChoice, pick_sdpa_backend, choose_sdpa_backend — settings.sdpa_backend: fastest,
//          the SDPA kernel chosen for a rung by timing each one on its attention, recorded.
#pragma once
#include <nlohmann/json_fwd.hpp>

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "bench/runtime/device_info.h"
#include "bench/step/step_spec.h"

namespace gpt2 {

struct SdpaTry {
  SdpaBackend backend = SdpaBackend::kAuto;
  std::optional<double> ms;  // median time of one forward + backward; none: it cannot run here
  std::string why;           // why it cannot (ATen's first line), when it cannot
};
struct SdpaChoice {
  SdpaBackend chosen = SdpaBackend::kAuto;
  std::string pytorch_choice;  // what ATen picks by itself for these inputs ("flash", "cudnn", ...)
  double margin = 0;           // the least gain over PyTorch's own choice that makes another kernel win
  std::vector<SdpaTry> tries;
  std::string timed_for;       // the rung whose timing this is, where another rung with the same attention took it
};
void to_json(nlohmann::json& j, const SdpaChoice& c);
SdpaChoice sdpa_choice_from(const nlohmann::json& j);

// The kernels tried, in this order: flash, efficient (memory-efficient), cudnn, math.
const std::vector<SdpaBackend>& sdpa_candidates();

// `trial(b)`: seconds of one forward + backward with only kernel b allowed; it throws where b cannot
// run those inputs (ATen's warnings, which say why, are kept with the error). Each candidate is
// tried once (warm-up, and whether it runs), then timed `rounds` times in turns; the fastest median
// wins, except that PyTorch's own choice is kept unless another is faster by more than `margin`
// (a fraction: the measurement's noise). Throws std::runtime_error, every reason listed, when none runs.
SdpaChoice pick_sdpa_backend(const std::string& pytorch_choice, double margin, int rounds,
                             const std::function<double(SdpaBackend)>& trial);

// The same on the device, for the step's attention: its batch, heads, context, head size, dtype
// (the one its math runs in) and dropout, q/k/v laid out as the model makes them. Every kernel is
// timed in `rounds` rounds that take turns (so drift hits all alike), each round's time the mean of
// `iters` forward + backward passes after one warm-up.
SdpaChoice choose_sdpa_backend(const StepSpec& spec, const DeviceInfo& dev, int rounds = 9, int iters = 10);

// What choose_sdpa_backend times, in words ("B=4 H=12 T=256 D=64 BFloat16 dropout=0"): rungs with the same
// attention share one timing, so that the kernel does not change from rung to rung with the timing's noise
// (on a 2-core CPU, flash's median moved 12% between rungs of one run and math won three of them).
std::string sdpa_attention_key(const StepSpec& spec);

}  // namespace gpt2
