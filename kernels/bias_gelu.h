// defines: the Linear + bias + GELU(tanh) of the MLP with our fused backward: the forward keeps the
//          pre-activation (on CUDA one GEMM that adds the bias, applies GELU and writes the pre-activation beside,
//          cuBLASLt's GELU_AUX_BIAS epilogue; elsewhere the GEMM with the bias, then GELU), the backward turns the incoming gradient into
//          d(pre) = grad · GELU'(pre) and sums it over the rows into d(bias) in one pass (a CUDA kernel on
//          GPUs, ATen ops elsewhere), where the unfused backward writes d(pre) in one kernel and reads it
//          all again to reduce the bias gradient; and where fuse_bias_gelu's epilogue GEMM, which keeps no
//          pre-activation, pays a whole extra GEMM in its backward to recompute it.
#pragma once
#include <ATen/core/Tensor.h>

#include <map>
#include <string>
#include <utility>

namespace gpt2::kernels {

// (d_pre in grad's dtype, d_bias (F) in pre's dtype, summed in fp32) from grad and pre, both (N × F) contiguous,
// of one dtype. The CUDA kernel (`slab` rows a block) for CUDA tensors, the reference otherwise.
std::pair<at::Tensor, at::Tensor> bias_gelu_backward(const at::Tensor& grad, const at::Tensor& pre, int64_t slab = 32);
std::pair<at::Tensor, at::Tensor> bias_gelu_backward_reference(const at::Tensor& grad, const at::Tensor& pre);
// The CUDA kernel: a block walks `slab` rows of 128 packs of columns (`gpt2bench kernels` times 8 to 64).
std::pair<at::Tensor, at::Tensor> bias_gelu_backward_cuda(const at::Tensor& grad, const at::Tensor& pre,
                                                          int64_t slab = 32);

// GELU_tanh(x·wᵀ + b) for x (N × C), w (F × C), b (F), differentiable in all three, its backward through
// bias_gelu_backward (its kernel at `slab` rows a block). Under autocast it computes in the autocast dtype, as
// at::linear would. Its GEMMs (the forward's GELU_AUX_BIAS, the input and weight gradients') by the cuBLASLt
// algorithms `table` names (kernels/lt_linear.h), else the forward's heuristic first and ATen's mm.
at::Tensor linear_bias_gelu(const at::Tensor& x, const at::Tensor& w, const at::Tensor& b, int64_t slab = 32,
                            const std::map<std::string, int>& table = {});

}  // namespace gpt2::kernels
