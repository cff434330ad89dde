// settings.classifier_chunk: fastest — the fused classifier's chunk timed per LM head and chosen, recorded. The
// rule is tested with fake timings and an out-of-memory candidate; the real timing runs kernels/classifier's CPU
// path on the tiny model's head.
#include <gtest/gtest.h>

#include <c10/core/Allocator.h>
#include <c10/util/Exception.h>
#include <nlohmann/json.hpp>

#include <map>
#include <vector>

#include "bench/ladder/results.h"
#include "bench/measure/choosers.h"
#include "bench/runtime/device.h"
#include "config/profile.h"
#include "config/yaml_reader.h"
#include "tests/helpers.h"

namespace gpt2 {
namespace {

// A trial from fixed per-chunk times (ms); a chunk missing from `ms` runs out of memory as the allocator says it.
std::function<double(int64_t)> fake_trial(std::map<int64_t, double> ms, std::vector<int64_t>* calls = nullptr) {
  return [ms, calls](int64_t chunk) {
    if (calls) calls->push_back(chunk);
    if (!ms.count(chunk)) TORCH_CHECK_WITH(OutOfMemoryError, false, "CUDA out of memory. Tried to allocate 6.14 GiB.");
    return ms.at(chunk) / 1e3;
  };
}

TEST(ChunkChoice, TheCandidatesDoubleFromTheSettingUpToEveryToken) {
  EXPECT_EQ(classifier_chunk_candidates(1024, 8192), (std::vector<int64_t>{1024, 2048, 4096, 8192}));
  EXPECT_EQ(classifier_chunk_candidates(1024, 6000), (std::vector<int64_t>{1024, 2048, 4096, 6000}));
  EXPECT_EQ(classifier_chunk_candidates(1024, 64), (std::vector<int64_t>{64}));  // one chunk holds them all
}

TEST(ChunkChoice, EveryChunkTimedInTurnsAfterAWarmUpTheFastestMedianWins) {
  std::vector<int64_t> calls;
  const auto c = pick_classifier_chunk({1024, 2048, 4096}, 2, fake_trial({{1024, 3.0}, {2048, 2.0}, {4096, 2.5}}, &calls));
  EXPECT_EQ(calls, (std::vector<int64_t>{1024, 2048, 4096, 1024, 2048, 4096, 1024, 2048, 4096}));
  EXPECT_EQ(c.chosen, "2048");
  ASSERT_EQ(c.tries.size(), 3u);
  EXPECT_DOUBLE_EQ(*c.tries[0].ms, 3.0);
}

TEST(ChunkChoice, ASingleCandidateIsChosenUntimed) {
  std::vector<int64_t> calls;
  const auto c = pick_classifier_chunk({64}, 5, fake_trial({{64, 1.0}}, &calls));
  EXPECT_TRUE(calls.empty());
  EXPECT_EQ(c.chosen, "64");
  ASSERT_EQ(c.tries.size(), 1u);
  EXPECT_EQ(c.tries[0].why, "not timed: the only candidate");
}

TEST(ChunkChoice, AChunkThatRunsOutOfMemoryIsRecordedWithWhyAndNoneIsAnError) {
  const auto c = pick_classifier_chunk({1024, 2048, 4096}, 1, fake_trial({{1024, 3.0}, {2048, 2.0}}));
  EXPECT_EQ(c.chosen, "2048");
  EXPECT_FALSE(c.tries[2].ms);
  EXPECT_EQ(c.tries[2].why, "CUDA out of memory. Tried to allocate 6.14 GiB.");
  const nlohmann::json j = c;
  EXPECT_EQ(j["chosen"], "2048");
  EXPECT_EQ(j["tries"][2]["why"], c.tries[2].why);
  const Choice back = choice_from(j);
  EXPECT_EQ(back.chosen, "2048");
  EXPECT_EQ(back.tries[2].why, c.tries[2].why);
  EXPECT_DOUBLE_EQ(*back.tries[1].ms, 2.0);
  try {
    pick_classifier_chunk({1024, 2048}, 1, fake_trial({}));
    FAIL() << "no chunk ran, and nothing was said";
  } catch (const std::runtime_error& e) {
    EXPECT_EQ(std::string(e.what()), "no classifier_chunk candidate runs here (1024: CUDA out of memory. Tried to allocate "
                                     "6.14 GiB.; 2048: CUDA out of memory. Tried to allocate 6.14 GiB.)");
  }
}

TEST(ChunkChoice, TimesTheFusedClassifierOnTheStepsHead) {
  const DeviceInfo cpu = detect_device("cpu");
  StepSpec s = baseline_spec(test::tiny_model(), 4, cpu);  // 64 tokens
  s.settings.classifier_chunk = 16;
  s.settings.classifier_chunk_fastest = true;
  s.model.classifier_chunk = 16;
  const Choice c = choose_classifier_chunk(s, cpu, 2, 1);
  ASSERT_EQ(c.tries.size(), 3u);  // 16, 32, 64
  for (const auto& t : c.tries) ASSERT_TRUE(t.ms) << t.candidate << ": " << t.why;
  EXPECT_TRUE(c.chosen == "16" || c.chosen == "32" || c.chosen == "64") << c.chosen;
  EXPECT_EQ(c.key, classifier_chunk_key(s));
  EXPECT_EQ(classifier_chunk_key(s), "N=64 C=32 V=97 Float from 16");
}

// The rung runs at the chunk chosen (an outcome, as the SDPA kernel is), and rungs.json keeps the measurement,
// which --resume reads back.
TEST(ChunkChoice, TheChoiceIsTheRungsOutcomeAndSurvivesResume) {
  RungRecord r;
  r.plan.rung.name = "17_top+fused_classifier";
  r.plan.rung.spec.model.classifier_chunk = 1024;
  r.plan.rung.spec.settings.classifier_chunk_fastest = true;
  r.out.status = RungStatus::kOk;
  r.out.choices.push_back(pick_classifier_chunk({1024, 2048}, 1, fake_trial({{1024, 2.0}, {2048, 1.0}})));
  EXPECT_EQ(r.spec().model.classifier_chunk, 2048);
  const nlohmann::json j = to_json(r);
  EXPECT_EQ(j["choices"][0]["setting"], "classifier_chunk");
  EXPECT_EQ(j["choices"][0]["chosen"], "2048");
  EXPECT_EQ(j["spec"]["model"]["classifier_chunk"], 2048);
  EXPECT_EQ(j["spec"]["settings"]["classifier_chunk"], "fastest");
  RungRecord back;
  back.plan = r.plan;
  restore(back, j);
  EXPECT_EQ(back.spec().model.classifier_chunk, 2048);
  // a rung without the fused classifier keeps none, whatever it was told
  back.plan.rung.spec.model.classifier_chunk = 0;
  EXPECT_EQ(back.spec().model.classifier_chunk, 0);
}

// On a GPU each chunk that leaves more than one is also timed with its softmax passes beside the GEMMs; the rung
// runs the one chosen, and a chunk in order clears it.
TEST(ChunkChoice, EachChunkButAllTokensIsAlsoTimedBesideASideStream) {
  std::vector<std::string> calls;
  const auto c = pick_classifier_chunk({1024, 2048, 4096}, 1, [&](int64_t chunk, bool beside) {
    calls.push_back(std::to_string(chunk) + (beside ? " beside" : ""));
    return chunk == 2048 && beside ? 1e-3 : 2e-3;
  }, true);
  EXPECT_EQ(calls, (std::vector<std::string>{"1024", "1024 beside", "2048", "2048 beside", "4096",
                                             "1024", "1024 beside", "2048", "2048 beside", "4096"}));
  EXPECT_EQ(c.chosen, "2048 beside");
  RungRecord r;
  r.plan.rung.spec.model.classifier_chunk = 1024;
  r.plan.rung.spec.settings.classifier_chunk_fastest = true;
  r.out.status = RungStatus::kOk;
  r.out.choices.push_back(c);
  EXPECT_EQ(r.spec().model.classifier_chunk, 2048);
  EXPECT_TRUE(r.spec().model.classifier_beside);
  EXPECT_EQ(to_json(r)["spec"]["model"]["classifier_beside"], true);
  r.out.choices[0].chosen = "4096";
  EXPECT_FALSE(r.spec().model.classifier_beside);
}

TEST(ChunkChoice, TheProfileSaysFastestOrANumberOfTokens) {
  test::TempDir d;
  auto load = [&](const std::string& chunk) {
    return load_profile(test::write_tiny_profile(d, "name: p\nmodel: tiny\nsettings: {classifier_chunk: " + chunk + "}\n"));
  };
  EXPECT_TRUE(load("fastest").settings.classifier_chunk_fastest);
  EXPECT_EQ(load("fastest").settings.classifier_chunk, 1024);  // the first tried
  EXPECT_FALSE(load("4096").settings.classifier_chunk_fastest);
  EXPECT_EQ(load("4096").settings.classifier_chunk, 4096);
  for (const char* bad : {"fastet", "0"}) {
    try {
      load(bad);
      FAIL() << bad;
    } catch (const ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find("classifier_chunk"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("expected tokens a chunk (1 to 16777216) or fastest, got '" +
                                           std::string(bad) + "'"), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace gpt2
