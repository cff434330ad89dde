// Runs on real hardware take hours: nothing is lost on Ctrl-C, a run resumes where it stopped, a
// diverging or out-of-memory rung is recorded and the ladder goes on, the same run gives the same
// losses, and hostile inputs give clear errors.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <thread>

#include "bench/ladder/lost_device.h"  // hang_after_s
#include "bench/ladder/run_dir.h"  // device_identity
#include "helpers.h"

namespace gpt2 {
namespace {

const std::string kBody =
    "name: rel\nmodel: tiny\ndata: {synthetic_tokens: 20000}\ndevice: cpu\nbatch: 4\nwarmup_steps: 1\n"
    "steps: 40\nrepetitions: 2\nparity_steps: 3\nbreakdown_steps: 0\nseed: 5\n"
    "variants: [mask_on_the_fly, native_layers, fused_adamw, sdpa]\n";
const std::string kTinyBody =
    "name: rel\nmodel: tiny\ndata: {synthetic_tokens: 20000}\ndevice: cpu\nbatch: 4\nwarmup_steps: 1\n"
    "steps: 2\nrepetitions: 2\nparity_steps: 3\nbreakdown_steps: 0\nseed: 5\nvariants: [mask_on_the_fly]\n";


// Starts gpt2bench; sends `sig` once a line containing `marker` appears (plus `delay`); returns the
// exit status and the output. `group`: to its whole process group, its children too, as `timeout` and a
// terminal's Ctrl-C do.
test::CommandResult run_and_signal(const std::string& args, const std::string& marker, int sig, double delay,
                                   bool group = false) {
  int fds[2];
  EXPECT_EQ(pipe(fds), 0);
  const pid_t pid = fork();
  if (pid == 0) {
    if (group) setpgid(0, 0);
    dup2(fds[1], 1), dup2(fds[1], 2), close(fds[0]);
    execl("/bin/sh", "sh", "-c", (std::string("exec ") + GPT2BENCH_BINARY + " " + args).c_str(), nullptr);
    _exit(127);
  }
  close(fds[1]);
  std::string out;
  char buf[4096];
  bool sent = false;
  for (ssize_t n; (n = read(fds[0], buf, sizeof(buf))) > 0;) {
    out.append(buf, n);
    if (!sent && out.find(marker) != std::string::npos) {
      std::this_thread::sleep_for(std::chrono::duration<double>(delay));
      kill(group ? -pid : pid, sig);
      sent = true;
    }
  }
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

int iterations_of(const nlohmann::json& results, const std::string& rung) {
  int n = 0;
  for (const auto& b : results["benchmarks"])
    n += b["run_name"].get<std::string>().find(rung) != std::string::npos && b["run_type"] == "iteration";
  return n;
}

TEST(Reliability, SigintDuringRung2ThenResumeEqualsAnUninterruptedRun) {
  test::TempDir d;
  const auto profile = test::write_tiny_profile(d, kBody);
  auto r = run_and_signal("ladder --profile " + profile + " --out " + (d / "run"), "[3/5] 02_native_layers", SIGINT, 0.01);
  ASSERT_EQ(r.exit_code, 130) << r.output;
  EXPECT_NE(r.output.find("--resume"), std::string::npos) << r.output;
  auto rungs = test::read_json(d / "run/rungs.json");  // valid JSON, written atomically
  EXPECT_EQ(rungs["status"], "interrupted");
  EXPECT_EQ(rungs["rungs"][0]["status"], "ok");
  EXPECT_EQ(rungs["rungs"][1]["status"], "ok");
  EXPECT_EQ(rungs["rungs"][2]["status"], "interrupted");
  EXPECT_EQ(rungs["rungs"][3]["status"], "interrupted");
  const auto partial = test::read_json(d / "run/results.json");
  EXPECT_EQ(iterations_of(partial, "01_mask_on_the_fly"), 2);

  r = test::run_gpt2bench("ladder --resume " + (d / "run"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("2 of 5 rungs already complete"), std::string::npos) << r.output;
  const auto resumed = test::read_json(d / "run/rungs.json");
  const auto results = test::read_json(d / "run/results.json");

  r = test::run_gpt2bench("ladder --profile " + profile + " --out " + (d / "straight"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto straight = test::read_json(d / "straight/rungs.json");
  EXPECT_EQ(resumed["status"], "complete");
  ASSERT_EQ(resumed["rungs"].size(), straight["rungs"].size());
  for (size_t i = 0; i < straight["rungs"].size(); ++i) {
    const auto &a = resumed["rungs"][i], &b = straight["rungs"][i];
    EXPECT_EQ(a["name"], b["name"]);
    EXPECT_EQ(a["status"], "ok");
    EXPECT_TRUE(std::isfinite(a["median"]["tokens_per_sec"].get<double>()));
    EXPECT_EQ(a["parity"]["losses"], b["parity"]["losses"]) << a["name"];  // the same math, bit for bit
    // No rung ran twice: exactly `repetitions` timed entries each.
    EXPECT_EQ(iterations_of(results, a["name"].get<std::string>()), 2) << a["name"];
  }
}

// A stop before the first rung began (while the peaks are measured, or the parity reference runs) is a clean stop:
// exit 130, a run directory --resume takes, and the resumed run complete.
TEST(Reliability, AStopBeforeTheFirstRungIsCleanAndResumable) {
  for (const std::string marker : {"measuring the fp32 matmul peak", "parity reference, "}) {
    test::TempDir d;
    const auto profile = test::write_tiny_profile(d, kTinyBody);
    auto r = run_and_signal("ladder --profile " + profile + " --out " + (d / "run"), marker, SIGINT, 0.01);
    ASSERT_EQ(r.exit_code, 130) << marker << ":\n" << r.output;
    EXPECT_EQ(r.output.find("error"), std::string::npos) << r.output;
    EXPECT_EQ(test::read_json(d / "run/rungs.json")["status"], "interrupted");
    r = test::run_gpt2bench("ladder --resume " + (d / "run"));
    ASSERT_EQ(r.exit_code, 0) << r.output;
    const auto resumed = test::read_json(d / "run/rungs.json");
    EXPECT_EQ(resumed["status"], "complete");
    for (const auto& rung : resumed["rungs"]) EXPECT_EQ(rung["status"], "ok") << rung.dump();
  }
}

// A stop sent to the process group (scripts/gpu_session.sh's deadline, a terminal's Ctrl-C) ends the Python
// reference in flight too: recorded as interrupted, not as its failure, and --resume runs it again.
TEST(Reliability, AStopThatEndsAReferenceMarksItInterruptedAndResumeRunsIt) {
  test::TempDir d;
  std::string body = kBody;
  body.replace(body.find("steps: 40"), 9, "steps: 2");
  body.replace(body.find("variants: ["), 11, "references: [ref_torch_eager]\nvariants: [");
  const auto profile = test::write_tiny_profile(d, body);
  auto r = run_and_signal("ladder --profile " + profile + " --out " + (d / "run"), "[ref] ref_torch_eager", SIGTERM,
                          0.3, /*group=*/true);
  ASSERT_EQ(r.exit_code, 130) << r.output;
  EXPECT_NE(r.output.find("ref_torch_eager not finished: interrupted (--resume runs it again)"), std::string::npos)
      << r.output;
  auto rungs = test::read_json(d / "run/rungs.json");
  EXPECT_EQ(rungs["status"], "interrupted");
  ASSERT_EQ(rungs["references"].size(), 1u);
  EXPECT_EQ(rungs["references"][0]["status"], "interrupted");

  r = test::run_gpt2bench("ladder --resume " + (d / "run"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("5 of 5 rungs already complete"), std::string::npos) << r.output;
  rungs = test::read_json(d / "run/rungs.json");
  EXPECT_EQ(rungs["status"], "complete");
  EXPECT_EQ(rungs["references"][0]["status"], "ok");

  // A finished reference is kept by a later --resume, as a finished rung is: not run again; the run is complete.
  r = test::run_gpt2bench("ladder --resume " + (d / "run"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("5 of 5 rungs already complete, 1 reference(s)"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("is complete: nothing to run"), std::string::npos) << r.output;
  const auto again = test::read_json(d / "run/rungs.json");
  ASSERT_EQ(again["references"].size(), 1u);
  EXPECT_EQ(again["references"][0], rungs["references"][0]);
}

// kBody at 2 steps a repetition in d/profile.yaml, and its finished run in d/run.
void finished_run(test::TempDir& d, std::string& body, std::string& profile) {
  body = kBody;
  body.replace(body.find("steps: 40"), 9, "steps: 2");
  profile = test::write_tiny_profile(d, body);
  ASSERT_EQ(test::run_gpt2bench("ladder --profile " + profile + " --out " + (d / "run")).exit_code, 0);
}

// Carried binaries run in another checkout say their own commit (scripts/gpu_session.sh sets GPT2BENCH_GIT_SHA from
// their build.txt once the files are checked): there the checkout's git held a stale HEAD, and an H100 run recorded
// 320402515242-dirty for binaries built at 4f0791ce96db. Without it, the checkout's own.
TEST(Reliability, CarriedBinariesSayTheCommitTheyWereBuiltAt) {
  ASSERT_EQ(std::getenv("GPT2BENCH_GIT_SHA"), nullptr);
  const std::string own = git_sha();
  EXPECT_FALSE(own.empty());
  setenv("GPT2BENCH_GIT_SHA", "4f0791ce96db", 1);
  EXPECT_EQ(git_sha(), "4f0791ce96db");
  EXPECT_NE(build_id().find("4f0791ce96db"), std::string::npos) << build_id();
  unsetenv("GPT2BENCH_GIT_SHA");
  EXPECT_EQ(git_sha(), own);
}

TEST(Reliability, ResumeRefusesAnotherProfileOrNothingToResume) {
  test::TempDir d;
  std::string body, profile;
  ASSERT_NO_FATAL_FAILURE(finished_run(d, body, profile));
  const auto before = test::read_text(d / "run/rungs.json");
  test::write_text(d / "profile.yaml", body + "lr: 0.001\n");
  auto r = test::run_gpt2bench("ladder --resume " + (d / "run"));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("cannot resume"), std::string::npos) << r.output;
  EXPECT_EQ(test::read_text(d / "run/rungs.json"), before);  // untouched
  r = test::run_gpt2bench("ladder --resume " + (d / "nothing"));
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("nothing to resume"), std::string::npos) << r.output;
  r = test::run_gpt2bench("ladder --profile " + profile + " --out " + (d / "run"));
  EXPECT_NE(r.output.find("or --resume it"), std::string::npos) << r.output;
}

// A run's ratios compare rungs and references timed on one device, and a lease may be an H100 and the next an
// H200 (or a CPU session a Zen 3 and the next a Zen 4, both "AMD EPYC"): --resume refuses a run made on another
// device, naming both, and leaves it untouched.
TEST(Reliability, ResumeRefusesARunMadeOnAnotherDevice) {
  test::TempDir d;
  std::string body, profile;
  ASSERT_NO_FATAL_FAILURE(finished_run(d, body, profile));
  auto rungs = test::read_json(d / "run/rungs.json");
  const auto here = rungs["device"];
  ASSERT_EQ(here["type"], "cpu");
  const std::string this_is = "this is " + device_identity(here);

  // the same device, total memory moved by a few KB (a CPU's MemTotal between boots), another card of the model
  // (a lease is a fresh machine): resumed, the cards the run was timed on kept (this CPU adds none)
  rungs["device"]["total_memory"] = here["total_memory"].get<int64_t>() - 8192;
  rungs["device"]["uuid"] = "GPU-00112233-4455-6677-8899-aabbccddeeff";
  rungs["cards"] = {"GPU-00112233-4455-6677-8899-aabbccddeeff"};
  test::write_text(d / "run/rungs.json", rungs.dump(2));
  auto r = test::run_gpt2bench("ladder --resume " + (d / "run"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("5 of 5 rungs already complete"), std::string::npos) << r.output;
  EXPECT_EQ(test::read_json(d / "run/rungs.json")["cards"], rungs["cards"]);

  struct Case {
    nlohmann::json device;
    std::string said;
  };
  nlohmann::json other_cpu = here, threads = here, h100 = {{"type", "cuda"}, {"name", "NVIDIA H100 80GB HBM3"},
                                                     {"compute_capability", "9.0"}, {"sm_count", 132},
                                                     {"driver_version", "580.159"}, {"runtime_version", "13.0"},
                                                     {"world_size", 1}, {"total_memory", 85'000'000'000}};
  // another CPU model than this one, whichever machine runs the test (a real id once matched a Zen 3 here)
  other_cpu["cpu_model_id"] = here.value("cpu_model_id", "") == "family 25 model 1 stepping 1"
                                  ? "family 25 model 17 stepping 1" : "family 25 model 1 stepping 1";
  threads["sm_count"] = here["sm_count"].get<int>() + 1;
  for (const Case& c :
       {Case{other_cpu, "(cpu, " + other_cpu["cpu_model_id"].get<std::string>() + ", "},
        Case{threads, ", " + std::to_string(here["sm_count"].get<int>() + 1) + " threads, 1 process(es))"},
        Case{h100, "NVIDIA H100 80GB HBM3 (cuda, cc 9.0, 132 SMs, driver 580.159, CUDA runtime 13.0, 1 process(es))"}}) {
    rungs["device"] = c.device;
    test::write_text(d / "run/rungs.json", rungs.dump(2));
    const auto before = test::read_text(d / "run/rungs.json");
    r = test::run_gpt2bench("ladder --resume " + (d / "run"));
    EXPECT_EQ(r.exit_code, 1) << r.output;
    EXPECT_NE(r.output.find("it was run on another device ("), std::string::npos) << r.output;
    EXPECT_NE(r.output.find(c.said), std::string::npos) << r.output;
    EXPECT_NE(r.output.find(this_is + "); its ratios compare rungs timed on one device: start a new --out"),
              std::string::npos)
        << r.output;
    EXPECT_EQ(test::read_text(d / "run/rungs.json"), before);  // untouched
  }
}

// The cards a run was timed on: the earlier sessions' and this one's GPU, each once, in order; a CPU adds none.
TEST(Reliability, CardsARunWasTimedOn) {
  const std::string a = "GPU-0a", b = "GPU-0b";
  EXPECT_EQ(cards_with(nlohmann::json::array(), a), nlohmann::json({a}));
  EXPECT_EQ(cards_with(nlohmann::json({a}), b), nlohmann::json({a, b}));
  EXPECT_EQ(cards_with(nlohmann::json({a, b}), a), nlohmann::json({a, b}));
  EXPECT_EQ(cards_with(nlohmann::json({a}), ""), nlohmann::json({a}));
  EXPECT_EQ(cards_with(nlohmann::json(), ""), nlohmann::json::array());  // an older run's rungs.json: none
}

// Our kernels first run on a GPU unchecked there: a kernel's illegal address loses the process's CUDA context, every
// later call in it fails, and freeing a tensor another stream used throws inside its destructor (std::terminate).
// Either way (`how`: the error reaching the rung's handler, or a destructor's throw) the rung is recorded with its
// error, the rest are left to a new process, the exit is 3, and --resume runs them there, keeping the faulted rung
// as it was (run again, it would lose the new process's device as well).
void lose_the_device_then_resume(const std::string& how) {
  test::TempDir d;
  std::string body = kBody;
  body.replace(body.find("steps: 40"), 9, "steps: 2");
  body.replace(body.find("variants: ["), 11, "references: [ref_torch_eager]\nvariants: [");
  const auto profile = test::write_tiny_profile(d, body);
  const std::string fault = "GPT2BENCH_FAULT_DEVICE=02_native_layers" + how;
  auto r = test::run_gpt2bench("ladder --profile " + profile + " --out " + (d / "run"), fault);
  ASSERT_EQ(r.exit_code, 3) << r.output;
  EXPECT_NE(r.output.find("gpt2bench: 02_native_layers left the device unusable (cudaErrorIllegalAddress: an illegal "
                          "memory access was encountered): CUDA error: an illegal memory access was encountered\n"),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("gpt2bench ladder --resume runs the rest in a new one"), std::string::npos) << r.output;
  auto rungs = test::read_json(d / "run/rungs.json");
  EXPECT_EQ(rungs["status"], "aborted");
  EXPECT_EQ(rungs["rungs"][1]["status"], "ok");
  EXPECT_FALSE(rungs["rungs"][1].contains("device_fault"));
  const auto lost = rungs["rungs"][2];
  EXPECT_EQ(lost["status"], "error");
  EXPECT_EQ(lost.value("device_fault", false), true);
  EXPECT_EQ(lost["error"].get<std::string>().rfind("CUDA error: an illegal memory access was encountered\n", 0), 0u)
      << lost["error"];
  for (int i : {3, 4}) EXPECT_EQ(rungs["rungs"][i]["status"], "pending") << i;
  EXPECT_TRUE(rungs["references"].empty());  // not started in a process without its device
  EXPECT_EQ(iterations_of(test::read_json(d / "run/results.json"), "01_mask_on_the_fly"), 2);  // the finished rungs' results

  // A new process, the fault still set for that rung: the rung is kept, not run again; the rest run, the
  // reference too. A rung's error stands: exit 1.
  r = test::run_gpt2bench("ladder --resume " + (d / "run"), fault);
  ASSERT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("3 of 5 rungs already complete"), std::string::npos) << r.output;
  rungs = test::read_json(d / "run/rungs.json");
  EXPECT_EQ(rungs["status"], "partial");
  for (const char* key : {"status", "error", "device_fault"}) EXPECT_EQ(rungs["rungs"][2][key], lost[key]) << key;
  for (int i : {0, 1, 3, 4}) EXPECT_EQ(rungs["rungs"][i]["status"], "ok") << i;
  ASSERT_EQ(rungs["references"].size(), 1u);
  EXPECT_EQ(rungs["references"][0]["status"], "ok");
}

TEST(Reliability, ARungThatLosesTheDeviceEndsTheProcessAndResumeGoesOnPastIt) { lose_the_device_then_resume(""); }

TEST(Reliability, ATensorFreedAfterTheDeviceIsLostEndsTheProcessTheSameWay) { lose_the_device_then_resume(":free"); }

// A process that ends in a rung records nothing there: a crash (a segfault, an abort), the out-of-memory killer, a
// deadline's kill where the rung could not stop in time. Written ahead of its work, the rung is left "in_flight";
// --resume runs it once more (a deadline's kill ends a sound rung so), counting the end in `ended_processes`.
TEST(Reliability, ARungItsProcessEndedInRunsOnceMore) {
  test::TempDir d;
  const auto profile = test::write_tiny_profile(d, kBody);
  auto r = run_and_signal("ladder --profile " + profile + " --out " + (d / "run"), "02_native_layers: build", SIGKILL, 0);
  ASSERT_EQ(r.exit_code, -1) << r.output;  // killed
  auto rungs = test::read_json(d / "run/rungs.json");
  EXPECT_EQ(rungs["status"], "running");
  EXPECT_EQ(rungs["rungs"][1]["status"], "ok");
  EXPECT_FALSE(rungs["rungs"][1].contains("in_flight"));  // ended: its outcome written
  EXPECT_EQ(rungs["rungs"][2]["status"], "pending");
  EXPECT_EQ(rungs["rungs"][2].value("in_flight", false), true);
  EXPECT_FALSE(rungs["rungs"][3].contains("in_flight"));  // not started

  r = test::run_gpt2bench("ladder --resume " + (d / "run"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("gpt2bench: 02_native_layers: the last process ended during it, recording nothing (a "
                          "crash, or a kill it could not stop for): run again; a second such end records it as an error"),
            std::string::npos)
      << r.output;
  rungs = test::read_json(d / "run/rungs.json");
  EXPECT_EQ(rungs["status"], "complete");
  for (const auto& rung : rungs["rungs"]) {
    EXPECT_EQ(rung["status"], "ok") << rung["name"];
    EXPECT_FALSE(rung.contains("in_flight")) << rung["name"];
  }
  EXPECT_EQ(rungs["rungs"][2].value("ended_processes", 0), 1);
  EXPECT_FALSE(rungs["rungs"][3].contains("ended_processes"));
}

// A rung that ends a second process (a crash it causes each time; a hang the deadline kills) is recorded as an error
// and kept as such by --resume, which goes on past it: it cannot take every later process, and every later lease of
// a GPU, with it.
TEST(Reliability, ARungThatEndsTwoProcessesIsAnErrorAndResumeGoesOnPastIt) {
  test::TempDir d;
  const auto profile = test::write_tiny_profile(d, kBody);
  auto r = run_and_signal("ladder --profile " + profile + " --out " + (d / "run"), "02_native_layers: build", SIGKILL, 0);
  ASSERT_EQ(r.exit_code, -1) << r.output;
  r = run_and_signal("ladder --resume " + (d / "run"), "02_native_layers: build", SIGKILL, 0);
  ASSERT_EQ(r.exit_code, -1) << r.output;
  auto rungs = test::read_json(d / "run/rungs.json");
  EXPECT_EQ(rungs["rungs"][2]["status"], "pending");
  EXPECT_EQ(rungs["rungs"][2].value("in_flight", false), true);
  EXPECT_EQ(rungs["rungs"][2].value("ended_processes", 0), 1);  // the first end; this one is counted on resume

  r = test::run_gpt2bench("ladder --resume " + (d / "run"));
  ASSERT_EQ(r.exit_code, 1) << r.output;  // a rung's error
  const std::string error =
      "its process ended during this rung 2 times, recording nothing (a crash, or a kill it could not stop for: the "
      "ladder's log says which); --resume does not run it again";
  EXPECT_NE(r.output.find("gpt2bench: 02_native_layers: " + error), std::string::npos) << r.output;
  rungs = test::read_json(d / "run/rungs.json");
  EXPECT_EQ(rungs["status"], "partial");
  const auto given_up = rungs["rungs"][2];
  EXPECT_EQ(given_up["status"], "error");
  EXPECT_EQ(given_up["error"], error);
  EXPECT_EQ(given_up.value("ended_processes", 0), 2);
  EXPECT_FALSE(given_up.contains("in_flight"));
  for (int i : {0, 1, 3, 4}) EXPECT_EQ(rungs["rungs"][i]["status"], "ok") << i;
  EXPECT_EQ(iterations_of(test::read_json(d / "run/results.json"), "02_native_layers"), 0);

  // Kept: a later --resume neither runs it again nor counts it again.
  r = test::run_gpt2bench("ladder --resume " + (d / "run"));
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("5 of 5 rungs already complete"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("gpt2bench: 02_native_layers: "), std::string::npos) << r.output;  // nothing counted
  rungs = test::read_json(d / "run/rungs.json");
  for (const char* key : {"status", "error", "ended_processes"}) EXPECT_EQ(rungs["rungs"][2][key], given_up[key]) << key;
  EXPECT_EQ(iterations_of(test::read_json(d / "run/results.json"), "02_native_layers"), 0);
}

// A rung that hangs (a kernel that never ends: the host waits at its next synchronization for good) would hold its
// process until a deadline killed it, recording nothing. The watch ends it as a lost device once the rung has begun
// no step phase for GPT2BENCH_HANG_S (a CUDA device's default kHangLimitS): the rung recorded, exit 3; --resume goes
// on past it, and the watch does not fire on the rungs that do not hang.
TEST(Reliability, ARungThatHangsEndsItsProcessAsALostDeviceAndResumeGoesOnPastIt) {
  test::TempDir d;
  std::string body = kBody;
  body.replace(body.find("steps: 40"), 9, "steps: 2");
  const auto profile = test::write_tiny_profile(d, body);
  auto r = test::run_gpt2bench("ladder --profile " + profile + " --out " + (d / "run"),
                               "GPT2BENCH_FAULT_DEVICE=02_native_layers:hang GPT2BENCH_HANG_S=2");
  ASSERT_EQ(r.exit_code, 3) << r.output;
  const std::string hung = "hung: no step began a phase for 2 s (a kernel that does not end, or a call that does "
                           "not return; GPT2BENCH_HANG_S sets the limit)";
  EXPECT_NE(r.output.find("gpt2bench: 02_native_layers left the device unusable (hung): " + hung), std::string::npos)
      << r.output;
  auto rungs = test::read_json(d / "run/rungs.json");
  EXPECT_EQ(rungs["status"], "aborted");
  EXPECT_EQ(rungs["rungs"][1]["status"], "ok");
  EXPECT_EQ(rungs["rungs"][2]["status"], "error");
  EXPECT_EQ(rungs["rungs"][2]["error"], hung);
  EXPECT_EQ(rungs["rungs"][2].value("device_fault", false), true);
  for (int i : {3, 4}) EXPECT_EQ(rungs["rungs"][i]["status"], "pending") << i;

  r = test::run_gpt2bench("ladder --resume " + (d / "run"), "GPT2BENCH_HANG_S=5");
  ASSERT_EQ(r.exit_code, 1) << r.output;  // the hung rung's error stands
  EXPECT_NE(r.output.find("3 of 5 rungs already complete"), std::string::npos) << r.output;
  rungs = test::read_json(d / "run/rungs.json");
  EXPECT_EQ(rungs["rungs"][2]["error"], hung);
  for (int i : {0, 1, 3, 4}) EXPECT_EQ(rungs["rungs"][i]["status"], "ok") << i;

  r = test::run_gpt2bench("ladder --profile " + profile + " --out " + (d / "bad"), "GPT2BENCH_HANG_S=soon");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("GPT2BENCH_HANG_S='soon': expected seconds, 0 or more (0: no watch)"), std::string::npos)
      << r.output;
  EXPECT_FALSE(files::exists(d / "bad"));
}

// The watch waits past its limit by twice a repetition's device time: a graph rung's host queues a repetition's
// launches and then waits for all of them, beginning no step meanwhile. Before the warm-up has timed a step,
// the limit alone.
TEST(Reliability, AHangIsCalledOnlyPastTheLimitAndTwiceARepetitionsDeviceTime) {
  EXPECT_DOUBLE_EQ(hang_after_s(120, 0.0, 20), 120);     // warm-up not done: no step time known
  EXPECT_DOUBLE_EQ(hang_after_s(120, 0.25, 20), 130);    // 20 steps of 0.25 s queued: 5 s, twice
  EXPECT_DOUBLE_EQ(hang_after_s(120, 30.0, 3), 300);     // slow steps: the margin outgrows the limit
  EXPECT_DOUBLE_EQ(hang_after_s(2, 0.5, 0), 2);          // no timed steps yet
  EXPECT_DOUBLE_EQ(hang_after_s(2, -1.0, -4), 2);        // nonsense in the record never shortens the limit
}

TEST(Reliability, AFaultInjectedInAnUnknownWayIsRefused) {
  test::TempDir d;
  std::string body = kBody;
  body.replace(body.find("steps: 40"), 9, "steps: 2");
  const auto profile = test::write_tiny_profile(d, body);
  const auto r = test::run_gpt2bench("ladder --profile " + profile + " --out " + (d / "run"),
                                     "GPT2BENCH_FAULT_DEVICE=02_native_layers:later");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("GPT2BENCH_FAULT_DEVICE='02_native_layers:later': expected <rung>, <rung>:free, "
                          "<rung>:device or <rung>:hang"),
            std::string::npos)
      << r.output;
}

TEST(Reliability, DivergenceIsRecordedWithItsStepAndTheLadderGoesOn) {
  test::TempDir d;
  std::string body = kBody;
  body.replace(body.find("steps: 40"), 9, "steps: 5");
  const auto profile = test::write_tiny_profile(d, body + "lr: 1.0e+8\n");
  auto r = test::run_gpt2bench("ladder --profile " + profile + " --out " + (d / "run"));
  EXPECT_EQ(r.exit_code, 1) << r.output;  // every rung diverged: no rung was measured, so no success
  EXPECT_NE(r.output.find("no rung was measured"), std::string::npos) << r.output;
  const auto rungs = test::read_json(d / "run/rungs.json");
  EXPECT_EQ(rungs["status"], "partial");
  for (const auto& rung : rungs["rungs"]) {
    EXPECT_EQ(rung["status"], "diverged") << rung["name"];
    EXPECT_GE(rung["diverged_at_step"].get<int>(), 1);
    EXPECT_NE(rung["error"].get<std::string>().find("non-finite loss at step"), std::string::npos);
  }
}

TEST(Reliability, OutOfTheCpuMemoryBudgetIsOomAndTheLadderGoesOn) {
  test::TempDir d;
  std::string body = kBody;
  body.replace(body.find("steps: 40"), 9, "steps: 2");
  const auto profile = test::write_tiny_profile(d, body + "settings: {cpu_memory_budget_gb: 0.000001}\n");
  auto r = test::run_gpt2bench("ladder --profile " + profile + " --out " + (d / "run"));
  EXPECT_EQ(r.exit_code, 1) << r.output;  // no rung was measured
  EXPECT_NE(r.output.find("no rung was measured"), std::string::npos) << r.output;
  const auto rungs = test::read_json(d / "run/rungs.json");
  EXPECT_EQ(rungs["status"], "partial");  // not "complete": rungs ran out of memory
  ASSERT_EQ(rungs["rungs"].size(), 5u);
  for (const auto& rung : rungs["rungs"]) {
    EXPECT_EQ(rung["status"], "oom") << rung["name"];
    EXPECT_NE(rung["error"].get<std::string>().find("out of memory at batch 4: CPU out of memory"), std::string::npos)
        << rung["error"];
  }
}

// What the H100 did with `batch: 32`: the fp32 baseline (and so the parity reference) needs more
// memory than the device has. The baseline is recorded as oom, the rungs that fit still run with
// a tok/s, and their parity is n/a with the reason. The CPU's budget is that device here: a budget
// between what the bf16 rung and the fp32 baseline need, measured by a first run without one.
TEST(Reliability, ParityReferenceOutOfMemoryIsRecordedAndTheRungsThatFitRun) {
  test::TempDir d;
  const std::string body =
      "name: rel\nmodel: tiny\ndata: {synthetic_tokens: 20000}\ndevice: cpu\nbatch: 32\nwarmup_steps: 1\n"
      "steps: 2\nrepetitions: 2\nparity_steps: 2\nbreakdown_steps: 1\nseed: 5\nvariants: [bf16_cast]\n";
  auto r = test::run_gpt2bench("ladder --profile " + test::write_tiny_profile(d, body) + " --out " + (d / "free"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto free = test::read_json(d / "free/rungs.json");
  const double fp32 = free["rungs"][0]["median"]["peak_alloc_bytes"].get<double>();
  const double bf16 = free["rungs"][1]["median"]["peak_alloc_bytes"].get<double>();
  // the premise, not the behaviour: a CPU without bf16 matmuls (Zen 3, under ASan) held more for the bf16 rung
  if (!(bf16 < 0.8 * fp32)) GTEST_SKIP() << "the bf16 rung needs " << bf16 << " bytes, the fp32 one " << fp32
                                         << ": no budget between them on this CPU";
  const double budget_gb = (0.5 * (fp32 + bf16)) / double(1 << 30);
  char setting[96];
  std::snprintf(setting, sizeof(setting), "settings: {cpu_memory_budget_gb: %.9f}\n", budget_gb);
  test::TempDir e;
  r = test::run_gpt2bench("ladder --profile " + test::write_tiny_profile(e, body + setting) + " --out " + (e / "run"));
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("no parity reference: the baseline ran out of memory at batch 32"), std::string::npos)
      << r.output;
  const auto rungs = test::read_json(e / "run/rungs.json");
  EXPECT_EQ(rungs["status"], "partial");
  EXPECT_EQ(rungs["rungs"][0]["status"], "oom");
  EXPECT_NE(rungs["rungs"][0]["error"].get<std::string>().find("out of memory at batch 32"), std::string::npos);
  const auto& fit = rungs["rungs"][1];
  EXPECT_EQ(fit["status"], "ok") << fit.dump(2);
  EXPECT_GT(fit["median"]["tokens_per_sec"].get<double>(), 0);
  EXPECT_EQ(fit["parity"]["verdict"], "n/a");
  EXPECT_NE(fit["parity"]["rule"].get<std::string>().find("no parity reference: the baseline ran out of memory"),
            std::string::npos);
  EXPECT_TRUE(fit["breakdown"].contains("phase_ms"));  // its profiling pass fitted too
}

TEST(Reliability, SameProfileSameSeedSameLosses) {
  test::TempDir d;
  std::string body = kBody;
  body.replace(body.find("steps: 40"), 9, "steps: 3");
  const auto profile = test::write_tiny_profile(d, body);
  ASSERT_EQ(test::run_gpt2bench("ladder --profile " + profile + " --out " + (d / "a")).exit_code, 0);
  ASSERT_EQ(test::run_gpt2bench("ladder --profile " + profile + " --out " + (d / "b")).exit_code, 0);
  const auto a = test::read_json(d / "a/rungs.json"), b = test::read_json(d / "b/rungs.json");
  for (size_t i = 0; i < a["rungs"].size(); ++i) {
    EXPECT_EQ(a["rungs"][i]["parity"]["losses"], b["rungs"][i]["parity"]["losses"]);
    EXPECT_EQ(a["rungs"][i]["median"]["loss"], b["rungs"][i]["median"]["loss"]);  // dropout included
  }
}

TEST(Reliability, HostileInputsGiveClearErrorsAndNoOutput) {
  test::TempDir d;
  const auto profile_for = [&](const std::string& data) {
    return test::write_tiny_profile(d, "model: tiny\ndevice: cpu\nvariants: []\ndata: " + data + "\n");
  };
  auto expect_error = [&](const std::string& profile, const std::string& needle) {
    const auto out = d / "out";
    auto r = test::run_gpt2bench("ladder --profile " + profile + " --out " + out);
    EXPECT_EQ(r.exit_code, 1) << r.output;
    EXPECT_NE(r.output.find(needle), std::string::npos) << r.output;
    EXPECT_FALSE(files::exists(out)) << needle;
  };
  // A shard cut short, one that declares far more tokens than it holds, an empty one.
  std::string good = std::string(1024, '\0');
  int32_t header[3] = {20240520, 1, 1000};
  std::memcpy(good.data(), header, sizeof(header));
  test::write_text(d / "s/truncated_0.bin", good + std::string(100, 'x'));
  test::write_text(d / "s/val_0.bin", good + std::string(2000, 'x'));
  expect_error(profile_for("{train: s/truncated_*.bin, val: s/val_*.bin}"),
               "truncated_0.bin: header declares 1000 tokens (2000 bytes) but the file holds 100");
  header[2] = 2'000'000'000;
  std::memcpy(good.data(), header, sizeof(header));
  test::write_text(d / "s/huge_0.bin", good);
  expect_error(profile_for("{train: s/huge_*.bin, val: s/val_*.bin}"), "header declares 2000000000 tokens");
  test::write_text(d / "s/empty_0.bin", "");
  expect_error(profile_for("{train: s/empty_*.bin, val: s/val_*.bin}"), "empty_0.bin: 0 bytes is too short");
  expect_error(profile_for("{train: s/missing_*.bin, val: s/val_*.bin}"), "no shard matches");
  expect_error(test::write_tiny_profile(d, "model: nowhere\n"), "model preset 'nowhere' not found");
  expect_error(test::write_tiny_profile(d, ""), "must be a YAML mapping");
  // Non-UTF-8 text is still text to tokenize: its bytes.
  test::write_text(d / "latin1.txt", std::string("caf\xe9 na\xefve \xff\xfe ", 14) + std::string(200, 'a'));
  auto r = test::run_gpt2bench("prepare --input " + (d / "latin1.txt") + " --out " + (d / "p"));
  EXPECT_EQ(r.exit_code, 0) << r.output;
}

}  // namespace
}  // namespace gpt2
