// End-to-end: the built gpt2bench binary on tiny profiles.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "helpers.h"

namespace gpt2 {
namespace {

const char* kTinyProfile =
    "name: tiny-e2e\nmodel: tiny\ndata: {synthetic_tokens: 20000}\ndevice: cpu\nbatch: 2\n"
    "warmup_steps: 1\nsteps: 2\nrepetitions: 2\nparity_steps: 2\nseed: 3\nvariants: []\n";

TEST(Cli, LadderWritesResultsWithTheCounters) {
  test::TempDir d;
  const auto profile = test::write_tiny_profile(d, kTinyProfile);
  auto r = test::run_gpt2bench("ladder --profile " + profile + " --out " + (d / "run"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("00_baseline"), std::string::npos);

  auto results = nlohmann::json::parse(test::read_text(d / "run/results.json"));
  EXPECT_EQ(results["context"]["profile"], "tiny-e2e");
  EXPECT_EQ(results["context"]["device_type"], "cpu");
  EXPECT_TRUE(results["context"].contains("torch_version"));
  EXPECT_TRUE(results["context"].contains("git_sha"));
  int iterations = 0;
  for (const auto& b : results["benchmarks"]) {
    EXPECT_EQ(b["run_name"], "tiny/00_baseline/iterations:2/repeats:2/manual_time");
    for (const char* c : {"tokens_per_sec", "step_ms", "peak_alloc_bytes", "peak_reserved_bytes", "loss",
                          "flops_per_token", "mfu"})
      EXPECT_TRUE(b.contains(c)) << c;
    if (b["run_type"] == "iteration") {
      ++iterations;
      EXPECT_GT(b["tokens_per_sec"].get<double>(), 0);
      EXPECT_TRUE(std::isfinite(b["loss"].get<double>()));
      EXPECT_GT(b["peak_alloc_bytes"].get<double>(), 0);
    }
  }
  EXPECT_EQ(iterations, 2);

  auto rungs = nlohmann::json::parse(test::read_text(d / "run/rungs.json"));
  EXPECT_EQ(rungs["status"], "complete");
  ASSERT_EQ(rungs["rungs"].size(), 1u);
  const auto& rung = rungs["rungs"][0];
  EXPECT_EQ(rung["name"], "00_baseline");
  EXPECT_EQ(rung["status"], "ok");
  EXPECT_EQ(rung["spec"]["optimizer"]["kind"], "adamw_loop");
  EXPECT_EQ(rung["tokens_per_step"], 2 * 16);
  EXPECT_GT(rung["peak_flops"]["measured_matmul"].get<double>(), 0);
  EXPECT_EQ(rung["parity"]["losses"].size(), 2u);
}

TEST(Cli, MisspelledKeyFailsAndWritesNothing) {
  test::TempDir d;
  const auto profile = test::write_tiny_profile(d, std::string(kTinyProfile) + "reps: 3\n");
  auto r = test::run_gpt2bench("ladder --profile " + profile + " --out " + (d / "run"));
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("profile.yaml:12: unknown key 'reps'"), std::string::npos) << r.output;
  EXPECT_FALSE(std::filesystem::exists(d / "run"));
}

TEST(Cli, RefusesToOverwriteAnotherRun) {
  test::TempDir d;
  test::write_text(d / "run/results.json", "{}");
  const auto profile = test::write_tiny_profile(d, kTinyProfile);
  auto r = test::run_gpt2bench("ladder --profile " + profile + " --out " + (d / "run"));
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("already holds results.json"), std::string::npos) << r.output;
  EXPECT_EQ(test::read_text(d / "run/results.json"), "{}");
}

TEST(Cli, UsageErrors) {
  auto r = test::run_gpt2bench("ladder --profile x.yaml");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("missing --out"), std::string::npos) << r.output;
  r = test::run_gpt2bench("ladder --profle x.yaml --out y");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("unknown option '--profle'"), std::string::npos) << r.output;
  r = test::run_gpt2bench("fly");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("unknown command 'fly'"), std::string::npos);
  r = test::run_gpt2bench("ladder --help");
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_NE(r.output.find("usage: gpt2bench ladder"), std::string::npos);
  r = test::run_gpt2bench("ladder --profile /nonexistent.yaml --out /tmp/never");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("/nonexistent.yaml: no such file"), std::string::npos) << r.output;
}

TEST(Cli, PrepareThenTrainOnTheShards) {
  test::TempDir d;
  std::string text;
  for (int i = 0; i < 400; ++i) text += "the quick brown fox jumps over the lazy dog. ";
  test::write_text(d / "corpus.txt", text);
  auto r = test::run_gpt2bench("prepare --input " + (d / "corpus.txt") + " --out " + (d / "shards"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("train_000000.bin"), std::string::npos);
  // Byte tokens need a vocabulary of 256.
  test::write_text(d / "models/bytes.yaml", "vocab_size: 256\ncontext: 16\nn_embd: 32\nn_head: 4\nn_layer: 1\n");
  test::write_text(d / "p.yaml",
                   "model: bytes\ndata: {train: shards/train_*.bin, val: shards/val_*.bin}\ndevice: cpu\n"
                   "batch: 2\nwarmup_steps: 0\nsteps: 1\nrepetitions: 1\nparity_steps: 0\nvariants: []\n");
  r = test::run_gpt2bench("ladder --profile " + (d / "p.yaml") + " --out " + (d / "run"));
  EXPECT_EQ(r.exit_code, 0) << r.output;
}

TEST(Cli, DoctorAndListVariantsRunWithoutAGpu) {
  auto r = test::run_gpt2bench("doctor");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("device:"), std::string::npos);
  r = test::run_gpt2bench("list-variants");
  EXPECT_EQ(r.exit_code, 0) << r.output;
}

}  // namespace
}  // namespace gpt2
