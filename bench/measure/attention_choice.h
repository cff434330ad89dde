// defines: the cudnn_attention extra's choice (bench/measure/choice.h): cuDNN's execution plan for each direction
//          of the step's attention, every plan of its heuristic list and of its first's one-knob neighbours timed
//          alone on the rung's shapes; the winners become the step's (ModelOptions::cudnn_forward_plan and
//          cudnn_backward_plan).
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "bench/measure/choice.h"

namespace gpt2 {

// For the forward, then the backward: `plans(backward)` lists cuDNN's plans by name, `trial(backward, plan)` times
// one (seconds, or throws where it cannot run). The list's first is kept unless another is faster by more than 1%.
// Chosen: "forward:eng8_k26=7,backward:eng8_k26=2"; its tries: each direction's first and its fastest other.
Choice pick_cudnn_plans(const std::function<std::vector<std::string>(bool backward)>& plans, int rounds,
                        const std::function<double(bool backward, const std::string& plan)>& trial);
// On the rung's attention (batch, heads, context, head size, dtype, dropout), each round the mean of `iters`
// forwards, or backwards of one forward; off CUDA it throws (the extra is CUDA's).
Choice choose_cudnn_plans(const StepSpec& spec, const DeviceInfo& dev, int rounds = 9, int iters = 10);
// The chosen plans into the step; anything but "forward:<plan>,backward:<plan>" throws.
void use_cudnn_plans(StepSpec& spec, const std::string& chosen);

}  // namespace gpt2
