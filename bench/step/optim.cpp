#include "bench/step/optim.h"

#include <ATen/ATen.h>
#include <torch/csrc/autograd/function_hook.h>
#include <torch/csrc/autograd/variable.h>

#include <cmath>
#include <utility>

#include "bench/runtime/device.h"
#include "kernels/adamw.h"

namespace gpt2 {

AdamW::AdamW(std::vector<at::Tensor> params, const OptimizerOptions& o) : o_(o), params_(std::move(params)) {
  for (const auto& p : params_) {
    exp_avg_.push_back(at::zeros_like(p, at::MemoryFormat::Preserve));
    exp_avg_sq_.push_back(at::zeros_like(p, at::MemoryFormat::Preserve));
    if (o_.kind == OptimizerKind::kAdamwFused) step_t_.push_back(at::zeros({}, p.options().dtype(at::kFloat)));
  }
  if (o_.kind == OptimizerKind::kAdamwOneLaunch && !params_.empty())
    step_t_.push_back(at::zeros({}, params_[0].options().dtype(at::kFloat)));
}

int64_t AdamW::state_bytes() const {
  int64_t b = 0;
  for (size_t i = 0; i < params_.size(); ++i) b += exp_avg_[i].nbytes() + exp_avg_sq_[i].nbytes();
  for (const auto& s : step_t_) b += s.nbytes();
  return b;
}

std::vector<at::Tensor> AdamW::state_tensors() const {
  std::vector<at::Tensor> out = exp_avg_;
  out.insert(out.end(), exp_avg_sq_.begin(), exp_avg_sq_.end());
  out.insert(out.end(), step_t_.begin(), step_t_.end());
  return out;
}

void AdamW::zero_grad() {
  for (auto& p : params_) p.mutable_grad().reset();
}

void AdamW::step(const at::Tensor& grad_scale, const at::Tensor& found_inf) {
  at::NoGradGuard no_grad;
  std::vector<size_t> live;
  for (size_t i = 0; i < params_.size(); ++i)
    if (params_[i].grad().defined()) live.push_back(i);
  ++step_;
  switch (o_.kind) {
    case OptimizerKind::kAdamwLoop: return step_loop(live);
    case OptimizerKind::kAdamwForeach: return step_foreach(live);
    case OptimizerKind::kAdamwFused: return step_fused(live, grad_scale, found_inf);
    case OptimizerKind::kAdamwOneLaunch: return step_one_launch(live, grad_scale, found_inf);
  }
}

void AdamW::step_fused_some(const std::vector<size_t>& which) {
  TORCH_CHECK(o_.kind == OptimizerKind::kAdamwFused, "an update of some parameters needs the fused AdamW (",
              to_string(o_.kind), " counts its steps for all parameters at once)");
  at::NoGradGuard no_grad;
  std::vector<size_t> live;
  for (size_t i : which)
    if (params_.at(i).grad().defined()) live.push_back(i);
  step_fused(live, {}, {});
}

void AdamW::step_loop(const std::vector<size_t>& live) {
  const double bc1 = 1.0 - std::pow(o_.beta1, step_), bc2 = 1.0 - std::pow(o_.beta2, step_);
  for (size_t i : live) {
    auto& p = params_[i];
    const auto& g = p.grad();
    p.mul_(1.0 - o_.lr * o_.weight_decay);
    exp_avg_[i].lerp_(g, 1.0 - o_.beta1);
    exp_avg_sq_[i].mul_(o_.beta2).addcmul_(g, g, 1.0 - o_.beta2);
    auto denom = (exp_avg_sq_[i].sqrt() / std::sqrt(bc2)).add_(o_.eps);
    p.addcdiv_(exp_avg_[i], denom, -o_.lr / bc1);
  }
}

AdamW::Lists AdamW::lists(const std::vector<size_t>& live) const {
  Lists l;
  for (size_t i : live)
    l.p.push_back(params_[i]), l.g.push_back(params_[i].grad()), l.m.push_back(exp_avg_[i]), l.v.push_back(exp_avg_sq_[i]);
  return l;
}

void AdamW::step_foreach(const std::vector<size_t>& live) {
  auto [p, g, m, v] = lists(live);
  if (p.empty()) return;
  const double bc1 = 1.0 - std::pow(o_.beta1, step_), bc2 = 1.0 - std::pow(o_.beta2, step_);
  at::_foreach_mul_(p, 1.0 - o_.lr * o_.weight_decay);
  at::_foreach_lerp_(m, g, 1.0 - o_.beta1);
  at::_foreach_mul_(v, o_.beta2);
  at::_foreach_addcmul_(v, g, g, 1.0 - o_.beta2);
  auto denom = at::_foreach_sqrt(v);
  at::_foreach_div_(denom, std::sqrt(bc2));
  at::_foreach_add_(denom, o_.eps);
  at::_foreach_addcdiv_(p, m, denom, -o_.lr / bc1);
}

void AdamW::step_fused(const std::vector<size_t>& live, const at::Tensor& grad_scale, const at::Tensor& found_inf) {
  auto [p, g, m, v] = lists(live);
  std::vector<at::Tensor> s;
  for (size_t i : live) s.push_back(step_t_[i]);
  if (p.empty()) return;
  // The step count lives on the device (as torch.optim's fused path keeps it), so no host value
  // enters the kernel's arguments and the step can be captured in a CUDA graph.
  at::_foreach_add_(s, 1.0);
  at::_fused_adamw_(p, g, m, v, /*max_exp_avg_sqs=*/{}, s, o_.lr, o_.beta1, o_.beta2, o_.weight_decay, o_.eps,
                    /*amsgrad=*/false, /*maximize=*/false,
                    grad_scale.defined() ? std::optional<at::Tensor>(grad_scale) : std::nullopt,
                    found_inf.defined() ? std::optional<at::Tensor>(found_inf) : std::nullopt);
  // A step the scaler skipped (inf/nan gradients) must not count: the kernel left the parameters
  // alone, so take the increment back on the device, as torch.optim's fused AdamW does.
  if (found_inf.defined()) at::_foreach_sub_(s, std::vector<at::Tensor>(s.size(), found_inf));
}

void AdamW::step_one_launch(const std::vector<size_t>& live, const at::Tensor& grad_scale, const at::Tensor& found_inf) {
  const auto [p, g, m, v] = lists(live);
  if (p.empty()) return;
  kernels::adamw_one_launch_(p, g, m, v, step_t_[0], {o_.lr, o_.beta1, o_.beta2, o_.weight_decay, o_.eps}, grad_scale,
                             found_inf);
}

namespace {
struct Accumulated : torch::autograd::PostAccumulateGradHook {
  explicit Accumulated(std::function<void()> f) : f(std::move(f)) {}
  void operator()(const torch::autograd::Variable&) override { f(); }
  std::function<void()> f;
};
}  // namespace

UpdateInBackward::UpdateInBackward(AdamW& opt, std::vector<std::vector<size_t>> groups, std::unique_ptr<SideStream> side)
    : opt_(opt), groups_(std::move(groups)), side_(std::move(side)) {
  TORCH_CHECK(opt_.kind() == OptimizerKind::kAdamwFused, "an update in backward needs the fused AdamW, not ",
              to_string(opt_.kind()));
  std::vector<int> seen(opt_.params().size(), 0);
  for (const auto& group : groups_)
    for (size_t i : group) TORCH_CHECK(i < seen.size() && !seen[i]++, "parameter ", i, " is in no group or in two");
  for (size_t i = 0; i < seen.size(); ++i) TORCH_CHECK(seen[i], "parameter ", i, " is in no group or in two");
  for (size_t g = 0; g < groups_.size(); ++g) {  // checked first: no hook is left behind by a refused grouping
    waiting_.push_back(groups_[g].size());
    for (size_t i : groups_[g])
      torch::autograd::impl::set_post_acc_grad_hooks(opt_.params()[i],
                                                     std::make_unique<Accumulated>([this, g] { accumulated(g); }));
  }
}

UpdateInBackward::~UpdateInBackward() {
  for (const auto& p : opt_.params()) torch::autograd::impl::set_post_acc_grad_hooks(p, nullptr);
}

void UpdateInBackward::accumulated(size_t group) {
  if (waiting_[group] == 0 || --waiting_[group] > 0) return;
  side_->run([this, group] { opt_.step_fused_some(groups_[group]); });
  ++issuing_;
}

void UpdateInBackward::finish() {
  for (size_t g = 0; g < groups_.size(); ++g) {
    if (waiting_[g] > 0) side_->run([this, g] { opt_.step_fused_some(groups_[g]); });
    waiting_[g] = groups_[g].size();
  }
  side_->join();
  issued_by_hooks_ = std::exchange(issuing_, 0);
}

}  // namespace gpt2
