// settings.residual_norm — how the fused residual norm's CUDA kernels traverse a row: sweeps (read again for each
// step), held (kept in registers both ways), held_forward or held_backward (in one direction alone: held rows cost
// the backward more registers), or fastest (each timed on the rung's rows, the sweeps kept unless another beats
// them by the margin). The rule is tested with fake timings; on the CPU only the reference runs, so one candidate.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "bench/ladder/results.h"
#include "bench/measure/choosers.h"
#include "bench/runtime/device.h"
#include "config/profile.h"
#include "config/yaml_reader.h"
#include "kernels/residual_norm.h"
#include "tests/helpers.h"
#include "variants/registry.h"

namespace gpt2 {
namespace {

const std::vector<std::string> kAll = {"sweeps", "held", "held_forward", "held_backward"};

std::function<double(const std::string&)> fake_traversals(std::map<std::string, double> ms,
                                                     std::vector<std::string>* calls = nullptr) {
  return [=](const std::string& name) {
    if (calls) calls->push_back(name);
    return ms.at(name) / 1e3;
  };
}

TEST(ResidualNormChoice, ATraversalIsChosenOnlyWhenFasterThanTheSweepsByTheMargin) {
  std::vector<std::string> calls;
  const std::vector<std::string> three = {"sweeps", "held", "held_forward"};
  Choice c =
      pick_residual_norm(three, 2, fake_traversals({{"sweeps", 40.7}, {"held", 45.0}, {"held_forward", 30.0}}, &calls));
  EXPECT_EQ(calls, (std::vector<std::string>{"sweeps", "held", "held_forward", "sweeps", "held", "held_forward",
                                             "sweeps", "held", "held_forward"}));  // tried once, then in turns
  EXPECT_EQ(c.setting, "residual_norm");
  EXPECT_EQ(c.chosen, "held_forward");
  EXPECT_EQ(c.incumbent, "sweeps");
  EXPECT_DOUBLE_EQ(*c.tries[2].ms, 30.0);
  auto pick = [](double sweeps, double held, double forward, double backward) {
    return pick_residual_norm(kAll, 2, fake_traversals({{"sweeps", sweeps}, {"held", held}, {"held_forward", forward},
                                                        {"held_backward", backward}})).chosen;
  };
  EXPECT_EQ(pick(40.0, 41.0, 39.8, 40.1), "sweeps");  // within 1%
  EXPECT_EQ(pick(40.0, 30.0, 35.0, 33.0), "held");
  EXPECT_EQ(pick(40.0, 36.0, 35.0, 33.0), "held_backward");
  EXPECT_EQ(pick(30.0, 40.0, 40.0, 40.0), "sweeps");
}

TEST(ResidualNormChoice, OnlyACudaDeviceHasFourTraversalsAndOnlyRowsThatFitAreHeld) {
  DeviceInfo gpu;
  gpu.type = DeviceType::kCuda;
  EXPECT_EQ(residual_norm_candidates(gpu), kAll);
  EXPECT_EQ(residual_norm_candidates(detect_device("cpu")), (std::vector<std::string>{"sweeps"}));
  // up to 4 packs of 16 bytes a lane of 32: GPT-2 124M's and 350M's rows in bf16, not 774M's; 512 floats
  EXPECT_TRUE(kernels::holds_rows(768, at::kBFloat16));
  EXPECT_TRUE(kernels::holds_rows(1024, at::kBFloat16));
  EXPECT_FALSE(kernels::holds_rows(1280, at::kBFloat16));
  EXPECT_TRUE(kernels::holds_rows(512, at::kFloat));
  EXPECT_FALSE(kernels::holds_rows(768, at::kFloat));
  EXPECT_FALSE(kernels::holds_rows(100, at::kBFloat16));  // not whole packs: one element a lane, swept
}

TEST(ResidualNormChoice, OnTheCpuTheReferenceRunsUntimed) {
  const DeviceInfo cpu = detect_device("cpu");
  StepSpec s = baseline_spec(test::tiny_model(), 4, cpu);
  s.settings.residual_norm = "fastest";
  s.model.dropout = 0.1;
  find_variant("fused_residual_norm")->apply(s);
  const Chooser* chooser = find_chooser("residual_norm");
  ASSERT_NE(chooser, nullptr);
  EXPECT_TRUE(chooser->wanted(s));
  const Choice c = chooser->choose(s, cpu);
  EXPECT_EQ(c.chosen, "sweeps");
  ASSERT_EQ(c.tries.size(), 1u);
  EXPECT_EQ(c.tries[0].why, "not timed: the only candidate");
  EXPECT_EQ(c.key, "N=64 C=32 Float dropout=0.1");
  s.model.fused_residual_norm = false;  // nothing to choose without the fused kernels
  EXPECT_FALSE(chooser->wanted(s));
}

// The rung runs with the traversal chosen, rungs.json keeps the timing, --resume reads it back.
TEST(ResidualNormChoice, TheChoiceIsTheRungsOutcomeAndSurvivesResume) {
  RungRecord r;
  r.plan.rung.name = "19_top+fused_residual_norm";
  r.plan.rung.spec.model.fused_residual_norm = true;
  r.plan.rung.spec.settings.residual_norm = "fastest";
  r.out.status = RungStatus::kOk;
  r.out.choices.push_back(
      pick_residual_norm(kAll, 1, fake_traversals({{"sweeps", 40.0}, {"held", 45.0}, {"held_forward", 25.0}})));
  EXPECT_TRUE(r.spec().model.residual_norm_held_forward);
  EXPECT_FALSE(r.spec().model.residual_norm_held_backward);
  const nlohmann::json j = to_json(r);
  EXPECT_EQ(j["choices"][0]["setting"], "residual_norm");
  EXPECT_EQ(j["choices"][0]["chosen"], "held_forward");
  EXPECT_EQ(j["spec"]["model"]["residual_norm_held"], (nlohmann::json{{"forward", true}, {"backward", false}}));
  EXPECT_EQ(j["spec"]["settings"]["residual_norm"], "fastest");
  RungRecord back;
  back.plan = r.plan;
  restore(back, j);
  EXPECT_TRUE(back.spec().model.residual_norm_held_forward);
  EXPECT_FALSE(back.spec().model.residual_norm_held_backward);
}

TEST(ResidualNormChoice, TheProfileSaysATraversalOrFastest) {
  test::TempDir d;
  auto load = [&](const std::string& how) {
    return load_profile(test::write_tiny_profile(d, "name: p\nmodel: tiny\nsettings: {residual_norm: " + how + "}\n"));
  };
  // each as the fused_residual_norm variant applies it: rows held forward, backward
  for (auto [how, forward, backward] : {std::tuple{"sweeps", false, false}, {"held", true, true},
                                        {"held_forward", true, false}, {"held_backward", false, true},
                                        {"fastest", false, false}}) {
    StepSpec s;
    s.settings = load(how).settings;
    EXPECT_EQ(s.settings.residual_norm, how);
    find_variant("fused_residual_norm")->apply(s);
    EXPECT_EQ(s.model.residual_norm_held_forward, forward) << how;
    EXPECT_EQ(s.model.residual_norm_held_backward, backward) << how;
  }
  try {
    load("registers");
    FAIL() << "an unknown traversal was taken";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("residual_norm"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("sweeps"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace gpt2
