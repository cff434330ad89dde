// Our one-launch AdamW: the arguments' checks, the step count, the dispatch, and the kernel's tiles on the host.
#include "kernels/adamw.h"

#include <ATen/ATen.h>


namespace gpt2::kernels {
namespace {

void check_scalar(const at::Tensor& t, const char* what, const at::Device& dev) {
  TORCH_CHECK(!t.defined() || (t.scalar_type() == at::kFloat && t.numel() == 1 && t.device() == dev),
              "adamw_one_launch_: ", what, " must be one float32 element on ", dev, ", got ",
              t.defined() ? t.toString() : "", " of ", t.defined() ? t.numel() : 0, " on ",
              t.defined() ? t.device() : dev);
}

void check_args(at::TensorList params, at::TensorList grads, at::TensorList exp_avgs, at::TensorList exp_avg_sqs,
                const at::Tensor& step, const at::Tensor& grad_scale, const at::Tensor& found_inf) {
  TORCH_CHECK(!params.empty() && grads.size() == params.size() && exp_avgs.size() == params.size() &&
                  exp_avg_sqs.size() == params.size(),
              "adamw_one_launch_: params, grads, exp_avgs and exp_avg_sqs must be as many and not none, got ",
              params.size(), ", ", grads.size(), ", ", exp_avgs.size(), ", ", exp_avg_sqs.size());
  const at::Tensor& first = params[0];
  const auto dtype = first.scalar_type();
  TORCH_CHECK(dtype == at::kFloat || dtype == at::kBFloat16 || dtype == at::kHalf,
              "adamw_one_launch_: float32, bf16 or fp16 parameters expected (the arithmetic is fp32's), got ", dtype);
  for (size_t i = 0; i < params.size(); ++i)
    for (const at::Tensor* t : {&params[i], &grads[i], &exp_avgs[i], &exp_avg_sqs[i]})
      TORCH_CHECK(t->defined() && t->scalar_type() == first.scalar_type() && t->device() == first.device() &&
                      t->is_contiguous() && t->sizes() == params[i].sizes(),
                  "adamw_one_launch_: tensor ", i, "'s param, grad, exp_avg and exp_avg_sq must be contiguous, of "
                  "one shape, of the dtype and on the device of the first parameter (", first.scalar_type(), ", ",
                  first.device(), ")");
  TORCH_CHECK(step.defined(), "adamw_one_launch_: the step count is missing");
  check_scalar(step, "the step count", first.device());
  check_scalar(grad_scale, "grad_scale", first.device());
  check_scalar(found_inf, "found_inf", first.device());
}

}  // namespace

void adamw_one_launch_(at::TensorList params, at::TensorList grads, at::TensorList exp_avgs,
                       at::TensorList exp_avg_sqs, const at::Tensor& step, const AdamWHyper& h,
                       const at::Tensor& grad_scale, const at::Tensor& found_inf) {
  check_args(params, grads, exp_avgs, exp_avg_sqs, step, grad_scale, found_inf);
  at::NoGradGuard no_grad;
  step.add_(1);
  if (params[0].is_cuda())
    adamw_one_launch_cuda_(params, grads, exp_avgs, exp_avg_sqs, step, h, grad_scale, found_inf);
  else
    adamw_one_launch_host_(params, grads, exp_avgs, exp_avg_sqs, step, h, grad_scale, found_inf);
  if (found_inf.defined()) step.sub_(found_inf);  // a skipped step does not count
}

void adamw_one_launch_host_(at::TensorList params, at::TensorList grads, at::TensorList exp_avgs,
                            at::TensorList exp_avg_sqs, const at::Tensor& step, const AdamWHyper& h,
                            const at::Tensor& grad_scale, const at::Tensor& found_inf) {
  if (found_inf.defined() && found_inf.item<float>() == 1.0f) return;
  const float scale = grad_scale.defined() ? grad_scale.item<float>() : 0.0f;
  const adamw::Coeffs c = adamw::coeffs(adamw_hyper(h), step.item<float>());
  auto run = [&](auto zero) {
    for_each_table<decltype(zero)>(params, grads, exp_avgs, exp_avg_sqs, [&](const auto& table) {
      for (int64_t tile = 0; tile < table.tiles; ++tile)
        for (int lane = 0; lane < adamw::kThreads; ++lane)
          adamw::tile_lane(table, tile, lane, c, grad_scale.defined() ? &scale : nullptr);
    });
  };
  switch (params[0].scalar_type()) {
    case at::kFloat: return run(float{});
    case at::kBFloat16: return run(c10::BFloat16{});
    default: return run(c10::Half{});  // the dtypes check_args takes
  }
}

}  // namespace gpt2::kernels
