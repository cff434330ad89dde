// What stays bounded however long or strange the input: host memory over a long rung, the time budget, a --rung
// pattern's cost. RunAlone: measured on the machine as it is, so run alone (CMakeLists.txt), as PairedLadder.
#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <string>

#include "bench/runtime/memory.h"
#include "common/files.h"
#include "common/posix_regex.h"
#include "helpers.h"

namespace gpt2 {
namespace {

// cpu-mini's model and batch, the baseline alone, `steps` timed steps in each of 2 repetitions: its peak RSS.
double peak_rss(const test::TempDir& dir, int steps) {
  const std::string name = "steps" + std::to_string(steps), profile = dir / (name + ".yaml");
  test::write_text(profile, "name: rss\nmodel: {preset: gpt2-mini, dropout: 0.0}\ndata: synthetic\ndevice: cpu\n"
                            "batch: 4\nwarmup_steps: 2\nrepetitions: 2\nparity_steps: 0\nbreakdown_steps: 0\n"
                            "references: []\nvariants: []\nsteps: " + std::to_string(steps) + "\n");
  const auto r = test::run_gpt2bench("ladder --profile " + profile + " --out " + (dir / name));
  EXPECT_EQ(r.exit_code, 0) << r.output;
  return test::read_json(dir / (name + "/rungs.json"))["rungs"][0]["median"]["peak_reserved_bytes"].get<double>();
}

// The host allocator keeps what a step frees for the next without hoarding: 100 timed steps peak where 10 did
// (glibc with mmap off grew about 95 MB a step here).
TEST(RunAlone, HostMemoryAfterTheTenthStepIsHostMemoryAtTheHundredth) {
  test::TempDir dir;
  const double ten = peak_rss(dir, 5), hundred = peak_rss(dir, 50);
  EXPECT_GT(ten, 1e8);
  EXPECT_LT(hundred, 1.10 * ten) << "10 steps: " << ten / 1e6 << " MB, 100 steps: " << hundred / 1e6 << " MB";
}

// A rung planned at its warm-up's speed, then slowed 4x from its first timed repetition: the repetitions left take
// fewer steps, and the run ends within 20% of its budget (before, it took its planned steps at any speed: 138 s for
// a one-minute budget).
TEST(RunAlone, ARungSlowedMidwayReplansAndTheRunStaysWithinItsBudget) {
  test::TempDir dir;
  const std::string profile = dir / "budget.yaml";
  constexpr double kBudgetS = 30;
  test::write_text(profile, "name: budget\nmodel: {preset: gpt2-mini, dropout: 0.0}\ndata: synthetic\ndevice: cpu\n"
                            "batch: 4\nwarmup_steps: 2\nsteps: 1000\nrepetitions: 5\nparity_steps: 0\n"
                            "breakdown_steps: 0\nreferences: []\nvariants: []\nbudget_minutes: 0.5\n");
  const auto start = std::chrono::steady_clock::now();
  const auto r = test::run_gpt2bench("ladder --profile " + profile + " --out " + (dir / "run"),
                                     "GPT2BENCH_FAULT_SLOW=00_baseline:1000:4");
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("re-planned after repetition 1: "), std::string::npos) << r.output;
  EXPECT_LT(took, 1.2 * kBudgetS) << r.output;
  const auto rung = test::read_json(dir / "run/rungs.json")["rungs"][0];
  EXPECT_NE(rung["ran"]["budget"].get<std::string>().find("re-planned"), std::string::npos) << rung["ran"].dump();
}

int64_t resident_bytes() {  // VmRSS
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("VmRSS:", 0) == 0) return std::stoll(line.substr(6)) * 1024;
  return 0;
}

// glibc's regcomp writes out each x{m,n} as n copies: ((a{0,100}){0,100}){0,100} took 9.3 GB before it failed.
TEST(Bounded, NestedBoundedRepetitionsAreRefusedOrMatchedWithinASecondAnd100MB) {
  const struct {
    std::string pattern;
    bool refused;
  } cases[] = {{"((a{0,100}){0,100}){0,100}", true}, {"(((a{0,7}){0,7}){0,7}){0,7}", true},
               {"(a|b|c|d|e|f|g|h|i|j){0,1000}", true}, {"((a{0,40}){0,40}){2,}", true},
               {"((a{0,10}){0,10}){0,10}", false}, {"([a-z]{1,40}_){1,40}", false}, {"0[1-5]_[a-z[:digit:]]+", false}};
  for (const auto& c : cases) {
    ASSERT_TRUE(reset_process_peak_rss());
    const int64_t before = resident_bytes();
    const auto start = std::chrono::steady_clock::now();
    try {
      const PosixRegex re(c.pattern, "--rung");
      EXPECT_FALSE(c.refused) << c.pattern;
      EXPECT_TRUE(re.found_in("01_aaaa_")) << c.pattern;
    } catch (const std::invalid_argument& e) {
      EXPECT_TRUE(c.refused) << c.pattern << ": " << e.what();
      EXPECT_NE(std::string(e.what()).find("is refused: its bounded repetitions"), std::string::npos) << e.what();
    }
    EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 1.0) << c.pattern;
    EXPECT_LT(process_peak_rss() - before, int64_t{100} << 20) << c.pattern;
  }
  EXPECT_EQ(regex_expanded_size("((a{0,100}){0,100}){0,100}", 1e300), 1e6);
  EXPECT_EQ(regex_expanded_size("[]a{}]{3}\\{x", 1e300), 5);  // a bracket, then an escaped brace, are one atom each
}

TEST(Bounded, ARefusedPatternIsABadInputError) {
  test::TempDir dir;
  const auto r = test::run_gpt2bench("ladder --profile " + std::string(GPT2BENCH_SOURCE_DIR) +
                                     "/profiles/cpu-mini.yaml --out " + (dir / "run") + " --rung '((a{0,40}){0,40}){0,40}'");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("gpt2bench ladder: error: --rung '((a{0,40}){0,40}){0,40}' is refused"), std::string::npos)
      << r.output;
  EXPECT_FALSE(files::exists(dir / "run")) << "nothing written";
}

}  // namespace
}  // namespace gpt2
