// One owner per run directory, no impossible figure, no crash on input (issue 48): each bad case a user met, as a
// test that failed before and holds now.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fcntl.h>
#include <thread>

#include "bench/ladder/peaks.h"
#include "bench/ladder/run_dir.h"
#include "bench/runtime/device.h"
#include "helpers.h"

namespace gpt2 {
namespace {

const std::string kFive =
    "name: own\nmodel: tiny\ndata: {synthetic_tokens: 20000}\ndevice: cpu\nbatch: 4\nwarmup_steps: 1\n"
    "steps: 3\nrepetitions: 2\nparity_steps: 2\nbreakdown_steps: 0\nseed: 5\n"
    "variants: [mask_on_the_fly, native_layers, fused_adamw, sdpa]\n";


// gpt2bench `args` started in the background, its output to `log`; returns its pid.
pid_t start(const std::string& args, const std::string& log, const std::string& env = "") {
  const pid_t pid = fork();
  if (pid == 0) {
    const int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(fd, 1), dup2(fd, 2);
    execl("/bin/sh", "sh", "-c", ("exec env " + env + " " + GPT2BENCH_BINARY + " " + args).c_str(), nullptr);
    _exit(127);
  }
  return pid;
}

bool wait_for(const std::function<bool()>& ready, double seconds = 120) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (!ready()) {
    if (std::chrono::steady_clock::now() > until) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return true;
}

// Two ladders on one --out, and a --resume of a live run: the second process is refused at once, naming the first;
// nothing of the first's is touched. Killed (SIGKILL), the first leaves its lock to the kernel: --resume takes over.
TEST(Ownership, ASecondProcessOnALiveRunDirectoryIsRefusedAndAKilledOnesIsTakenOver) {
  test::TempDir d;
  const auto profile = test::write_tiny_profile(d, kFive);
  const std::string run = d / "run";
  // The first held in its second rung: a host waiting on a kernel that never ends (60 s), no watch to end it.
  const pid_t first = start("ladder --profile " + profile + " --out " + run, d / "first.log",
                            "GPT2BENCH_FAULT_DEVICE=01_mask_on_the_fly:hang GPT2BENCH_HANG_S=0");
  const std::string me = "pid " + std::to_string(first) + " on ";
  ASSERT_TRUE(wait_for([&] { return test::read_text(d / "first.log").find("[2/5]") != std::string::npos; }))
      << test::read_text(d / "first.log");
  EXPECT_NE(test::read_text(run + "/.lock").find(me), std::string::npos) << test::read_text(run + "/.lock");
  EXPECT_TRUE(RunLock::held(run));

  auto again = test::run_gpt2bench("ladder --profile " + profile + " --out " + run);
  EXPECT_EQ(again.exit_code, 1) << again.output;
  EXPECT_NE(again.output.find(run + " is in use by another gpt2bench process (" + me), std::string::npos) << again.output;
  auto resume = test::run_gpt2bench("ladder --resume " + run);
  EXPECT_EQ(resume.exit_code, 1) << resume.output;
  EXPECT_NE(resume.output.find("in use by another gpt2bench process (" + me), std::string::npos) << resume.output;
  EXPECT_EQ(resume.output.find("ended during it"), std::string::npos) << resume.output;  // the live rung not taken

  kill(first, SIGKILL);
  int status = 0;
  waitpid(first, &status, 0);
  EXPECT_FALSE(RunLock::held(run));
  EXPECT_EQ(test::read_json(run + "/rungs.json")["status"], "running");
  resume = test::run_gpt2bench("ladder --resume " + run);
  EXPECT_EQ(resume.exit_code, 0) << resume.output;
  const auto doc = test::read_json(run + "/rungs.json");
  EXPECT_EQ(doc["status"], "complete");
  for (const auto& r : doc["rungs"]) EXPECT_EQ(r["status"], "ok") << r["name"];
}

// A peak measured low (the machine busy): the first rung beats it, it is measured once more, and where that is low
// too the peak becomes the rate achieved, flagged. No MFU over 100% anywhere: console, rungs.json, results.json.
TEST(Ownership, APeakMeasuredBelowARateAchievedIsRaisedAndFlaggedAndNoMfuPassesOneHundredPercent) {
  test::TempDir d;
  const auto profile = test::write_tiny_profile(
      d, "name: low\nmodel: tiny\ndata: {synthetic_tokens: 20000}\ndevice: cpu\nbatch: 2\nwarmup_steps: 1\n"
         "steps: 3\nrepetitions: 2\nparity_steps: 0\nbreakdown_steps: 0\nvariants: [bf16_cast]\n");
  auto r = test::run_gpt2bench("ladder --profile " + profile + " --out " + (d / "run"), "GPT2BENCH_TEST_LOW_PEAKS=1000");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("measuring it again"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("UNRELIABLE fp32 peak"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("UNRELIABLE bf16 peak"), std::string::npos) << r.output;
  const auto doc = test::read_json(d / "run/rungs.json");
  EXPECT_TRUE(doc["measured"]["unreliable"].contains("fp32")) << doc["measured"].dump();
  EXPECT_NE(doc["mfu"]["basis"].get<std::string>().find("UNRELIABLE"), std::string::npos);
  for (const auto& rung : doc["rungs"]) {
    EXPECT_LE(rung["median"]["mfu"].get<double>(), 1.0) << rung["name"];
    EXPECT_LE(rung["median"]["mfu_vs_measured_peak"].get<double>(), 1.0) << rung["name"];
  }
  // the closing table shows no MFU it cannot stand by: "?", as the report does
  const size_t row = r.output.find("\n00_baseline", r.output.find("vs prev"));
  ASSERT_NE(row, std::string::npos) << r.output;
  const std::string baseline_row = r.output.substr(row + 1, r.output.find('\n', row + 1) - row - 1);
  EXPECT_EQ(baseline_row.find('%'), std::string::npos) << baseline_row;
  EXPECT_NE(baseline_row.find("  ?  "), std::string::npos) << baseline_row;
  const auto results = test::read_json(d / "run/results.json");
  for (const auto& b : results["benchmarks"]) {  // not the cv aggregate: a spread over the mean, not an MFU
    if (b.contains("mfu") && b.value("aggregate_name", "") != "cv") {
      EXPECT_LE(b["mfu"].get<double>(), 1.0 + 1e-9) << b.dump();
    }
  }
}

// Peaks as the ladder holds them, with a fake measurement: measured once; a rate above is measured once more,
// and the better of the two kept; still below, raised to the rate and flagged; every record follows.
TEST(Ownership, PeaksAreMeasuredOnceRemeasuredOnceThenRaised) {
  const DeviceInfo cpu = detect_device("cpu");
  int calls = 0;
  double next = 1e9;
  Peaks peaks(cpu, [&](MathMode) { return ++calls, next; });
  std::vector<RungRecord> records(2);  // fp32 steps
  peaks.measure_for(records, nlohmann::json());
  const int first = calls;
  EXPECT_DOUBLE_EQ(records[1].plan.measured_peak, 1e9);
  EXPECT_FALSE(peaks.hold(records[0], 0.5e9, records));
  EXPECT_EQ(calls, first);

  next = 1.5e9;  // measured again: better, still below the 3e9 achieved
  EXPECT_TRUE(peaks.hold(records[0], 3e9, records));
  EXPECT_EQ(calls, first + 1);
  EXPECT_DOUBLE_EQ(records[1].plan.measured_peak, 3e9);
  EXPECT_DOUBLE_EQ(*records[1].plan.mfu_peak, 3e9);
  EXPECT_TRUE(peaks.to_json()["unreliable"].contains("fp32"));
  EXPECT_TRUE(peaks.hold(records[1], 4e9, records));  // once a run: no second measurement
  EXPECT_EQ(calls, first + 1);
  EXPECT_DOUBLE_EQ(records[0].plan.measured_peak, 4e9);

  // A measurement that fails beside the rung's live step (out of memory) does not fail the rung: the rate stands.
  bool out_of_memory = false;
  Peaks failing(cpu, [&](MathMode) -> double {
    if (out_of_memory) throw std::runtime_error("out of memory");
    return 1e9;
  });
  failing.measure_for(records, nlohmann::json());
  out_of_memory = true;
  EXPECT_TRUE(failing.hold(records[0], 2e9, records));
  EXPECT_DOUBLE_EQ(records[0].plan.measured_peak, 2e9);
  EXPECT_TRUE(failing.to_json()["unreliable"].contains("fp32"));

  // A run resumed keeps its peaks: nothing measured. A measurement again that clears the rate is taken, unflagged.
  Peaks kept(cpu, [&](MathMode) { return ++calls, 1e12; });
  kept.measure_for(records, nlohmann::json{{"matmul_tflops", {{"fp32", 0.002}, {"bf16", 0.001}, {"fp16", 0.001}}},
                                           {"copy_bandwidth_gbs", 5.0}});
  EXPECT_EQ(calls, first + 1);
  EXPECT_DOUBLE_EQ(records[0].plan.measured_peak, 2e9);
  EXPECT_TRUE(kept.hold(records[0], 3e9, records));
  EXPECT_DOUBLE_EQ(records[0].plan.measured_peak, 1e12);
  EXPECT_FALSE(kept.to_json().contains("unreliable"));
}

// A CPU's MFU is over its best measured rate (the Zen 3's run 20261202: fp32 123 GFLOP/s, bf16 emulated at 4.5).
// A bf16 peak raised below it leaves the MFU's basis sound; the fp32 one raised makes it unreliable.
TEST(Ownership, OnlyARaisedPeakThatIsTheCpusBestMakesItsMfuUnreliable) {
  const DeviceInfo cpu = detect_device("cpu");
  Peaks peaks(cpu, [](MathMode m) { return m == MathMode::kFp32 ? 100e9 : 4e9; });
  std::vector<RungRecord> records(2);
  records[1].plan.rung.spec.precision = Precision::kBf16Cast;
  peaks.measure_for(records, nlohmann::json());
  EXPECT_TRUE(peaks.hold(records[1], 5e9, records));
  EXPECT_TRUE(peaks.to_json()["unreliable"].contains("bf16"));
  EXPECT_DOUBLE_EQ(*records[0].plan.mfu_peak, 100e9);
  EXPECT_EQ(records[0].plan.mfu_basis.find("UNRELIABLE"), std::string::npos) << records[0].plan.mfu_basis;
  EXPECT_FALSE(records[0].plan.mfu_unreliable);
  EXPECT_TRUE(peaks.hold(records[0], 120e9, records));
  EXPECT_NE(records[1].plan.mfu_basis.find("UNRELIABLE"), std::string::npos) << records[1].plan.mfu_basis;
  EXPECT_TRUE(records[1].plan.mfu_unreliable);
}

// --rung: 100,000 characters crashed std::regex (its recursion); 20,000 nested groups too. Now: a pattern over
// 1,000 characters is refused, and no pattern within that takes long or overflows (glibc's matcher: no backtracking).
TEST(Ownership, ALongOrNestedRungPatternIsRefusedOrMatchedNeverACrash) {
  test::TempDir d;
  const auto profile = test::write_tiny_profile(
      d, "model: tiny\ndata: {synthetic_tokens: 2000}\ndevice: cpu\nbatch: 2\nsteps: 1\nvariants: []\n");
  const std::string out = " --out " + (d / "run");
  auto r = test::run_gpt2bench("ladder --profile " + profile + out + " --rung '" + std::string(100'000, 'a') + "'");
  EXPECT_EQ(r.exit_code, 2) << r.output.substr(0, 300);  // bad input
  EXPECT_NE(r.output.find("--rung takes a pattern of at most 1000 characters (this one has 100000)"), std::string::npos)
      << r.output.substr(0, 300);
  r = test::run_gpt2bench("ladder --profile " + profile + out + " --rung '" + std::string(20'000, '(') +
                          std::string(20'000, ')') + "'");
  EXPECT_EQ(r.exit_code, 2);
  std::string deep = std::string(499, '(') + "zz" + std::string(499, ')'), slow;
  for (int i = 0; i < 499; ++i) slow += ".*";  // exponential for a backtracking matcher
  for (const std::string& p : {deep, slow + "X"}) {
    const auto t0 = std::chrono::steady_clock::now();
    r = test::run_gpt2bench("ladder --profile " + profile + out + " --rung '" + p + "'");
    EXPECT_EQ(r.exit_code, 1) << r.output.substr(0, 300);  // matches no rung, or every rung's empty string: no run
    EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 30);
    EXPECT_FALSE(files::exists(d / "run/rungs.json"));
  }
}

size_t count(const std::string& s, const std::string& needle) {
  size_t n = 0;
  for (size_t at = s.find(needle); at != std::string::npos; at = s.find(needle, at + 1)) ++n;
  return n;
}

// --resume keeps the run's --rung (--rung= for all), leaves a complete run as it is, and never measures its peaks
// again: they are the run's, from its start.
TEST(Ownership, ResumeKeepsTheRungFilterAndThePeaksAndLeavesACompleteRunAsItIs) {
  test::TempDir d;
  const auto profile = test::write_tiny_profile(
      d, "name: keep\nmodel: tiny\ndata: {synthetic_tokens: 2000}\ndevice: cpu\nbatch: 2\nwarmup_steps: 1\n"
         "steps: 2\nrepetitions: 2\nparity_steps: 2\nbreakdown_steps: 0\nvariants: [mask_on_the_fly, fused_adamw]\n");
  const std::string run = d / "run";
  auto r = test::run_gpt2bench("ladder --profile " + profile + " --out " + run + " --rung '^00_baseline$'");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto first = test::read_text(run + "/rungs.json");
  EXPECT_EQ(test::read_json(run + "/rungs.json")["rung_filter"], "^00_baseline$");

  r = test::run_gpt2bench("ladder --resume " + run);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("--resume keeps the run's --rung '^00_baseline$'"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find(run + " is complete: nothing to run"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("measuring"), std::string::npos) << r.output;
  EXPECT_EQ(test::read_text(run + "/rungs.json"), first);

  r = test::run_gpt2bench("ladder --resume " + run + " --rung=");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(r.output.find("measuring the"), std::string::npos) << r.output;
  const auto doc = test::read_json(run + "/rungs.json");
  EXPECT_EQ(doc["measured"]["matmul_tflops"], nlohmann::json::parse(first)["measured"]["matmul_tflops"]);
  for (const auto& rung : doc["rungs"]) EXPECT_EQ(rung["status"], "ok") << rung["name"];
  r = test::run_gpt2bench("ladder --resume " + run);
  EXPECT_NE(r.output.find("is complete: nothing to run"), std::string::npos) << r.output;
}

// A damaged rungs.json (cut short): said once, naming the file, with what to do, with or without --profile.
TEST(Ownership, ADamagedRungsJsonIsSaidOnceWithWhatToDo) {
  test::TempDir d;
  const auto profile = test::write_tiny_profile(
      d, "model: tiny\ndata: {synthetic_tokens: 2000}\ndevice: cpu\nbatch: 2\nsteps: 1\nparity_steps: 0\n"
         "breakdown_steps: 0\nvariants: []\n");
  ASSERT_EQ(test::run_gpt2bench("ladder --profile " + profile + " --out " + (d / "run")).exit_code, 0);
  const auto text = test::read_text(d / "run/rungs.json");
  test::write_text(d / "run/rungs.json", text.substr(0, text.size() / 2));
  for (const std::string& extra : std::vector<std::string>{"", " --profile " + profile}) {
    auto r = test::run_gpt2bench("ladder --resume " + (d / "run") + extra);
    EXPECT_EQ(r.exit_code, 1) << r.output;
    EXPECT_EQ(count(r.output, "rungs.json: not valid JSON"), 1u) << r.output;
    EXPECT_NE(r.output.find("cannot be restored from it, so --resume cannot go on; start a new --out"),
              std::string::npos) << r.output;
  }
}

// Bad input is refused before anything is measured or written.
TEST(Ownership, BadInputIsRefusedBeforeAnythingIsMeasuredOrWritten) {
  test::TempDir d;
  const std::string head = "model: tiny\ndevice: cpu\nsteps: 1\nparity_steps: 0\nvariants: []\n";
  auto refused = [&](const std::string& body, const std::string& needle, const std::string& env = "") {
    const auto profile = test::write_tiny_profile(d, head + body);
    auto r = test::run_gpt2bench("ladder --profile " + profile + " --out " + (d / "run"), env);
    EXPECT_EQ(r.exit_code, 1) << r.output;
    EXPECT_NE(r.output.find(needle), std::string::npos) << r.output;
    EXPECT_EQ(r.output.find("measuring"), std::string::npos) << r.output;
    EXPECT_FALSE(files::exists(d / "run")) << needle;
  };
  refused("data: {synthetic_tokens: 2000}\nbatch: 2\nrepetitions: 1\n", "key 'repetitions' in profile: one repetition has no spread");
  refused("data: {synthetic_tokens: 2000}\nseed: 1\nseed: 2\n", "profile.yaml:8: key 'seed' in profile appears twice (first on line 7)");
  refused("data: {synthetic_tokens: 1024}\nbatch: 64\n", "the data holds 1024 tokens, fewer than one batch of 1×64×16+1");
  refused("data: {synthetic_tokens: 2000}\nbatch: 2\nreferences: [ref_torch_eager]\n",
          "the reference rungs run Python, and '/nonexistent/python' is not an executable",
          "GPT2BENCH_PYTHON=/nonexistent/python");

  // prepare: a directory for --input; a folder that holds shards already (train_*.bin would read both corpora).
  auto r = test::run_gpt2bench("prepare --input " + d.path + " --out " + (d / "shards"));
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find(d.path + ": a directory; --input takes one text file"), std::string::npos) << r.output;
  test::write_text(d / "corpus.txt", std::string(4000, 'a'));
  ASSERT_EQ(test::run_gpt2bench("prepare --input " + (d / "corpus.txt") + " --out " + (d / "shards")).exit_code, 0);
  const auto shard = test::read_text(d / "shards/train_000000.bin");
  test::write_text(d / "other.txt", std::string(4000, 'b'));
  r = test::run_gpt2bench("prepare --input " + (d / "other.txt") + " --out " + (d / "shards"));
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("shards already holds shards (train_000000.bin, 2 in all): choose another --out"),
            std::string::npos) << r.output;
  EXPECT_EQ(test::read_text(d / "shards/train_000000.bin"), shard);
}

}  // namespace
}  // namespace gpt2
