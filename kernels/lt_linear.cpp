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

// op(a)·op(b) (+ bias) by the algorithm at `index`, or by ATen (`aten`) where the table names none (-1).
template <class Aten>
at::Tensor gemm(const StepGemm& g, const at::Tensor& a, const at::Tensor& b, const at::Tensor& bias, int64_t index,
                Aten&& aten) {
  if (index < 0) return aten();
  at::Tensor out = at::empty({g.M, g.N}, a.options());
  lt_gemm(g, a, b, out, bias, static_cast<int>(index));
  return out;
}

struct LtLinearFn : torch::autograd::Function<LtLinearFn> {
  // b: the bias, or an empty tensor where `biased` is false (an undefined input is not a variable)
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, const at::Tensor& w, const at::Tensor& b,
                            bool biased, const GemmAlgorithms& table) {
    const auto gemms = linear_gemms("linear", x.size(0), x.size(1), w.size(0));
    const std::string dtype = c10::toString(x.scalar_type());
    auto index = [&](const StepGemm& g, bool bias) -> int64_t {
      const auto it = table.find(gemm_key(g, bias, dtype));
      return it == table.end() ? -1 : it->second;
    };
    ctx->save_for_backward({x, w});
    ctx->saved_data["dx"] = index(gemms[1], false), ctx->saved_data["dw"] = index(gemms[2], false);
    ctx->saved_data["bias"] = biased;
    return gemm(gemms[0], x, w, biased ? b : at::Tensor(), index(gemms[0], biased),
                [&] { return biased ? at::addmm(b, x, w.t()) : at::mm(x, w.t()); });
  }
  static variable_list backward(AutogradContext* ctx, variable_list grad) {
    const auto saved = ctx->get_saved_variables();
    const at::Tensor &x = saved[0], &w = saved[1], g = grad[0].contiguous();
    const auto gemms = linear_gemms("linear", x.size(0), x.size(1), w.size(0));
    const at::Tensor dx = gemm(gemms[1], g, w, {}, ctx->saved_data["dx"].toInt(), [&] { return g.mm(w); });
    const at::Tensor dw = gemm(gemms[2], g, x, {}, ctx->saved_data["dw"].toInt(), [&] { return g.t().mm(x); });
    return {dx, dw, ctx->saved_data["bias"].toBool() ? g.sum(0) : at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

}  // namespace

at::Tensor lt_linear(const at::Tensor& x, const at::Tensor& w, const at::Tensor& b, const GemmAlgorithms& table) {
  TORCH_CHECK(x.dim() == 2 && w.dim() == 2 && x.size(1) == w.size(1) && (!b.defined() || b.numel() == w.size(0)),
              "lt_linear: x (N × in), w (out × in) and b (out) expected, got x ", x.sizes(), ", w ", w.sizes(),
              b.defined() ? ", b " + c10::str(b.sizes()) : std::string());
  const at::Tensor bias = b.defined() ? cast_as_autocast(b) : at::empty({0}, w.options());
  return LtLinearFn::apply(cast_as_autocast(x).contiguous(), cast_as_autocast(w).contiguous(), bias, b.defined(),
                           table);
}

}  // namespace gpt2::kernels
