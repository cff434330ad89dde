#include "bench/step/train_step.h"

#include <ATen/ATen.h>
#include <ATen/autocast_mode.h>
#include <ATen/Context.h>

#include <algorithm>
#include <cmath>
#include <string>

#include "bench/runtime/nvtx.h"
#include "bench/runtime/phase.h"
#include "kernels/classifier.h"

namespace gpt2 {

SdpaBackendGuard::SdpaBackendGuard(SdpaBackend b) {
  TORCH_CHECK(b != SdpaBackend::kFastest,
              "sdpa_backend 'fastest' is settled by timing each kernel before the step is built (the ladder does it)");
  auto& ctx = at::globalContext();
  flash_ = ctx.userEnabledFlashSDP(), efficient_ = ctx.userEnabledMemEfficientSDP();
  math_ = ctx.userEnabledMathSDP(), cudnn_ = ctx.userEnabledCuDNNSDP();
  if (b == SdpaBackend::kAuto) return;
  ctx.setSDPUseFlash(b == SdpaBackend::kFlash);
  ctx.setSDPUseMemEfficient(b == SdpaBackend::kEfficient);
  ctx.setSDPUseMath(b == SdpaBackend::kMath);
  ctx.setSDPUseCuDNN(b == SdpaBackend::kCudnn);
}

SdpaBackendGuard::~SdpaBackendGuard() {
  auto& ctx = at::globalContext();
  ctx.setSDPUseFlash(flash_);
  ctx.setSDPUseMemEfficient(efficient_);
  ctx.setSDPUseMath(math_);
  ctx.setSDPUseCuDNN(cudnn_);
}

namespace {
// Autocast on for a scope, with the caller's state put back however the scope ends (an exception
// from the model must not leave the process autocasting).
class AutocastGuard {
 public:
  AutocastGuard(c10::DeviceType device, bool on, at::ScalarType dtype)
      : device_(device), enabled_(at::autocast::is_autocast_enabled(device)),
        dtype_(at::autocast::get_autocast_dtype(device)), cache_(at::autocast::is_autocast_cache_enabled()) {
    if (!on) return;
    at::autocast::set_autocast_enabled(device_, true);
    at::autocast::set_autocast_dtype(device_, dtype);
    at::autocast::set_autocast_cache_enabled(false);  // the cache is not valid across graph replays
  }
  ~AutocastGuard() {
    at::autocast::set_autocast_enabled(device_, enabled_);
    at::autocast::set_autocast_dtype(device_, dtype_);
    at::autocast::set_autocast_cache_enabled(cache_);
  }
  AutocastGuard(const AutocastGuard&) = delete;
  AutocastGuard& operator=(const AutocastGuard&) = delete;

