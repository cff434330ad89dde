#include "bench/train_step.h"

#include <ATen/ATen.h>
#include <ATen/autocast_mode.h>
#include <ATen/Context.h>

#include "bench/device.h"
#include "bench/nvtx.h"

namespace gpt2 {

TrainStep::TrainStep(const StepSpec& spec, const DeviceInfo& dev, at::Tensor tokens, uint64_t seed, int rank)
    : spec_(spec),
      dev_(dev),
      device_(torch_device(dev)),
      loader_(std::move(tokens), spec.batch, spec.model.context, rank, spec.dist.world_size),
      saved_matmul_precision_(at::globalContext().float32MatmulPrecision()) {
  at::manual_seed(seed);
  model_ = GPT2(spec_.model);
  init_weights(*model_, seed);
  model_->to(device_);
  if (spec_.precision == Precision::kBf16Cast) model_->to(at::kBFloat16);
  model_->train();
  // TF32 is process-wide state in ATen: set for this step's lifetime, restored by the destructor.
  at::globalContext().setFloat32MatmulPrecision(spec_.precision == Precision::kTf32 ? "high" : "highest");
  opt_ = std::make_unique<AdamW>(model_->parameters(), spec_.optimizer);
}

TrainStep::~TrainStep() {
  at::globalContext().setFloat32MatmulPrecision(
      saved_matmul_precision_ == at::Float32MatmulPrecision::HIGHEST ? "highest"
      : saved_matmul_precision_ == at::Float32MatmulPrecision::HIGH  ? "high"
                                                                     : "medium");
}

int64_t TrainStep::parameter_bytes() const {
  int64_t b = 0;
  for (const auto& p : model_->parameters()) b += p.nbytes();
  return b;
}

at::Tensor TrainStep::step() {
  NvtxRange step_range("step");
  at::Tensor x, y;  // (B, T) int64 each
  {
    NvtxRange r("data");
    std::tie(x, y) = loader_.next();
    x = x.to(device_);
    y = y.to(device_);
  }

  const bool autocast = spec_.precision == Precision::kBf16Autocast || spec_.precision == Precision::kFp16Autocast;
  if (autocast) {
    at::autocast::set_autocast_enabled(device_.type(), true);
    at::autocast::set_autocast_dtype(device_.type(), compute_dtype(spec_.precision));
  }
  at::Tensor logits, loss;
  {
    NvtxRange r("forward");
    logits = model_->forward(x);  // (B, T, Vp)
  }
  {
    NvtxRange r("loss");
    loss = at::cross_entropy_loss(logits.view({-1, logits.size(-1)}), y.view({-1}));
  }
  if (autocast) {
    at::autocast::set_autocast_enabled(device_.type(), false);
    at::autocast::clear_cache();
  }
  {
    NvtxRange r("backward");
    loss.backward();
  }
  {
    NvtxRange r("optimizer");
    opt_->step();
    opt_->zero_grad();
  }
  loss = loss.detach();
  if (spec_.sync_every_step) (void)loss.item<float>();
  return loss;
}

std::vector<double> loss_trajectory(StepSpec spec, const DeviceInfo& dev, const at::Tensor& tokens, uint64_t seed,
                                    int steps) {
  spec.model.dropout = 0.0;  // dropout masks depend on the kernels' RNG use, not on the math
  TrainStep ts(spec, dev, tokens, seed);
  std::vector<double> losses;
  for (int i = 0; i < steps; ++i) losses.push_back(ts.step().item<double>());
  return losses;
}

}  // namespace gpt2
