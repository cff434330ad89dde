// Paired timing end to end (docs/measurement.md: Pairs): a machine slowed for a window of time
// (GPT2BENCH_FAULT_SLOW) moves an unpaired ratio but not the paired one, and the run says it was disturbed; a quiet
// run never says so. Registered apart and run serially (CMakeLists.txt): other tests beside them disturb the machine.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "bench/measure/stats.h"
#include "common/files.h"
#include "helpers.h"

namespace gpt2 {
namespace {

constexpr char kProfile[] =
    "name: paired\nmodel: {preset: gpt2-mini, dropout: 0.0}\ndata: synthetic\ndevice: cpu\nbatch: 4\n"
    "warmup_steps: 2\nsteps: 2\nrepetitions: 6\nparity_steps: 0\nbreakdown_steps: 0\nseed: 1337\nplan: ladder\n"
    "references: []\n";

struct Ran {
  nlohmann::json rungs;
  std::string findings;
};

Ran ladder(const test::TempDir& dir, const std::string& name, const std::string& variants, const std::string& env = "") {
  const std::string profile = dir / (name + ".yaml");
  test::write_text(profile, std::string(kProfile) + "variants: [" + variants + "]\n");
  const std::string out = dir / name;
  const auto r = test::run_gpt2bench("ladder --profile " + profile + " --out " + out, env);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  const auto rep = test::run_gpt2bench("report " + out + " --out " + out + "/report");
  EXPECT_EQ(rep.exit_code, 0) << rep.output;
  const std::string md = test::read_text(out + "/report/report.md");
  const auto from = md.find("## Findings");
  return {test::read_json(out + "/rungs.json")["rungs"], md.substr(from, md.find("\n## ", from + 1) - from)};
}

double medians_ratio(const nlohmann::json& a, const nlohmann::json& b) {
  return median(a["repetitions"]["tokens_per_sec"].get<std::vector<double>>()) /
         median(b["repetitions"]["tokens_per_sec"].get<std::vector<double>>());
}

TEST(PairedLadder, AWindowAtHalfSpeedLeavesThePairedRatioAndIsNamed) {
  test::TempDir dir;
  const Ran quiet = ladder(dir, "quiet", "mask_on_the_fly");
  const nlohmann::json& q = quiet.rungs[1];
  ASSERT_EQ(q["paired"]["with"], "00_baseline");
  // The window: as long as the quiet pairs took (both sides, each about the rung's timed seconds), so at half speed
  // it holds half of them (3 of 6): half of the rung's timing, and half of the unpaired repetitions.
  const double pairs = 2 * q["ran"]["seconds"]["timed"].get<double>();
  const Ran slowed = ladder(dir, "slowed", "mask_on_the_fly",
                            "GPT2BENCH_FAULT_SLOW=01_mask_on_the_fly:" + std::to_string(pairs) + ":2");
  const nlohmann::json& s = slowed.rungs[1];
  const double paired = s["paired"]["ratio"].get<double>(), undisturbed = q["paired"]["ratio"].get<double>();
  EXPECT_NEAR(paired / undisturbed, 1.0, 0.10) << s["paired"].dump();
  // The same repetitions unpaired, against the baseline timed before the window: off by far more.
  EXPECT_GT(std::abs(medians_ratio(s, slowed.rungs[0]) / undisturbed - 1.0), 0.10) << s["repetitions"].dump();
  EXPECT_TRUE(s["paired"]["disturbed"].get<bool>()) << s["paired"].dump();
  EXPECT_GT(s["paired"]["movement"].get<double>(), kQuietMovement);
  EXPECT_NE(slowed.findings.find("**Disturbed**"), std::string::npos) << slowed.findings;
  EXPECT_NE(slowed.findings.find("01_mask_on_the_fly"), std::string::npos) << slowed.findings;
  EXPECT_NE(slowed.findings.find("disturbed at 01_mask_on_the_fly"), std::string::npos) << slowed.findings;
}

TEST(PairedLadder, AQuietRunIsNeverCalledDisturbed) {
  test::TempDir dir;
  for (int i = 0; i < 3; ++i) {
    const Ran quiet = ladder(dir, "quiet" + std::to_string(i), "mask_on_the_fly, fused_adamw, native_layers");
    ASSERT_EQ(quiet.rungs.size(), 4u);
    for (size_t k = 1; k < quiet.rungs.size(); ++k) {
      const nlohmann::json& p = quiet.rungs[k]["paired"];
      EXPECT_FALSE(p["disturbed"].get<bool>()) << quiet.rungs[k]["name"] << ": " << p.dump();
      EXPECT_EQ(p["ratios"].size(), 6u);
    }
    EXPECT_EQ(quiet.findings.find("Disturbed"), std::string::npos) << quiet.findings;
    EXPECT_NE(quiet.findings.find("- **Fastest**"), std::string::npos) << quiet.findings;
    EXPECT_NE(quiet.findings.find("its own checks pass (disturbed"), std::string::npos) << quiet.findings;
  }
}

}  // namespace
}  // namespace gpt2
