// settings.sdpa_backend: fastest — the SDPA kernel timed per rung and chosen, recorded. The choice
// rule is tested with fake timings and errors; the real timing runs ATen's CPU kernels (flash and
// math; the memory-efficient and cuDNN kernels exist on GPUs only and are recorded as not running).
#include <gtest/gtest.h>

#include <ATen/ATen.h>
#include <ATen/Context.h>
#include <nlohmann/json.hpp>

#include <map>
#include <string>
#include <vector>

#include "bench/ladder/results.h"
#include "bench/measure/choosers.h"
#include "bench/step/train_step.h"
#include "tests/helpers.h"

namespace gpt2 {
namespace {

using B = SdpaBackend;

// A trial from fixed per-kernel times (ms); a kernel missing from `ms` cannot run, as ATen says it:
// warnings with the reasons, then "No available kernel".
std::function<double(B)> fake_trial(std::map<B, double> ms, std::vector<B>* calls = nullptr) {
  return [ms, calls](B b) {
    if (calls) calls->push_back(b);
    if (!ms.count(b)) {
      TORCH_WARN("Flash attention kernel not used because:");
      TORCH_WARN("Both fused kernels do not support non-null attn_mask.");
      TORCH_CHECK(false, "No available kernel. Aborting execution.");
    }
    return ms.at(b) / 1e3;
  };
}

TEST(SdpaChoice, PyTorchsOwnKernelStaysUnlessAnotherBeatsItByTheMargin) {
  // another kernel 10% faster: it wins
  auto c = pick_sdpa_backend("flash", 0.01, 3, fake_trial({{B::kFlash, 1.0}, {B::kCudnn, 0.9}, {B::kMath, 4.0}}));
  EXPECT_EQ(c.chosen, "cudnn");
  EXPECT_EQ(c.incumbent, "flash");
  // 0.5% faster is within the noise margin: PyTorch's own choice stays
  c = pick_sdpa_backend("flash", 0.01, 3, fake_trial({{B::kFlash, 1.0}, {B::kCudnn, 0.995}}));
  EXPECT_EQ(c.chosen, "flash");
  // PyTorch's own kernel slower by more than the margin loses, whichever it is
  c = pick_sdpa_backend("efficient", 0.01, 3, fake_trial({{B::kFlash, 1.0}, {B::kEfficient, 1.036}}));
  EXPECT_EQ(c.chosen, "flash");
  // PyTorch's choice not among the kernels that run: the fastest that does
  c = pick_sdpa_backend("overrideable", 0.01, 3, fake_trial({{B::kMath, 2.0}, {B::kEfficient, 1.5}}));
  EXPECT_EQ(c.chosen, "efficient");
}

TEST(SdpaChoice, TimesEveryKernelInTurnsAfterAWarmUpAndTakesTheMedian) {
  std::vector<B> calls;
  int math_calls = 0;
  auto base = fake_trial({{B::kFlash, 1.0}, {B::kMath, 2.0}}, &calls);
  // math's second timed round is an outlier (something else ran): the median ignores it
  auto trial = [&](B b) {
    const double s = base(b);
    return b == B::kMath && ++math_calls == 3 ? 0.0001 : s;
  };
  const auto c = pick_sdpa_backend("math", 0.01, 3, trial);
  // one try each (warm-up, and whether it runs), then rounds in turns over the kernels that ran
  EXPECT_EQ(calls, (std::vector<B>{B::kFlash, B::kEfficient, B::kCudnn, B::kMath, B::kFlash, B::kMath, B::kFlash,
                                   B::kMath, B::kFlash, B::kMath}));
  ASSERT_EQ(c.tries.size(), 4u);
  EXPECT_DOUBLE_EQ(*c.tries[0].ms, 1.0);
  EXPECT_DOUBLE_EQ(*c.tries[3].ms, 2.0);
  EXPECT_EQ(c.chosen, "flash");
}

TEST(SdpaChoice, AKernelThatCannotRunIsRecordedWithAtensReasons) {
  const auto c = pick_sdpa_backend("flash", 0.01, 2, fake_trial({{B::kFlash, 1.0}}));
  ASSERT_EQ(c.tries.size(), 4u);
  EXPECT_FALSE(c.tries[1].ms);
  EXPECT_EQ(c.tries[1].why, "No available kernel. Aborting execution.; Flash attention kernel not used because:; "
                            "Both fused kernels do not support non-null attn_mask.");
  const nlohmann::json j = c;
  EXPECT_EQ(j["chosen"], "flash");
  EXPECT_EQ(j["tries"][0]["ms"], 1.0);
  EXPECT_FALSE(j["tries"][1].contains("ms"));
  EXPECT_EQ(j["tries"][1]["candidate"], "efficient");
  EXPECT_EQ(j["setting"], "sdpa_backend");
  EXPECT_EQ(j["incumbent"], "flash");
  const Choice back = choice_from(j);
  EXPECT_EQ(back.chosen, "flash");
  EXPECT_EQ(back.tries[1].why, c.tries[1].why);
  EXPECT_DOUBLE_EQ(*back.tries[0].ms, 1.0);
}

TEST(SdpaChoice, NoKernelThatRunsIsAnErrorNamingEveryReason) {
  try {
    pick_sdpa_backend("flash", 0.01, 2, fake_trial({}));
    FAIL() << "no kernel ran, and nothing was said";
  } catch (const std::runtime_error& e) {
    const std::string m = e.what();
    EXPECT_EQ(m.rfind("no sdpa_backend candidate runs here (flash: No available kernel", 0), 0u) << m;
    for (const char* k : {"efficient: ", "cudnn: ", "math: "}) EXPECT_NE(m.find(k), std::string::npos) << m;
  }
}

TEST(SdpaChoice, TimesAtensCpuKernelsAndLeavesTheFlagsAsTheyWere) {
  auto& ctx = at::globalContext();
  StepSpec s = baseline_spec(test::tiny_model(), 2, detect_device("cpu"));
  s.model.attention = AttentionImpl::kSdpa;
  s.model.dropout = 0;  // ATen's CPU flash kernel takes no dropout
  ctx.setSDPUseMemEfficient(false);  // a user's setting, to be restored
  const auto c = choose_sdpa_backend(s, detect_device("cpu"), 2, 1);
  EXPECT_TRUE(ctx.userEnabledFlashSDP());
  EXPECT_TRUE(ctx.userEnabledMathSDP());
  EXPECT_FALSE(ctx.userEnabledMemEfficientSDP());
  ctx.setSDPUseMemEfficient(true);
  ASSERT_EQ(c.tries.size(), 4u);
  EXPECT_EQ(c.incumbent, "flash");
  EXPECT_EQ(c.key, sdpa_attention_key(s));
  for (size_t i : {0, 3}) ASSERT_TRUE(c.tries[i].ms) << c.tries[i].candidate << ": " << c.tries[i].why;
  for (size_t i : {1, 2}) EXPECT_FALSE(c.tries[i].why.empty()) << c.tries[i].candidate;
  EXPECT_GT(*c.tries[0].ms, 0);
  EXPECT_GT(*c.tries[3].ms, 0);
  EXPECT_TRUE(c.chosen == "flash" || c.chosen == "math") << c.chosen;
  // with dropout, the CPU has no fused kernel: math alone runs, and is chosen
  s.model.dropout = 0.1;
  EXPECT_EQ(choose_sdpa_backend(s, detect_device("cpu"), 1, 1).chosen, "math");
}

TEST(SdpaChoice, AStepGivenFastestUnsettledIsRefused) {
  StepSpec s = baseline_spec(test::tiny_model(), 2, detect_device("cpu"));
  s.model.attention = AttentionImpl::kSdpa;
  s.sdpa_backend = B::kFastest;
  try {
    TrainStep ts(s, detect_device("cpu"), at::zeros({1000}, at::kInt), 1);
    FAIL() << "built a step with an unsettled SDPA kernel";
  } catch (const c10::Error& e) {
    EXPECT_NE(std::string(e.what_without_backtrace()).find("sdpa_backend 'fastest' is settled by timing"),
              std::string::npos);
  }
}

// The rung runs with the kernel chosen (an outcome, as batch_scaling's batch), and rungs.json keeps
// the measurement, which --resume reads back.
TEST(SdpaChoice, TheChoiceIsTheRungsOutcomeAndSurvivesResume) {
  RungRecord r;
  r.plan.rung.spec.model.attention = AttentionImpl::kSdpa;
  r.plan.rung.spec.sdpa_backend = B::kFastest;
  r.out.choices.push_back(pick_sdpa_backend("flash", 0.01, 1, fake_trial({{B::kFlash, 1.0}, {B::kCudnn, 0.8}})));
  EXPECT_EQ(r.spec().sdpa_backend, B::kCudnn);
  EXPECT_EQ(r.plan.rung.spec.sdpa_backend, B::kFastest);
  r.out.status = RungStatus::kSkipped;
  const auto j = to_json(r);
  EXPECT_EQ(j["spec"]["sdpa_backend"], "cudnn");
  EXPECT_EQ(j["choices"][0]["chosen"], "cudnn");
  RungRecord back;
  back.plan = r.plan;
  restore(back, j);
  EXPECT_EQ(back.spec().sdpa_backend, B::kCudnn);
  ASSERT_TRUE(back.choice("sdpa_backend"));
  EXPECT_DOUBLE_EQ(*back.choice("sdpa_backend")->tries[2].ms, 0.8);
  EXPECT_EQ(sdpa_backend_from("fastest"), B::kFastest);
  EXPECT_THROW(sdpa_backend_from("fastests"), std::invalid_argument);
}

}  // namespace
}  // namespace gpt2
