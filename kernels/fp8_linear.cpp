// The FP8 linear layer: per-tensor quantization, the autograd function over at::_scaled_mm, the fp32 reference.
#include "kernels/fp8_linear.h"

#include <ATen/ATen.h>
#include <ATen/record_function.h>
#include <torch/autograd.h>

#include <cstdint>

#include "kernels/autocast.h"

namespace gpt2::kernels {
namespace {

// |t|'s largest element in fp32, one element on t's device: on CUDA one reduction reading t as it is (on a CPU
// ATen copies t into fp32 first)
at::Tensor abs_max(const at::Tensor& t) { return at::linalg_vector_norm(t, INFINITY, std::nullopt, false, at::kFloat); }

struct Fp8Linear : torch::autograd::Function<Fp8Linear> {
  // `b` is read only where `bias` (autograd takes no undefined tensor as an input).
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& x, const at::Tensor& w,
                            const at::Tensor& b, bool bias) {
    // Each operand also transposed, in the pass that quantizes it: the backward's layouts, saved in place of
    // the forward's (a byte an element, not two).
    const Fp8 qx = quantize_fp8(x, kFp8Forward.a, true), qw = quantize_fp8(w, kFp8Forward.b, true);
    ctx->save_for_backward({qx.transposed, qx.inverse_scale, qw.transposed, qw.inverse_scale});
    ctx->saved_data["x_dtype"] = static_cast<int64_t>(x.scalar_type());
    ctx->saved_data["w_dtype"] = static_cast<int64_t>(w.scalar_type());
    ctx->saved_data["bias"] = bias;
    // The bias in the epilogue where _scaled_mm takes one (a bf16 or fp16 output); fast accumulation for the
    // forward alone (kFp8Forward), as torchao's default: the gradients' sums keep full precision.
    const bool epilogue = bias && (x.scalar_type() == at::kBFloat16 || x.scalar_type() == at::kHalf);
    const auto bias_in_epilogue = epilogue ? std::optional(b.to(x.scalar_type())) : std::nullopt;
    at::Tensor y =
        fp8_scaled_mm(qx, qw.data.t(), qw.inverse_scale, x.scalar_type(), bias_in_epilogue, kFp8Forward.fast_accum);
    return bias && !epilogue ? y.add_(b.to(y.scalar_type())) : y;
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grad) {
    const auto s = ctx->get_saved_variables();
    const at::Tensor &x_t = s[0], &x_inverse_scale = s[1], &w_t = s[2], &w_inverse_scale = s[3];
    static_assert(kFp8InputGrad.a == kFp8WeightGrad.a && kFp8InputGrad.b == kFp8Forward.b &&
                      kFp8WeightGrad.b == kFp8Forward.a, "fp8_linear: the backward reuses the forward's operands");
    const Fp8 qg = quantize_fp8(grad[0].contiguous(), kFp8InputGrad.a, true);
    const auto x_dtype = static_cast<at::ScalarType>(ctx->saved_data["x_dtype"].toInt());
    const auto w_dtype = static_cast<at::ScalarType>(ctx->saved_data["w_dtype"].toInt());
    const at::Tensor d_x =  // (N, M)·(M, K)
        fp8_scaled_mm(qg, w_t.t(), w_inverse_scale, x_dtype, std::nullopt, kFp8InputGrad.fast_accum);
    const at::Tensor d_w =  // (M, N)·(N, K)
        fp8_scaled_mm({qg.transposed, qg.inverse_scale, {}}, x_t.t(), x_inverse_scale, w_dtype, std::nullopt,
                      kFp8WeightGrad.fast_accum);
    const bool bias = ctx->saved_data["bias"].toBool();  // its gradient in one launch: summed in fp32, rounded once
    return {d_x, d_w, bias ? grad[0].sum(0, /*keepdim=*/false, w_dtype) : at::Tensor(), at::Tensor()};
  }
};

void check_args(const at::Tensor& x, const at::Tensor& w, const std::optional<at::Tensor>& b) {
  TORCH_CHECK(x.dim() == 2 && w.dim() == 2 && x.size(1) == w.size(1) && (!b || (b->dim() == 1 && b->size(0) == w.size(0))),
              "fp8_linear: x (N, K), w (M, K), b (M), got ", x.sizes(), ", ", w.sizes(), b ? ", " : "",
              b ? b->sizes() : at::IntArrayRef{});
}

}  // namespace

