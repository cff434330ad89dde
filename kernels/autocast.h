// defines: cast_as_autocast — what a custom autograd function does with its inputs under autocast. Inside a
//          custom function's forward the autocast dispatch key is off, so its matmuls would run in the inputs'
//          dtype; casting the inputs first (outside, so autograd casts the gradients back) does what autocast
//          would have done to a matmul.
#pragma once
#include <ATen/autocast_mode.h>
#include <ATen/core/Tensor.h>

namespace gpt2::kernels {

// t in the autocast dtype of its device when autocast is on there; t itself otherwise.
inline at::Tensor cast_as_autocast(const at::Tensor& t) {
  const auto dev = t.device().type();
  return at::autocast::is_autocast_enabled(dev) ? t.to(at::autocast::get_autocast_dtype(dev)) : t;
}

}  // namespace gpt2::kernels