 private:
  c10::DeviceType device_;
  bool enabled_;
  at::ScalarType dtype_;
  bool cache_;
};

// The update in backward's groups: a block's parameters together (the block's gradients come within one block's
// backward), each other parameter alone (the head's, the embeddings', the final norm's come at different times).
std::vector<std::vector<size_t>> update_groups(GPT2Impl& model) {
  std::vector<std::vector<size_t>> groups;
  std::string last;  // a module's parameters come one after another
  size_t i = 0;
  for (const auto& item : model.named_parameters()) {
    const std::string& name = item.key();
    const std::string key = name.rfind("blocks.", 0) == 0 ? name.substr(0, name.find('.', 7)) : name;
    if (groups.empty() || key != last) groups.emplace_back();
    groups.back().push_back(i++);
    last = key;
  }
  return groups;
}

int dist_rank(const StepSpec& spec, Dist* dist) {
  if (spec.dist.backend == "none") return 0;
  TORCH_CHECK(dist && dist->world_size() == spec.dist.world_size && spec.dist.world_size > 1, "a DDP step of world size ",
              spec.dist.world_size, " needs a process group of that size (run with --nproc N or torchrun)");
  return dist->rank();
}
}  // namespace

TrainStep::TrainStep(const StepSpec& spec, const DeviceInfo& dev, at::Tensor tokens, uint64_t seed, Dist* dist)
    : spec_(spec),
      dev_(dev),
      device_(torch_device(dev)),
      matmul_precision_(spec.tf32),  // TF32 is process-wide in ATen: set for this step's lifetime
      sdpa_backend_(spec.sdpa_backend),
      loader_(std::move(tokens), spec.batch, spec.model.context, dist_rank(spec, dist), ranks(spec)) {
  at::manual_seed(seed);
  model_ = GPT2(spec_.model);
  init_weights(*model_, seed, dev.cuda());  // a CPU run's memory meter would count the kept draws
  model_->to(device_);
  if (spec_.precision == Precision::kBf16Cast) model_->to(at::kBFloat16);  // weights, grads, optimizer state
  model_->train();
  if (spec_.dist.backend != "none") {
    dist->broadcast_from_rank0(model_->parameters());  // identical weights everywhere, as DDP does
    grad_sync_ = dist->grad_sync(model_->parameters());
  }
  opt_ = std::make_unique<AdamW>(model_->parameters(), spec_.optimizer);
  TORCH_CHECK(spec_.micro_batch == 0 || (spec_.micro_batch > 0 && spec_.batch % spec_.micro_batch == 0 &&
                                          spec_.dist.backend == "none" && !spec_.optimizer.in_backward &&
                                          spec_.executor == ExecutorKind::kEager),
              "micro_batch ", spec_.micro_batch, " must divide the batch (", spec_.batch,
              ") of an eager, one-process step without an update in backward");
  if (spec_.optimizer.in_backward) {
    TORCH_CHECK(spec_.dist.backend == "none" && spec_.precision != Precision::kFp16Autocast,
                "an update in backward cannot wait for what DDP's all-reduce or fp16's inf check needs first");
    in_backward_ = std::make_unique<UpdateInBackward>(*opt_, update_groups(*model_), make_side_stream(dev_));
  }
  if (spec_.precision == Precision::kFp16Autocast) {
    auto f = at::TensorOptions().device(device_).dtype(at::kFloat);
    scale_ = at::full({}, 65536.0, f);  // GradScaler's defaults: init 2^16, x2 every 2000 clean steps, /2 on inf
    growth_tracker_ = at::zeros({}, f.dtype(at::kInt));
    found_inf_ = at::zeros({}, f);
  }
  if (spec_.model.classifier_beside) classifier_side_ = make_side_stream(dev_);
  mover_ = make_batch_mover(dev_, loader_, spec_.loader.pinned);
  std::vector<at::Tensor> state = model_->parameters();
  for (const auto& t : opt_->state_tensors()) state.push_back(t);
  if (scale_.defined()) state.insert(state.end(), {scale_, growth_tracker_});
  executor_ = make_executor(spec_.executor, dev_, [this](const at::Tensor& x, const at::Tensor& y) { return body(x, y); },
                            std::move(state));
}

TrainStep::~TrainStep() = default;

c10::ScalarType attention_dtype(const StepSpec& spec) {
  return spec.precision == Precision::kFp32 ? at::kFloat : compute_dtype(math_mode(spec));
}

std::string sdpa_kernel_for(const at::Tensor& q, double dropout) {
  switch (at::_fused_sdp_choice(q, q, q, {}, dropout, /*is_causal=*/true)) {
    case 0: return "math";
    case 1: return "flash";
    case 2: return "efficient";
    case 3: return "cudnn";
    case 4: return "overrideable";
    default: return "none";
  }
}

std::string TrainStep::sdpa_backend_used() const {
  if (spec_.model.attention != AttentionImpl::kSdpa) return "n/a";
  const auto& m = spec_.model;
  if (m.cudnn_attention && m.fused_qkv) return "cudnn (our graphs: cudnn_attention)";
  auto q = at::empty({spec_.batch, m.n_head, m.context, m.n_embd / m.n_head},
                     at::device(device_).dtype(attention_dtype(spec_)));
  return sdpa_kernel_for(q.requires_grad_(), m.dropout);
}

at::Tensor TrainStep::step() {
  mark_step_began();  // the hang watch's heartbeat
  NvtxRange step_range("step");
  at::Tensor x, y;  // (B, T) int64 each, on the device
  {
    PhaseRange r("data");
    std::tie(x, y) = mover_->next();
  }
  at::Tensor loss = executor_->run(x, y);
  if (spec_.sync_every_step) (void)loss.item<float>();
  return loss;
}

double TrainStep::eval_loss(const at::Tensor& x, const at::Tensor& y, int64_t rows) {
  at::NoGradGuard no_grad;
  const int64_t batch = x.size(0);
  at::Tensor sum;  // each slice's mean loss, weighted by its rows (every row has the same tokens), on the device
  for (int64_t i = 0; i < batch; i += rows) {
    const int64_t n = std::min(rows, batch - i);
    const at::Tensor part =
        forward_loss(x.narrow(0, i, n).to(device_), y.narrow(0, i, n).to(device_)).to(at::kDouble) * n;
    sum = sum.defined() ? sum + part : part;
  }
  return sum.defined() ? sum.item<double>() / batch : std::nan("");  // one read back; no rows: no loss
}

at::Tensor TrainStep::forward_loss(const at::Tensor& x, const at::Tensor& y) {
  const bool autocast = spec_.precision == Precision::kBf16Autocast || spec_.precision == Precision::kFp16Autocast;
  AutocastGuard guard(device_.type(), autocast, compute_dtype(math_mode(spec_)));  // over forward and loss
  const int64_t chunk = spec_.model.classifier_chunk;
  at::Tensor out;
  {
    PhaseRange r("forward");
    out = chunk > 0 ? model_->hidden(x) : model_->forward(x);  // (B, T, C), or the logits (B, T, Vp)
  }
  PhaseRange r("loss");  // fused: the head's matmuls, forward and backward, are here too
  if (chunk > 0)
    return kernels::linear_cross_entropy(out.view({-1, out.size(-1)}), model_->head_weight, y.view({-1}), chunk,
                                         {spec_.model.classifier_threads, spec_.model.classifier_staged,
                                          spec_.model.classifier_exp2},
                                         classifier_side_.get());
  return at::cross_entropy_loss(out.view({-1, out.size(-1)}), y.view({-1}));
}

at::Tensor TrainStep::body(const at::Tensor& x, const at::Tensor& y) {
  // In micro-batches each pass's mean loss is weighted by its share of the rows: the sum is the batch's mean.
  const int64_t rows = spec_.micro_batch > 0 ? spec_.micro_batch : x.size(0);
  const double share = static_cast<double>(rows) / static_cast<double>(x.size(0));
  const bool whole = rows == x.size(0);  // a step in one pass runs no op beyond it (the profilers' phases hold them all)
  at::Tensor loss;
  for (int64_t i = 0; i < x.size(0); i += rows) {
    if (grad_sync_) grad_sync_->prepare_for_forward();
    at::Tensor part = whole ? forward_loss(x, y) : forward_loss(x.narrow(0, i, rows), y.narrow(0, i, rows)) * share;
    if (grad_sync_) grad_sync_->prepare_for_backward();  // buckets all-reduce as backward fills them
    PhaseRange r("backward");
    (scale_.defined() ? part * scale_ : part).backward();
    if (in_backward_) in_backward_->finish();
    loss = loss.defined() ? loss + part.detach() : part.detach();
  }
  {
    PhaseRange r("optimizer");
    if (!scale_.defined()) {
      if (!in_backward_) opt_->step();  // else issued in backward
    } else {
      // GradScaler.step: find inf/nan in the gradients; the fused kernel unscales and skips the
      // update itself (no host sync); the other forms need the verdict on the host, as in PyTorch.
      std::vector<at::Tensor> grads;
      for (const auto& p : opt_->params())
        if (p.grad().defined()) grads.push_back(p.grad());
      found_inf_.zero_();
      const bool fused = spec_.optimizer.kind == OptimizerKind::kAdamwFused ||
                         spec_.optimizer.kind == OptimizerKind::kAdamwOneLaunch;
      at::_amp_foreach_non_finite_check_and_unscale_(grads, found_inf_, fused ? at::ones_like(scale_) : scale_.reciprocal());
      if (fused)
        opt_->step(scale_, found_inf_);
      else if (found_inf_.item<float>() == 0.0f)
        opt_->step();
      at::_amp_update_scale_(scale_, growth_tracker_, found_inf_, 2.0, 0.5, 2000);
    }
    opt_->zero_grad();
  }
  return loss;
}

TimedSteps time_steps(int64_t steps, const std::function<at::Tensor()>& step, StepTimer& timer,
                      const std::function<bool()>& stop) {
  TimedSteps t;
  timer.mark();
  for (int64_t i = 0; i < steps; ++i) {
    if (stop()) {
      t.stopped = true;
      break;
    }
    t.losses.push_back(step());
    timer.mark();
  }
  t.seconds = timer.intervals();
  return t;
}

namespace {
// After the first step: exp_avg = (1 - beta1) g, so |g| = |exp_avg| / (1 - beta1), summed in fp64 on the
// device and read once.
double first_step_gradient_norm(const AdamW& opt) {
  std::vector<at::Tensor> sums;
  for (const auto& m : opt.first_moments()) sums.push_back(m.to(at::kDouble).square().sum());
  if (sums.empty()) return 0;
  return std::sqrt(at::stack(sums).sum().item<double>()) / (1.0 - opt.beta1());
}

// The same, canonical parameter by canonical parameter: each one's view of its parameter taken of that parameter's
// first moment (exp_avg has the parameter's strides), summed on the device and read once.
std::vector<std::pair<std::string, double>> first_step_gradient_norms(GPT2Impl& model, const AdamW& opt) {
  const auto& params = opt.params();
  const auto& moments = opt.first_moments();
  std::vector<std::string> names;
  std::vector<at::Tensor> sums;
  for (const auto& [name, view] : canonical_parameters(model))
    for (size_t i = 0; i < params.size(); ++i) {
      if (!view.is_alias_of(params[i])) continue;
      const at::Tensor& m = moments[i];
      const at::Tensor g = m.as_strided(view.sizes(), view.strides(),
                                        m.storage_offset() + view.storage_offset() - params[i].storage_offset());
      names.push_back(name);
      sums.push_back(g.to(at::kDouble).square().sum());
      break;
    }
  std::vector<std::pair<std::string, double>> out;
  if (sums.empty()) return out;
  const at::Tensor norms = at::stack(sums).sqrt().div(1.0 - opt.beta1()).cpu();
  for (size_t i = 0; i < names.size(); ++i) out.emplace_back(names[i], norms[static_cast<int64_t>(i)].item<double>());
  return out;
}
}  // namespace

Trajectory loss_trajectory(StepSpec spec, const DeviceInfo& dev, const at::Tensor& tokens, uint64_t seed, int steps,
                           Dist* dist) {
  spec.model.dropout = 0.0;  // dropout masks depend on the kernels' RNG use, not on the math
  TrainStep ts(spec, dev, tokens, seed, dist);
  Trajectory t;
  for (int i = 0; i < steps; ++i) {
    const double local = ts.step().item<double>();
    if (ranks(spec) == 1) {
      t.losses.push_back(local);
    } else {  // the global batch's loss: the mean over ranks
      double sum = 0;
      for (double l : dist->allgather({local})) sum += l;
      t.losses.push_back(sum / ranks(spec));
    }
    if (i == 0) {
      t.first_grad_norm = first_step_gradient_norm(ts.optimizer());
      if (t.first_grad_norm > 0) t.first_grad_norms = first_step_gradient_norms(ts.model(), ts.optimizer());
    }
  }
  auto [x0, y0] = Loader(tokens, spec.batch, spec.model.context, dist_rank(spec, dist), ranks(spec)).next();
  t.first_batch_after = ts.eval_loss(x0, y0);
  return t;
}

}  // namespace gpt2
