// defines: StepGemm, LtLayout, column_major — a row-major matmul as it is described to cuBLASLt, which is
//          column-major, in plain numbers (kernels/cuda/gelu_epilogues.cpp, kernels/cuda/gemm_survey.cpp), so that
//          the CPU tests run the description through a column-major GEMM of their own against the row-major
//          product. No libtorch here.
#pragma once
#include <array>
#include <cstdint>
#include <string>

namespace gpt2::kernels {

// out (M × N) = op(A) · op(B), row-major: A stored (M × K), or (K × M) and read transposed; B stored (K × N), or
// (N × K) and read transposed.
struct StepGemm {
  enum Product { kForward, kInputGrad, kWeightGrad };  // x·Wᵀ, dY·W, dYᵀ·X
  std::string name;  // "fc1 forward", "fc1 dX", "fc1 dW"
  int64_t M, N, K;
  bool a_transposed, b_transposed;
  int64_t calls;  // a step: one a block, or the classifier's chunks
  Product product = kForward;
  bool in_blocks = true;  // a block's linear (fp8_linears' FP8 ones), not the LM head
  double flops() const { return 2.0 * static_cast<double>(M) * static_cast<double>(N) * static_cast<double>(K); }
};

// The three GEMMs of a linear y = x·Wᵀ (W: out × in) over `rows` tokens, named "<name> forward", "<name> dX" (dY·W)
// and "<name> dW" (dYᵀ·X).
inline std::array<StepGemm, 3> linear_gemms(const std::string& name, int64_t rows, int64_t in, int64_t out,
                                            int64_t calls = 1) {
  return {StepGemm{name + " forward", rows, out, in, false, true, calls, StepGemm::kForward},
          StepGemm{name + " dX", rows, in, out, false, false, calls, StepGemm::kInputGrad},
          StepGemm{name + " dW", out, in, rows, true, false, calls, StepGemm::kWeightGrad}};
}

// "M=8192 N=2304 K=768 NT bias BFloat16": a GEMM's shape, how A and B are read (N as stored, T transposed), its
// epilogue ("": none) and the dtype — what one algorithm is chosen for (kernels/lt_linear.h).
inline std::string gemm_key(const StepGemm& g, const std::string& epilogue, const std::string& dtype) {
  return "M=" + std::to_string(g.M) + " N=" + std::to_string(g.N) + " K=" + std::to_string(g.K) + " " +
         (g.a_transposed ? "T" : "N") + (g.b_transposed ? "T" : "N") + " " + (epilogue.empty() ? "" : epilogue + " ") +
         dtype;
}

// The row-major out (M × N) is cuBLASLt's (N × M) matrix D = op(A')·op(B'), A' the row-major B and B' the
// row-major A (outᵀ = op(B)ᵀ·op(A)ᵀ). Stored layouts as (rows, cols, leading dimension) in column-major terms; an
// epilogue's bias and auxiliary matrix follow D (m rows: the row-major output's columns).
struct LtLayout {
  int64_t m, n, k;
  bool a_transposed, b_transposed;
  int64_t a_rows, a_cols, lda, b_rows, b_cols, ldb, ldd;
};

inline LtLayout column_major(const StepGemm& g) {
  LtLayout l{g.N, g.M, g.K, g.b_transposed, g.a_transposed, 0, 0, 0, 0, 0, 0, g.N};
  // A': B stored (K × N) row-major is (N × K) column-major, used as it is; stored (N × K) it is (K × N), transposed
  if (g.b_transposed) l.a_rows = g.K, l.a_cols = g.N, l.lda = g.K;
  else l.a_rows = g.N, l.a_cols = g.K, l.lda = g.N;
  // B': A stored (M × K) is (K × M) column-major; stored (K × M) it is (M × K), read transposed
  if (g.a_transposed) l.b_rows = g.M, l.b_cols = g.K, l.ldb = g.M;
  else l.b_rows = g.K, l.b_cols = g.M, l.ldb = g.K;
  return l;
}

// gelu_epilogues' two GEMMs over N tokens, C wide, F = 4C: fc1's forward x (N × C) · wᵀ, w (F × C); fc2's input
// gradient g (N × C) · w2, w2 (C × F).
inline StepGemm fc1_forward_gemm(int64_t N, int64_t C, int64_t F) { return {"fc1 forward", N, F, C, false, true, 1}; }
inline StepGemm fc2_dgrad_gemm(int64_t N, int64_t C, int64_t F) {
  return {"fc2 dX", N, F, C, false, false, 1, StepGemm::kInputGrad};
}

}  // namespace gpt2::kernels
