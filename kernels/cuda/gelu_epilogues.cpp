// The gelu_epilogues variant's two GEMMs through cuBLASLt (kernels/gelu_epilogues.h): fc1's forward with
// CUBLASLT_EPILOGUE_GELU_AUX_BIAS, fc2's input gradient with CUBLASLT_EPILOGUE_DGELU_BGRAD, each described by
// kernels/gemm_layout.h (the CPU tests run those descriptions through a column-major GEMM of their own).
// cuBLASLt's GELU is the tanh approximation, the MLP's; the handle and stream are ATen's current ones, the
// workspace comes from the caching allocator (graph-capture safe: a captured step takes it from its pool).
// Built when CMake found the cuBLASLt library ATen itself loads (GPT2_HAVE_CUBLASLT); else the functions say so.
#include <ATen/core/Tensor.h>
#include <c10/util/Exception.h>

#include "kernels/gelu_epilogues.h"
#include "kernels/gemm_layout.h"

#if GPT2_HAVE_CUBLASLT
#include <ATen/Context.h>
#include <ATen/cuda/CUDAContext.h>
#include <ATen/cuda/Exceptions.h>
#include <ATen/ops/empty.h>
#include <c10/cuda/CUDAGuard.h>
#include <cublasLt.h>

#include <cstdint>

#include "kernels/cuda/lt.h"

namespace gpt2::kernels {
namespace {

using namespace lt;  // NOLINT: the shared cuBLASLt helpers (kernels/cuda/lt.h)

// One GEMM as described (kernels/gemm_layout.h), with its epilogue: `vec` the bias (m) or where its
// gradient goes, `aux` the pre-activation (m × n, ld m).
struct Gemm {
  LtLayout shape;
  const void* a;
  const void* b;
  void* d;
  cublasLtEpilogue_t epilogue;
  void* vec;
  void* aux;
};

void run(const Gemm& gemm, at::ScalarType dtype, const char* what) {
  const LtLayout& g = gemm.shape;
  const cudaDataType_t t = cuda_type(dtype, what);
  const bool tf32 = dtype == at::kFloat && at::globalContext().allowTF32CuBLAS();
  MatmulDesc op;
  TORCH_CUDABLAS_CHECK(
      cublasLtMatmulDescCreate(&op.d, tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F, CUDA_R_32F));
  const cublasOperation_t ta = g.a_transposed ? CUBLAS_OP_T : CUBLAS_OP_N, tb = g.b_transposed ? CUBLAS_OP_T : CUBLAS_OP_N;
  set(op.d, CUBLASLT_MATMUL_DESC_TRANSA, ta);
  set(op.d, CUBLASLT_MATMUL_DESC_TRANSB, tb);
  set(op.d, CUBLASLT_MATMUL_DESC_EPILOGUE, gemm.epilogue);
  set(op.d, CUBLASLT_MATMUL_DESC_BIAS_POINTER, gemm.vec);
  set(op.d, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, gemm.aux);
  set(op.d, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, g.ldd);  // the pre-activation is laid out as D
  Layout a, b, d;
  TORCH_CUDABLAS_CHECK(cublasLtMatrixLayoutCreate(&a.d, t, g.a_rows, g.a_cols, g.lda));
  TORCH_CUDABLAS_CHECK(cublasLtMatrixLayoutCreate(&b.d, t, g.b_rows, g.b_cols, g.ldb));
  TORCH_CUDABLAS_CHECK(cublasLtMatrixLayoutCreate(&d.d, t, g.m, g.n, g.ldd));
  Preference pref;
  TORCH_CUDABLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref.d));
  set(pref.d, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, kWorkspaceBytes);
  set(pref.d, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, alignment(gemm.a));
  set(pref.d, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, alignment(gemm.b));
  set(pref.d, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, alignment(gemm.d));
  set(pref.d, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, alignment(gemm.d));
  const cublasLtHandle_t handle = at::cuda::getCurrentCUDABlasLtHandle();
  cublasLtMatmulHeuristicResult_t algo{};
  int found = 0;
  TORCH_CUDABLAS_CHECK(cublasLtMatmulAlgoGetHeuristic(handle, op.d, a.d, b.d, d.d, d.d, pref.d, 1, &algo, &found));
  TORCH_CHECK(found > 0, what, ": cuBLASLt has no algorithm for this epilogue at m=", g.m, " n=", g.n, " k=", g.k,
              " in ", dtype);
  const at::Tensor workspace =
      at::empty({static_cast<int64_t>(kWorkspaceBytes)}, at::TensorOptions().dtype(at::kByte).device(at::kCUDA));
  const float alpha = 1.0f, beta = 0.0f;
  TORCH_CUDABLAS_CHECK(cublasLtMatmul(handle, op.d, &alpha, gemm.a, a.d, gemm.b, b.d, &beta, gemm.d, d.d, gemm.d, d.d,
                                      &algo.algo,
                                      workspace.mutable_data_ptr(), kWorkspaceBytes,
                                      at::cuda::getCurrentCUDAStream()));
}

}  // namespace

