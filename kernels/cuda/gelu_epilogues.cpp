// The gelu_epilogues variant's two GEMMs through cuBLASLt (kernels/gelu_epilogues.h): fc1's forward with
// CUBLASLT_EPILOGUE_GELU_AUX_BIAS, fc2's input gradient with CUBLASLT_EPILOGUE_DGELU_BGRAD, each described by
// kernels/gemm_layout.h and run by lt_gemm (kernels/gemm_survey.h) at a place of cuBLASLt's heuristic list (the
// first unless the gemm_algorithms table names another). cuBLASLt's GELU is the tanh approximation, the MLP's.
// Built when CMake found the cuBLASLt library ATen itself loads (GPT2_HAVE_CUBLASLT); else the functions say so.
#include <ATen/core/Tensor.h>
#include <c10/util/Exception.h>

#include "kernels/gelu_epilogues.h"
#include "kernels/gemm_layout.h"
#include "kernels/gemm_survey.h"

#if GPT2_HAVE_CUBLASLT
#include <ATen/ops/empty.h>

namespace gpt2::kernels {

bool gelu_epilogues_built() { return true; }

std::pair<at::Tensor, at::Tensor> linear_gelu_aux_cuda(const at::Tensor& x, const at::Tensor& w, const at::Tensor& b,
                                                       int algorithm) {
  TORCH_CHECK(x.is_cuda() && w.is_cuda() && b.is_cuda(), "linear_gelu_aux_cuda: CUDA tensors expected");
  const int64_t N = x.size(0), C = x.size(1), F = w.size(0);
  at::Tensor out = at::empty({N, F}, x.options()), pre = at::empty({N, F}, x.options());
  if (N == 0) return {out, pre};
  lt_gemm(fc1_forward_gemm(N, C, F), x, w, out, {LtEpilogue::kGeluAuxBias, b, pre}, algorithm);
  return {out, pre};
}

std::pair<at::Tensor, at::Tensor> matmul_dgelu_bgrad_cuda(const at::Tensor& g, const at::Tensor& w,
                                                          const at::Tensor& pre) {
  TORCH_CHECK(g.is_cuda() && w.is_cuda() && pre.is_cuda(), "matmul_dgelu_bgrad_cuda: CUDA tensors expected");
  const int64_t N = g.size(0), C = g.size(1), F = w.size(1);
  at::Tensor d_pre = at::empty({N, F}, g.options()), d_bias = at::empty({F}, g.options());
  if (N == 0) return {d_pre, d_bias.zero_()};
  lt_gemm(fc2_dgrad_gemm(N, C, F), g, w, d_pre, {LtEpilogue::kDGeluBGrad, d_bias, pre}, 0);
  return {d_pre, d_bias};
}

}  // namespace gpt2::kernels

#else  // no cuBLASLt library found at configure time

namespace gpt2::kernels {

bool gelu_epilogues_built() { return false; }

std::pair<at::Tensor, at::Tensor> linear_gelu_aux_cuda(const at::Tensor&, const at::Tensor&, const at::Tensor&, int) {
  TORCH_CHECK(false, "linear_gelu_aux_cuda: this build found no cuBLASLt library (CMake: CUBLASLT_LIBRARY)");
}

std::pair<at::Tensor, at::Tensor> matmul_dgelu_bgrad_cuda(const at::Tensor&, const at::Tensor&, const at::Tensor&) {
  TORCH_CHECK(false, "matmul_dgelu_bgrad_cuda: this build found no cuBLASLt library (CMake: CUBLASLT_LIBRARY)");
}

}  // namespace gpt2::kernels
#endif
