// lt_linear (kernels/lt_linear.h): the table's algorithms through lt_gemm (kernels/gemm_survey.h), ATen elsewhere.
#include "kernels/lt_linear.h"

#include <ATen/ops/addmm.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/mm.h>
#include <c10/core/ScalarType.h>
#include <torch/autograd.h>

#include "kernels/autocast.h"
#include "kernels/gemm_layout.h"
#include "kernels/gemm_survey.h"

namespace gpt2::kernels {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

struct LtLinearFn : torch::autograd::Function<LtLinearFn> {
  // b: the bias, or an empty tensor where `biased` is false (an undefined input is not a variable)
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, const at::Tensor& w, const at::Tensor& b,
                            bool biased, const GemmAlgorithms& table) {
    const auto gemms = linear_gemms("linear", x.size(0), x.size(1), w.size(0));
    const auto t = x.scalar_type();
    ctx->save_for_backward({x, w});
    ctx->saved_data["dx"] = table_algorithm(table, gemms[1], "", t);
    ctx->saved_data["dw"] = table_algorithm(table, gemms[2], "", t);
    ctx->saved_data["bias"] = biased;
    const int64_t f = table_algorithm(table, gemms[0], biased ? "bias" : "", t);
    if (!biased) return gemm_or_aten(gemms[0], x, w, f, [&] { return at::mm(x, w.t()); });
    if (f < 0) return at::addmm(b, x, w.t());
    at::Tensor y = at::empty({x.size(0), w.size(0)}, x.options());
    lt_gemm(gemms[0], x, w, y, {LtEpilogue::kBias, b, {}}, static_cast<int>(f));
    return y;
  }
  static variable_list backward(AutogradContext* ctx, variable_list grad) {
    const auto saved = ctx->get_saved_variables();
    const at::Tensor &x = saved[0], &w = saved[1], g = grad[0].contiguous();
    const auto gemms = linear_gemms("linear", x.size(0), x.size(1), w.size(0));
    const at::Tensor dx = gemm_or_aten(gemms[1], g, w, ctx->saved_data["dx"].toInt(), [&] { return g.mm(w); });
    const at::Tensor dw = gemm_or_aten(gemms[2], g, x, ctx->saved_data["dw"].toInt(), [&] { return g.t().mm(x); });
    return {dx, dw, ctx->saved_data["bias"].toBool() ? g.sum(0) : at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

}  // namespace

int64_t table_algorithm(const GemmAlgorithms& table, const StepGemm& g, const std::string& epilogue,
                        at::ScalarType dtype) {
  const auto it = table.find(gemm_key(g, epilogue, c10::toString(dtype)));
  return it == table.end() ? -1 : it->second;
}

at::Tensor gemm_or_aten(const StepGemm& g, const at::Tensor& a, const at::Tensor& b, int64_t index,
                        const std::function<at::Tensor()>& aten) {
  if (index < 0) return aten();
  at::Tensor out = at::empty({g.M, g.N}, a.options());
  lt_gemm(g, a, b, out, {}, static_cast<int>(index));
  return out;
}

at::Tensor lt_linear(const at::Tensor& x, const at::Tensor& w, const at::Tensor& b, const GemmAlgorithms& table) {
  TORCH_CHECK(x.dim() == 2 && w.dim() == 2 && x.size(1) == w.size(1) && (!b.defined() || b.numel() == w.size(0)),
              "lt_linear: x (N × in), w (out × in) and b (out) expected, got x ", x.sizes(), ", w ", w.sizes(),
              b.defined() ? ", b " + c10::str(b.sizes()) : std::string());
  const at::Tensor bias = b.defined() ? cast_as_autocast(b) : at::empty({0}, w.options());
  return LtLinearFn::apply(cast_as_autocast(x).contiguous(), cast_as_autocast(w).contiguous(), bias, b.defined(),
                           table);
}

}  // namespace gpt2::kernels
