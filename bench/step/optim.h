// defines: AdamW — the seed's optimizer in the three forms PyTorch has: a per-tensor loop (Python's
//          _single_tensor_adamw), foreach ops (_multi_tensor_adamw) and the fused kernel
//          (at::_fused_adamw_); and a fourth, ours: the fused kernel's arithmetic in one launch
//          (kernels/adamw.h). Same math in all; none reads a value back to the host.
#pragma once
#include <ATen/core/Tensor.h>

#include <memory>
#include <vector>

#include "bench/step/step_spec.h"

namespace gpt2 {

class SideStream;  // kernels/side_stream.h

class AdamW {
 public:
  AdamW(std::vector<at::Tensor> params, const OptimizerOptions& o);
  // Parameters without a gradient are left as they are. With `grad_scale`/`found_inf` (fused and
  // one-launch only, device tensors) the kernel unscales the gradients and skips the update on inf/nan.
  void step(const at::Tensor& grad_scale = {}, const at::Tensor& found_inf = {});
  // The fused kernel over some parameters (their indices in params()), for an update issued as backward makes
  // their gradients (OptimizerOptions::in_backward): each parameter keeps its own step count, as in step().
  void step_fused_some(const std::vector<size_t>& which);
  void zero_grad();  // grads set to undefined (set_to_none=True, PyTorch's default)
  // Bytes of optimizer state (exp_avg + exp_avg_sq + step counters), for the memory breakdown.
  int64_t state_bytes() const;
  std::vector<at::Tensor> state_tensors() const;  // exp_avg, exp_avg_sq, device step counters
  const std::vector<at::Tensor>& params() const { return params_; }
  OptimizerKind kind() const { return o_.kind; }
  // exp_avg, one a parameter. Right after the first step it is (1 - beta1) x the gradient that step
  // took (unscaled, averaged over ranks), whatever form computed it; zero if the step was skipped.
  const std::vector<at::Tensor>& first_moments() const { return exp_avg_; }
  double beta1() const { return o_.beta1; }

 private:
  struct Lists {
    std::vector<at::Tensor> p, g, m, v;  // the live parameters, their gradients, exp_avg, exp_avg_sq
  };
  Lists lists(const std::vector<size_t>& live) const;
  void step_loop(const std::vector<size_t>& live);
  void step_foreach(const std::vector<size_t>& live);
  void step_fused(const std::vector<size_t>& live, const at::Tensor& grad_scale, const at::Tensor& found_inf);
  void step_one_launch(const std::vector<size_t>& live, const at::Tensor& grad_scale, const at::Tensor& found_inf);

  OptimizerOptions o_;
  std::vector<at::Tensor> params_, exp_avg_, exp_avg_sq_;
  // fused: float32 step counters on the parameter's device; one-launch: one counter for all (every parameter
  // of our models gets a gradient every step, so all counts are equal)
  std::vector<at::Tensor> step_t_;
  int64_t step_ = 0;                // loop/foreach keep the count on the host, as PyTorch does
};

// AdamW's update issued from inside backward (PyTorch's optimizer-in-backward): each group's fused update is queued
// on `side` once autograd has accumulated the gradient of every parameter in it, so it runs beside the backward of
// the layers before it. No parameter is read by backward after its own gradient is made; autograd's version
// counters would say so if one were.
class UpdateInBackward {
 public:
  UpdateInBackward(AdamW& opt, std::vector<std::vector<size_t>> groups, std::unique_ptr<SideStream> side);
  ~UpdateInBackward();  // takes the hooks off the parameters
  UpdateInBackward(const UpdateInBackward&) = delete;
  UpdateInBackward& operator=(const UpdateInBackward&) = delete;
  // After backward: the groups still waiting (a parameter that got no gradient), then the caller's stream waits
  // for every update.
  void finish();
  size_t issued_by_hooks() const { return issued_by_hooks_; }  // groups the last backward issued itself

 private:
  void accumulated(size_t group);
  AdamW& opt_;
  std::vector<std::vector<size_t>> groups_;  // indices into opt.params()
  std::vector<size_t> waiting_;              // gradients each group still waits for in this backward
  std::unique_ptr<SideStream> side_;
  size_t issued_by_hooks_ = 0, issuing_ = 0;
};

}  // namespace gpt2
