// defines: adamw_one_launch_ — AdamW over a list of tensors with torch's fused AdamW arithmetic, every tensor's
//          update in one CUDA kernel (kernels/adamw_tiles.h), where at::_fused_adamw_ launches one per 320 chunks
//          of 64 Ki elements. On the host the kernel's tiles and threads run one after another: what the CPU
//          tests check against at::_fused_adamw_.
#pragma once
#include <ATen/core/Tensor.h>

#include <memory>
#include <vector>

#include "kernels/adamw_tiles.h"

namespace gpt2::kernels {

struct AdamWHyper {
  double lr, beta1, beta2, weight_decay, eps;
};

// params, grads, exp_avgs, exp_avg_sqs: one list each, the i-th tensors of one shape, all contiguous, of one
// dtype (float32, bf16 or fp16: the arithmetic is fp32's), on one device. `step`: the float32 count (one
// element) all of them share; 1 is added to it before the update. grad_scale, found_inf (float32, one element, optional): the gradients are divided by the
// scale (and stored so); where found_inf is 1 nothing changes and the count is taken back, as torch.optim's
// fused AdamW under a GradScaler.
void adamw_one_launch_(at::TensorList params, at::TensorList grads, at::TensorList exp_avgs,
                       at::TensorList exp_avg_sqs, const at::Tensor& step, const AdamWHyper& h,
                       const at::Tensor& grad_scale = {}, const at::Tensor& found_inf = {});
// The update alone (the count not touched): the CUDA kernel, and the same tiles run on the host.
void adamw_one_launch_cuda_(at::TensorList params, at::TensorList grads, at::TensorList exp_avgs,
                            at::TensorList exp_avg_sqs, const at::Tensor& step, const AdamWHyper& h,
                            const at::Tensor& grad_scale, const at::Tensor& found_inf);
void adamw_one_launch_host_(at::TensorList params, at::TensorList grads, at::TensorList exp_avgs,
                            at::TensorList exp_avg_sqs, const at::Tensor& step, const AdamWHyper& h,
                            const at::Tensor& grad_scale, const at::Tensor& found_inf);

// The kernel's hyper-parameters, in fp32 as ATen's kernel converts them.
inline adamw::Hyper adamw_hyper(const AdamWHyper& h) {
  return {float(h.lr), float(h.beta1), float(h.beta2), float(h.weight_decay), float(h.eps)};
}

// f(table) for each launch's Table over the lists (checked by adamw_one_launch_), kMaxTensors tensors a table.
template <typename T, typename F>
void for_each_table(at::TensorList params, at::TensorList grads, at::TensorList exp_avgs,
                    at::TensorList exp_avg_sqs, F&& f) {
  std::vector<adamw::Operands<T>> ops;
  for (size_t i = 0; i < params.size(); ++i)
    ops.push_back({params[i].data_ptr<T>(), grads[i].data_ptr<T>(), exp_avgs[i].data_ptr<T>(),
                   exp_avg_sqs[i].data_ptr<T>(), params[i].numel()});
  auto table = std::make_unique<adamw::Table<T>>();
  for (size_t next = 0; next < ops.size();) {
    next += adamw::fill(*table, ops.data() + next, ops.size() - next);
    if (table->tiles > 0) f(*table);
  }
}

}  // namespace gpt2::kernels
