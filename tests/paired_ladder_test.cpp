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

Ran ladder(const test::TempDir& dir, const std::string& name, const std::string& variants, const std::string& env = "",
           int repetitions = 6) {
  const std::string profile = dir / (name + ".yaml");
  std::string body = kProfile;
  body.replace(body.find("repetitions: 6"), 14, "repetitions: " + std::to_string(repetitions));
  test::write_text(profile, body + "variants: [" + variants + "]\n");
  const std::string out = dir / name;
  const auto r = test::run_gpt2bench("ladder --profile " + profile + " --out " + out, env);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  const auto rep = test::run_gpt2bench("report " + out + " --out " + out + "/report");
  EXPECT_EQ(rep.exit_code, 0) << rep.output;
  const std::string md = test::read_text(out + "/report/report.md");
  const auto from = md.find("## Findings");
  return {test::read_json(out + "/rungs.json")["rungs"], md.substr(from, md.find("\n## ", from + 1) - from)};
}

// a's tok/s over b's, each over its whole timing (total tokens over total time: its repetitions take equal steps).
double unpaired_ratio(const nlohmann::json& a, const nlohmann::json& b) {
  auto whole = [](const nlohmann::json& r) {
    double inverse = 0;
    const auto tps = r["repetitions"]["tokens_per_sec"].get<std::vector<double>>();
    for (double t : tps) inverse += 1 / t;
    return static_cast<double>(tps.size()) / inverse;
  };
  return whole(a) / whole(b);
}

TEST(PairedLadder, AWindowAtHalfSpeedLeavesThePairedRatioAndIsNamed) {
  test::TempDir dir;
  const Ran quiet = ladder(dir, "quiet", "mask_on_the_fly", "", 8);
  const nlohmann::json& q = quiet.rungs[1];
  ASSERT_EQ(q["paired"]["with"], "00_baseline");
  // The window: as long as the quiet pairs took (both sides, each about the rung's timed seconds), so at half speed
  // it holds half of them and more (about 5 of 8: the movement still sees two pairs slow and two not at 3 to 6).
  const double pairs = 1.2 * 2 * q["ran"]["seconds"]["timed"].get<double>();
  const Ran slowed = ladder(dir, "slowed", "mask_on_the_fly",
                            "GPT2BENCH_FAULT_SLOW=01_mask_on_the_fly:" + std::to_string(pairs) + ":2", 8);
  const nlohmann::json& s = slowed.rungs[1];
  const double paired = s["paired"]["ratio"].get<double>(), undisturbed = q["paired"]["ratio"].get<double>();
  EXPECT_NEAR(paired / undisturbed, 1.0, 0.10) << s["paired"].dump();
  // The same repetitions unpaired, against the baseline timed before the window: off by far more.
  EXPECT_GT(std::abs(unpaired_ratio(s, slowed.rungs[0]) / undisturbed - 1.0), 0.10) << s["repetitions"].dump();
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
