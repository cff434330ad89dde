// defines: LtGemm, fc1_forward_gemm, fc2_dgrad_gemm — how gelu_epilogues' two GEMMs are described to cuBLASLt
//          (kernels/cuda/gelu_epilogues.cpp), as plain numbers, so that the CPU tests can run the same description
//          through a column-major GEMM of their own and check it against the row-major products it stands for.
//          No libtorch here.
//
// cuBLASLt is column-major: a row-major (R × C) tensor is its (C × R) matrix with leading dimension C. So the
// row-major out = x·wᵀ (N × F) is computed as outᵀ (F × N) = w·xᵀ, with F the rows of D (those of the bias, of
// its gradient and of the epilogue's auxiliary pre-activation) and N, the tokens, its columns.
#pragma once
#include <cstdint>

namespace gpt2::kernels {

// D (m × n, ld ldd) = op(A) · B: A is stored (m × k, ld lda), or (k × m, ld lda) and read transposed; B is
// stored (k × n, ld ldb).
struct LtGemm {
  int64_t m, n, k;
  bool a_transposed;
  int64_t lda, ldb, ldd;
};

// fc1 forward, out (N × F) = x (N × C) · wᵀ, w (F × C): A = w, stored (C × F) column-major, read transposed;
// B = x, (C × N); D = out, (F × N).
inline LtGemm fc1_forward_gemm(int64_t N, int64_t C, int64_t F) { return {F, N, C, true, C, C, F}; }

// fc2's input gradient, d (N × F) = g (N × C) · w2, w2 (C × F): A = w2, stored (F × C) column-major as it is;
// B = g, (C × N); D = d, (F × N).
inline LtGemm fc2_dgrad_gemm(int64_t N, int64_t C, int64_t F) { return {F, N, C, false, F, C, F}; }

}  // namespace gpt2::kernels
