// defines: Fp8, quantize_fp8, dequantize_fp8, fp8_linear, fp8_linear_reference — issue 50's FP8 linear layer:
//          x·wᵀ + b through at::_scaled_mm with dynamic per-tensor scales (each operand's own amax), x and w in
//          e4m3, the incoming gradient in e5m2 (docs/variants.md: FP8).
#pragma once
#include <ATen/core/Tensor.h>

#include <optional>

namespace gpt2::kernels {

// A tensor scaled into an FP8 format's range by its own amax and cast: t ≈ data (as fp32) × inverse_scale.
struct Fp8 {
  at::Tensor data;           // t × (the format's largest value / amax(t)), in the format
  at::Tensor inverse_scale;  // amax(t) / the format's largest value: fp32, one element (at::_scaled_mm's scale)
  at::Tensor transposed;     // data's transpose, (K, N) contiguous, where asked for: _scaled_mm's other layout
};
// format: at::kFloat8_e4m3fn or at::kFloat8_e5m2; a tensor of zeros quantizes to zeros. `transposed` (t 2-D)
// also makes the transpose: on CUDA, where fp8_both_packable, in one pass with data (quantize_fp8_both_cuda).
Fp8 quantize_fp8(const at::Tensor& t, at::ScalarType format, bool transposed = false);
at::Tensor dequantize_fp8(const Fp8& q);  // fp32
double fp8_largest(at::ScalarType format);  // 448 for e4m3, 57344 for e5m2; throws for any other format
// The same values by ATen ops alone: the amax, a divide into FP8, a transposed copy.
Fp8 quantize_fp8_reference(const at::Tensor& t, at::ScalarType format, bool transposed = false);

// Whether the one-pass kernel takes t: contiguous (N, K) fp32, bf16 or fp16, N a multiple of 16, K of 16 bytes'
// elements, 16-byte aligned.
bool fp8_both_packable(const at::Tensor& t);
// quantize_fp8 of t (N, K, not empty) in both layouts, its amax given (one fp32 element on t's device): the
// inverse scale and the row-major bits quantize_fp8_reference's make (up to the last bit of the scale's division)
// and their transpose, in one launch. A build without CUDA throws (kernels/no_cuda.cpp).
Fp8 quantize_fp8_both_cuda(const at::Tensor& t, const at::Tensor& amax, at::ScalarType format);

// The RecordFunction scope of FP8's own work (each quantization, the layouts _scaled_mm needs): the breakdown's
// fp8_scaling, wherever it runs (bench/measure/profiler.h: own_scope).
inline constexpr const char* kFp8ScalingRecord = "gpt2bench::fp8_scaling";

// Each of fp8_linear's three products: its operands' formats and whether _scaled_mm accumulates fast (fewer
// promotions of the tensor cores' partial sums into fp32). One table, so that `gpt2bench kernels` times the
// products as the layer runs them (bench/commands/gemm_bench.h).
struct Fp8Product {
  at::ScalarType a, b;
  bool fast_accum;
};
inline constexpr Fp8Product kFp8Forward{at::kFloat8_e4m3fn, at::kFloat8_e4m3fn, true};     // x · wᵀ
inline constexpr Fp8Product kFp8InputGrad{at::kFloat8_e5m2, at::kFloat8_e4m3fn, false};   // dy · w
inline constexpr Fp8Product kFp8WeightGrad{at::kFloat8_e5m2, at::kFloat8_e4m3fn, false};  // dyᵀ · x

// a (N, K) · b (K, M) through at::_scaled_mm, in `out`: a row-major, b_data column-major (a row-major (M, K)
// tensor's transpose); anything else is copied into those layouts. `bias` goes into the GEMM's epilogue.
at::Tensor fp8_scaled_mm(const Fp8& a, const at::Tensor& b_data, const at::Tensor& b_inverse_scale,
                         at::ScalarType out, const std::optional<at::Tensor>& bias = {}, bool fast_accum = false);

// a (M, K) · b (K, N), any strides, quantized as `p` says into the layouts _scaled_mm takes (a row-major, b's
// data (N, K) row-major), and their product in `out`: a product of fp8_linear's with its scaling apart, as
// `gpt2bench kernels` times it.
struct Fp8Operands {
  Fp8 a, b;
};
Fp8Operands quantize_fp8_operands(const at::Tensor& a, const at::Tensor& b, const Fp8Product& p);
at::Tensor fp8_product(const Fp8Operands& q, at::ScalarType out, bool fast_accum);

// x (N, K) · wᵀ (w: M, K) + b (M) in x's dtype (the autocast dtype under autocast), differentiable in all three.
// Forward: x and w in e4m3 (3 mantissa bits: the precision forward values need). Backward: the gradient in e5m2
// (the range gradients need), multiplied with the forward's e4m3 x and w. On CUDA every dimension must be a
// multiple of 16.
at::Tensor fp8_linear(const at::Tensor& x, const at::Tensor& w, const std::optional<at::Tensor>& b);

// What fp8_linear is tested against: x and w quantized and dequantized, then an fp32 matmul; autograd's backward
// through it passes the gradient on unquantized (the quantization as identity).
at::Tensor fp8_linear_reference(const at::Tensor& x, const at::Tensor& w, const std::optional<at::Tensor>& b);

}  // namespace gpt2::kernels