bool gelu_epilogues_built() { return true; }

std::pair<at::Tensor, at::Tensor> linear_gelu_aux_cuda(const at::Tensor& x, const at::Tensor& w, const at::Tensor& b) {
  TORCH_CHECK(x.is_cuda() && w.is_cuda() && b.is_cuda(), "linear_gelu_aux_cuda: CUDA tensors expected");
  const c10::cuda::CUDAGuard guard(x.device());
  const int64_t N = x.size(0), C = x.size(1), F = w.size(0);
  at::Tensor out = at::empty({N, F}, x.options()), pre = at::empty({N, F}, x.options());
  if (N == 0) return {out, pre};
  run({column_major(fc1_forward_gemm(N, C, F)), w.const_data_ptr(), x.const_data_ptr(), out.mutable_data_ptr(),
       CUBLASLT_EPILOGUE_GELU_AUX_BIAS, const_cast<void*>(b.const_data_ptr()), pre.mutable_data_ptr()},
      x.scalar_type(), "linear_gelu_aux_cuda");
  return {out, pre};
}

std::pair<at::Tensor, at::Tensor> matmul_dgelu_bgrad_cuda(const at::Tensor& g, const at::Tensor& w,
                                                          const at::Tensor& pre) {
  TORCH_CHECK(g.is_cuda() && w.is_cuda() && pre.is_cuda(), "matmul_dgelu_bgrad_cuda: CUDA tensors expected");
  const c10::cuda::CUDAGuard guard(g.device());
  const int64_t N = g.size(0), C = g.size(1), F = w.size(1);
  at::Tensor d_pre = at::empty({N, F}, g.options()), d_bias = at::empty({F}, g.options());
  if (N == 0) return {d_pre, d_bias.zero_()};
  run({column_major(fc2_dgrad_gemm(N, C, F)), w.const_data_ptr(), g.const_data_ptr(), d_pre.mutable_data_ptr(),
       CUBLASLT_EPILOGUE_DGELU_BGRAD, d_bias.mutable_data_ptr(), const_cast<void*>(pre.const_data_ptr())},
      g.scalar_type(), "matmul_dgelu_bgrad_cuda");
  return {d_pre, d_bias};
}

}  // namespace gpt2::kernels

#else  // no cuBLASLt library found at configure time

namespace gpt2::kernels {

bool gelu_epilogues_built() { return false; }

std::pair<at::Tensor, at::Tensor> linear_gelu_aux_cuda(const at::Tensor&, const at::Tensor&, const at::Tensor&) {
  TORCH_CHECK(false, "linear_gelu_aux_cuda: this build found no cuBLASLt library (CMake: CUBLASLT_LIBRARY)");
}

std::pair<at::Tensor, at::Tensor> matmul_dgelu_bgrad_cuda(const at::Tensor&, const at::Tensor&, const at::Tensor&) {
  TORCH_CHECK(false, "matmul_dgelu_bgrad_cuda: this build found no cuBLASLt library (CMake: CUBLASLT_LIBRARY)");
}

}  // namespace gpt2::kernels
#endif
