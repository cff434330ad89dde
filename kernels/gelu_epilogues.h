// defines: the MLP (fc1, GELU(tanh), fc2) with fc1's elementwise work in cuBLASLt's GEMM epilogues, forward
//          and backward — the gelu_epilogues variant:
//          - forward: fc1's GEMM adds the bias, applies GELU and also writes the pre-activation it applied it
//            to (CUBLASLT_EPILOGUE_GELU_AUX_BIAS): no GELU kernel, and the backward has the pre-activation;
//          - backward: fc2's input-gradient GEMM (grad · W2) multiplies its result by GELU'(pre) and sums the
//            rows into fc1's bias gradient on its way out (CUBLASLT_EPILOGUE_DGELU_BGRAD): the (N × 4C)
//            gradient of the activation is never written, no gelu_backward kernel reads it, no reduction
//            reads d(pre) again for the bias.
//          What llm.c's and apex's fused MLPs do, and what ATen does not (its _addmm_activation keeps no
//          pre-activation, so fuse_bias_gelu's backward recomputes it with a GEMM; fused_gelu_backward keeps it
//          but runs GELU and its backward as passes of their own). CUDA through cuBLASLt; elsewhere (and as the
//          tests' reference) the same arithmetic in ATen ops.
#pragma once
#include <ATen/core/Tensor.h>

#include <utility>

namespace gpt2::kernels {

// Whether this build calls cuBLASLt (a CUDA build that found the library): else the _cuda functions below throw.
bool gelu_epilogues_built();

// (GELU_tanh(x·wᵀ + b), x·wᵀ + b) for x (N × C), w (F × C), b (F), one dtype, contiguous. On CUDA by the
// `algorithm`th of cuBLASLt's heuristic list for it (-1: the first); the reference runs none, and refuses one.
std::pair<at::Tensor, at::Tensor> linear_gelu_aux(const at::Tensor& x, const at::Tensor& w, const at::Tensor& b,
                                                  int algorithm = -1);
std::pair<at::Tensor, at::Tensor> linear_gelu_aux_reference(const at::Tensor& x, const at::Tensor& w,
                                                            const at::Tensor& b);
std::pair<at::Tensor, at::Tensor> linear_gelu_aux_cuda(const at::Tensor& x, const at::Tensor& w, const at::Tensor& b,
                                                       int algorithm = 0);

// (d_pre = (g·w) ⊙ GELU_tanh'(pre), its sum over the N rows) for g (N × C), w (C × F), pre (N × F): fc2's
// input gradient carried through GELU, and fc1's bias gradient. One dtype, contiguous.
std::pair<at::Tensor, at::Tensor> matmul_dgelu_bgrad(const at::Tensor& g, const at::Tensor& w, const at::Tensor& pre);
std::pair<at::Tensor, at::Tensor> matmul_dgelu_bgrad_reference(const at::Tensor& g, const at::Tensor& w,
                                                               const at::Tensor& pre);
std::pair<at::Tensor, at::Tensor> matmul_dgelu_bgrad_cuda(const at::Tensor& g, const at::Tensor& w,
                                                          const at::Tensor& pre);

// fc2(GELU_tanh(fc1(x))) for x (N × C), w1 (F × C), b1 (F), w2 (C × F), b2 (C), differentiable in all five,
// through the two functions above. Under autocast it computes in the autocast dtype, as at::linear would.
at::Tensor mlp_gelu_epilogues(const at::Tensor& x, const at::Tensor& w1, const at::Tensor& b1, const at::Tensor& w2,
                              const at::Tensor& b2);

}  // namespace gpt2::kernels
