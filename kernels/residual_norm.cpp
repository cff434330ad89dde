// The fused residual-add + LayerNorm: the ATen reference, the dispatch to the CUDA kernels, the autograd function.
#include "kernels/residual_norm.h"

#include <ATen/ATen.h>
#include <torch/autograd.h>

namespace gpt2::kernels {
namespace {

void check_args(const at::Tensor& x, const at::Tensor& r, const at::Tensor& gamma, const at::Tensor& beta) {
  TORCH_CHECK(x.dim() == 2 && x.sizes() == r.sizes() && x.is_contiguous() && r.is_contiguous(),
              "add_layer_norm: x and r must be contiguous (N, C) tensors of one shape, got ", x.sizes(), " and ",
              r.sizes());
  TORCH_CHECK(gamma.dim() == 1 && gamma.size(0) == x.size(1) && beta.sizes() == gamma.sizes(),
              "add_layer_norm: gamma and beta must be (C) with C = ", x.size(1), ", got ", gamma.sizes(), " and ",
              beta.sizes());
  TORCH_CHECK(r.scalar_type() == x.scalar_type() && gamma.scalar_type() == x.scalar_type() &&
                  beta.scalar_type() == x.scalar_type() && at::isFloatingType(x.scalar_type()),
              "add_layer_norm: x, r, gamma and beta must share one floating dtype");
}

struct AddLayerNorm : torch::autograd::Function<AddLayerNorm> {
  static torch::autograd::variable_list forward(torch::autograd::AutogradContext* ctx, const at::Tensor& x,
                                                const at::Tensor& r, const at::Tensor& gamma, const at::Tensor& beta,
                                                double eps) {
    AddNormForward f = add_layer_norm_forward(x, r, gamma, beta, eps);
    ctx->save_for_backward({f.s, f.mean, f.rstd, gamma, beta});
    return {f.s, f.y};
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grad) {
    const auto saved = ctx->get_saved_variables();
    const AddNormForward f{saved[0], at::Tensor(), saved[1], saved[2]};
    const at::Tensor dy = grad[1].defined() ? grad[1].contiguous() : at::zeros_like(f.s);
    const at::Tensor ds_out = grad[0].defined() ? grad[0].contiguous() : at::Tensor();
    AddNormBackward b = add_layer_norm_backward(ds_out, dy, f, saved[3], saved[4]);
    return {b.ds, b.ds, b.dgamma, b.dbeta, at::Tensor()};
  }
};

}  // namespace

AddNormForward add_layer_norm_forward_reference(const at::Tensor& x, const at::Tensor& r, const at::Tensor& gamma,
                                                const at::Tensor& beta, double eps) {
  check_args(x, r, gamma, beta);
  at::Tensor s = x + r;
  auto [y, mean, rstd] = at::native_layer_norm(s, {x.size(1)}, gamma, beta, eps);
  return {s, y, mean, rstd};
}

AddNormForward add_layer_norm_forward(const at::Tensor& x, const at::Tensor& r, const at::Tensor& gamma,
                                      const at::Tensor& beta, double eps) {
  check_args(x, r, gamma, beta);
  return x.is_cuda() ? add_layer_norm_forward_cuda(x, r, gamma, beta, eps)
                     : add_layer_norm_forward_reference(x, r, gamma, beta, eps);
}

AddNormBackward add_layer_norm_backward_reference(const at::Tensor& ds_out, const at::Tensor& dy,
                                                  const AddNormForward& f, const at::Tensor& gamma,
                                                  const at::Tensor& beta) {
  auto [dx, dgamma, dbeta] = at::native_layer_norm_backward(dy, f.s, {f.s.size(1)}, f.mean, f.rstd, gamma, beta,
                                                            {true, true, true});
  return {ds_out.defined() ? ds_out + dx : dx, dgamma, dbeta};
}

AddNormBackward add_layer_norm_backward(const at::Tensor& ds_out, const at::Tensor& dy, const AddNormForward& f,
                                        const at::Tensor& gamma, const at::Tensor& beta) {
  TORCH_CHECK(dy.sizes() == f.s.sizes() && (!ds_out.defined() || ds_out.sizes() == f.s.sizes()),
              "add_layer_norm_backward: dy and ds_out must have s's shape ", f.s.sizes());
  return dy.is_cuda() ? add_layer_norm_backward_cuda(ds_out, dy, f, gamma, beta)
                      : add_layer_norm_backward_reference(ds_out, dy, f, gamma, beta);
}

std::pair<at::Tensor, at::Tensor> add_layer_norm(const at::Tensor& x, const at::Tensor& r, const at::Tensor& gamma,
                                                 const at::Tensor& beta, double eps) {
  const int64_t C = x.size(-1);
  const auto dt = x.scalar_type();
  const auto rows = [&](const at::Tensor& t) { return t.to(dt).reshape({-1, C}).contiguous(); };
  auto out = AddLayerNorm::apply(rows(x), rows(r), gamma.to(dt), beta.to(dt), eps);
  return {out[0].view(x.sizes()), out[1].view(x.sizes())};
}

}  // namespace gpt2::kernels
