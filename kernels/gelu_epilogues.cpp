// The MLP with fc1's bias, GELU and their backward in cuBLASLt's GEMM epilogues: the ATen references, the
// dispatch to the cuBLASLt calls (kernels/cuda/gelu_epilogues.cpp), the autograd function.
#include "kernels/gelu_epilogues.h"

#include <ATen/ATen.h>
#include <torch/autograd.h>

#include <algorithm>

#include "kernels/autocast.h"

namespace gpt2::kernels {
namespace {

void check_same(const char* what, std::initializer_list<const at::Tensor*> ts) {
  const at::Tensor& first = **ts.begin();
  for (const at::Tensor* t : ts) {
    TORCH_CHECK(t->is_contiguous(), what, ": contiguous tensors expected, got strides ", t->strides());
    TORCH_CHECK(t->scalar_type() == first.scalar_type() && t->device() == first.device(), what,
                ": one dtype and device expected, got ", first.scalar_type(), " on ", first.device(), " and ",
                t->scalar_type(), " on ", t->device());
  }
}

struct MlpGeluEpilogues : torch::autograd::Function<MlpGeluEpilogues> {
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& x, const at::Tensor& w1,
                            const at::Tensor& b1, const at::Tensor& w2, const at::Tensor& b2) {
    auto [h, pre] = linear_gelu_aux(x, w1, b1);  // (N, F) each
    ctx->save_for_backward({x, w1, w2, h, pre});
    return at::addmm(b2, h, w2.t());
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grad) {
    const auto saved = ctx->get_saved_variables();
    const at::Tensor &x = saved[0], &w1 = saved[1], &w2 = saved[2], &h = saved[3], &pre = saved[4];
    const at::Tensor g = grad[0].contiguous();  // (N, C)
    auto [d_pre, d_b1] = matmul_dgelu_bgrad(g, w2, pre);
    return {d_pre.mm(w1), d_pre.t().mm(x), d_b1, g.t().mm(h), g.sum(0)};
  }
};

}  // namespace

std::pair<at::Tensor, at::Tensor> linear_gelu_aux_reference(const at::Tensor& x, const at::Tensor& w,
                                                            const at::Tensor& b) {
  at::Tensor pre = at::addmm(b, x, w.t());
  return {at::gelu(pre, "tanh"), pre};
}

std::pair<at::Tensor, at::Tensor> linear_gelu_aux(const at::Tensor& x, const at::Tensor& w, const at::Tensor& b,
                                                  int algorithm) {
  TORCH_CHECK(x.dim() == 2 && w.dim() == 2 && b.dim() == 1 && x.size(1) == w.size(1) && b.size(0) == w.size(0),
              "linear_gelu_aux: x (N, C), w (F, C), b (F) expected, got ", x.sizes(), ", ", w.sizes(), ", ", b.sizes());
  check_same("linear_gelu_aux", {&x, &w, &b});
  if (x.is_cuda()) return linear_gelu_aux_cuda(x, w, b, std::max(algorithm, 0));
  TORCH_CHECK(algorithm < 0, "linear_gelu_aux: cuBLASLt algorithm #", algorithm, " asked for on ", x.device(),
              ", where the reference runs");
  return linear_gelu_aux_reference(x, w, b);
}

std::pair<at::Tensor, at::Tensor> matmul_dgelu_bgrad_reference(const at::Tensor& g, const at::Tensor& w,
                                                               const at::Tensor& pre) {
  at::Tensor d_pre = at::gelu_backward(g.mm(w), pre, "tanh");
  return {d_pre, d_pre.sum(0, /*keepdim=*/false, at::kFloat).to(pre.scalar_type())};
}

std::pair<at::Tensor, at::Tensor> matmul_dgelu_bgrad(const at::Tensor& g, const at::Tensor& w, const at::Tensor& pre) {
  TORCH_CHECK(g.dim() == 2 && w.dim() == 2 && pre.dim() == 2 && g.size(1) == w.size(0) && pre.size(0) == g.size(0) &&
                  pre.size(1) == w.size(1),
              "matmul_dgelu_bgrad: g (N, C), w (C, F), pre (N, F) expected, got ", g.sizes(), ", ", w.sizes(), ", ",
              pre.sizes());
  check_same("matmul_dgelu_bgrad", {&g, &w, &pre});
  return g.is_cuda() ? matmul_dgelu_bgrad_cuda(g, w, pre) : matmul_dgelu_bgrad_reference(g, w, pre);
}

at::Tensor mlp_gelu_epilogues(const at::Tensor& x, const at::Tensor& w1, const at::Tensor& b1, const at::Tensor& w2,
                              const at::Tensor& b2) {
  TORCH_CHECK(x.dim() == 2 && w1.dim() == 2 && w2.dim() == 2 && b1.dim() == 1 && b2.dim() == 1 &&
                  x.size(1) == w1.size(1) && b1.size(0) == w1.size(0) && w2.size(1) == w1.size(0) &&
                  b2.size(0) == w2.size(0),
              "mlp_gelu_epilogues: x (N, C), w1 (F, C), b1 (F), w2 (C, F), b2 (C) expected, got ", x.sizes(), ", ",
              w1.sizes(), ", ", b1.sizes(), ", ", w2.sizes(), ", ", b2.sizes());
  return MlpGeluEpilogues::apply(cast_as_autocast(x), cast_as_autocast(w1), cast_as_autocast(b1), cast_as_autocast(w2),
                                 cast_as_autocast(b2));
}

}  // namespace gpt2::kernels
