// Paired timing (docs/reference-rungs.md): a reference's repetitions alternating with its C++ rung's; the pipes'
// protocol with a stand-in for the script, the ratio of the pairs, and where a GPU pairs at all.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <string>

#include "bench/ladder/paired.h"
#include "bench/ladder/reference.h"
#include "bench/ladder/reference_rungs.h"
#include "bench/runtime/device_info.h"
#include "helpers.h"

namespace gpt2 {
namespace {

RungRecord ok_rung(const std::string& name) {
  RungRecord r;
  r.plan.rung.name = name;
  r.out.status = RungStatus::kOk;
  return r;
}

// A stand-in for the script's side: "ready", then `answers` one per "rep", then it exits (as one that failed would).
pid_t script(PairPipes& pipes, const std::vector<std::string>& answers, bool ready = true) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    pipes.in_child();
    const auto [asks, tells] = pipes.child_fds();
    FILE* in = ::fdopen(asks, "r");
    auto say = [&](const std::string& s) { (void)!::write(tells, s.data(), s.size()); };
    if (ready) say("ready\n");
    char line[64];
    for (const std::string& a : answers)
      if (std::fgets(line, sizeof line, in) && std::strcmp(line, "rep\n") == 0) say(a + "\n");
    ::_exit(0);
  }
  pipes.in_parent();
  return pid;
}

TEST(Paired, ThePipesAskForARepetitionAtATimeAndSayWhenTheScriptEnded) {
  PairPipes pipes;
  const pid_t pid = script(pipes, {"0.25", "0.5"});
  ASSERT_TRUE(pipes.ready(pid));
  EXPECT_DOUBLE_EQ(pipes.repetition(pid), 0.25);
  EXPECT_DOUBLE_EQ(pipes.repetition(pid), 0.5);
  EXPECT_NE(test::error_of([&] { (void)pipes.repetition(pid); })
                .find("paired timing: the reference ended when asked for a repetition"),
            std::string::npos);
  pipes.end();
  int status = 0;
  EXPECT_EQ(::waitpid(pid, &status, 0), pid);

  PairPipes bad;  // an answer that is not seconds is refused, saying what it was
  const pid_t other = script(bad, {"nan?"});
  ASSERT_TRUE(bad.ready(other));
  EXPECT_NE(test::error_of([&] { (void)bad.repetition(other); }).find("answered 'nan?'"), std::string::npos);
  bad.end();
  EXPECT_EQ(::waitpid(other, &status, 0), other);

  PairPipes never;  // a script that ends before it is ready: no pairing, and no wait past its end
  const pid_t gone = script(never, {}, false);
  EXPECT_FALSE(never.ready(gone));
  never.end();
  EXPECT_EQ(::waitpid(gone, &status, 0), gone);
}

// Each C++ repetition beside one of the reference's: the ratio is the median of the pairs' ratios, with the sign
// test's interval, and becomes the reference's own; the ladder's timing's ratio is kept beside it.
TEST(Paired, TheRatioIsThePairsAndTheFirstTimingIsKept) {
  nlohmann::json ref = {{"name", "ref_torch_compile"}, {"status", "ok"}, {"ratio", 1.5}, {"cpp_tokens_per_sec", 150.0},
                        {"compared_with", "24_planned_batch+kept"},
                        {"config", {{"batch", 2}, {"model", {{"context", 5}}}}},  // 10 tokens a step
                        {"result", {{"tokens_per_sec", 100.0}, {"step_s", {0.1, 0.1, 0.1}}}}};
  RungRecord again = ok_rung("24_planned_batch+kept");
  again.plan.rung.spec.batch = 2;
  // a drift slows both sides alike, pair by pair: C++ 50, 60, 80 ms, Python 1.2x each (1.3x in the middle)
  again.out.timing.rep_step_ms = {50, 60, 80};
  again.out.timing.rep_tokens_per_sec = {200, 1e4 / 60, 125};
  again.out.timing.steps = 3;
  compare_again(ref, again, {0.06, 0.078, 0.096});
  EXPECT_NEAR(ref["ratio"].get<double>(), 1.2, 1e-12);
  EXPECT_EQ(ref["again"]["ratio"], ref["ratio"]);
  const auto& ri = ref["ratio_interval"];
  EXPECT_NEAR(ri["low"].get<double>(), 1.2, 1e-12);  // 3 pairs: their whole range, at 75%
  EXPECT_NEAR(ri["high"].get<double>(), 1.3, 1e-12);
  EXPECT_DOUBLE_EQ(ri["level"].get<double>(), 0.75);
  EXPECT_EQ(ri["method"].get<std::string>().rfind("paired", 0), 0u);
  EXPECT_EQ(ref["first_timing"], (nlohmann::json{{"cpp_tokens_per_sec", 150.0}, {"ratio", 1.5}}));
  EXPECT_NEAR(ref["python_tokens_per_sec"].get<double>(), 10 / 0.078, 1e-9);
  EXPECT_EQ(ref["cpp_tokens_per_sec"], ref["again"]["cpp_tokens_per_sec"]);
  EXPECT_EQ(ref["again"]["paired"]["python_step_s"].size(), 3u);
  EXPECT_EQ(again_line(ref), "    24_planned_batch+kept timed again beside ref_torch_compile: 167 tok/s; its first "
                             "timing (the ladder's) 1.50x it");
  EXPECT_NE(reference_line(ref).find("128 tok/s (Python"), std::string::npos) << reference_line(ref);
  EXPECT_NE(reference_line(ref).find("is 1.20x it (1.20-1.30x, 75%, paired)"), std::string::npos) << reference_line(ref);
}

// Paired timing needs both on the device at once: on a GPU only where the C++ rung held at most 40% of its memory.
TEST(Paired, OnAGpuOnlyWhereBothFit) {
  RungRecord r = ok_rung("00_baseline");
  DeviceInfo gpu{}, cpu{};
  gpu.type = DeviceType::kCuda, gpu.total_memory = int64_t{80} << 30;
  cpu.total_memory = int64_t{24} << 30;
  r.out.memory.peak_reserved_bytes = int64_t{28} << 30;  // the H100's baseline at B=8
  EXPECT_TRUE(fits_beside(r, gpu));
  EXPECT_TRUE(fits_beside(r, cpu));
  r.out.memory.peak_reserved_bytes = int64_t{45} << 30;  // its top at batch 128
  EXPECT_FALSE(fits_beside(r, gpu));
  EXPECT_TRUE(fits_beside(r, cpu));
}

}  // namespace
}  // namespace gpt2
