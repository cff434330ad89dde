// settings.residual_norm — how the fused residual norm's CUDA kernels traverse a row: sweeps (read again for each
// step), held (kept in registers), or fastest (both timed on the rung's rows, the sweeps kept unless held beats
// them by the margin). The rule is tested with fake timings; on the CPU only the reference runs, so one candidate.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <map>
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

std::function<double(bool)> fake_trial(double sweeps_ms, double held_ms, std::vector<bool>* calls = nullptr) {
  return [=](bool held) {
    if (calls) calls->push_back(held);
    return (held ? held_ms : sweeps_ms) / 1e3;
  };
}

TEST(ResidualNormChoice, HeldIsChosenOnlyWhenFasterThanTheSweepsByTheMargin) {
  std::vector<bool> calls;
  Choice c = pick_residual_norm({"sweeps", "held"}, 2, fake_trial(40.7, 30.0, &calls));
  EXPECT_EQ(calls, (std::vector<bool>{false, true, false, true, false, true}));  // tried once, then in turns
  EXPECT_EQ(c.setting, "residual_norm");
  EXPECT_EQ(c.chosen, "held");
  EXPECT_EQ(c.incumbent, "sweeps");
  EXPECT_DOUBLE_EQ(*c.tries[1].ms, 30.0);
  EXPECT_EQ(pick_residual_norm({"sweeps", "held"}, 2, fake_trial(40.0, 39.8)).chosen, "sweeps");  // within 1%
  EXPECT_EQ(pick_residual_norm({"sweeps", "held"}, 2, fake_trial(30.0, 40.0)).chosen, "sweeps");
}

TEST(ResidualNormChoice, OnlyACudaDeviceHasTwoTraversalsAndOnlyRowsThatFitAreHeld) {
  DeviceInfo gpu;
  gpu.type = DeviceType::kCuda;
  EXPECT_EQ(residual_norm_candidates(gpu), (std::vector<std::string>{"sweeps", "held"}));
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
  s.settings.residual_norm_fastest = true;
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
  r.plan.rung.spec.settings.residual_norm_fastest = true;
  r.out.status = RungStatus::kOk;
  r.out.choices.push_back(pick_residual_norm({"sweeps", "held"}, 1, fake_trial(40.0, 25.0)));
  EXPECT_TRUE(r.spec().model.residual_norm_held);
  const nlohmann::json j = to_json(r);
  EXPECT_EQ(j["choices"][0]["setting"], "residual_norm");
  EXPECT_EQ(j["choices"][0]["chosen"], "held");
  EXPECT_EQ(j["spec"]["model"]["residual_norm_held"], true);
  EXPECT_EQ(j["spec"]["settings"]["residual_norm"], "fastest");
  RungRecord back;
  back.plan = r.plan;
  restore(back, j);
  EXPECT_TRUE(back.spec().model.residual_norm_held);
}

TEST(ResidualNormChoice, TheProfileSaysSweepsHeldOrFastest) {
  test::TempDir d;
  auto load = [&](const std::string& how) {
    return load_profile(test::write_tiny_profile(d, "name: p\nmodel: tiny\nsettings: {residual_norm: " + how + "}\n"));
  };
  EXPECT_FALSE(load("sweeps").settings.residual_norm_held);
  EXPECT_TRUE(load("held").settings.residual_norm_held);
  EXPECT_TRUE(load("fastest").settings.residual_norm_fastest);
  StepSpec s;
  s.settings = load("held").settings;
  find_variant("fused_residual_norm")->apply(s);
  EXPECT_TRUE(s.model.residual_norm_held);
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
