// What stays bounded however long or strange the input: host memory over a long rung, a --rung pattern's cost.
#include <gtest/gtest.h>

#include <string>

#include "common/files.h"
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
  return test::read_json(dir / name / "rungs.json")["rungs"][0]["median"]["peak_reserved_bytes"].get<double>();
}

// The host allocator keeps what a step frees for the next without hoarding: 100 timed steps peak where 10 did
// (glibc with mmap off grew about 95 MB a step here).
TEST(Bounded, HostMemoryAfterTheTenthStepIsHostMemoryAtTheHundredth) {
  test::TempDir dir;
  const double ten = peak_rss(dir, 5), hundred = peak_rss(dir, 50);
  EXPECT_GT(ten, 1e8);
  EXPECT_LT(hundred, 1.10 * ten) << "10 steps: " << ten / 1e6 << " MB, 100 steps: " << hundred / 1e6 << " MB";
}

}  // namespace
}  // namespace gpt2