at::Tensor fp8_scaled_mm(const Fp8& a, const at::Tensor& b_data, const at::Tensor& b_inverse_scale,
                         at::ScalarType out, const std::optional<at::Tensor>& bias, bool fast_accum) {
  at::Tensor rows, cols;
  {  // in Fp8Linear nothing is copied: quantize_fp8 made both layouts
    RECORD_FUNCTION(kFp8ScalingRecord, c10::ArrayRef<const c10::IValue>{});
    rows = a.data.contiguous();
    cols = b_data.t().is_contiguous() ? b_data : b_data.t().contiguous().t();
  }
  return at::_scaled_mm(rows, cols, a.inverse_scale, b_inverse_scale, bias, {}, out, fast_accum);
}

Fp8Operands quantize_fp8_operands(const at::Tensor& a, const at::Tensor& b, const Fp8Product& p) {
  TORCH_CHECK(a.dim() == 2 && b.dim() == 2 && a.size(1) == b.size(0), "quantize_fp8_operands: a (M, K) and b (K, N) "
              "expected, got ", a.sizes(), " and ", b.sizes());
  return {quantize_fp8(a.contiguous(), p.a), quantize_fp8(b.t().contiguous(), p.b)};
}

at::Tensor fp8_product(const Fp8Operands& q, at::ScalarType out, bool fast_accum) {
  return fp8_scaled_mm(q.a, q.b.data.t(), q.b.inverse_scale, out, std::nullopt, fast_accum);
}

double fp8_largest(at::ScalarType format) {
  TORCH_CHECK(format == at::kFloat8_e4m3fn || format == at::kFloat8_e5m2,
              "quantize_fp8: format must be Float8_e4m3fn or Float8_e5m2, got ", format);
  return format == at::kFloat8_e4m3fn ? 448.0 : 57344.0;
}

Fp8 quantize_fp8_reference(const at::Tensor& t, at::ScalarType format, bool transposed) {
  TORCH_CHECK(!transposed || t.dim() == 2, "quantize_fp8: a transpose of a 2-D tensor only, got ", t.sizes());
  const double top = fp8_largest(format);
  RECORD_FUNCTION(kFp8ScalingRecord, c10::ArrayRef<const c10::IValue>{});
  // Four launches on a GPU: the amax (exact, no |t| in memory), two scalar ops making the inverse scale, and t
  // divided by it in fp32 (the 1-element view promotes it, where a 0-dim tensor would not: fp16's range would
  // flush a small gradient's scale), cast to FP8 as it is stored. t / inverse_scale <= top: no clamp.
  const at::Tensor inverse_scale =
      abs_max(t).clamp_min_(1e-12).div_(top);
  at::Tensor data = at::empty_like(t, t.options().dtype(format));
  at::div_out(data, t, inverse_scale.view({1}));
  return {data, inverse_scale, transposed ? data.t().contiguous() : at::Tensor()};
}

bool fp8_both_packable(const at::Tensor& t) {
  const auto type = t.scalar_type();
  if (t.dim() != 2 || !t.is_contiguous() || (type != at::kFloat && type != at::kBFloat16 && type != at::kHalf))
    return false;
  const int64_t pack = 16 / static_cast<int64_t>(t.element_size());
  return t.size(0) % 16 == 0 && t.size(1) % pack == 0 && reinterpret_cast<uintptr_t>(t.data_ptr()) % 16 == 0;
}

Fp8 quantize_fp8(const at::Tensor& t, at::ScalarType format, bool transposed) {
  if (!transposed || !t.is_cuda() || t.numel() == 0 || !fp8_both_packable(t))
    return quantize_fp8_reference(t, format, transposed);
  RECORD_FUNCTION(kFp8ScalingRecord, c10::ArrayRef<const c10::IValue>{});
  // two launches: the amax, then one pass making the inverse scale from it and writing both layouts
  return quantize_fp8_both_cuda(t, abs_max(t), format);
}

at::Tensor dequantize_fp8(const Fp8& q) { return q.data.to(at::kFloat) * q.inverse_scale; }

at::Tensor fp8_linear(const at::Tensor& x, const at::Tensor& w, const std::optional<at::Tensor>& b) {
  check_args(x, w, b);
  return Fp8Linear::apply(cast_as_autocast(x), cast_as_autocast(w), b ? cast_as_autocast(*b) : at::empty({0}), b.has_value());
}

at::Tensor fp8_linear_reference(const at::Tensor& x, const at::Tensor& w, const std::optional<at::Tensor>& b) {
  check_args(x, w, b);
  auto through = [](const at::Tensor& t) {  // the quantized value forward, the identity backward
    const at::Tensor f = t.to(at::kFloat);
    return f + (dequantize_fp8(quantize_fp8(t.detach(), at::kFloat8_e4m3fn)) - f).detach();
  };
  const at::Tensor y = at::matmul(through(x), through(w).t());
  return b ? y + b->to(at::kFloat) : y;
}

}  // namespace gpt2::kernels
