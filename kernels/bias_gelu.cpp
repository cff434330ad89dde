// The MLP's Linear + bias + GELU(tanh) with the fused backward: the ATen reference, the dispatch to the
// CUDA kernel, the autograd function.
#include "kernels/bias_gelu.h"

#include <ATen/ATen.h>
#include <torch/autograd.h>

#include "kernels/autocast.h"
#include "kernels/gelu_epilogues.h"
#include "kernels/lt_linear.h"

namespace gpt2::kernels {
namespace {

void check_gelu_args(const at::Tensor& grad, const at::Tensor& pre) {
  TORCH_CHECK(grad.dim() == 2 && grad.sizes() == pre.sizes() && grad.is_contiguous() && pre.is_contiguous(),
              "bias_gelu_backward: grad and pre must be contiguous (N, F) tensors of one shape, got ", grad.sizes(),
              " and ", pre.sizes());
  TORCH_CHECK(grad.scalar_type() == pre.scalar_type() && at::isFloatingType(pre.scalar_type()),
              "bias_gelu_backward: grad and pre must share one floating dtype, got ", grad.scalar_type(), " and ",
              pre.scalar_type());
  TORCH_CHECK(grad.device() == pre.device(), "bias_gelu_backward: grad on ", grad.device(), ", pre on ", pre.device());
}

struct LinearBiasGelu : torch::autograd::Function<LinearBiasGelu> {
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& x, const at::Tensor& w,
                            const at::Tensor& b, int64_t slab, const GemmAlgorithms& table) {
    // (N, F) each. On CUDA one GEMM whose epilogue adds the bias, applies GELU and writes the pre-activation
    // beside (cuBLASLt GELU_AUX_BIAS, gelu_epilogues's forward): on the H100 at batch 32 that GEMM took 3.66 ms
    // a step where the GEMM with its bias and then ATen's GELU took 2.85 + 1.64 (the first run's breakdowns of
    // top+gelu_epilogues and top+fused_gelu_backward, reports/reference/gpu-nvidia-h100-80gb-hbm3). Elsewhere
    // the GEMM with its bias, then GELU.
    const auto gemms = linear_gemms("fc1", x.size(0), x.size(1), w.size(0));
    const int64_t f = table_algorithm(table, gemms[0], "gelu_aux_bias", x.scalar_type());
    auto [h, pre] = (x.is_cuda() && gelu_epilogues_built()) || f >= 0  // a table's algorithm off CUDA: refused
                        ? linear_gelu_aux(x.contiguous(), w.contiguous(), b.contiguous(), static_cast<int>(f))
                        : linear_gelu_aux_reference(x, w, b);
    ctx->save_for_backward({x, w, pre});
    ctx->saved_data["slab"] = slab;
    ctx->saved_data["dx"] = table_algorithm(table, gemms[1], "", x.scalar_type());
    ctx->saved_data["dw"] = table_algorithm(table, gemms[2], "", x.scalar_type());
    return h;
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grad) {
    const auto saved = ctx->get_saved_variables();
    const at::Tensor &x = saved[0], &w = saved[1], &pre = saved[2];
    auto [d_pre, d_bias] = bias_gelu_backward(grad[0].contiguous(), pre, ctx->saved_data["slab"].toInt());
    const auto gemms = linear_gemms("fc1", x.size(0), x.size(1), w.size(0));
    const at::Tensor dx = gemm_or_aten(gemms[1], d_pre, w, ctx->saved_data["dx"].toInt(), [&] { return d_pre.mm(w); });
    const at::Tensor dw =
        gemm_or_aten(gemms[2], d_pre, x, ctx->saved_data["dw"].toInt(), [&] { return d_pre.t().mm(x); });
    return {dx, dw, d_bias, at::Tensor(), at::Tensor()};
  }
};

}  // namespace

std::pair<at::Tensor, at::Tensor> bias_gelu_backward_reference(const at::Tensor& grad, const at::Tensor& pre) {
  check_gelu_args(grad, pre);
  at::Tensor d_pre = at::gelu_backward(grad, pre, "tanh");
  return {d_pre, d_pre.sum(0, /*keepdim=*/false, at::kFloat).to(pre.scalar_type())};
}

std::pair<at::Tensor, at::Tensor> bias_gelu_backward(const at::Tensor& grad, const at::Tensor& pre, int64_t slab) {
  check_gelu_args(grad, pre);
  return pre.is_cuda() ? bias_gelu_backward_cuda(grad, pre, slab) : bias_gelu_backward_reference(grad, pre);
}

at::Tensor linear_bias_gelu(const at::Tensor& x, const at::Tensor& w, const at::Tensor& b, int64_t slab,
                            const GemmAlgorithms& table) {
  TORCH_CHECK(x.dim() == 2 && w.dim() == 2 && b.dim() == 1 && x.size(1) == w.size(1) && b.size(0) == w.size(0),
              "linear_bias_gelu: x (N, C), w (F, C), b (F), got ", x.sizes(), ", ", w.sizes(), ", ", b.sizes());
  return LinearBiasGelu::apply(cast_as_autocast(x), cast_as_autocast(w), cast_as_autocast(b), slab, table);
}

}  // namespace gpt2::kernels
