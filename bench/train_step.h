// defines: TrainStep — THE training step every rung runs: batch -> forward -> cross-entropy ->
//          backward -> AdamW -> zero grads. Built from a StepSpec; never told which variants made it.
#pragma once
#include <ATen/core/Tensor.h>

#include <memory>
#include <vector>

#include "bench/optim.h"
#include "bench/step_spec.h"
#include "model/data.h"
#include "model/gpt2.h"

namespace gpt2 {

class TrainStep {
 public:
  // `tokens`: the training stream (int32, CPU). Weights come from init_weights(seed); dropout's
  // RNG is seeded from `seed` too, so two TrainSteps of one spec take identical steps.
  TrainStep(const StepSpec& spec, const DeviceInfo& dev, at::Tensor tokens, uint64_t seed, int rank = 0);
  ~TrainStep();
  TrainStep(const TrainStep&) = delete;
  TrainStep& operator=(const TrainStep&) = delete;

  // One optimizer step. Returns the loss as a device scalar; nothing waits for the device unless
  // the spec asks for a host read every step (sync_every_step).
  at::Tensor step();

  const StepSpec& spec() const { return spec_; }
  GPT2Impl& model() { return *model_; }
  const AdamW& optimizer() const { return *opt_; }
  int64_t tokens_per_step() const { return spec_.batch * spec_.model.context * spec_.dist.world_size; }
  int64_t parameter_bytes() const;

 private:
  StepSpec spec_;
  DeviceInfo dev_;
  c10::Device device_;
  GPT2 model_{nullptr};
  std::unique_ptr<AdamW> opt_;
  Loader loader_;
  at::Float32MatmulPrecision saved_matmul_precision_;
};

// K steps of `spec` from the seed's weights and data, dropout off, loss read after each step:
// the trajectory the parity check compares across rungs (never timed).
std::vector<double> loss_trajectory(StepSpec spec, const DeviceInfo& dev, const at::Tensor& tokens, uint64_t seed,
                                    int steps);

}  // namespace gpt2
