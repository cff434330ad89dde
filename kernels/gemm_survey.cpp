// The step's matmul shapes (kernels/gemm_survey.h); the cuBLASLt side is in kernels/cuda/gemm_survey.cpp.
#include "kernels/gemm_survey.h"

#include <ATen/core/ivalue.h>

namespace gpt2::kernels {

std::vector<StepGemm> step_gemms(int64_t tokens, int64_t C, int64_t vocab, int64_t n_layer, int64_t head_rows) {
  std::vector<StepGemm> out;
  auto linear = [&](const std::string& name, int64_t in, int64_t features, int64_t rows, int64_t calls) {
    for (const StepGemm& g : linear_gemms(name, rows, in, features, calls)) out.push_back(g);
  };
  linear("qkv", C, 3 * C, tokens, n_layer);
  linear("proj", C, C, tokens, n_layer);
  linear("fc1", C, 4 * C, tokens, n_layer);
  linear("fc2", 4 * C, C, tokens, n_layer);
  const int64_t rows = head_rows > 0 && head_rows < tokens ? head_rows : tokens;
  linear("head", C, vocab, rows, (tokens + rows - 1) / rows);
  for (size_t i = out.size() - 3; i < out.size(); ++i) out[i].in_blocks = false;
  return out;
}

std::vector<c10::IValue> lt_gemm_record_inputs(const StepGemm& g) {
  return {c10::IValue(std::vector<int64_t>{g.M, g.N, g.K})};
}

}  // namespace gpt2::kernels
