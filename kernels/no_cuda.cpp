// The CPU build's side of the kernels' CUDA seam (CMake picks this file or kernels/cuda/*.cu).
#include <c10/util/Exception.h>

#include "kernels/adamw.h"
#include "kernels/attention.h"
#include "kernels/bias_gelu.h"
#include "kernels/classifier.h"
#include "kernels/column_sums_cuda.h"
#include "kernels/fp8_linear.h"
#include "kernels/gemm_survey.h"
#include "kernels/gelu_epilogues.h"
#include "kernels/residual_norm.h"

namespace gpt2::kernels {

at::Tensor softmax_xent_backward_cuda_(at::Tensor&, const at::Tensor&, double, SoftmaxLaunch) {
  TORCH_CHECK(false, "softmax_xent_backward_cuda_: this build has no CUDA (build with GPT2BENCH_CUDA=ON)");
}

at::Tensor scaled_gradient_cuda(const at::Tensor&, const at::Tensor&, at::ScalarType) {
  TORCH_CHECK(false, "scaled_gradient_cuda: this build has no CUDA (build with GPT2BENCH_CUDA=ON)");
}

std::pair<at::Tensor, at::Tensor> bias_gelu_backward_cuda(const at::Tensor&, const at::Tensor&, int64_t) {
  TORCH_CHECK(false, "bias_gelu_backward_cuda: this build has no CUDA (build with GPT2BENCH_CUDA=ON)");
}

at::Tensor column_sums_cuda(const at::Tensor&, int64_t, int64_t, at::ScalarType) {
  TORCH_CHECK(false, "column_sums_cuda: this build has no CUDA (build with GPT2BENCH_CUDA=ON)");
}

void adamw_one_launch_cuda_(at::TensorList, at::TensorList, at::TensorList, at::TensorList, const at::Tensor&,
                            const AdamWHyper&, const at::Tensor&, const at::Tensor&) {
  TORCH_CHECK(false, "adamw_one_launch_cuda_: this build has no CUDA (build with GPT2BENCH_CUDA=ON)");
}

Fp8 quantize_fp8_both_cuda(const at::Tensor&, const at::Tensor&, at::ScalarType) {
  TORCH_CHECK(false, "quantize_fp8_both_cuda: this build has no CUDA (build with GPT2BENCH_CUDA=ON)");
}

bool gelu_epilogues_built() { return false; }
bool cudnn_attention_built() { return false; }

at::Tensor cudnn_causal_attention(const at::Tensor&, int64_t, double, const CudnnPlans&) {
  TORCH_CHECK(false, "cudnn_causal_attention: this build has no CUDA (build with GPT2BENCH_CUDA=ON)");
}
std::vector<std::string> cudnn_attention_plans(const at::Tensor&, int64_t, double, bool) {
  TORCH_CHECK(false, "cudnn_attention_plans: this build has no CUDA (build with GPT2BENCH_CUDA=ON)");
}
bool gemm_survey_built() { return false; }

std::vector<LtAlgo> heuristic_algos(const StepGemm&, const at::Tensor&, const at::Tensor&, const at::Tensor&, int) {
  TORCH_CHECK(false, "heuristic_algos: this build has no CUDA (build with GPT2BENCH_CUDA=ON)");
}

std::vector<std::string> lt_algorithms(const StepGemm&, const at::Tensor&, const at::Tensor&, const at::Tensor&,
                                       const LtEpilogue&) {
  TORCH_CHECK(false, "lt_algorithms: this build has no CUDA (build with GPT2BENCH_CUDA=ON)");
}

void lt_gemm(const StepGemm&, const at::Tensor&, const at::Tensor&, const at::Tensor&, const LtEpilogue&, int) {
  TORCH_CHECK(false, "lt_gemm: this build has no CUDA (build with GPT2BENCH_CUDA=ON)");
}

std::pair<at::Tensor, at::Tensor> linear_gelu_aux_cuda(const at::Tensor&, const at::Tensor&, const at::Tensor&, int) {
  TORCH_CHECK(false, "linear_gelu_aux_cuda: this build has no CUDA (build with GPT2BENCH_CUDA=ON)");
}

std::pair<at::Tensor, at::Tensor> matmul_dgelu_bgrad_cuda(const at::Tensor&, const at::Tensor&, const at::Tensor&) {
  TORCH_CHECK(false, "matmul_dgelu_bgrad_cuda: this build has no CUDA (build with GPT2BENCH_CUDA=ON)");
}

AddNormForward add_layer_norm_forward_cuda(const at::Tensor&, const at::Tensor&, const at::Tensor&, const at::Tensor&,
                                           double, double, const at::Tensor&, bool) {
  TORCH_CHECK(false, "add_layer_norm_forward_cuda: this build has no CUDA (build with GPT2BENCH_CUDA=ON)");
}

AddNormBackward add_layer_norm_backward_cuda(const at::Tensor&, const at::Tensor&, const AddNormForward&,
                                             const at::Tensor&, const at::Tensor&) {
  TORCH_CHECK(false, "add_layer_norm_backward_cuda: this build has no CUDA (build with GPT2BENCH_CUDA=ON)");
}

}  // namespace gpt2::kernels
