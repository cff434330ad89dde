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

// x (N, K) · wᵀ (w: M, K) + b (M) in x's dtype (the autocast dtype under autocast), differentiable in all three.
// Forward: x and w in e4m3 (3 mantissa bits: the precision forward values need). Backward: the gradient in e5m2
// (the range gradients need), multiplied with the forward's e4m3 x and w. On CUDA every dimension must be a
// multiple of 16.
at::Tensor fp8_linear(const at::Tensor& x, const at::Tensor& w, const std::optional<at::Tensor>& b);

// What fp8_linear is tested against: x and w quantized and dequantized, then an fp32 matmul; autograd's backward
// through it passes the gradient on unquantized (the quantization as identity).
at::Tensor fp8_linear_reference(const at::Tensor& x, const at::Tensor& w, const std::optional<at::Tensor>& b);

}  // namespace gpt2::kernels
