// defines: GemmAlgorithms, lt_linear — a linear layer whose three GEMMs (forward, input and weight gradient) each run
//          the cuBLASLt algorithm a table names for its shape, ATen's own call where it names none: the
//          gemm_algorithms extra, whose table the run fills by timing (docs/variants.md: Measured choices).
#pragma once
#include <ATen/core/Tensor.h>

#include <functional>
#include <map>
#include <string>

#include "kernels/gemm_layout.h"

namespace gpt2::kernels {

// A GEMM's key (kernels/gemm_layout.h's gemm_key) -> the place of its algorithm in cuBLASLt's heuristic list.
using GemmAlgorithms = std::map<std::string, int>;

// The place the table names for g with that epilogue ("": none) in that dtype; -1 where it names none.
int64_t table_algorithm(const GemmAlgorithms& table, const StepGemm& g, const std::string& epilogue,
                        at::ScalarType dtype);
// op(a)·op(b) of g, a new tensor, by the algorithm at `index` (lt_gemm), or by `aten()` where index is -1.
at::Tensor gemm_or_aten(const StepGemm& g, const at::Tensor& a, const at::Tensor& b, int64_t index,
                        const std::function<at::Tensor()>& aten);

// x (N × in) · wᵀ (w: out × in) + b (out; undefined: none), differentiable in all three; under autocast in its
// dtype, as at::linear would. A GEMM the table names runs that algorithm (CUDA builds with cuBLASLt), the bias in
// the forward's epilogue; the others are ATen's addmm and mm as at::linear's autograd calls them, and the bias's
// gradient is ATen's column sum: with an empty table the same ops as at::linear, forward and backward.
at::Tensor lt_linear(const at::Tensor& x, const at::Tensor& w, const at::Tensor& b, const GemmAlgorithms& table);

}  // namespace gpt2::kernels
