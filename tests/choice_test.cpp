// One mechanism for a setting settled by timing (bench/measure/choice.h): the rule on fake timings, and a third
// choice declared here alone, as a new one would be, timed, chosen, recorded, kept through --resume and reported.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "bench/ladder/ladder.h"
#include "bench/measure/choice.h"
#include "tests/helpers.h"

namespace gpt2 {
namespace {

std::function<double(const std::string&)> fake_times(std::map<std::string, double> ms) {
  return [ms](const std::string& c) {
    if (!ms.count(c)) throw std::runtime_error(c + " cannot run here");
    return ms.at(c) / 1e3;
  };
}

TEST(Choice, TheFastestMedianWinsUnlessTheIncumbentIsWithinTheMargin) {
  Choice c{"s", "k", "rule", "", "", 0, {}, ""};
  EXPECT_EQ(time_candidates(c, {"a", "b", "c"}, 3, fake_times({{"a", 2}, {"b", 1}, {"c", 3}})).chosen, "b");
  c.incumbent = "a", c.margin = 0.1;
  EXPECT_EQ(time_candidates(c, {"a", "b"}, 3, fake_times({{"a", 1.05}, {"b", 1}})).chosen, "a");
  EXPECT_EQ(time_candidates(c, {"a", "b"}, 3, fake_times({{"a", 1.2}, {"b", 1}})).chosen, "b");
  const Choice out = time_candidates(c, {"a", "b"}, 1, fake_times({{"b", 1}}));
  EXPECT_EQ(out.tries[0].why, "a cannot run here");
  const Choice back = choice_from(nlohmann::json(out));
  EXPECT_EQ(nlohmann::json(back), nlohmann::json(out));
  EXPECT_EQ(time_candidates(c, {"a"}, 1, fake_times({})).chosen, "a");  // a single candidate is not timed
  try {
    time_candidates(c, {"a", "b"}, 1, fake_times({}));
    FAIL() << "none ran, and nothing was said";
  } catch (const std::runtime_error& e) {
    EXPECT_EQ(std::string(e.what()), "no s candidate runs here (a: a cannot run here; b: b cannot run here)");
  }
}

// The fake: two candidates on every SDPA rung's batch, "fast" the faster; applying it is remembered.
struct FakeChoice {
  int timings = 0;
  std::vector<std::string> applied;
  FakeChoice() {
    choosers().push_back(
        {"test_setting", true, [](const StepSpec& s) { return s.model.attention == AttentionImpl::kSdpa; },
         [](const StepSpec& s) { return "B=" + std::to_string(s.batch); },
         [this](const StepSpec&, const DeviceInfo&) {
           ++timings;
           return time_candidates({"test_setting", "", "the fake's rule", "", "", 0, {}, ""}, {"slow", "fast"}, 2,
                                  fake_times({{"slow", 2}, {"fast", 1}}));
         },
         [this](StepSpec&, const std::string& chosen) { applied.push_back(chosen); }});
  }
  ~FakeChoice() { choosers().pop_back(); }
};

nlohmann::json choice_of(const nlohmann::json& rung) {
  for (const auto& c : rung.value("choices", nlohmann::json::array()))
    if (c["setting"] == "test_setting") return c;
  return nullptr;
}

TEST(Choice, ANewChoiceIsTimedChosenRecordedKeptThroughResumeAndReported) {
  FakeChoice fake;
  test::TempDir d;
  const auto profile = test::write_tiny_profile(
      d, "name: c\nmodel: tiny\ndata: {synthetic_tokens: 20000}\ndevice: cpu\nbatch: 2\nwarmup_steps: 1\nsteps: 2\n"
         "repetitions: 2\nparity_steps: 2\nbreakdown_steps: 0\nseed: 3\nplan: recipes\n"
         "recipes: {a: [sdpa], b: [sdpa, fused_adamw]}\n");
  const std::string run = d / "run";
  ASSERT_EQ(run_ladder({profile, run, "", "01_a", false, false}), 0);
  EXPECT_EQ(fake.timings, 1);
  EXPECT_NE(std::find(fake.applied.begin(), fake.applied.end(), "fast"), fake.applied.end());
  auto doc = test::read_json(run + "/rungs.json");
  EXPECT_TRUE(choice_of(doc["rungs"][0]).is_null());  // no SDPA in the baseline
  const auto c = choice_of(doc["rungs"][1]);
  ASSERT_FALSE(c.is_null()) << doc["rungs"][1].dump();
  EXPECT_EQ(c["chosen"], "fast");
  EXPECT_EQ(c["key"], "B=2");
  EXPECT_EQ(c["tries"].size(), 2u);

  ASSERT_EQ(run_ladder({profile, run, "", "", true, false}), 0);  // --resume --rung=: the rest
  EXPECT_EQ(fake.timings, 1);  // 02_b took 01_a's timing of the same key, kept through --resume
  doc = test::read_json(run + "/rungs.json");
  EXPECT_EQ(choice_of(doc["rungs"][2])["timed_for"], "01_a") << doc["rungs"][2].dump();
  EXPECT_EQ(choice_of(doc["rungs"][2])["chosen"], "fast");

  const auto r = test::run_gpt2bench("report " + run + " --out " + (d / "report"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::string md = test::read_text(d / "report/report.md");
  EXPECT_NE(md.find("test_setting"), std::string::npos) << md;
  // the timing said once, with the rung that took it
  EXPECT_NE(md.find("01_a fast (slow 2, fast 1), and so 02_b (the same B=2)."), std::string::npos) << md;
}

}  // namespace
}  // namespace gpt2
