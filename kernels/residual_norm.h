// defines: the fused residual-add + LayerNorm of a pre-LN block boundary, forward and backward:
//          (s, y) = (x + r, LayerNorm(x + r)) in one pass over the row, where the unfused step writes x + r in
//          one kernel and reads it back in the next; and in the backward, LayerNorm's input gradient added to
//          the residual stream's gradient in the same pass (a CUDA kernel each way on GPUs, ATen elsewhere).
#pragma once
#include <ATen/core/Tensor.h>

#include <utility>

namespace gpt2::kernels {

struct AddNormForward {
  at::Tensor s, y, mean, rstd;  // s = x + r and y = LayerNorm(s), (N × C); the rows' mean and 1/std, (N)
};
struct AddNormBackward {
  at::Tensor ds, dgamma, dbeta;  // ds = ds_out + LayerNorm'(dy), (N × C): the gradient of x and of r
};

// x, r (N × C) contiguous, one dtype; gamma, beta (C) of that dtype. The CUDA kernel for CUDA tensors, the
// reference (ATen's native_layer_norm) otherwise; mean and rstd as each computes them.
AddNormForward add_layer_norm_forward(const at::Tensor& x, const at::Tensor& r, const at::Tensor& gamma,
                                      const at::Tensor& beta, double eps);
AddNormForward add_layer_norm_forward_reference(const at::Tensor& x, const at::Tensor& r, const at::Tensor& gamma,
                                                const at::Tensor& beta, double eps);
AddNormForward add_layer_norm_forward_cuda(const at::Tensor& x, const at::Tensor& r, const at::Tensor& gamma,
                                           const at::Tensor& beta, double eps);
// ds_out (the gradient reaching s from the residual stream) may be undefined: none.
AddNormBackward add_layer_norm_backward(const at::Tensor& ds_out, const at::Tensor& dy, const AddNormForward& f,
                                        const at::Tensor& gamma, const at::Tensor& beta);
AddNormBackward add_layer_norm_backward_reference(const at::Tensor& ds_out, const at::Tensor& dy,
                                                  const AddNormForward& f, const at::Tensor& gamma,
                                                  const at::Tensor& beta);
AddNormBackward add_layer_norm_backward_cuda(const at::Tensor& ds_out, const at::Tensor& dy, const AddNormForward& f,
                                             const at::Tensor& gamma, const at::Tensor& beta);

// (x + r, LayerNorm(x + r)) for x, r (..., C), differentiable in x, r, gamma and beta. r is promoted to x's
// dtype and gamma, beta cast to it (under autocast the residual stream is fp32 and LayerNorm runs in fp32).
std::pair<at::Tensor, at::Tensor> add_layer_norm(const at::Tensor& x, const at::Tensor& r, const at::Tensor& gamma,
                                                 const at::Tensor& beta, double eps);

}  // namespace gpt2::kernels
