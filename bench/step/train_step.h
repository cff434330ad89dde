// defines: TrainStep — THE training step every rung runs: batch -> forward -> cross-entropy ->
//          backward -> AdamW -> zero grads. Built from a StepSpec; never told which variants made it.
#pragma once
#include <ATen/core/Tensor.h>

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "bench/runtime/device.h"
#include "bench/runtime/dist.h"
#include "bench/step/optim.h"
#include "bench/step/step_spec.h"
#include "model/data.h"
#include "model/gpt2.h"

namespace gpt2 {

// Allows SDPA only the given kernel for a scope (kAuto: PyTorch's own choice among all), restoring
// ATen's process-wide flags after. kFastest is not a kernel: the ladder settles it by measurement
// (bench/measure/choosers.h) before a step is built, and a step given it is refused.
class SdpaBackendGuard {
 public:
  explicit SdpaBackendGuard(SdpaBackend b);
  ~SdpaBackendGuard();
  SdpaBackendGuard(const SdpaBackendGuard&) = delete;
  SdpaBackendGuard& operator=(const SdpaBackendGuard&) = delete;

 private:
  bool flash_, efficient_, math_, cudnn_;
};

// The dtype the step's attention runs in: fp32, or the dtype its precision casts or autocasts to.
c10::ScalarType attention_dtype(const StepSpec& spec);
// The SDPA kernel ATen picks, under the flags now set, for causal attention on inputs like `q`
// (B, heads, T, head size) with `dropout`: "math", "flash", "efficient", "cudnn", ...
std::string sdpa_kernel_for(const at::Tensor& q, double dropout);

class TrainStep {
 public:
  // `tokens`: the training stream (int32, CPU). Weights and dropout's RNG come from `seed`: two TrainSteps of one
  // spec take identical steps. With spec.dist, `dist` is the group: weights broadcast from rank 0, each rank its
  // slice of the batch, c10d's Reducer averaging gradients in backward.
  TrainStep(const StepSpec& spec, const DeviceInfo& dev, at::Tensor tokens, uint64_t seed, Dist* dist = nullptr);
  ~TrainStep();
  TrainStep(const TrainStep&) = delete;
  TrainStep& operator=(const TrainStep&) = delete;

  // One optimizer step. Returns the loss as a device scalar; nothing waits for the device unless
  // the spec asks for a host read every step (sync_every_step).
  at::Tensor step();

  const StepSpec& spec() const { return spec_; }
  GPT2Impl& model() { return *model_; }
  const AdamW& optimizer() const { return *opt_; }
  const UpdateInBackward* update_in_backward() const { return in_backward_.get(); }  // null unless the spec asks
  int64_t tokens_per_step() const { return gpt2::tokens_per_step(spec_); }
  // The loss on (x, y) with the step's model, precision and autocast, no gradients: the mean over x's rows, taken
  // `rows` at a time. Beside a live step a whole batch's logits need not fit: on an H100 at batch_scaling's 128, the
  // parity run's 12.28 GiB of logits did not, past its CUDA graph's 64 GiB pool.
  double eval_loss(const at::Tensor& x, const at::Tensor& y, int64_t rows = 8);
  // The SDPA kernel ATen picks for this step's attention shapes ("math", "flash", ...), or "n/a"; under
  // cudnn_attention, that it is our cuDNN graphs.
  std::string sdpa_backend_used() const;

 private:
  at::Tensor body(const at::Tensor& x, const at::Tensor& y);  // what a CUDA graph captures
  at::Tensor forward_loss(const at::Tensor& x, const at::Tensor& y);

  StepSpec spec_;
  DeviceInfo dev_;
  c10::Device device_;
  MatmulPrecisionGuard matmul_precision_;
  SdpaBackendGuard sdpa_backend_;
  GPT2 model_{nullptr};
  std::unique_ptr<AdamW> opt_;
  std::unique_ptr<UpdateInBackward> in_backward_;
  std::unique_ptr<SideStream> classifier_side_;  // spec.model.classifier_beside: its softmax passes run there  // spec.optimizer.in_backward: the update issued from backward
  Loader loader_;
  std::unique_ptr<BatchMover> mover_;
  std::unique_ptr<Executor> executor_;
  std::unique_ptr<GradSync> grad_sync_;
  at::Tensor scale_, growth_tracker_, found_inf_;  // fp16 gradient scaler state (device)
};

// One repetition: `steps` calls of `step`, the timer marked around each, losses kept on the device, `stop()` asked
// before each. The host waits once, after the last step, unless the step itself synchronizes.
struct TimedSteps {
  std::vector<double> seconds;     // one per step taken
  std::vector<at::Tensor> losses;  // device scalars, one per step taken
  bool stopped = false;            // stop() said so before all steps were taken
};
TimedSteps time_steps(int64_t steps, const std::function<at::Tensor()>& step, StepTimer& timer,
                      const std::function<bool()>& stop);

// K steps of `spec` from the seed's weights and data, dropout off, never timed: the losses (data-parallel, the
// global batch's), the first batch's loss again after them (a changed problem's check) and the first step's
// gradient norms, read from AdamW's first moment (docs/measurement.md: Parity). 0: not known (a skipped step).
struct Trajectory {
  std::vector<double> losses;
  double first_batch_after = 0;
  double first_grad_norm = 0;
  // The same gradient parameter by parameter (canonical_parameters' names and shapes): what a kernel writing one
  // parameter's gradient wrong changes, where the whole norm moves by a hair. Empty where not known.
  std::vector<std::pair<std::string, double>> first_grad_norms = {};
};
Trajectory loss_trajectory(StepSpec spec, const DeviceInfo& dev, const at::Tensor& tokens, uint64_t seed, int steps,
                           Dist* dist = nullptr);

}  // namespace gpt2
