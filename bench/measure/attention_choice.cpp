#include "bench/measure/attention_choice.h"

#include <ATen/ATen.h>
#include <torch/csrc/autograd/autograd.h>

#include <map>
#include <stdexcept>

#include "bench/measure/choosers.h"
#include "bench/runtime/device.h"
#include "bench/step/train_step.h"
#include "kernels/attention.h"

namespace gpt2 {

Choice pick_cudnn_plans(const std::function<std::vector<std::string>(bool backward)>& plans, int rounds,
                        const std::function<double(bool backward, const std::string& plan)>& trial) {
  Choice all{"cudnn_attention_plans", "",
             "each direction's median time alone on the rung's attention, every plan of cuDNN's heuristic list (mode "
             "A, as ATen's) and of its first with one knob changed; the list's first kept unless another is faster "
             "by more than the margin; the tries: its time and the fastest other's",
             "", "", 0.01, {}, ""};
  for (const bool backward : {false, true}) {
    const std::string direction = backward ? "backward" : "forward";
    const std::vector<std::string> names = plans(backward);
    if (names.empty()) throw std::runtime_error("cuDNN's heuristic lists no " + direction + " plan for this attention");
    const Choice one = time_candidates({direction, "", "", "", names[0], all.margin, {}, ""}, names, rounds,
                                       [&](const std::string& plan) { return trial(backward, plan); });
    all.chosen += (all.chosen.empty() ? "" : ",") + direction + ":" + one.chosen;
    all.incumbent += (all.incumbent.empty() ? "" : ",") + direction + ":" + names[0];
    keep_tries(one, all);
  }
  return all;
}

Choice choose_cudnn_plans(const StepSpec& spec, const DeviceInfo& dev, int rounds, int iters) {
  if (!dev.cuda()) throw std::runtime_error("cuDNN's attention plans are timed on a CUDA device, not on " + dev.name);
  const auto& m = spec.model;
  const int64_t H = m.n_head;
  const double p = m.dropout;
  const auto opts = at::device(torch_device(dev)).dtype(attention_dtype(spec));
  at::Tensor qkv = at::randn({spec.batch, m.context, 3 * m.n_embd}, opts).requires_grad_();
  const at::Tensor gy = at::randn({spec.batch, m.context, m.n_embd}, opts);
  std::map<std::string, at::Tensor> outputs;  // for each backward plan, the forward whose backward it runs
  auto trial = [&](bool backward, const std::string& plan) {
    if (!backward) {
      const at::NoGradGuard no_grad;
      return seconds_per_pass(dev, iters, [&] { (void)kernels::cudnn_causal_attention(qkv, H, p, {plan, ""}); });
    }
    at::Tensor& y = outputs[plan];
    if (!y.defined()) y = kernels::cudnn_causal_attention(qkv, H, p, {"", plan});
    return seconds_per_pass(dev, iters, [&] { (void)torch::autograd::grad({y}, {qkv}, {gy}, /*retain_graph=*/true); });
  };
  Choice c = pick_cudnn_plans(
      [&](bool backward) { return kernels::cudnn_attention_plans(qkv.detach(), H, p, backward); }, rounds, trial);
  c.key = sdpa_attention_key(spec);
  outputs.clear(), qkv.reset();
  empty_cache(dev);
  return c;
}

void use_cudnn_plans(StepSpec& spec, const std::string& chosen) {
  const auto comma = chosen.find(',');
  auto after = [](const std::string& part, const std::string& label) {  // "" where part is not "<label><plan>"
    return part.starts_with(label) && part.find(',') == std::string::npos ? part.substr(label.size()) : "";
  };
  const std::string forward = after(chosen.substr(0, comma), "forward:");
  const std::string backward = comma == std::string::npos ? "" : after(chosen.substr(comma + 1), "backward:");
  if (forward.empty() || backward.empty())
    throw std::runtime_error("cudnn_attention_plans: 'forward:<plan>,backward:<plan>' expected, got '" + chosen + "'");
  spec.model.cudnn_forward_plan = forward;
  spec.model.cudnn_backward_plan = backward;
}

}  // namespace gpt2
