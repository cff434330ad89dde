// Our kernels' launches chosen by timing. settings.classifier_kernel — the fused classifier's CUDA kernel: 512
// threads a row (the default), 256, 1024, or 1024 with the row staged in shared memory, each also with its
// exponentials in base 2 ("512 exp2"); settings.gelu_backward_slab
// — the fused GELU backward's rows a block: 32 (the default), 16, 8, 64. fastest: each timed alone on the rung's
// shapes, the default kept unless another beats it by the margin. The rule is tested with fake timings; on the CPU
// only the reference runs, so one candidate.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <map>
#include <string>
#include <vector>

#include "bench/ladder/results.h"
#include "bench/measure/choosers.h"
#include "bench/runtime/device.h"
#include "config/profile.h"
#include "config/yaml_reader.h"
#include "tests/helpers.h"
#include "variants/registry.h"

namespace gpt2 {
namespace {

std::function<double(const std::string&)> fake_trial(std::map<std::string, double> ms) {
  return [ms](const std::string& name) { return ms.at(name) / 1e3; };
}

TEST(ClassifierKernelChoice, FiveTwelveIsKeptUnlessAnotherIsFasterByTheMargin) {
  const std::vector<std::string> all = {"512", "256", "1024", "staged"};
  const Choice c = pick_classifier_kernel(all, 2, fake_trial({{"512", 0.83}, {"256", 0.9}, {"1024", 0.8}, {"staged", 0.6}}));
  EXPECT_EQ(c.setting, "classifier_kernel");
  EXPECT_EQ(c.chosen, "staged");
  EXPECT_EQ(c.incumbent, "512");
  ASSERT_EQ(c.tries.size(), 4u);
  EXPECT_DOUBLE_EQ(*c.tries[3].ms, 0.6);
  EXPECT_EQ(pick_classifier_kernel(all, 2, fake_trial({{"512", 0.830}, {"256", 0.9}, {"1024", 0.826}, {"staged", 0.9}}))
                .chosen,
            "512");  // within 1%
  // a launch that cannot run (a row too wide to stage) is recorded with why, the rest compete
  const Choice wide = pick_classifier_kernel(all, 2, [](const std::string& name) -> double {
    if (name == "staged") throw std::runtime_error("a row of 1048576 Float does not fit");
    return name == "256" ? 1e-3 : 2e-3;
  });
  EXPECT_EQ(wide.chosen, "256");
  EXPECT_FALSE(wide.tries[3].ms.has_value());
  EXPECT_NE(wide.tries[3].why.find("does not fit"), std::string::npos) << wide.tries[3].why;
}

TEST(ClassifierKernelChoice, OnTheCpuTheReferenceRunsUntimed) {
  const DeviceInfo cpu = detect_device("cpu");
  DeviceInfo gpu;
  gpu.type = DeviceType::kCuda;
  EXPECT_EQ(classifier_kernel_candidates(gpu), (std::vector<std::string>{"512", "256", "1024", "staged", "512 exp2",
                                                                         "256 exp2", "1024 exp2", "staged exp2"}));
  StepSpec s = baseline_spec(test::tiny_model(), 4, cpu);
  s.settings.classifier_kernel = "fastest";
  s.settings.classifier_chunk = 48;
  find_variant("fused_classifier")->apply(s);
  const Chooser* chooser = find_chooser("classifier_kernel");
  ASSERT_NE(chooser, nullptr);
  EXPECT_TRUE(chooser->wanted(s));
  const Choice c = chooser->choose(s, cpu);
  EXPECT_EQ(c.chosen, "512");
  ASSERT_EQ(c.tries.size(), 1u);
  EXPECT_EQ(c.tries[0].why, "not timed: the only candidate");
  EXPECT_EQ(c.key, "rows=48 V=" + std::to_string(s.model.padded_vocab()) + " Float");
  s.batch = 1;  // a chunk past the tokens: the tokens
  EXPECT_EQ(chooser->key(s), "rows=" + std::to_string(s.model.context) + " V=" + std::to_string(s.model.padded_vocab()) +
                                 " Float");
  s.settings.classifier_kernel = "512";
  EXPECT_FALSE(chooser->wanted(s));
  s.settings.classifier_kernel = "fastest", s.model.classifier_chunk = 0;  // no fused classifier, nothing to choose
  EXPECT_FALSE(chooser->wanted(s));
}

// The rung runs with the launch chosen, rungs.json keeps the timing, --resume reads it back.
TEST(ClassifierKernelChoice, TheChoiceIsTheRungsOutcomeAndSurvivesResume) {
  RungRecord r;
  r.plan.rung.name = "17_top+fused_classifier";
  r.plan.rung.spec.model.classifier_chunk = 1024;
  r.plan.rung.spec.settings.classifier_kernel = "fastest";
  r.out.status = RungStatus::kOk;
  r.out.choices.push_back(pick_classifier_kernel(
      {"512", "staged", "staged exp2"}, 1, fake_trial({{"512", 0.8}, {"staged", 0.5}, {"staged exp2", 0.4}})));
  EXPECT_EQ(r.spec().model.classifier_threads, 1024);
  EXPECT_TRUE(r.spec().model.classifier_staged);
  EXPECT_TRUE(r.spec().model.classifier_exp2);
  const nlohmann::json j = to_json(r);
  EXPECT_EQ(j["choices"][0]["chosen"], "staged exp2");
  EXPECT_EQ(j["spec"]["model"]["classifier_threads"], 1024);
  EXPECT_EQ(j["spec"]["model"]["classifier_staged"], true);
  EXPECT_EQ(j["spec"]["model"]["classifier_exp2"], true);
  EXPECT_EQ(j["spec"]["settings"]["classifier_kernel"], "fastest");
  RungRecord back;
  back.plan = r.plan;
  restore(back, j);
  EXPECT_TRUE(back.spec().model.classifier_staged);
  EXPECT_TRUE(back.spec().model.classifier_exp2);
}

TEST(ClassifierKernelChoice, TheProfileNamesALaunchOrFastest) {
  test::TempDir d;
  auto load = [&](const std::string& how) {
    return load_profile(test::write_tiny_profile(d, "name: p\nmodel: tiny\nsettings: {classifier_kernel: " + how + "}\n"));
  };
  for (auto [how, threads, staged, exp2] :
       {std::tuple{"512", 512, false, false}, {"256", 256, false, false}, {"1024", 1024, false, false},
        {"staged", 1024, true, false}, {"512 exp2", 512, false, true}, {"256 exp2", 256, false, true},
        {"1024 exp2", 1024, false, true}, {"staged exp2", 1024, true, true}, {"fastest", 512, false, false}}) {
    StepSpec s;
    s.settings = load(how).settings;
    EXPECT_EQ(s.settings.classifier_kernel, how);
    find_variant("fused_classifier")->apply(s);  // fastest: the default until the chooser's pick
    EXPECT_EQ(s.model.classifier_threads, threads) << how;
    EXPECT_EQ(s.model.classifier_staged, staged) << how;
    EXPECT_EQ(s.model.classifier_exp2, exp2) << how;
  }
  DeviceInfo gpu;  // every candidate a name the profile takes
  gpu.type = DeviceType::kCuda;
  for (const auto& name : classifier_kernel_candidates(gpu)) EXPECT_NO_THROW(load(name)) << name;
  try {
    load("2048");
    FAIL() << "an unknown launch was taken";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("classifier_kernel"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("staged"), std::string::npos) << e.what();
  }
}

TEST(GeluBackwardSlabChoice, ThirtyTwoIsKeptUnlessAnotherIsFasterByTheMargin) {
  const std::vector<std::string> all = {"32", "16", "8", "64"};
  const Choice c = pick_gelu_backward_slab(all, 2, fake_trial({{"32", 0.069}, {"16", 0.05}, {"8", 0.06}, {"64", 0.07}}));
  EXPECT_EQ(c.setting, "gelu_backward_slab");
  EXPECT_EQ(c.chosen, "16");
  EXPECT_EQ(c.incumbent, "32");
  EXPECT_EQ(pick_gelu_backward_slab(all, 2, fake_trial({{"32", 0.0690}, {"16", 0.0685}, {"8", 0.08}, {"64", 0.08}}))
                .chosen,
            "32");  // within 1%
}

TEST(GeluBackwardSlabChoice, OnTheCpuTheReferenceRunsUntimedAndTheRungKeepsTheChoice) {
  const DeviceInfo cpu = detect_device("cpu");
  DeviceInfo gpu;
  gpu.type = DeviceType::kCuda;
  EXPECT_EQ(gelu_backward_slab_candidates(gpu), (std::vector<std::string>{"32", "16", "8", "64"}));
  StepSpec s = baseline_spec(test::tiny_model(), 4, cpu);
  s.settings.gelu_backward_slab = "fastest";
  find_variant("fused_gelu_backward")->apply(s);
  EXPECT_EQ(s.model.gelu_backward_slab, 32);  // the default until chosen
  const Chooser* chooser = find_chooser("gelu_backward_slab");
  ASSERT_NE(chooser, nullptr);
  EXPECT_TRUE(chooser->wanted(s));
  const Choice c = chooser->choose(s, cpu);
  EXPECT_EQ(c.chosen, "32");
  ASSERT_EQ(c.tries.size(), 1u);
  EXPECT_EQ(c.key, "N=" + std::to_string(4 * s.model.context) + " F=" + std::to_string(4 * s.model.n_embd) + " Float");
  s.model.fused_gelu_backward = false;
  EXPECT_FALSE(chooser->wanted(s));
  RungRecord r;  // the rung runs with the slab chosen, --resume reads it back
  r.plan.rung.name = "18_top+fused_gelu_backward";
  r.plan.rung.spec.model.fused_gelu_backward = true;
  r.plan.rung.spec.settings.gelu_backward_slab = "fastest";
  r.out.status = RungStatus::kOk;
  r.out.choices.push_back(pick_gelu_backward_slab({"32", "8"}, 1, fake_trial({{"32", 0.07}, {"8", 0.05}})));
  EXPECT_EQ(r.spec().model.gelu_backward_slab, 8);
  const nlohmann::json j = to_json(r);
  EXPECT_EQ(j["spec"]["model"]["gelu_backward_slab"], 8);
  RungRecord back;
  back.plan = r.plan;
  restore(back, j);
  EXPECT_EQ(back.spec().model.gelu_backward_slab, 8);
}

TEST(GeluBackwardSlabChoice, TheProfileNamesASlabOrFastest) {
  test::TempDir d;
  auto load = [&](const std::string& how) {
    return load_profile(test::write_tiny_profile(d, "name: p\nmodel: tiny\nsettings: {gelu_backward_slab: " + how + "}\n"));
  };
  StepSpec s;
  s.settings = load("8").settings;
  find_variant("fused_gelu_backward")->apply(s);
  EXPECT_EQ(s.model.gelu_backward_slab, 8);
  EXPECT_EQ(load("fastest").settings.gelu_backward_slab, "fastest");
  try {
    load("12");
    FAIL() << "an unknown slab was taken";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("gelu_backward_slab"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace gpt2
