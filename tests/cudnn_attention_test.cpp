// The cudnn_attention extra: kernels::causal_attention from the fused QKV output. ATen's side must be causal
// attention over the heads in the projection's order (checked against the formula); cuDNN's refuses what it cannot
// run, saying why; on a GPU (the _CUDA tests) cuDNN's side must be ATen's, forward and gradient, its gradient one
// (B, T, 3C) tensor.
#include <gtest/gtest.h>

#include <ATen/ATen.h>
#include <torch/autograd.h>

#include <cmath>
#include <iostream>
#include <map>
#include <string>

#include "bench/measure/attention_choice.h"
#include "bench/measure/choosers.h"
#include "bench/step/step_spec.h"
#include "bench/step/train_step.h"
#include "cuda_test.h"
#include "kernels/attention.h"
#include "model/gpt2.h"
#include "tests/helpers.h"
#include "variants/registry.h"

namespace gpt2 {
namespace {

// Causal attention by its formula: softmax(q kᵀ / sqrt(d) + mask) v, head h reading columns h·d.. of q, k and v.
at::Tensor by_formula(const at::Tensor& qkv, int64_t n_head) {
  const int64_t B = qkv.size(0), T = qkv.size(1), C = qkv.size(2) / 3, d = C / n_head;
  auto heads = [&](int64_t part) { return qkv.narrow(2, part * C, C).reshape({B, T, n_head, d}).permute({0, 2, 1, 3}); };
  const at::Tensor scores = at::matmul(heads(0), heads(1).transpose(2, 3)) / std::sqrt(static_cast<double>(d));
  const at::Tensor above = at::ones({T, T}, qkv.options().dtype(at::kBool)).triu(1);
  const at::Tensor y = at::matmul(at::softmax(scores.masked_fill(above, -INFINITY), -1), heads(2));
  return y.permute({0, 2, 1, 3}).reshape({B, T, C});
}

using test::error_of;

TEST(CudnnAttention, AtensSideIsCausalAttentionOverTheProjectionsHeads) {
  at::manual_seed(5);
  const at::Tensor qkv = at::randn({2, 12, 3 * 32}, at::kDouble).requires_grad_();
  const at::Tensor y = kernels::causal_attention(qkv, 4, 0.0, /*cudnn=*/false), want = by_formula(qkv, 4);
  ASSERT_EQ(y.sizes(), want.sizes());
  EXPECT_TRUE(at::allclose(y, want, 1e-12, 1e-12)) << (y - want).abs().max().item<double>();
  const at::Tensor g = at::randn_like(y);
  const auto grad = torch::autograd::grad({y}, {qkv}, {g}), want_grad = torch::autograd::grad({want}, {qkv}, {g});
  EXPECT_TRUE(at::allclose(grad[0], want_grad[0], 1e-12, 1e-12));
}

TEST(CudnnAttention, BadInputIsRefusedWithTheReason) {
  const at::Tensor qkv = at::randn({2, 8, 96});
  EXPECT_NE(error_of([&] { (void)kernels::causal_attention(qkv, 4, 0.0, true); })
                .find("cuDNN's attention needs a CUDA tensor, got one on cpu"),
            std::string::npos);
  EXPECT_NE(error_of([&] { (void)kernels::causal_attention(at::randn({2, 8, 95}), 4, 0.0, false); })
                .find("qkv must be (B, T, 3C), got [2, 8, 95]"),
            std::string::npos);
  EXPECT_NE(error_of([&] { (void)kernels::causal_attention(qkv, 5, 0.0, false); })
                .find("32 channels do not split into 5 heads"),
            std::string::npos);
}

TEST(CudnnAttention, TheExtraNeedsCudaAndTheFusedProjectionAndSaysSoOnTheCpu) {
  const Variant* v = find_variant("cudnn_attention");
  ASSERT_NE(v, nullptr);
  const Support s = v->supports(detect_device("cpu"));
  EXPECT_FALSE(s.ok);
  EXPECT_NE(s.why_not.find("cuDNN's fused attention is CUDA's"), std::string::npos) << s.why_not;
  EXPECT_EQ(std::vector<std::string_view>(v->requires_.begin(), v->requires_.end()),
            (std::vector<std::string_view>{"sdpa", "fuse_qkv"}));
  StepSpec spec = baseline_spec(test::tiny_model(), 2, detect_device("cpu"));
  for (const char* on : {"sdpa", "fuse_qkv", "cudnn_attention"}) find_variant(on)->apply(spec);
  nlohmann::json j = spec;
  EXPECT_EQ(j["model"]["cudnn_attention"], true);
  // rungs.json's sdpa_backend_used says whose attention ran, not the SDPA kernel ATen would pick
  EXPECT_EQ(TrainStep(spec, detect_device("cpu"), at::zeros({1000}, at::kInt), 1).sdpa_backend_used(),
            "cudnn (our graphs: cudnn_attention)");
  // A model told to use it anyway says why it cannot, never quietly ATen's.
  ModelOptions m = test::tiny_model();
  m.attention = AttentionImpl::kSdpa, m.fused_qkv = true, m.cudnn_attention = true;
  GPT2 model(m);
  const at::Tensor idx = at::randint(m.vocab_size, {2, m.context}, at::kLong);
  EXPECT_NE(error_of([&] { (void)model->forward(idx); }).find("needs a CUDA tensor"), std::string::npos);
}

// The plan choice's rule on a fake cuDNN: each direction's plans timed alone; a faster one (by more than 1%) replaces
// the list's first, a plan that cannot run is kept with why; the winners become the step's plans.
TEST(CudnnAttention, ThePlanChoiceTimesEachDirectionsListAndTheStepRunsTheWinners) {
  const std::map<std::string, double> ms = {{"forward:eng8_k26=7", 1.0}, {"forward:eng8_k26=2", 0.8},
                                            {"backward:eng8_k26=26", 1.0}, {"backward:eng8_k26=3", 0.995}};
  std::map<std::string, int> calls;
  const Choice c = pick_cudnn_plans(
      [](bool backward) {
        return backward ? std::vector<std::string>{"eng8_k26=26", "eng8_k26=3", "eng9"}
                        : std::vector<std::string>{"eng8_k26=7", "eng8_k26=2"};
      },
      3,
      [&](bool backward, const std::string& plan) {
        const std::string name = (backward ? "backward:" : "forward:") + plan;
        ++calls[name];
        if (plan == "eng9") throw std::runtime_error("did not build: no kernel");
        return ms.at(name) / 1e3;
      });
  EXPECT_EQ(c.setting, "cudnn_attention_plans");
  EXPECT_EQ(c.chosen, "forward:eng8_k26=2,backward:eng8_k26=26");  // 0.5% faster is within the margin
  EXPECT_EQ(c.incumbent, "forward:eng8_k26=7,backward:eng8_k26=26");
  EXPECT_EQ(calls["forward:eng8_k26=2"], 4);  // tried once, then 3 rounds
  EXPECT_EQ(calls["backward:eng9"], 1);
  ASSERT_EQ(c.tries.size(), 4u);
  EXPECT_EQ(c.tries[0].candidate, "forward:eng8_k26=7");
  EXPECT_DOUBLE_EQ(*c.tries[1].ms, 0.8);
  EXPECT_EQ(c.tries[3].candidate, "backward:eng8_k26=3");

  StepSpec spec = baseline_spec(test::tiny_model(), 2, detect_device("cpu"));
  for (const char* on : {"sdpa", "fuse_qkv", "cudnn_attention"}) find_variant(on)->apply(spec);
  const Chooser* chooser = find_chooser("cudnn_attention_plans");
  ASSERT_NE(chooser, nullptr);
  EXPECT_TRUE(chooser->wanted(spec));
  EXPECT_EQ(chooser->key(spec), sdpa_attention_key(spec));
  chooser->apply(spec, c.chosen);
  EXPECT_EQ(spec.model.cudnn_forward_plan, "eng8_k26=2");
  EXPECT_EQ(spec.model.cudnn_backward_plan, "eng8_k26=26");
  EXPECT_EQ(nlohmann::json(spec)["model"]["cudnn_plans"]["forward"], "eng8_k26=2");
  for (const std::string bad : {"forward:eng8", "backward:eng8,forward:eng8", "forward:,backward:eng8",
                                "forward:a,backward:b,c"})
    EXPECT_THROW(use_cudnn_plans(spec, bad), std::runtime_error) << bad;
  try {
    (void)chooser->choose(spec, detect_device("cpu"));
    ADD_FAILURE() << "timed on the CPU";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("timed on a CUDA device, not on "), std::string::npos) << e.what();
  }
  spec.model.cudnn_attention = false;
  EXPECT_FALSE(chooser->wanted(spec));
}

using test::KernelsCuda;

// Dropout off: cuDNN's output and gradient are ATen's SDPA's within bf16's rounding, the gradient one (B, T, 3C)
// tensor; at GPT-2's head size and at 128.
TEST_F(KernelsCuda, CudnnAttentionIsAtensForwardAndGradient_CUDA) {
  at::manual_seed(11);
  for (const int64_t d : {64, 128}) {
    const at::Tensor qkv = at::randn({2, 256, 3 * 4 * d}, on_gpu().dtype(at::kBFloat16)).requires_grad_();
    const at::Tensor y = kernels::causal_attention(qkv, 4, 0.0, true), want = kernels::causal_attention(qkv, 4, 0.0, false);
    const at::Tensor g = at::randn_like(y);
    const auto grad = torch::autograd::grad({y}, {qkv}, {g}), want_grad = torch::autograd::grad({want}, {qkv}, {g});
    auto near = [](const at::Tensor& got, const at::Tensor& ref) {
      return (got.to(at::kFloat) - ref.to(at::kFloat)).abs().max().item<double>() <=
             2e-2 * ref.to(at::kFloat).abs().max().item<double>();
    };
    EXPECT_TRUE(near(y, want)) << "d=" << d;
    EXPECT_EQ(grad[0].sizes(), qkv.sizes());
    EXPECT_TRUE(grad[0].is_contiguous());
    EXPECT_TRUE(near(grad[0], want_grad[0])) << "d=" << d;
  }
}

// Dropout on: the generator decides the weights dropped (the same seed, the same output; another, another), and the
// gradient is finite.
TEST_F(KernelsCuda, CudnnAttentionDropoutFollowsTheGenerator_CUDA) {
  const at::Tensor qkv = at::randn({2, 128, 3 * 4 * 64}, on_gpu().dtype(at::kBFloat16)).requires_grad_();
  auto run = [&](uint64_t seed) {
    at::manual_seed(seed);
    return kernels::causal_attention(qkv, 4, 0.1, true);
  };
  const at::Tensor a = run(1), b = run(1), c = run(2);
  EXPECT_TRUE(at::equal(a, b));
  EXPECT_FALSE(at::equal(a, c));
  const auto grad = torch::autograd::grad({a}, {qkv}, {at::ones_like(a)});
  EXPECT_TRUE(at::isfinite(grad[0]).all().item<bool>());
}

// Every plan listed runs the same attention or says why it cannot: each forward plan's output and each backward
// plan's gradient are the first plan's within bf16's rounding; a plan not listed is refused naming the list.
TEST_F(KernelsCuda, CudnnAttentionRunsEveryPlanOfItsLists_CUDA) {
  at::manual_seed(12);
  const at::Tensor qkv = at::randn({2, 256, 3 * 4 * 64}, on_gpu().dtype(at::kBFloat16)).requires_grad_();
  const at::Tensor g = at::randn({2, 256, 4 * 64}, on_gpu().dtype(at::kBFloat16));
  const at::Tensor y = kernels::cudnn_causal_attention(qkv, 4, 0.0), dq = torch::autograd::grad({y}, {qkv}, {g})[0];
  auto near = [](const at::Tensor& got, const at::Tensor& ref) {
    return (got.to(at::kFloat) - ref.to(at::kFloat)).abs().max().item<double>() <=
           2e-2 * ref.to(at::kFloat).abs().max().item<double>();
  };
  for (const bool backward : {false, true}) {
    const auto plans = kernels::cudnn_attention_plans(qkv, 4, 0.0, backward);
    ASSERT_FALSE(plans.empty());
    std::cout << (backward ? "backward" : "forward") << " plans:";
    for (const std::string& plan : plans) {
      std::cout << " " << plan;
      const kernels::CudnnPlans named = backward ? kernels::CudnnPlans{"", plan} : kernels::CudnnPlans{plan, ""};
      try {
        const at::Tensor y2 = kernels::cudnn_causal_attention(qkv, 4, 0.0, named);
        EXPECT_TRUE(near(y2, y)) << plan;
        if (backward) {
          EXPECT_TRUE(near(torch::autograd::grad({y2}, {qkv}, {g})[0], dq)) << plan;
        }
      } catch (const c10::Error& e) {  // a plan that cannot run says why; the list's first must run
        const std::string says = e.what_without_backtrace();
        EXPECT_TRUE(says.find("did not build") != std::string::npos || says.find("execution failed") !=
                    std::string::npos) << plan << ": " << says;
        EXPECT_NE(plan, plans[0]);
      }
    }
    std::cout << "\n";
  }
  EXPECT_NE(error_of([&] { (void)kernels::cudnn_causal_attention(qkv, 4, 0.0, {"eng999", ""}); })
                .find("cuDNN's forward list for these operands has no plan eng999"),
            std::string::npos);
}

TEST_F(KernelsCuda, CudnnAttentionRefusesWhatCudnnCannotRun_CUDA) {
  EXPECT_NE(error_of([&] { (void)kernels::cudnn_causal_attention(at::randn({2, 16, 3 * 64}, on_gpu()), 1, 0.0); })
                .find("bf16 or fp16 expected"),
            std::string::npos);
  const at::Tensor wide = at::randn({2, 16, 3 * 160}, on_gpu().dtype(at::kBFloat16));
  EXPECT_NE(error_of([&] { (void)kernels::cudnn_causal_attention(wide, 1, 0.0); }).find("head size 160"),
            std::string::npos);
}

}  // namespace
}  // namespace gpt2
