// Ladder logic that a GPU exercised and that is tested here with fakes built from what it did:
// batch_scaling's back-off when the rung itself runs out of memory (H100: the search chose 64, the
// rung ran out of memory at 64), the timed loop's one host wait per repetition, the run status,
// and error text in tables.
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include <sys/stat.h>

#include <cstdlib>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "bench/ladder/backoff.h"
#include "bench/ladder/reference.h"
#include "bench/ladder/results.h"
#include "bench/measure/clocks.h"
#include "bench/runtime/device.h"
#include "config/profile.h"
#include "bench/step/train_step.h"
#include "common/files.h"
#include "helpers.h"

namespace gpt2 {
namespace {

// The interpreter run_reference starts (GPT2BENCH_PYTHON) set to `python` while it lives, then as it was.
struct ReferencePython {
  explicit ReferencePython(const std::string& python) {
    if (const char* v = std::getenv("GPT2BENCH_PYTHON")) was = v;
    setenv("GPT2BENCH_PYTHON", python.c_str(), 1);
  }
  ~ReferencePython() {
    if (was) setenv("GPT2BENCH_PYTHON", was->c_str(), 1);
    else unsetenv("GPT2BENCH_PYTHON");
  }
  std::optional<std::string> was;
};

// A reference's config as small as run_reference takes: batch 2 of 4 tokens, one step of each kind.
nlohmann::json tiny_reference_config() {
  return {{"batch", 2}, {"model", {{"context", 4}}}, {"parity_steps", 1},
          {"warmup_steps", 0}, {"repetitions", 1}, {"steps", 1}};
}

[[noreturn]] void cuda_oom(int64_t batch) {
  TORCH_CHECK_WITH(OutOfMemoryError, false, "CUDA out of memory. Tried to allocate 12.28 GiB. GPU 0 has a total "
                   "capacity of 79.19 GiB of which 2.05 GiB is free (batch ", batch, ")\nSee documentation for "
                   "Memory Management");
}

TEST(BatchBackoff, HalvesUntilTheRungFitsAndRecordsEveryTry) {
  nlohmann::json tries = nlohmann::json::array();
  tries.push_back({{"batch", 64}, {"fits", true}, {"stage", "search"}});  // what the probe said
  std::vector<int64_t> attempted;
  int cleanups = 0;
  const int64_t got = backoff_on_oom(
      64, tries,
      [&](int64_t b) {
        attempted.push_back(b);
        if (b > 16) cuda_oom(b);
      },
      [&] { ++cleanups; });
  EXPECT_EQ(got, 16);
  EXPECT_EQ(attempted, (std::vector<int64_t>{64, 32, 16}));
  EXPECT_EQ(cleanups, 2);  // the device cleaned after each failed try
  ASSERT_EQ(tries.size(), 4u);
  EXPECT_EQ(tries[1]["batch"], 64);
  EXPECT_EQ(tries[1]["fits"], false);
  EXPECT_EQ(tries[1]["stage"], "rung");
  EXPECT_EQ(tries[1]["why"].get<std::string>().find('\n'), std::string::npos);  // one line
  EXPECT_EQ(tries[3], (nlohmann::json{{"batch", 16}, {"fits", true}, {"stage", "rung"}}));
}

TEST(BatchBackoff, NothingFitsGoesUpAsOutOfMemory) {
  nlohmann::json tries = nlohmann::json::array();
  EXPECT_THROW(backoff_on_oom(4, tries, [](int64_t b) { cuda_oom(b); }, [] {}), c10::OutOfMemoryError);
  EXPECT_EQ(tries.size(), 3u);  // 4, 2, 1
}

TEST(BatchBackoff, OtherErrorsAreNotRetried) {
  nlohmann::json tries = nlohmann::json::array();
  int calls = 0;
  EXPECT_THROW(backoff_on_oom(8, tries, [&](int64_t) { ++calls, throw std::runtime_error("capture failed"); }, [] {}),
               std::runtime_error);
  EXPECT_EQ(calls, 1);
}

// A fake device timer: what the timed loop asks of it, in order.
struct RecordingTimer : StepTimer {
  std::vector<std::string>& log;
  int marks = 0;
  explicit RecordingTimer(std::vector<std::string>& l) : log(l) {}
  void mark() override { log.push_back("mark"), ++marks; }
  std::vector<double> intervals() override {
    log.push_back("wait");
    std::vector<double> out(marks > 0 ? marks - 1 : 0, 0.25);
    marks = 0;
    return out;
  }
};

TEST(TimedLoop, MarksEveryStepBoundaryAndWaitsOnceAtTheEnd) {
  std::vector<std::string> log;
  RecordingTimer timer(log);
  auto step = [&] {
    log.push_back("step");
    return at::zeros({});
  };
  const TimedSteps t = time_steps(3, step, timer, [] { return false; });
  EXPECT_EQ(log, (std::vector<std::string>{"mark", "step", "mark", "step", "mark", "step", "mark", "wait"}));
  EXPECT_EQ(t.seconds, (std::vector<double>{0.25, 0.25, 0.25}));
  EXPECT_EQ(t.losses.size(), 3u);
  EXPECT_FALSE(t.stopped);
}

TEST(TimedLoop, AStopBetweenStepsEndsTheRepetition) {
  std::vector<std::string> log;
  RecordingTimer timer(log);
  int asked = 0;
  const TimedSteps t = time_steps(5, [] { return at::zeros({}); }, timer, [&] { return ++asked > 2; });
  EXPECT_TRUE(t.stopped);
  EXPECT_EQ(t.seconds.size(), 2u);
  EXPECT_EQ(t.losses.size(), 2u);
}

// In bf16, as the rungs ref_torch_compile is held against.
RungRecord rung(const std::string& name, const std::string& status, const std::string& error = "") {
  RungRecord r;
  r.plan.rung.name = name;
  r.plan.rung.spec.precision = Precision::kBf16Cast;
  r.out.status = rung_status_from(status);
  r.out.error = error;
  return r;
}

// Under a time budget batch_scaling's rung takes two shares while its batch is to be searched: on the H100 the
// search took all of one share and left 12_batch_scaling, the top every extra is held against, one timed step a
// repetition (cv 4.6%). The rungs that take its batch, and the rung once its batch is known (--resume), take one.
TEST(RungRecord, ABatchSearchTakesAShareOfTheBudgetOfItsOwn) {
  RungRecord top = rung("12_batch_scaling", "pending");
  top.plan.kind = RungKind::kLadder;
  top.plan.rung.spec.search_batch = true;
  EXPECT_EQ(top.budget_shares(), 2);
  for (RungKind k : {RungKind::kExtra, RungKind::kControl, RungKind::kKept}) {
    RungRecord on = top;
    on.plan.kind = k;
    EXPECT_EQ(on.budget_shares(), 1);  // the top's batch, taken
  }
  top.out.batch = 64;
  EXPECT_EQ(top.budget_shares(), 1);
  RungRecord plain = rung("11_vocab_padding", "pending");
  EXPECT_EQ(plain.budget_shares(), 1);
}

// The plan stays as planned: batch_scaling's answer is the outcome's, and the step that runs is the
// planned one at that batch.
TEST(RungRecord, TheRunBatchIsAnOutcomeNotAnEditOfThePlan) {
  RungRecord r;
  r.plan.rung.spec.batch = 8;
  r.plan.rung.spec.search_batch = true;
  r.plan.rung.spec.model.context = 16;
  EXPECT_EQ(r.spec().batch, 8);
  r.out.batch = 32;
  EXPECT_EQ(r.spec().batch, 32);
  EXPECT_FALSE(r.spec().search_batch);
  EXPECT_EQ(r.tokens_per_step(), 32 * 16);
  EXPECT_EQ(r.plan.rung.spec.batch, 8);
  EXPECT_TRUE(r.plan.rung.spec.search_batch);
  const auto j = to_json(r);
  EXPECT_EQ(j["spec"]["batch"], 32);
  EXPECT_EQ(j["planned_batch"], 8);
  EXPECT_EQ(j["status"], "pending");
  EXPECT_EQ(rung_status_from("oom"), RungStatus::kOom);
  EXPECT_THROW(rung_status_from("fine"), std::invalid_argument);
}

// ref_torch_compile is compared with the fastest C++ rung that runs its problem: the same batch, one process,
// the same untied model, nothing slowed on purpose. A noisy anti-variant rung, weight_tying's model or the top's
// second timing (the control) is never the one it is held against, however fast it came out.
TEST(Reference, ComparedWithTheFastestRungOfTheSameStep) {
  auto ok = [](const std::string& name, int64_t batch, double tps) {
    RungRecord r = rung(name, "ok");
    r.plan.rung.spec.batch = batch;
    r.out.timing.rep_tokens_per_sec = {tps, tps, tps};
    return r;
  };
  std::vector<RungRecord> rungs = {ok("00_baseline", 8, 50), ok("11_vocab_padding", 8, 200),
                                   ok("12_batch_scaling", 16, 100), ok("13_top+fused_classifier", 16, 110),
                                   ok("14_top+sync_every_step", 16, 130), ok("15_top+weight_tying", 16, 140),
                                   ok("16_top+ddp", 16, 150), rung("17_top+bf16_autocast", "error"),
                                   ok("18_top_again", 16, 160)};
  rungs[4].plan.rung.anti = true;
  rungs[5].plan.rung.spec.model.tie_weights = true;
  rungs[6].plan.rung.spec.dist.backend = "gloo";
  rungs[6].plan.rung.spec.dist.world_size = 2;
  rungs[7].plan.rung.spec.batch = 16;
  rungs[7].out.timing.rep_tokens_per_sec = {500};
  rungs[8].plan.kind = RungKind::kControl;
  auto ref = [](int64_t batch) {
    const double step_s = batch * 4 / 100.0;  // 100 tok/s at T = 4, with some noise
    return nlohmann::json{{"name", "ref_torch_compile"}, {"status", "ok"},
                          {"config", {{"batch", batch}, {"precision", "bf16_cast"},
                                      {"model", {{"tie_weights", false}, {"context", 4}}}}},
                          {"result", {{"tokens_per_sec", 100.0}, {"step_s", {step_s / 1.05, step_s, step_s / 0.95}}}}};
  };
  nlohmann::json at16 = ref(16), at8 = ref(8), at4 = ref(4);
  compare_reference(at16, rungs, {});
  EXPECT_EQ(at16["compared_with"], "13_top+fused_classifier");
  EXPECT_DOUBLE_EQ(at16["ratio"].get<double>(), 1.1);
  // With it, how far noise could move it: 110 over 105, 100 and 95 tok/s; 3 and 3 repetitions cover 1 - 2/20.
  const auto& ri = at16["ratio_interval"];
  EXPECT_NEAR(ri["estimate"].get<double>(), 1.1, 1e-9);
  EXPECT_NEAR(ri["low"].get<double>(), 110 / 105.0, 1e-9);
  EXPECT_NEAR(ri["high"].get<double>(), 110 / 95.0, 1e-9);
  EXPECT_NEAR(ri["level"].get<double>(), 0.9, 1e-12);
  EXPECT_NE(reference_line(at16).find("(1.05-1.16x, 90%)"), std::string::npos) << reference_line(at16);
  compare_reference(at8, rungs, {});
  EXPECT_EQ(at8["compared_with"], "11_vocab_padding");
  compare_reference(at4, rungs, {});  // no rung ran at its batch
  EXPECT_FALSE(at4.contains("compared_with"));
  EXPECT_FALSE(at4.contains("ratio"));
  // Parity: at the baseline's batch a reference is judged by its class (its gradient norm too); at another
  // batch (batch_scaling's) it trains another problem, with another gradient: judged as such a rung is.
  const Trajectory baseline{{5.0, 4.0}, 3.0, 2.0};
  auto with_parity = [&](int64_t batch, double grad_norm, double first_batch_after) {
    nlohmann::json j = ref(batch);
    j["result"]["parity_losses"] = {5.0, 4.1};
    j["result"]["parity_grad_norm"] = grad_norm;
    j["result"]["parity_first_batch_after"] = first_batch_after;
    compare_reference(j, rungs, baseline);
    return j["parity"];
  };
  EXPECT_EQ(with_parity(8, 2.01, 3.0)["class"], "precision");
  EXPECT_EQ(with_parity(8, 2.01, 3.0)["verdict"], "pass");
  EXPECT_EQ(with_parity(8, 1.5, 3.0)["verdict"], "fail");  // the same batch, a gradient 25% smaller
  EXPECT_EQ(with_parity(16, 1.5, 3.0)["class"], "problem");
  EXPECT_EQ(with_parity(16, 1.5, 3.0)["verdict"], "pass");  // 16 rows average more noise away: a smaller gradient
  EXPECT_EQ(with_parity(16, 1.5, 5.5)["verdict"], "fail");  // the first batch's loss did not fall
  EXPECT_TRUE(to_json(rungs[4])["anti_variant"].get<bool>());
  EXPECT_FALSE(to_json(rungs[3])["anti_variant"].get<bool>());
}

// A reference that failed says on the console what Python said, from its first words: on an H100 (run
// 20261126-210951-gpu-124m) the line kept the error's last 117 characters, the allocator's advice, and lost what ran out.
TEST(Reference, ItsErrorLineSaysWhatPythonSaidFirst) {
  // The reference's process as it failed on the H100 (its last line, the error's), from an interpreter that says
  // it and exits 1; run_reference keeps the exit and the line apart, whatever the paths before them.
  test::TempDir tmp;
  const std::string said = "torch.OutOfMemoryError: CUDA out "
      "of memory. Tried to allocate 6.14 GiB. GPU 0 has a total capacity of 79.18 GiB of which 648.62 MiB is "
      "free. Process 1357 has 52.92 GiB memory in use. Including non-PyTorch memory, this process has 25.61 "
      "GiB memory in use. Of the allocated memory 24.73 GiB is allocated by PyTorch, and 222.49 MiB is "
      "reserved by PyTorch but unallocated. If reserved but unallocated memory is large try setting "
      "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.  See documentation for Memory "
      "Management  (https://docs.pytorch.org/docs/stable/notes/cuda.html#optimizing-memory-usage-with-pytorch-cuda-alloc-conf)";
  const std::string python = files::join(tmp.path, "python.py: odd name");  // a ".py: " in its path too
  files::write_file_atomic(python, "#!/bin/sh\necho 'Traceback (most recent call last):' >&2\necho \"" + said +
                                       "\" >&2\nexit 1\n");
  ASSERT_EQ(::chmod(python.c_str(), 0755), 0);
  const nlohmann::json ref = [&] {
    const ReferencePython fake(python);
    return run_reference("ref_torch_compile", tiny_reference_config(), at::arange(200, at::kInt), tmp.path, -1);
  }();
  ASSERT_EQ(ref["status"], "error") << ref;
  EXPECT_EQ(ref["failure"]["exit"], "exit code 1") << ref;
  EXPECT_EQ(ref["failure"]["said"], said) << ref;
  const std::string line = reference_line(ref);
  EXPECT_EQ(line.rfind("    ref_torch_compile error: exit code 1: torch.OutOfMemoryError: CUDA out of memory. Tried to "
                       "allocate 6.14 GiB.", 0), 0u) << line;
  EXPECT_LE(line.size(), 4 + 18 + 7 + 140u) << line;
  EXPECT_EQ(line.substr(line.size() - 3), "...") << line;
  nlohmann::json short_one = ref;
  short_one["failure"] = {{"exit", "killed by signal 9"}, {"said", ""}};
  EXPECT_EQ(reference_line(short_one), "    ref_torch_compile error: killed by signal 9");
  nlohmann::json no_process = {{"name", "ref_torch_compile"}, {"status", "error"}, {"error", "its result x does not parse"}};
  EXPECT_EQ(reference_line(no_process), "    ref_torch_compile error: its result x does not parse");
}

// The interpreter may be a bare name, found on PATH as the shell finds it: the GPU kit's build compiles in
// `python3`, and on an H200 (2026-12-04) the check looked for ./python3 and refused the ladder before its first rung.
TEST(Reference, ABarePythonNameIsFoundOnPath) {
  test::TempDir tmp;
  const std::string python = files::join(tmp.path, "python3");
  files::write_file_atomic(python, "#!/bin/sh\nexit 0\n");
  ASSERT_EQ(::chmod(python.c_str(), 0755), 0);
  const std::string was = std::getenv("PATH") ? std::getenv("PATH") : "";
  setenv("PATH", ("/nonexistent:" + tmp.path + ":" + was).c_str(), 1);
  EXPECT_NO_THROW(check_python_runs("python3"));
  EXPECT_THROW(check_python_runs("no-such-python3"), std::runtime_error);
  setenv("PATH", "/nonexistent", 1);
  try {
    check_python_runs("python3");
    ADD_FAILURE() << "python3 is not on PATH";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("'python3' is not an executable"), std::string::npos) << e.what();
  }
  setenv("PATH", was.c_str(), 1);
  EXPECT_NO_THROW(check_python_runs(python));
  EXPECT_THROW(check_python_runs(tmp.path), std::runtime_error);  // a directory
}

// A reference's clocks are NVML's over its timed repetitions, each compiled form's over its own (the script's
// timed_window_s, on the samples' clock): on the H100 (20261127-030430-gpu-124m) ref_torch_compile's second form at
// B=8 ran 5 of its 9 repetitions at twice the first form's step time, and nothing recorded whether the device's
// clock had dropped. Here the first form runs at the full clock and the second under the power cap.
TEST(Reference, ItsClocksAreTheSamplesWithinEachFormsTimedRepetitions) {
  ClockSamples samples{"", 1980, {}};
  for (int i = 0; i < 300; ++i) {  // 6 s: a compilation (idle), the first form, a compilation, the second form
    const double t = 50 + 0.02 * i;
    const bool first = t >= 51 && t <= 52, second = t >= 54 && t <= 55;
    samples.samples.push_back({first ? 1980.0 : second ? 1755.0 : 345.0, 2619, 600, 55,
                               first ? 0 : second ? kReasonSwPowerCap : kReasonGpuIdle, t});
  }
  nlohmann::json ref = {
      {"name", "ref_torch_compile"}, {"status", "ok"},
      {"result", {{"tokens_per_sec", 370564.0}, {"compile_scope", "model"}, {"timed_window_s", {51.0, 52.0}},
                  {"compile_scopes", {{"model", {{"tokens_per_sec", 370564.0}, {"timed_window_s", {51.0, 52.0}}}},
                                      {"model_and_loss", {{"tokens_per_sec", 202304.0}, {"timed_window_s", {54.0, 55.0}}}},
                                      {"broken", {{"error", "RuntimeError: cannot compile"}}}}}}}};
  attach_reference_clocks(ref, samples);
  EXPECT_EQ(ref["clocks"]["sm_mhz_median"], 1980.0) << ref["clocks"];
  EXPECT_EQ(ref["compile_scope_clocks"]["model"]["sm_mhz_median"], 1980.0);
  EXPECT_EQ(ref["compile_scope_clocks"]["model_and_loss"]["sm_mhz_median"], 1755.0);
  EXPECT_EQ(ref["compile_scope_clocks"]["model_and_loss"]["power_capped_share"], 1.0);
  EXPECT_FALSE(ref["compile_scope_clocks"].contains("broken"));  // a form that failed ran no repetitions
  const std::string line = reference_line(ref);
  EXPECT_NE(line.find("\n      SM clock over its timed steps (median): model 1980 MHz, model_and_loss 1755 MHz "
                      "(power-capped 100%)"), std::string::npos) << line;
  // The eager reference has one form: its clocks on the line. On the CPU none, said in rungs.json, not on the line.
  nlohmann::json eager = {{"name", "ref_torch_eager"}, {"status", "ok"},
                          {"result", {{"tokens_per_sec", 34088.0}, {"timed_window_s", {51.0, 52.0}}}}};
  attach_reference_clocks(eager, samples);
  EXPECT_NE(reference_line(eager).find("SM clock over its timed steps (median): 1980 MHz"), std::string::npos);
  attach_reference_clocks(eager, ClockSamples{"no NVML on a CPU", 0, {}});
  EXPECT_EQ(eager["clocks"], nlohmann::json({{"available", false}, {"why", "no NVML on a CPU"}}));
  EXPECT_EQ(reference_line(eager).find("SM clock"), std::string::npos) << reference_line(eager);
  nlohmann::json no_window = {{"name", "ref_torch_eager"}, {"status", "ok"}, {"result", {{"tokens_per_sec", 1.0}}}};
  attach_reference_clocks(no_window, samples);
  EXPECT_EQ(no_window["clocks"]["why"], "the reference recorded no timed window");
  nlohmann::json failed = {{"name", "ref_torch_eager"}, {"status", "error"}, {"error", "x"}};
  attach_reference_clocks(failed, samples);
  EXPECT_FALSE(failed.contains("clocks"));
}

// A rung whose parity failed computes another step than the reference's: however fast, ref_torch_compile is not
// held against it, and the reference says which faster rung it passed over and why. Where every candidate
// failed, there is no ratio at all, only what was passed over.
TEST(Reference, NeverComparedWithARungThatFailedParity) {
  auto ok = [](const std::string& name, double tps, const std::string& verdict) {
    RungRecord r = rung(name, "ok");
    r.plan.rung.spec.batch = 8;
    r.out.timing.rep_tokens_per_sec = {tps, tps, tps};
    r.out.parity.verdict = verdict;
    return r;
  };
  const nlohmann::json ref = {{"name", "ref_torch_compile"}, {"status", "ok"},
                              {"config", {{"batch", 8}, {"precision", "bf16_cast"},
                                          {"model", {{"tie_weights", false}, {"context", 4}}}}},
                              {"result", {{"tokens_per_sec", 100.0}}}};
  std::vector<RungRecord> rungs = {ok("11_vocab_padding", 120, "pass"), ok("13_top+fused_residual_norm", 150, "fail"),
                                   ok("14_top+gelu_epilogues", 90, "fail"), ok("15_top+fused_classifier", 130, "n/a")};
  nlohmann::json j = ref;
  compare_reference(j, rungs, {});
  EXPECT_EQ(j["compared_with"], "15_top+fused_classifier");
  EXPECT_DOUBLE_EQ(j["ratio"].get<double>(), 1.3);
  ASSERT_EQ(j["passed_over"].size(), 1u) << j.dump();  // the slower failing rung was never a candidate to say
  EXPECT_EQ(j["passed_over"][0]["rung"], "13_top+fused_residual_norm");
  EXPECT_EQ(j["passed_over"][0]["why"], "failed parity");
  EXPECT_DOUBLE_EQ(j["passed_over"][0]["cpp_tokens_per_sec"].get<double>(), 150);
  EXPECT_NE(reference_line(j).find("1.30x it\n      not compared with 13_top+fused_residual_norm (150 tok/s): failed parity"),
            std::string::npos)
      << reference_line(j);
  compare_reference(j, rungs, {});  // compared again: said once
  EXPECT_EQ(j["passed_over"].size(), 1u);

  std::vector<RungRecord> failing = {rungs[1], rungs[2]};
  nlohmann::json none = ref;
  compare_reference(none, failing, {});
  EXPECT_FALSE(none.contains("compared_with"));
  EXPECT_FALSE(none.contains("ratio"));
  EXPECT_EQ(none["passed_over"].size(), 2u);
  // A passing rung has no passed_over at all.
  nlohmann::json clean = ref;
  compare_reference(clean, {rungs[0]}, {});
  EXPECT_EQ(clean["compared_with"], "11_vocab_padding");
  EXPECT_FALSE(clean.contains("passed_over"));
}

// ref_torch_compile's matmuls are bf16: a faster fp32 rung (a CPU whose bf16 is slow), fp16 rung (a CPU with
// AVX512-FP16: 15_top+fp16_autocast, 1.33x it on a Xeon) or FP8 rung is passed over with why, so that its ratio
// says what the step does, not its format. bf16 autocast is bf16 matmuls too.
TEST(Reference, ComparedOnlyWithRungsOfItsMatmulFormat) {
  auto ok = [](const std::string& name, double tps, Precision precision) {
    RungRecord r = rung(name, "ok");
    r.plan.rung.spec.batch = 16;
    r.plan.rung.spec.precision = precision;
    r.out.timing.rep_tokens_per_sec = {tps, tps, tps};
    return r;
  };
  std::vector<RungRecord> rungs = {ok("03_fused_adamw", 400, Precision::kFp32),
                                   ok("12_batch_scaling", 100, Precision::kBf16Cast),
                                   ok("14_top+bf16_autocast", 110, Precision::kBf16Autocast),
                                   ok("15_top+fp16_autocast", 130, Precision::kFp16Autocast),
                                   ok("22_top+fp8_linears", 150, Precision::kBf16Cast),
                                   ok("23_top+kept", 120, Precision::kBf16Cast),
                                   ok("24_top+tf32", 50, Precision::kFp32)};
  rungs[4].plan.rung.spec.model.fp8_linears = true;
  rungs[6].plan.rung.spec.tf32 = true;
  nlohmann::json ref = {{"name", "ref_torch_compile"}, {"status", "ok"},
                        {"config", {{"batch", 16}, {"precision", "bf16_cast"},
                                    {"model", {{"tie_weights", false}, {"context", 4}}}}},
                        {"result", {{"tokens_per_sec", 100.0}}}};
  compare_reference(ref, rungs, {});
  EXPECT_EQ(ref["compared_with"], "23_top+kept");
  EXPECT_DOUBLE_EQ(ref["ratio"].get<double>(), 1.2);
  const nlohmann::json passed = ref["passed_over"];  // the faster ones alone: not the slower tf32 rung
  ASSERT_EQ(passed.size(), 3u) << ref.dump();
  EXPECT_EQ(passed[0]["rung"], "03_fused_adamw");
  EXPECT_EQ(passed[0]["why"], "fp32 matmuls, the reference's bf16");
  EXPECT_EQ(passed[1]["why"], "fp16 matmuls, the reference's bf16");
  EXPECT_EQ(passed[2]["rung"], "22_top+fp8_linears");
  EXPECT_EQ(passed[2]["why"], "fp8 matmuls, the reference's bf16");
  EXPECT_NE(reference_line(ref).find("not compared with 15_top+fp16_autocast (130 tok/s): fp16 matmuls, the "
                                     "reference's bf16"),
            std::string::npos)
      << reference_line(ref);
  rungs[5].plan.rung.spec.precision = Precision::kFp16Autocast;  // no bf16 rung faster than bf16 autocast's
  compare_reference(ref, rungs, {});
  EXPECT_EQ(ref["compared_with"], "14_top+bf16_autocast");
  nlohmann::json unknown = ref;
  unknown["config"]["precision"] = "int4";
  EXPECT_THROW(compare_reference(unknown, rungs, {}), std::invalid_argument);
}

// Where both sides ran a breakdown the reference's kernels are set beside the C++ rung's by kind of work, by the one
// rule the breakdown's categories follow: kernel names from the H100 run of 2026-11-27 (ref_torch_compile at B=8).
TEST(Reference, SetBesideItsRungByKindOfWork) {
  RungRecord top = rung("24_planned_batch+kept", "ok");
  top.plan.rung.spec.batch = 8;
  top.out.timing.rep_tokens_per_sec = {120, 120, 120};
  top.out.breakdown.summary = {{"events_per_step", 369.0},
                               {"category_ms", {{"matmul", 9.2}, {"attention", 3.49}, {"normalization", 1.74}}}};
  auto kernel = [](const std::string& name, double ms) {
    return nlohmann::json{{"name", name}, {"count_per_step", 1.0}, {"ms_per_step", ms}};
  };
  nlohmann::json ref = {{"name", "ref_torch_compile"}, {"status", "ok"},
                        {"config", {{"batch", 8}, {"precision", "bf16_cast"},
                                    {"model", {{"tie_weights", false}, {"context", 4}}}}},
                        {"result", {{"tokens_per_sec", 100.0}, {"breakdown", {{"events", "kernel launches"},
                                                                              {"events_per_step", 551.0}}}}}};
  ref["result"]["breakdown"]["by_name"] = {
      kernel("nvjet_sm90_tst_192x128_64x5_1x2_h_bz_coopB_bias_TNT", 0.85),
      kernel("triton_per_fused_add_native_dropout_native_layer_norm_view_5", 0.848),
      kernel("triton_per_fused_add_native_dropout_backward_native_layer_norm_native_layer_norm_backward_view_10", 0.5),
      kernel("cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wgmma_f16_knob_7_64x128x64_4x1x1_cga1x1x1_kernel0_0", 1.2),
      kernel("void cudnn::fusion::compute_dot_do_o_specialized<true, 64>(void const*, void const*, void*)", 0.2),
      kernel("void at::native::(anonymous namespace)::cunn_SoftMaxBackward<8, c10::BFloat16, float, c10::BFloat16, "
             "at::native::(anonymous namespace)::LogSoftMaxBackwardEpilogue>(c10::BFloat16*)", 1.09),
      kernel("memcpy", 0.25), kernel("memset", 0.05),
      kernel("void at::native::reduce_kernel<128, 4, at::native::ReduceOp<float>>()", 0.54)};
  compare_reference(ref, {top}, {});
  ASSERT_TRUE(ref.contains("category_ms")) << ref.dump();
  EXPECT_EQ(ref["category_ms"]["cpp"], top.out.breakdown.summary["category_ms"]);
  const auto& py = ref["category_ms"]["python"];
  EXPECT_DOUBLE_EQ(py["matmul"].get<double>(), 0.85);
  EXPECT_DOUBLE_EQ(py["normalization"].get<double>(), 0.848 + 0.5);
  EXPECT_DOUBLE_EQ(py["attention"].get<double>(), 1.2 + 0.2);
  EXPECT_DOUBLE_EQ(py["loss"].get<double>(), 1.09);
  EXPECT_DOUBLE_EQ(py["memcpy"].get<double>(), 0.25 + 0.05);
  EXPECT_DOUBLE_EQ(py["other"].get<double>(), 0.54);  // a generic kernel names no op: not guessed
  // On a CPU the names are ATen ops, an autograd node's under its forward op's kind.
  ref["result"]["breakdown"] = {{"events", "ATen ops"}, {"events_per_step", 3.0},
                                {"by_name", {kernel("aten::addmm", 4.0), kernel("aten::native_layer_norm", 1.0),
                                             kernel("autograd::engine::evaluate_function: AddmmBackward0", 6.0)}}};
  compare_reference(ref, {top}, {});
  EXPECT_EQ(ref["category_ms"]["python"], nlohmann::json({{"matmul", 10.0}, {"normalization", 1.0}}));
  // A compiled step's time on a CPU is in inductor's regions ("Torch-Compiled Region: 0/0",
  // CompiledFunctionBackward: the Zen 4's cpu-scaled run), not in ops: no kind to set beside.
  nlohmann::json compiled = ref;
  compiled.erase("category_ms");
  compiled["config"]["compile"] = true;
  compare_reference(compiled, {top}, {});
  EXPECT_FALSE(compiled.contains("category_ms"));
  // A rung without a breakdown pass (one at its floor): nothing to set beside.
  nlohmann::json bare = ref;
  bare.erase("category_ms");
  top.out.breakdown.summary = nlohmann::json();
  compare_reference(bare, {top}, {});
  EXPECT_FALSE(bare.contains("category_ms"));
}

// At batch_scaling's batch the reference trains the problem the C++ top trains there (the same batch, weights and
// data): judged against the baseline's step at that batch where one ran, else that rung's trajectory, as a reference
// of its class, parameter by parameter too; with neither, as a rung of another problem (its first batch's loss must
// fall).
TEST(Reference, AtBatchScalingsBatchItIsJudgedAgainstTheBaselineThereOrTheCppRung) {
  RungRecord base = rung("00_baseline", "ok"), top = rung("12_batch_scaling", "ok");
  base.plan.rung.spec.batch = 8;
  top.plan.rung.spec.batch = 16;
  top.out.timing.rep_tokens_per_sec = {100, 100, 100};
  top.out.parity = judge_parity(ParityClass::kProblem, Trajectory{{5.0, 4.2}, 4.0, 2.0, {{"a", 2.0}, {"b", 0.1}}},
                                Trajectory{{5.0, 4.0}});
  const Trajectory baseline{{5.0, 4.0}, 3.0, 3.0};
  auto ref = [](std::vector<double> losses, double b_norm) {
    return nlohmann::json{{"name", "ref_torch_compile"}, {"status", "ok"},
                          {"config", {{"batch", 16}, {"precision", "bf16_cast"},
                                      {"model", {{"tie_weights", false}, {"context", 4}}}}},
                          {"result", {{"tokens_per_sec", 100.0}, {"parity_losses", losses}, {"parity_grad_norm", 2.0},
                                      {"parity_first_batch_after", 9.0},  // would fail the problem rule
                                      {"parity_grad_norms", {{"a", 2.0}, {"b", b_norm}}}}}};
  };
  nlohmann::json j = ref({5.0, 4.25}, 0.1);
  compare_reference(j, {base, top}, baseline);
  EXPECT_EQ(j["parity"]["against"], "12_batch_scaling") << j["parity"].dump();
  EXPECT_EQ(j["parity"]["judged_as"], "precision");
  EXPECT_EQ(j["parity"]["verdict"], "pass") << j["parity"]["rule"];
  EXPECT_NEAR(j["parity"]["max_abs_dev"].get<double>(), 0.05, 1e-12);
  EXPECT_EQ(j["parity"]["params_compared"], 2);
  j = ref({5.0, 4.25}, 0.3);  // one parameter's gradient three times the C++ one's
  compare_reference(j, {base, top}, baseline);
  EXPECT_EQ(j["parity"]["verdict"], "fail") << j["parity"]["rule"];
  EXPECT_EQ(j["parity"]["worst_param"], "b");
  RungRecord tied = top;  // the same batch, another model (the head is the embedding): not the reference's problem
  tied.plan.rung.name = "11_tied";
  tied.plan.rung.spec.model.tie_weights = true;
  j = ref({5.0, 4.25}, 0.1);
  compare_reference(j, {base, tied, top}, baseline);
  EXPECT_EQ(j["parity"]["against"], "12_batch_scaling");
  // the baseline's step at that batch, where one ran (the C++ rungs there are judged against it): judged against it
  const std::map<int64_t, Trajectory> at{{16, Trajectory{{5.0, 4.4, 4.1}, 3.0, 2.1, {{"a", 2.0}, {"b", 0.1}}}}};
  j = ref({5.0, 4.25}, 0.1);
  compare_reference(j, {base, top}, baseline, at);
  EXPECT_EQ(j["parity"]["against"], "baseline at batch 16") << j["parity"].dump();
  EXPECT_EQ(j["parity"]["judged_as"], "precision");
  EXPECT_NEAR(j["parity"]["max_abs_dev"].get<double>(), 0.15, 1e-12);
  EXPECT_EQ(j["parity"]["verdict"], "pass") << j["parity"]["rule"];
  j = ref({5.0, 4.25, 4.0, 3.9}, 0.1);  // more steps than that trajectory has: the C++ rung's again
  compare_reference(j, {base, top}, baseline, at);
  EXPECT_EQ(j["parity"]["against"], "12_batch_scaling");
  j = ref({5.0, 4.25}, 0.1);
  compare_reference(j, {base, top}, baseline, {{8, at.at(16)}});  // at another batch: not this reference's
  EXPECT_EQ(j["parity"]["against"], "12_batch_scaling");
  j = ref({5.0, 4.25}, 0.1);
  top.out.parity.losses.clear();  // no C++ trajectory at that batch
  compare_reference(j, {base, top}, baseline);
  EXPECT_EQ(j["parity"]["against"], "baseline");
  EXPECT_EQ(j["parity"]["judged_as"], "problem");
  EXPECT_EQ(j["parity"]["verdict"], "fail");  // 9.0 after, from 5.0: the first batch's loss rose
  // its eager parity run out of device memory (gpt2bench_ref.py's parity_error): no verdict, the reason, the ratio
  j = ref({}, 0.1);
  j["result"].erase("parity_losses");
  j["result"]["parity_error"] = "OutOfMemoryError: CUDA out of memory. Tried to allocate 12.28 GiB.";
  compare_reference(j, {base, top}, baseline);
  EXPECT_EQ(j["parity"]["verdict"], "n/a") << j.dump();
  EXPECT_EQ(j["parity"]["error"], "its parity run: OutOfMemoryError: CUDA out of memory. Tried to allocate 12.28 GiB.");
  EXPECT_DOUBLE_EQ(j["ratio"].get<double>(), 1.0);
  EXPECT_NE(reference_line(j).find(", parity n/a\n      parity: its parity run: OutOfMemoryError: CUDA out of memory."),
            std::string::npos)
      << reference_line(j);
}

// The C++ rung timed again after the reference: its ratio and interval beside the first, from its own
// repetitions; a timing that did not finish (interrupted, diverged) says so instead of a ratio.
TEST(Reference, TheRungTimedAgainAfterItIsComparedAsTheFirstTiming) {
  nlohmann::json ref = {{"name", "ref_torch_eager"}, {"status", "ok"},
                        {"config", {{"batch", 2}, {"model", {{"context", 5}}}}},  // 10 tokens a step
                        {"result", {{"tokens_per_sec", 100.0}, {"step_s", {0.1 / 1.05, 0.1, 0.1 / 0.95}}}}};
  RungRecord again = rung("00_baseline", "ok");
  again.plan.rung.spec.batch = 2;
  again.out.timing.rep_tokens_per_sec = {88, 90, 92};
  again.out.timing.rep_step_ms = {1e4 / 88, 1e4 / 90, 1e4 / 92};
  again.out.timing.steps = 3;
  compare_again(ref, again);
  const auto& a = ref["again"];
  EXPECT_EQ(a["rung"], "00_baseline");
  EXPECT_DOUBLE_EQ(a["ratio"].get<double>(), 0.9);
  EXPECT_NEAR(a["ratio_interval"]["low"].get<double>(), 88 / 105.0, 1e-9);  // every pair, 3 and 3: 90%
  EXPECT_NEAR(a["ratio_interval"]["high"].get<double>(), 92 / 95.0, 1e-9);
  EXPECT_EQ(a["steps_per_repetition"], 3);
  EXPECT_EQ(a["batch"], 2);
  EXPECT_EQ(again_line(ref), "    00_baseline timed again after ref_torch_eager: 90 tok/s, 0.90x it (0.84-0.97x, 90%)");
  again.out.status = RungStatus::kInterrupted;
  compare_again(ref, again);
  EXPECT_EQ(ref["again"]["error"], "not finished: interrupted");
  EXPECT_FALSE(ref["again"].contains("ratio"));
  EXPECT_EQ(again_line(ref), "    00_baseline timed again after ref_torch_eager: not finished: interrupted");
  again.out.status = RungStatus::kDiverged;
  again.out.timing.diverged_at = 7;
  compare_again(ref, again);
  EXPECT_EQ(ref["again"]["error"], "non-finite loss at step 7");
}

// The reference runs after the rungs (their number also sets the rungs' budget shares): each selected one at the
// profile's batch, ref_torch_compile again at batch_scaling's other batch, those a resumed run keeps left out.
TEST(Reference, TheRunsAfterTheRungs) {
  using Runs = std::vector<std::pair<std::string, int64_t>>;
  const std::vector<std::string> both = {"ref_torch_eager", "ref_torch_compile"};
  const nlohmann::json none = nlohmann::json::array();
  EXPECT_EQ(references_to_run(both, 8, std::nullopt, none), (Runs{{"ref_torch_eager", 8}, {"ref_torch_compile", 8}}));
  EXPECT_EQ(references_to_run(both, 8, 32, none),
            (Runs{{"ref_torch_eager", 8}, {"ref_torch_compile", 8}, {"ref_torch_compile", 32}}));
  EXPECT_EQ(references_to_run(both, 8, 8, none), (Runs{{"ref_torch_eager", 8}, {"ref_torch_compile", 8}}));
  EXPECT_EQ(references_to_run(both, 8, 0, none).size(), 3u);  // batch_scaling still to run: one more, batch unknown
  EXPECT_EQ(references_to_run({"ref_torch_eager"}, 8, 32, none), (Runs{{"ref_torch_eager", 8}}));
  auto kept = [](const std::string& name, int64_t batch) {
    return nlohmann::json{{"name", name}, {"status", "ok"}, {"config", {{"batch", batch}}}};
  };
  const nlohmann::json eager8 = {kept("ref_torch_eager", 8)}, compile32 = {kept("ref_torch_compile", 32)};
  EXPECT_EQ(references_to_run(both, 8, 32, eager8), (Runs{{"ref_torch_compile", 8}, {"ref_torch_compile", 32}}));
  EXPECT_EQ(references_to_run(both, 8, 32, compile32), (Runs{{"ref_torch_eager", 8}, {"ref_torch_compile", 8}}));
  EXPECT_EQ(references_to_run(both, 8, 0, compile32), (Runs{{"ref_torch_eager", 8}, {"ref_torch_compile", 8}}));
}

// ref_torch_compile's parity run is compiled at the profile's batch (the compiled step against the baseline's
// losses) and uncompiled at batch_scaling's, where it only says whether the step trains: dropout off is another
// graph, a compilation of its own on a lent GPU's clock. The eager reference has no compilation to spare.
TEST(Reference, TheCompiledReferenceCompilesItsParityRunOnlyAtTheProfilesBatch) {
  const Profile prof = load_profile(GPT2BENCH_SOURCE_DIR "/profiles/gpu-124m.yaml");
  const DeviceInfo cpu = detect_device("cpu");
  EXPECT_EQ(reference_config("ref_torch_compile", prof, cpu, prof.batch)["parity_eager"], false);
  EXPECT_EQ(reference_config("ref_torch_compile", prof, cpu, 4 * prof.batch)["parity_eager"], true);
  EXPECT_EQ(reference_config("ref_torch_eager", prof, cpu, prof.batch)["parity_eager"], false);
  EXPECT_EQ(reference_config("ref_torch_compile", prof, cpu, 4 * prof.batch)["parity_steps"], prof.parity_steps);
}

// ref_torch_compile runs at the profile's batch and again at batch_scaling's: each run keeps its own config,
// tokens and log (the second once overwrote the first's log, which its rungs.json entry still named).
TEST(Reference, EachRunKeepsItsOwnFiles) {
  test::TempDir tmp;
  const std::string d = tmp.path, sub = files::join(d, "reference");
  const ReferencePython fake("/bin/true");  // exits 0 and writes no result: an error entry, files left
  const nlohmann::json config = tiny_reference_config();
  nlohmann::json at4 = config;
  at4["batch"] = 4;
  const at::Tensor tokens = at::arange(200, at::kInt);
  const auto a = run_reference("ref_torch_compile", config, tokens, d, -1);
  const auto b = run_reference("ref_torch_compile", at4, tokens, d, -1);
  EXPECT_EQ(a["log"], files::join(sub, "ref_torch_compile_b2.log"));
  EXPECT_EQ(b["log"], files::join(sub, "ref_torch_compile_b4.log"));
  for (const char* f : {"ref_torch_compile_b2.config.json", "ref_torch_compile_b2.tokens",
                        "ref_torch_compile_b4.config.json", "ref_torch_compile_b4.tokens"})
    EXPECT_TRUE(files::exists(files::join(sub, f))) << f;
  EXPECT_EQ(test::read_json(files::join(sub, "ref_torch_compile_b2.config.json"))["batch"], 2);
  EXPECT_EQ(a["status"], "error");  // no result written: said, not thrown
}

TEST(RunStatus, PartialWhenAnyRungFailed) {
  EXPECT_EQ(run_status({rung("00_baseline", "ok"), rung("01_x", "skipped"), rung("02_y", "diverged")}, false, false),
            "complete");
  EXPECT_EQ(run_status({rung("00_baseline", "ok"), rung("12_batch_scaling", "error", "x")}, false, false), "partial");
  EXPECT_EQ(run_status({rung("00_baseline", "oom", "x")}, false, false), "partial");
  EXPECT_EQ(run_status({rung("00_baseline", "ok")}, true, false), "interrupted");
  EXPECT_EQ(run_status({rung("00_baseline", "ok")}, false, true), "aborted");
  // nothing measured is never complete
  EXPECT_EQ(run_status({rung("00_baseline", "diverged"), rung("01_x", "skipped")}, false, false), "partial");
  EXPECT_TRUE(nothing_measured({rung("00_baseline", "diverged"), rung("01_x", "oom", "x")}));
  EXPECT_FALSE(nothing_measured({rung("00_baseline", "skipped")}));
  EXPECT_FALSE(nothing_measured({rung("00_baseline", "ok"), rung("01_x", "diverged")}));
}

// The parity cell says what was judged: the deviation and the gradient norm's ratio for the same problem, the
// first batch's loss before and after for another one (its losses beside the baseline's mean nothing).
TEST(SummaryTable, TheParityCellShowsWhatWasJudged) {
  std::vector<RungRecord> rs = {rung("00_baseline", "ok"), rung("05_bf16_cast", "ok"), rung("12_batch_scaling", "ok")};
  for (auto& r : rs) r.out.timing.rep_tokens_per_sec = {100}, r.out.timing.rep_step_ms = {10};
  rs[1].out.parity = judge_parity(ParityClass::kPrecision, Trajectory{{5.05, 4.0}, 3.0, 2.1}, Trajectory{{5.0, 4.0}, 0, 2.0});
  rs[2].out.parity = judge_parity(ParityClass::kProblem, Trajectory{{5.5, 4.5}, 4.25, 2.1}, Trajectory{{5.0, 4.0}, 0, 2.0});
  rs.push_back(rung("14_top+fused_classifier", "ok"));
  rs.back().out.timing.rep_tokens_per_sec = {100}, rs.back().out.timing.rep_step_ms = {10};
  rs.back().out.parity = judge_parity(ParityClass::kPrecision, Trajectory{{5.5, 4.6}, 4.0, 2.1},
                                      trajectory_of(rs[2].out.parity), "12_batch_scaling");
  const std::string table = summary_table(rs, false);
  EXPECT_NE(table.find("pass (max dev 5.00e-02, |grad| 1.050x)\n"), std::string::npos) << table;
  EXPECT_NE(table.find("pass* (max dev 1.00e-01, |grad| 1.000x)\n"), std::string::npos) << table;
  EXPECT_NE(table.find("(parity*: judged against 12_batch_scaling, the rung they are built on at their batch; docs/measurement.md: Parity)"),
            std::string::npos) << table;
  EXPECT_NE(table.find("pass (first batch's loss 5.500 -> 4.250)"), std::string::npos) << table;
  // and it comes back on --resume
  RungRecord back = rung("12_batch_scaling", "ok");
  restore(back, to_json(rs[2]));
  EXPECT_EQ(back.out.parity.judged_as, ParityClass::kProblem);
  EXPECT_EQ(back.out.parity.first_batch_after, 4.25);
}

// Under the table, each rung that failed parity on a line of its own: what it was held to and how far off it was.
TEST(SummaryTable, EachParityFailureIsNamedWithWhatItWasJudgedAgainst) {
  std::vector<RungRecord> rs = {rung("00_baseline", "ok"), rung("05_bf16_cast", "ok"), rung("12_batch_scaling", "ok")};
  const Trajectory fp32{{5.0, 4.0}, 0, 2.0, {{"ln.shift", 0.01}, {"head", 1.0}}};
  rs[1].out.parity = judge_parity(ParityClass::kPrecision, Trajectory{{5.05, 4.0}, 3.0, 2.0, {{"ln.shift", 0.0101}}}, fp32);
  EXPECT_EQ(parity_failures(rs), "");
  rs[2].out.parity = judge_parity(ParityClass::kPrecision, Trajectory{{5.05, 4.0}, 3.0, 2.0, {{"ln.shift", 0.0071}}},
                                  fp32, "baseline at batch 16");
  rs[1].out.parity = judge_parity(ParityClass::kExact, Trajectory{{5.5, 4.0}, 3.0, 2.0}, fp32);
  EXPECT_EQ(parity_failures(rs),
            "!! PARITY FAILED: 05_bf16_cast against the baseline: losses within 0.5 (rungs.json's parity.rule: which "
            "check; docs/measurement.md: Parity)\n"
            "!! PARITY FAILED: 12_batch_scaling against the baseline at batch 16: furthest parameter ln.shift 0.710x, "
            "losses within 0.05 (rungs.json's parity.rule: which check; docs/measurement.md: Parity)\n");
}

TEST(SummaryTable, AMultiLineErrorTakesOneLine) {
  const std::string table = summary_table(
      {rung("12_batch_scaling", "error",
            "CUDA graph capture failed: CUDA error: operation not permitted when stream is capturing\n"
            "CUDA kernel errors might be asynchronously reported at some other API call")},
      true);
  EXPECT_NE(table.find("error: CUDA graph capture failed: CUDA error: operation not permitted when stream is capturing\n"),
            std::string::npos)
      << table;
  EXPECT_EQ(table.find("asynchronously"), std::string::npos) << table;
}

}  // namespace
}  // namespace gpt2
