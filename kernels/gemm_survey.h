// defines: step_gemms, the training step's matmuls as shapes; heuristic_algos: the algorithms cuBLASLt's heuristic
//          offers for one, which `gpt2bench kernels` times beside ATen's matmul (do the step's matmuls get cuBLAS's
//          best kernels?); lt_gemm: one of them by its place in that list, as the step runs it (kernels/lt_linear.h).
#pragma once
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "kernels/gemm_layout.h"  // StepGemm

namespace c10 {
struct IValue;
}

namespace gpt2::kernels {

// A linear y = x·Wᵀ (W: out × in) over `rows` tokens: its forward, its input gradient dX = dY·W and its weight
// gradient dW = dYᵀ·X. The blocks' linears (QKV fused, projection, fc1, fc2; `tokens` rows, n_layer calls each)
// and the LM head (`head_rows` a chunk, as many chunks as cover the tokens).
std::vector<StepGemm> step_gemms(int64_t tokens, int64_t C, int64_t vocab, int64_t n_layer, int64_t head_rows);

// cuBLASLt's heuristic algorithms for out = op(A)·op(B) on these operands (A, B stored as `g` says, row-major; bf16
// or half; out (M × N) of their dtype; fp32 accumulation, a 32 MiB workspace), at most `max_algos`, in the
// heuristic's order: the first is what cuBLASLt would pick. Each a call of that algorithm on these tensors and its
// configuration in words (algorithm id, tile, split-K, stages, waves). CUDA builds with cuBLASLt only.
struct LtAlgo {
  std::string config;
  std::function<void()> call;
};
std::vector<LtAlgo> heuristic_algos(const StepGemm& g, const at::Tensor& a, const at::Tensor& b, const at::Tensor& out,
                                    int max_algos);
bool gemm_survey_built();  // false where cuBLASLt was not found (and on a CPU build)

// What a GEMM's epilogue does beside the product (out: M × N): nothing; adds `vec` (N, one value an output column);
// adds `vec`, writes that pre-activation to `aux` (M × N) and GELU(tanh) of it to out (GELU_AUX_BIAS); multiplies
// the product by GELU'(`aux`) and writes its column sums to `vec` (DGELU_BGRAD). All in the operands' dtype.
struct LtEpilogue {
  enum Kind { kNone, kBias, kGeluAuxBias, kDGeluBGrad } kind = kNone;
  at::Tensor vec, aux;
  std::string name() const {  // a table key's word for it (gemm_key)
    return kind == kBias ? "bias" : kind == kGeluAuxBias ? "gelu_aux_bias" : kind == kDGeluBGrad ? "dgelu_bgrad" : "";
  }
};

// The configuration in words of each algorithm cuBLASLt's heuristic lists for out = op(a)·op(b) with that epilogue,
// at most kMaxLtAlgorithms, in its order; and that product by the one at `index`. Each list is asked for once a
// process for each shape, dtype, epilogue and alignment. fp32 tensors compute in TF32 where ATen's matmuls may.
// CUDA builds with cuBLASLt only.
constexpr int kMaxLtAlgorithms = 8;
std::vector<std::string> lt_algorithms(const StepGemm& g, const at::Tensor& a, const at::Tensor& b,
                                       const at::Tensor& out, const LtEpilogue& e = {});
void lt_gemm(const StepGemm& g, const at::Tensor& a, const at::Tensor& b, const at::Tensor& out, const LtEpilogue& e,
             int index);

// Each lt_gemm call is a RecordFunction of this name whose one input is {M, N, K} (lt_gemm_record_inputs), so the
// FLOP counter (bench/measure/profiler.h) and the profiler's op names see the GEMMs that ATen does not run.
inline constexpr const char* kLtGemmRecord = "gpt2bench::lt_gemm";
std::vector<c10::IValue> lt_gemm_record_inputs(const StepGemm& g);

}  // namespace gpt2::kernels
