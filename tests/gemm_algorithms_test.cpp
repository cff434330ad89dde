// The gemm_algorithms extra: kernels::lt_linear (the blocks' linears, each GEMM by the algorithm a table names, ATen's
// call elsewhere) and its choice (bench/measure/gemm_choice.h). On the CPU the table is empty and lt_linear must be
// at::linear exactly; a table entry must reach the step's GEMM of that key (here: lt_gemm says there is no CUDA).
// The algorithms themselves: KernelsCuda.LtLinearRunsEveryHeuristicAlgorithm_CUDA.
#include <gtest/gtest.h>

#include <ATen/ATen.h>
#include <torch/autograd.h>

#include <string>
#include <vector>

#include "bench/ladder/results.h"
#include "bench/measure/choosers.h"
#include "bench/measure/gemm_choice.h"
#include "bench/runtime/device.h"
#include "kernels/gemm_layout.h"
#include "kernels/lt_linear.h"
#include "model/gpt2.h"
#include "tests/helpers.h"
#include "variants/registry.h"

namespace gpt2 {
namespace {

std::vector<at::Tensor> leaves(std::vector<int64_t> x, std::vector<int64_t> w, bool bias) {
  at::manual_seed(3);
  std::vector<at::Tensor> t = {at::randn(x).requires_grad_(), at::randn(w).requires_grad_()};
  if (bias) t.push_back(at::randn({w[0]}).requires_grad_());
  return t;
}

TEST(GemmAlgorithms, WithAnEmptyTableTheLinearIsAtensForwardAndBackward) {
  for (bool bias : {true, false}) {
    const auto ours = leaves({24, 16}, {40, 16}, bias), aten = leaves({24, 16}, {40, 16}, bias);
    const at::Tensor b = bias ? ours[2] : at::Tensor(), b_aten = bias ? aten[2] : at::Tensor();
    const at::Tensor y = kernels::lt_linear(ours[0], ours[1], b, {}), want = at::linear(aten[0], aten[1], b_aten);
    EXPECT_TRUE(at::equal(y, want)) << bias;
    const at::Tensor g = at::randn_like(y);
    const auto grads = torch::autograd::grad({y}, ours, {g}), want_grads = torch::autograd::grad({want}, aten, {g});
    for (size_t i = 0; i < grads.size(); ++i) EXPECT_TRUE(at::equal(grads[i], want_grads[i])) << bias << " " << i;
  }
}

TEST(GemmAlgorithms, TheLinearRefusesShapesThatDoNotMultiply) {
  const auto t = leaves({24, 16}, {40, 12}, true);
  try {
    (void)kernels::lt_linear(t[0], t[1], t[2], {});
    FAIL() << "no error";
  } catch (const c10::Error& e) {
    EXPECT_NE(std::string(e.what_without_backtrace()).find("lt_linear: x (N × in), w (out × in) and b (out) expected"),
              std::string::npos) << e.what();
  }
}

StepSpec top_spec() {  // the top rung's linears: fused QKV with its bias, the residual kernel adding the others'
  StepSpec s = baseline_spec(test::tiny_model(), 2, detect_device("cpu"));
  for (const char* v : {"sdpa", "fuse_qkv", "fused_gelu_backward", "fused_residual_norm"}) find_variant(v)->apply(s);
  s.model.qkv_bias = true;
  return s;
}

TEST(GemmAlgorithms, TheChoiceTimesTheGemmsTheStepRunsThroughTheLinear) {
  StepSpec s = top_spec();
  std::vector<std::string> names;
  for (const LinearGemm& g : lt_linear_gemms(s)) names.push_back(g.gemm.name + " " + g.epilogue);
  // fc1's forward is fused_gelu_backward's GELU_AUX_BIAS GEMM; the projection's and fc2's biases the residual kernel's
  EXPECT_EQ(names, (std::vector<std::string>{"qkv forward bias", "qkv dX ", "qkv dW ", "proj forward ", "proj dX ",
                                             "proj dW ", "fc1 forward gelu_aux_bias", "fc1 dX ", "fc1 dW ",
                                             "fc2 forward ", "fc2 dX ", "fc2 dW "}));
  EXPECT_EQ(gemm_algorithms_key(s), "rows=32 Float: qkv 32->96 bias, proj 32->32, fc1 32->128 gelu_aux_bias, fc2 128->32");
  s.model.fused_residual_norm = s.model.fused_gelu_backward = false, s.model.fused_qkv = false;
  // query, key and value share the projection's shape, bias and all: one timing for the four
  EXPECT_EQ(gemm_algorithms_key(s), "rows=32 Float: query 32->32 bias, fc1 32->128 bias, fc2 128->32 bias");
  EXPECT_EQ(lt_linear_gemms(s).size(), 9u);
}

TEST(GemmAlgorithms, OnTheCpuAtenIsChosenUntimed) {
  StepSpec s = top_spec();
  find_variant("gemm_algorithms")->apply(s);
  const Chooser* chooser = find_chooser("gemm_algorithms");
  ASSERT_NE(chooser, nullptr);
  ASSERT_TRUE(chooser->wanted(s));
  const Choice c = chooser->choose(s, detect_device("cpu"));
  EXPECT_EQ(c.chosen, "qkv.forward:aten,qkv.dX:aten,qkv.dW:aten,proj.forward:aten,proj.dX:aten,proj.dW:aten,"
                      "fc1.forward:aten,fc1.dX:aten,fc1.dW:aten,fc2.forward:aten,fc2.dX:aten,fc2.dW:aten");
  ASSERT_EQ(c.tries.size(), 12u);
  EXPECT_EQ(c.tries[1].candidate, "qkv.dX:aten");
  EXPECT_EQ(c.tries[1].why, "not timed: the only candidate");
  chooser->apply(s, c.chosen);
  EXPECT_TRUE(s.model.gemm_algorithms.empty());
}

TEST(GemmAlgorithms, TheChosenAlgorithmsBecomeTheStepsTableAndBadOnesAreRefused) {
  StepSpec s = top_spec();
  use_gemm_algorithms(s, "qkv.dX:lt3,proj.forward:aten,fc2.dW:lt0");
  ASSERT_EQ(s.model.gemm_algorithms.size(), 2u);
  const auto qkv = kernels::linear_gemms("qkv", 32, 32, 96);
  EXPECT_EQ(s.model.gemm_algorithms.at(kernels::gemm_key(qkv[1], "", "Float")), 3);
  EXPECT_EQ(s.model.gemm_algorithms.at("M=32 N=128 K=32 TN Float"), 0);
  for (const auto& [chosen, says] : std::vector<std::pair<std::string, std::string>>{
           {"head.dX:lt1", "'head.dX:lt1' names none of this step's GEMMs (rows=32 Float: qkv"},
           {"qkv.dX", "'qkv.dX' names none"},
           {"qkv.dX:lt", "aten or ltN expected"},
           {"qkv.dX:cublas", "aten or ltN expected"}}) {
    StepSpec t = top_spec();
    try {
      use_gemm_algorithms(t, chosen);
      ADD_FAILURE() << chosen << ": no error";
    } catch (const std::runtime_error& e) {
      EXPECT_NE(std::string(e.what()).find(says), std::string::npos) << e.what();
    }
  }
}

// Each GEMM the choice lists, named in the table, is the one the step's forward + backward runs by that algorithm:
// lt_gemm refuses CPU tensors, where a key the step never looks up would pass unnoticed.
TEST(GemmAlgorithms, EveryTimedGemmIsOneTheStepLooksUp) {
  StepSpec base = top_spec();
  find_variant("gemm_algorithms")->apply(base);
  for (const std::string layers : {"top", "unfused"}) {
    if (layers == "unfused")
      base.model.fused_residual_norm = base.model.fused_gelu_backward = base.model.fused_qkv = false;
    for (const LinearGemm& g : lt_linear_gemms(base)) {
      StepSpec s = base;
      s.model.gemm_algorithms[kernels::gemm_key(g.gemm, g.epilogue, "Float")] = 0;
      GPT2 model(s.model);
      const at::Tensor idx = at::randint(s.model.vocab_size, {s.batch, s.model.context});
      try {
        model->forward(idx).sum().backward();
        ADD_FAILURE() << layers << " " << g.gemm.name << ": the step did not run it";
      } catch (const c10::Error& e) {
        const std::string says = e.what_without_backtrace();  // lt_gemm's, or the GELU forward's reference
        EXPECT_TRUE(says.find("lt_gemm: ") != std::string::npos || says.find("cuBLASLt algorithm #0 asked for") !=
                    std::string::npos) << says;
      }
    }
  }
}

}  // namespace
}  // namespace gpt2
