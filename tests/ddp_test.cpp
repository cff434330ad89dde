// DDP with real processes on this machine (Gloo over loopback): the launcher, torchrun, replicas
// kept identical, N ranks × B = 1 rank × N·B, and a killed rank named by the survivor.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <chrono>
#include <cmath>

#include "helpers.h"

namespace gpt2 {
namespace {

const char* kProfile =
    "model: tiny\ndata: {synthetic_tokens: 20000}\ndevice: cpu\nbatch: 2\nseed: 3\ndist_timeout_s: 30\n"
    "warmup_steps: 1\nsteps: 2\nrepetitions: 2\nparity_steps: 2\nvariants: [ddp]\n";

nlohmann::json rank_file(const test::TempDir& d, const std::string& dir, int rank) {
  return test::read_json(d / (dir + "/rank" + std::to_string(rank) + ".json"));
}

TEST(Ddp, ReplicasStayIdenticalAndMatchOneRankWithTheGlobalBatch) {
  test::TempDir d;
  const auto profile = test::write_tiny_profile(d, kProfile);
  auto r = test::run_gpt2bench("ddp-check --profile " + profile + " --out " + (d / "two") + " --steps 4 --nproc 2");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto r0 = rank_file(d, "two", 0), r1 = rank_file(d, "two", 1);
  EXPECT_EQ(r0["world_size"], 2);
  EXPECT_EQ(r0["param_sum"], r1["param_sum"]);  // bit for bit: same all-reduced gradients, same updates
  EXPECT_EQ(r0["param_sum_sq"], r1["param_sum_sq"]);
  EXPECT_NE(r0["losses"], r1["losses"]);  // each rank read its own slice of the batch

  r = test::run_gpt2bench("ddp-check --profile " + profile + " --out " + (d / "one") + " --steps 4 --batch 4");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto one = rank_file(d, "one", 0);
  EXPECT_EQ(one["world_size"], 1);
  for (size_t i = 0; i < 4; ++i)
    EXPECT_NEAR(r0["mean_losses"][i].get<double>(), one["mean_losses"][i].get<double>(), 1e-5) << "step " << i;
  EXPECT_NEAR(r0["param_sum"].get<double>(), one["param_sum"].get<double>(), 1e-3);
}

TEST(Ddp, AKilledRankIsNamedAndTheSurvivorStops) {
  test::TempDir d;
  const auto profile = test::write_tiny_profile(d, kProfile);
  const auto start = std::chrono::steady_clock::now();
  auto r = test::run_gpt2bench("ddp-check --profile " + profile + " --out " + (d / "o") +
                               " --steps 500 --nproc 2", "GPT2BENCH_FAULT_RANK=1 GPT2BENCH_FAULT_STEP=3");
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("rank 1 was killed by signal 9"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("lost rank 1"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("rank 0 exited with code 1"), std::string::npos) << r.output;
  EXPECT_LT(took, 30.0);  // within the configured timeout, not a hang
}

void expect_ddp_rung(const test::TempDir& d, const std::string& run) {
  auto rungs = test::read_json(d / (run + "/rungs.json"));
  ASSERT_EQ(rungs["rungs"].size(), 2u);
  const auto& ddp = rungs["rungs"][1];
  EXPECT_EQ(ddp["name"], "01_ddp");
  EXPECT_EQ(ddp["status"], "ok");
  EXPECT_EQ(ddp["world_size"], 2);
  EXPECT_EQ(ddp["tokens_per_step"], 2 * 2 * 16);  // summed over ranks
  EXPECT_EQ(ddp["rank_step_ms"].size(), 2u);
  EXPECT_GT(ddp["scaling_efficiency"].get<double>(), 0.0);
  EXPECT_EQ(ddp["parity"]["verdict"], "pass");
  EXPECT_EQ(rungs["device"]["world_size"], 2);
  auto results = test::read_json(d / (run + "/results.json"));
  EXPECT_EQ(results["context"]["world_size"], "2");
  bool counted = false;
  for (const auto& b : results["benchmarks"])
    if (b["run_name"].get<std::string>().find("01_ddp") != std::string::npos && b["run_type"] == "iteration")
      counted = b.contains("scaling_efficiency") && b["world_size"] == 2;
  EXPECT_TRUE(counted);
}

TEST(Ddp, LadderWithTheBuiltInLauncher) {
  test::TempDir d;
  const auto profile = test::write_tiny_profile(d, kProfile);
  auto r = test::run_gpt2bench("ladder --profile " + profile + " --out " + (d / "run") + " --nproc 2");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  expect_ddp_rung(d, "run");
}

// Rank 0 hosts the store its messages to the others go through: it must not end before every rank
// has read "done" (a follower slower to read it lost rank 0 and failed: seen once in CI).
TEST(Ddp, RankZeroWaitsForEveryRankToReadDone) {
  test::TempDir d;
  const auto profile = test::write_tiny_profile(d, kProfile);
  auto r = test::run_gpt2bench("ladder --profile " + profile + " --out " + (d / "run") + " --nproc 2",
                               "GPT2BENCH_TEST_FOLLOWER_DELAY_MS=1500");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(r.output.find("lost rank 0"), std::string::npos) << r.output;
  expect_ddp_rung(d, "run");
}

TEST(Ddp, LadderUnderTorchrun) {
  // The torchrun beside the interpreter this build was configured with (.venv's, .venv-cuda's for the CUDA build).
  const std::string torchrun = files::join(files::parent(GPT2BENCH_PYTHON), "torchrun");
  if (!files::exists(torchrun)) GTEST_SKIP() << "skipped: no " << torchrun << " beside the project's Python";
  test::TempDir d;
  const auto profile = test::write_tiny_profile(d, kProfile);
  auto r = test::run_command(torchrun + " --standalone --nproc_per_node=2 --no-python " + GPT2BENCH_BINARY + " ladder --profile " +
                             profile + " --out " + (d / "run"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  expect_ddp_rung(d, "run");
}

}  // namespace
}  // namespace gpt2
