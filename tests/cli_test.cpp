// End-to-end: the built gpt2bench binary on tiny profiles.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <cstdlib>
#include <sstream>
#include <vector>

#include "bench/ladder/parity.h"
#include "bench/measure/stats.h"
#include "bench/runtime/device.h"
#include "bench/runtime/memory.h"
#include "helpers.h"
#include "variants/registry.h"

namespace gpt2 {
namespace {

const char* kTinyProfile =
    "name: tiny-e2e\nmodel: tiny\ndata: {synthetic_tokens: 20000}\ndevice: cpu\nbatch: 2\n"
    "warmup_steps: 1\nsteps: 2\nrepetitions: 2\nparity_steps: 2\nseed: 3\nvariants: []\n";

// kTinyProfile with its `variants: []` line replaced by `lines`: a test's variants, plan, settings and references.
std::string tiny_profile_with(const std::string& lines) {
  std::string body = kTinyProfile;
  return body.replace(body.find("variants: []"), 12, lines);
}

TEST(Cli, LadderWritesResultsWithTheCounters) {
  test::TempDir d;
  const auto profile = test::write_tiny_profile(d, kTinyProfile);
  auto r = test::run_gpt2bench("ladder --profile " + profile + " --out " + (d / "run"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("00_baseline"), std::string::npos);
  // The console, redirected: one line per rung as it ends, the summary; no Google Benchmark table (that is
  // --verbose), no escape codes, no line over 160 characters.
  EXPECT_NE(r.output.find("    00_baseline ok: "), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("manual_time"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("***WARNING***"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find('\x1b'), std::string::npos) << r.output;
  std::istringstream lines(r.output);
  for (std::string line; std::getline(lines, line);) EXPECT_LE(line.size(), 160u) << line;

  auto results = test::read_json(d / "run/results.json");
  EXPECT_EQ(results["context"]["profile"], "tiny-e2e");
  EXPECT_EQ(results["context"]["device_type"], "cpu");
  EXPECT_TRUE(results["context"].contains("torch_version"));
  EXPECT_TRUE(results["context"].contains("git_sha"));
  int iterations = 0;
  for (const auto& b : results["benchmarks"]) {
    EXPECT_EQ(b["run_name"], "tiny/00_baseline/iterations:1/repeats:2/manual_time");
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

  auto rungs = test::read_json(d / "run/rungs.json");
  EXPECT_EQ(rungs["status"], "complete");
  // every variant's traits, for the report to read in place of names
  EXPECT_EQ(rungs["variants"].size(), registry().size());
  EXPECT_EQ(rungs["variants"]["fp8_linears"], (nlohmann::json{{"parity", "fp8"}, {"extra", true}, {"anti", false}}));
  EXPECT_EQ(rungs["variants"]["sync_every_step"]["anti"], true);
  ASSERT_EQ(rungs["rungs"].size(), 1u);
  const auto& rung = rungs["rungs"][0];
  EXPECT_EQ(rung["name"], "00_baseline");
  EXPECT_EQ(rung["status"], "ok");
  EXPECT_EQ(rung["spec"]["optimizer"]["kind"], "adamw_loop");
  EXPECT_EQ(rung["tokens_per_step"], 2 * 16);
  EXPECT_GT(rung["peak_flops"]["measured_matmul"].get<double>(), 0);
  EXPECT_EQ(rung["parity"]["losses"].size(), 2u);
  EXPECT_GT(rung["breakdown"]["events_per_step"].get<double>(), 0);  // the profiling pass ran, apart
  EXPECT_TRUE(files::exists(d / "run/breakdown/00_baseline.trace.json"));
}

// The time budget: a budget far too small for the rungs still runs every rung, at the floor (two warm-up steps, one
// timed step per repetition, no breakdown pass), with a verdict, and records what it ran, why and how long each
// part took; a progress line follows each rung. Without budget_minutes a CPU run gets 15 minutes. The batch-scaling top keeps
// its breakdown pass (the report sets FP8's beside it).
TEST(Cli, ATightTimeBudgetRunsEveryRungAtTheFloorAndSaysSo) {
  test::TempDir d;
  const auto profile = test::write_tiny_profile(
      d, "name: tiny-budget\nmodel: tiny\ndata: {synthetic_tokens: 20000}\ndevice: cpu\nbatch: 2\n"
         "warmup_steps: 5\nsteps: 4\nrepetitions: 2\nparity_steps: 2\nseed: 3\n"
         "variants: [mask_on_the_fly, batch_scaling]\nsettings: {max_batch: 2}\nbudget_minutes: 0.0001\n");
  auto r = test::run_gpt2bench("ladder --profile " + profile + " --out " + (d / "run"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("gpt2bench: 1/4 rungs, "), std::string::npos) << r.output;  // the search takes two shares
  EXPECT_NE(r.output.find("gpt2bench: 3/4 rungs, "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("    took "), std::string::npos) << r.output;
  auto rungs = test::read_json(d / "run/rungs.json");
  EXPECT_DOUBLE_EQ(rungs["profile"]["budget_s"].get<double>(), 0.006);
  ASSERT_EQ(rungs["rungs"].size(), 3u);
  for (const auto& rung : rungs["rungs"]) {
    EXPECT_EQ(rung["status"], "ok") << rung.dump();
    EXPECT_EQ(rung["ran"]["steps_per_repetition"], 1) << rung.dump();
    // the fit times the second warm-up step (the first's holds one-time work), and stops warming up there
    EXPECT_EQ(rung["ran"]["warmup_steps"], 2);
    EXPECT_EQ(rung["ran"]["repetitions"], 2);
    const auto& took = rung["ran"]["seconds"];  // where its wall time went
    for (const char* what : {"choices", "build", "timed"}) EXPECT_TRUE(took.contains(what)) << took.dump();
    EXPECT_EQ(took.contains("parity"), rung["name"] != "00_baseline") << took.dump();  // the baseline is the reference
    EXPECT_GT(took["build"].get<double>(), 0) << took.dump();
    EXPECT_GT(took["timed"].get<double>(), 0) << took.dump();
    EXPECT_EQ(took.contains("breakdown"), rung["variant"] == "batch_scaling") << took.dump();
    EXPECT_EQ(took.contains("search"), rung["variant"] == "batch_scaling") << took.dump();
    EXPECT_EQ(rung["repetitions"]["step_ms"].size(), 2u);
    if (rung["variant"] == "batch_scaling") {
      EXPECT_EQ(rung["ran"]["budget"].get<std::string>().find("no breakdown pass"), std::string::npos) << rung.dump();
      EXPECT_GT(rung["breakdown"]["step_ms"].get<double>(), 0) << rung["breakdown"].dump();
      continue;
    }
    EXPECT_NE(rung["ran"]["budget"].get<std::string>().find("1 of 4 timed steps per repetition; no breakdown pass"),
              std::string::npos) << rung.dump();
    EXPECT_EQ(rung["breakdown"]["skipped"], "over the time budget");
  }
  EXPECT_EQ(rungs["rungs"][1]["parity"]["verdict"], "pass");

  const auto unbudgeted = test::write_tiny_profile(
      d, "name: tiny-budget\nmodel: tiny\ndata: {synthetic_tokens: 20000}\ndevice: cpu\nbatch: 2\n"
         "warmup_steps: 1\nsteps: 3\nrepetitions: 2\nparity_steps: 2\nseed: 3\nvariants: []\nbreakdown_steps: 0\n");
  r = test::run_gpt2bench("ladder --profile " + unbudgeted + " --out " + (d / "run2"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  rungs = test::read_json(d / "run2/rungs.json");
  EXPECT_DOUBLE_EQ(rungs["profile"]["budget_s"].get<double>(), 900.0);
  EXPECT_EQ(rungs["profile"]["budget_basis"], "15 minutes (a CPU's default)");
  EXPECT_EQ(rungs["rungs"][0]["ran"]["steps_per_repetition"], 3);
  EXPECT_EQ(rungs["rungs"][0]["ran"]["budget"], "");
}

// Two SDPA rungs on one attention, the kernel timed (dropout 0: with dropout ATen's CPU has math alone).
std::string sdpa_fastest_profile(const test::TempDir& d) {
  std::string body =
      tiny_profile_with("variants: [sdpa, fuse_qkv]\nbreakdown_steps: 0\nsettings: {sdpa_backend: fastest}");
  body.replace(body.find("model: tiny"), 11, "model: {preset: tiny, dropout: 0.0}");
  return test::write_tiny_profile(d, body);
}

// The rung's choice of `setting` in rungs.json's generic `choices` list; null where it has none.
nlohmann::json choice_of(const nlohmann::json& rung, const std::string& setting) {
  for (const auto& c : rung.value("choices", nlohmann::json::array()))
    if (c["setting"] == setting) return c;
  return nullptr;
}

// settings.classifier_chunk: fastest — a rung with the fused classifier times its chunks on its head (the tiny
// model at batch 128: 2,048 tokens, so 1,024 and 2,048), runs with the fastest and says so; a later rung with the
// same head takes that timing's choice; parity and the spec as it ran have it.
TEST(Cli, ClassifierChunkFastestTimesTheChunksAndRunsTheRungWithTheChoice) {
  test::TempDir d;
  std::string body =
      tiny_profile_with("plan: recipes\nrecipes: {fc: [fused_classifier], fc_adamw: [fused_adamw, fused_classifier]}\n"
                        "breakdown_steps: 0\nsettings: {classifier_chunk: fastest}");
  body.replace(body.find("batch: 2"), 8, "batch: 128");
  auto r = test::run_gpt2bench("ladder --profile " + test::write_tiny_profile(d, body) + " --out " + (d / "run"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("classifier_chunk: "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find(" (timed on N=2048 C=32 V=97 Float from 1024: 1024 "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find(" (timed for 01_fc on the same N=2048 C=32 V=97 Float from 1024)"), std::string::npos)
      << r.output;
  const auto doc = test::read_json(d / "run/rungs.json");
  ASSERT_EQ(doc["rungs"].size(), 3u);
  EXPECT_FALSE(doc["rungs"][0].contains("choices"));  // no fused classifier in the baseline
  const auto &fc = doc["rungs"][1], &next = doc["rungs"][2];
  const auto c = choice_of(fc, "classifier_chunk");
  ASSERT_FALSE(c.is_null()) << fc.dump();
  const std::string chosen = c["chosen"];
  EXPECT_TRUE(chosen == "1024" || chosen == "2048") << fc.dump();
  ASSERT_EQ(c["tries"].size(), 2u);
  for (const auto& t : c["tries"]) EXPECT_GT(t["ms"].get<double>(), 0) << t;
  EXPECT_FALSE(c.contains("timed_for"));  // its own timing
  EXPECT_EQ(fc["spec"]["model"]["classifier_chunk"], std::stoll(chosen));
  EXPECT_EQ(fc["spec"]["settings"]["classifier_chunk"], "fastest");
  EXPECT_EQ(fc["parity"]["verdict"], "pass");
  EXPECT_EQ(choice_of(next, "classifier_chunk")["timed_for"], "01_fc");
  EXPECT_EQ(next["spec"]["model"]["classifier_chunk"], std::stoll(chosen));
}

// settings.sdpa_backend: fastest — the rung times each SDPA kernel on its attention, runs with the
// fastest, and says so (the console, rungs.json's choices, the spec as it ran). A later rung with the
// same attention (fuse_qkv changes the projection, not the attention's inputs) takes that timing's choice.
TEST(Cli, SdpaFastestTimesTheKernelsAndRunsTheRungWithTheChoice) {
  test::TempDir d;
  auto r = test::run_gpt2bench("ladder --profile " + sdpa_fastest_profile(d) + " --out " + (d / "run"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find(" (timed on B=2 H="), std::string::npos) << r.output;
  const auto doc = test::read_json(d / "run/rungs.json");
  const auto& rung = doc["rungs"][1];
  const auto c = choice_of(rung, "sdpa_backend");
  ASSERT_FALSE(c.is_null()) << rung.dump();
  EXPECT_FALSE(doc["rungs"][0].contains("choices"));  // no SDPA in the baseline
  const std::string chosen = c["chosen"];
  EXPECT_TRUE(chosen == "flash" || chosen == "math") << chosen;
  EXPECT_EQ(rung["spec"]["sdpa_backend"], chosen);
  EXPECT_EQ(rung["spec"]["settings"]["sdpa_backend"], "fastest");
  EXPECT_EQ(rung["sdpa_backend_used"], chosen);
  EXPECT_EQ(c["tries"].size(), 4u);
  EXPECT_EQ(rung["parity"]["verdict"], "pass");
  EXPECT_FALSE(c.contains("timed_for"));  // its own timing
  const auto& next = doc["rungs"][2];
  ASSERT_EQ(doc["rungs"].size(), 3u);
  EXPECT_EQ(choice_of(next, "sdpa_backend")["timed_for"], rung["name"]) << next.dump();
  EXPECT_EQ(choice_of(next, "sdpa_backend")["tries"], c["tries"]);
  EXPECT_EQ(next["spec"]["sdpa_backend"], chosen);
  EXPECT_NE(r.output.find("    sdpa_backend: " + chosen + " (timed for " + rung["name"].get<std::string>() +
                          " on the same B=2 H="),
            std::string::npos)
      << r.output;
  size_t timings = 0;
  for (size_t at = 0; (at = r.output.find(" (timed on B=2 H=", at)) != std::string::npos; ++at) ++timings;
  EXPECT_EQ(timings, 1u);
}

// --resume keeps the kept rungs' SDPA timings: a rung run later on the same attention takes their choice.
TEST(Cli, SdpaTimingsOfKeptRungsStandAfterResume) {
  test::TempDir d;
  const auto profile = sdpa_fastest_profile(d);
  auto r = test::run_gpt2bench("ladder --profile " + profile + " --out " + (d / "run") + " --rung 01_sdpa");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  r = test::run_gpt2bench("ladder --resume " + (d / "run") + " --rung=");  // every rung, not the run's 01_sdpa
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(r.output.find(" (timed on B=2 H="), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("sdpa_backend: "), std::string::npos) << r.output;
  const auto doc = test::read_json(d / "run/rungs.json");
  EXPECT_EQ(choice_of(doc["rungs"][2], "sdpa_backend")["timed_for"], "01_sdpa") << doc["rungs"][2].dump();
  EXPECT_EQ(choice_of(doc["rungs"][2], "sdpa_backend")["chosen"], choice_of(doc["rungs"][1], "sdpa_backend")["chosen"]);
}

// The FLOP model in rungs.json, the independent count from the op shapes beside it (the manual
// attention computes the full T×T matrix, SDPA with is_causal the triangle), and MFU's one
// denominator with its basis.
TEST(Cli, FlopsFormulaCountedFlopsAndMfuBasis) {
  test::TempDir d;
  std::string body = tiny_profile_with("variants: [sdpa]\nbreakdown_steps: 1");
  auto r = test::run_gpt2bench("ladder --verbose --profile " + test::write_tiny_profile(d, body) + " --out " + (d / "run"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("tiny/01_sdpa/iterations:1/repeats:2/manual_time"), std::string::npos);  // --verbose
  EXPECT_EQ(r.output.find('\x1b'), std::string::npos) << r.output;  // its table too: no colour into a pipe
  const auto doc = test::read_json(d / "run/rungs.json");
  ASSERT_EQ(doc["rungs"].size(), 2u);
  for (const auto& rung : doc["rungs"]) {
    const auto& f = rung["flops"];
    // tiny: L=2, C=32, V=97, T=16: 6·(2·12·32² + 97·32) + 6·2·32·16 = 172,224
    EXPECT_EQ(f["per_token"], 172224.0);
    EXPECT_EQ(f["per_token_noncausal"], 172224.0 + 6 * 2 * 32 * 16);
    EXPECT_NE(f["formula"].get<std::string>().find("6*(L*12*C^2 + V*C) + 6*L*C*T"), std::string::npos);
    EXPECT_NEAR(f["counted_vs_formula"].get<double>(), 1.0, 0.02) << rung["name"] << " " << f.dump();
    // the same rate over two peaks: equal up to rounding ((x / a) · a / b is not always x / b to the last bit)
    const double mfu = rung["median"]["mfu"].get<double>();
    EXPECT_NEAR(mfu, rung["median"]["mfu_vs_measured_peak"].get<double>() *
                         rung["peak_flops"]["measured_matmul"].get<double>() / rung["peak_flops"]["mfu"].get<double>(),
                1e-12 * mfu);
    EXPECT_TRUE(rung["median"]["mfu_vs_precision_peak"].is_null());  // a CPU has no datasheet
    EXPECT_EQ(rung["clocks"]["available"], false);
  }
  EXPECT_NE(doc["rungs"][0]["flops"]["counted_compared_with"].get<std::string>().find("noncausal"), std::string::npos);
  // dropout 0.1 here: ATen's CPU SDPA takes its math path, which computes the full matrix.
  EXPECT_EQ(doc["rungs"][1]["sdpa_backend_used"], "math");
  EXPECT_NE(doc["rungs"][1]["flops"]["counted_compared_with"].get<std::string>().find("noncausal"), std::string::npos);
  EXPECT_EQ(doc["rungs"][0]["peak_flops"]["mfu"], doc["rungs"][1]["peak_flops"]["mfu"]);  // one denominator
  EXPECT_EQ(doc["mfu"]["basis"].get<std::string>().rfind("the highest matmul rate measured on this CPU", 0), 0u);
  EXPECT_FALSE(doc["device"]["bf16_support"].get<std::string>().empty());
  // what the report reads a CPU's runs against (it has no datasheet): the rates measured here, each rung's
  // the one of its precision (fp32 here), and the copy bandwidth
  const auto& measured = doc["measured"];
  EXPECT_GT(measured["copy_bandwidth_gbs"].get<double>(), 0.1);
  EXPECT_TRUE(measured["matmul_tflops"].contains("bf16")) << measured.dump();  // a CPU: every precision it has
  const double fp32 = doc["rungs"][0]["peak_flops"]["measured_matmul"].get<double>();
  EXPECT_NEAR(measured["matmul_tflops"]["fp32"].get<double>() * 1e12, fp32, 1e-12 * fp32);
  const auto& spread = doc["rungs"][0]["spread"];
  EXPECT_EQ(spread["repetitions"], 2);
  EXPECT_GE(spread["tokens_per_sec_ci"][1].get<double>(), spread["tokens_per_sec_ci"][0].get<double>());
}

// A --rung filter that selects nothing is refused before anything runs, naming the rungs; nothing
// is written (it used to run the parity reference, then die on a raw JSON parse error).
TEST(Cli, ARungFilterMatchingNothingIsRefusedUpFront) {
  test::TempDir d;
  const auto profile = test::write_tiny_profile(d, kTinyProfile);
  auto r = test::run_gpt2bench("ladder --profile " + profile + " --out " + (d / "run") + " --rung nonesuch");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("--rung 'nonesuch' matches no rung to run (rungs: 00_baseline)"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("parity reference"), std::string::npos) << r.output;
  EXPECT_FALSE(files::exists(d / "run"));
  r = test::run_gpt2bench("ladder --profile " + profile + " --out " + (d / "run") + " --rung '('");
  EXPECT_EQ(r.exit_code, 2) << r.output;  // a usage error, as --only's in gpt2bench kernels
  EXPECT_NE(r.output.find("is not a valid regular expression"), std::string::npos) << r.output;
}

// The filter is ours alone, over the rung name and the benchmark name: an anchored regex selects what
// it reads as (Google Benchmark's own filter saw ".../iterations:1/repeats:2/manual_time" after the
// name, so '^01_sdpa$' passed our check and then ran nothing, ending in a JSON parse error).
TEST(Cli, AnAnchoredOrNegatedRungFilterRunsExactlyItsRungs) {
  test::TempDir d;
  std::string body = tiny_profile_with("plan: add_one\nvariants: [sdpa, fp16_autocast]");
  const auto profile = test::write_tiny_profile(d, body);
  const bool fp16 = detect_device("cpu").fp16;
  for (const auto& [filter, ran] : std::vector<std::pair<std::string, std::string>>{
           {"'^01_add_sdpa$'", "01_add_sdpa"}, {"'-^tiny/0[12]_'", "00_baseline"}}) {
    const std::string out = d / ("run" + ran + std::to_string(filter.size()));
    auto r = test::run_gpt2bench("ladder --profile " + profile + " --out " + out + " --rung " + filter);
    ASSERT_EQ(r.exit_code, 0) << filter << "\n" << r.output;
    const auto doc = test::read_json(out + "/rungs.json");
    ASSERT_EQ(doc["rungs"].size(), 3u);
    for (const auto& rung : doc["rungs"]) {
      if (rung["name"].get<std::string>().find("fp16_autocast") != std::string::npos) {
        // A rung about a variant (add_one, extra) that cannot run here is skipped, not run without it (an
        // extra 15_top+fp16_autocast on a CPU without fp16 ran the top of the ladder in fp32, at 15.7x).
        EXPECT_EQ(rung["status"], fp16 ? "pending" : "skipped") << rung.dump();
        if (!fp16) {
          EXPECT_NE(rung["error"].get<std::string>().find("fp16_autocast does not run here"), std::string::npos);
        }
        continue;
      }
      EXPECT_EQ(rung["status"] == "pending", rung["name"] != ran) << filter << " " << rung["name"] << " " << rung["status"];
    }
  }
}

// The Python reference rungs run after the ladder on the same data and batch, beside the rungs: the
// eager one is the baseline's model (same parameter count, the same initial weights draw for draw, the
// same losses step for step), the compiled one (bf16, fused AdamW, SDPA, padded vocabulary,
// torch.compile) within the precision band. A failing interpreter is an error entry, not a crash.
TEST(Cli, ReferenceRungsMatchTheBaselineAndRunBesideIt) {
  test::TempDir d;
  // Padded to 8s: 97 -> 104 (to 64s, 128 zero-logit classes would lift the first loss by ln(128/97) = 0.28,
  // past the precision band; GPT-2's 50257 -> 50304 lifts it by 0.001).
  const std::string body =
      tiny_profile_with("variants: []\nreferences: [ref_torch_eager, ref_torch_compile]\nsettings: {vocab_multiple: 8}\n"
                        "breakdown_steps: 1");
  const auto profile = test::write_tiny_profile(d, body);
  auto r = test::run_gpt2bench("ladder --profile " + profile + " --out " + (d / "run"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("    ref_torch_eager ok: "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("reference rungs (the same step in Python PyTorch"), std::string::npos) << r.output;
  const auto doc = test::read_json(d / "run/rungs.json");
  ASSERT_EQ(doc["rungs"].size(), 1u);  // never a rung of the ladder
  ASSERT_EQ(doc["references"].size(), 2u);
  const auto& eager = doc["references"][0];
  ASSERT_EQ(eager["status"], "ok") << eager.dump();
  EXPECT_EQ(eager["compared_with"], "00_baseline");
  EXPECT_EQ(eager["result"]["parameters"], eager["cpp_parameters"]);
  // both sides page alike: the reference ran under the host allocator gpt2bench set for itself
  const std::string host = doc["host_allocator"];
  if (host.rfind("tcmalloc", 0) == 0)
    EXPECT_NE(eager["result"]["malloc"]["LD_PRELOAD"].get<std::string>().find("tcmalloc"), std::string::npos) << host;
  else
    EXPECT_EQ(eager["result"]["malloc"]["MALLOC_MMAP_THRESHOLD_"], "33554432") << eager["result"].dump();
  EXPECT_NE(host.find("handed back between rungs"), std::string::npos) << host;
  EXPECT_EQ(eager["parity"]["verdict"], "pass") << eager.dump();
  EXPECT_LT(eager["parity"]["max_abs_dev"].get<double>(), 1e-4) << eager.dump();  // the same weights and data
  EXPECT_EQ(eager["parity"]["losses"].size(), 2u);
  // The first step's whole gradient, Python's read from torch.optim.AdamW's state as the C++ one from ours.
  EXPECT_GT(eager["parity"]["grad_norm"].get<double>(), 0) << eager.dump();
  EXPECT_NEAR(eager["parity"]["grad_norm_ratio"].get<double>(), 1.0, 1e-4) << eager.dump();
  // ... and parameter by parameter, under the same canonical names on both sides
  EXPECT_EQ(eager["parity"]["params_compared"], eager["parity"]["grad_norms"].size()) << eager["parity"].dump();
  EXPECT_GT(eager["parity"]["params_compared"].get<int64_t>(), 10);
  EXPECT_LT(eager["parity"]["worst_param_dev"].get<double>(), 1e-4) << eager["parity"].dump();
  const auto& ri = eager["ratio_interval"];  // the ratio with where noise alone could put it
  EXPECT_LE(ri["low"].get<double>(), ri["estimate"].get<double>()) << ri.dump();
  EXPECT_LE(ri["estimate"].get<double>(), ri["high"].get<double>()) << ri.dump();
  EXPECT_GT(ri["level"].get<double>(), 0) << ri.dump();
  // Paired timing (a CPU always pairs): the C++ rung timed again, each of its repetitions beside one of the
  // reference's, alternately first; the ratio is the pairs', the ladder's first timing's kept beside it.
  const auto& again = eager["again"];
  ASSERT_TRUE(again.contains("paired")) << eager.dump();
  EXPECT_EQ(again["rung"], "00_baseline");
  EXPECT_EQ(again["batch"], doc["rungs"][0]["spec"]["batch"]);
  const auto& cpp_ms = again["repetitions"]["step_ms"];
  const auto& py_s = again["paired"]["python_step_s"];
  ASSERT_EQ(cpp_ms.size(), doc["rungs"][0]["repetitions"]["tokens_per_sec"].size());
  ASSERT_EQ(py_s.size(), cpp_ms.size());
  EXPECT_EQ(py_s, eager["result"]["paired"]["step_s"]);  // what the script timed is what gpt2bench read
  EXPECT_EQ(again["steps_per_repetition"], doc["rungs"][0]["ran"]["steps_per_repetition"]);
  std::vector<double> ratios;
  for (size_t i = 0; i < py_s.size(); ++i) ratios.push_back(py_s[i].get<double>() / (cpp_ms[i].get<double>() / 1e3));
  EXPECT_EQ(again["paired"]["ratios"], nlohmann::json(ratios));
  EXPECT_DOUBLE_EQ(eager["ratio"].get<double>(), median(ratios));
  EXPECT_EQ(eager["ratio"], again["ratio"]);
  EXPECT_NEAR(eager["first_timing"]["ratio"].get<double>(), doc["rungs"][0]["median"]["tokens_per_sec"].get<double>() /
                                                                eager["result"]["tokens_per_sec"].get<double>(), 1e-9);
  EXPECT_NE(again["repetitions"]["tokens_per_sec"], doc["rungs"][0]["repetitions"]["tokens_per_sec"]);  // timed anew
  EXPECT_NE(r.output.find("    00_baseline timed again beside ref_torch_eager: "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("[ref] ref_torch_eager at batch 2: Python "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find(", paired with 00_baseline\n"), std::string::npos) << r.output;
  // The compiled reference's matmuls are bf16 and the one rung's fp32: nothing to hold it against, said so.
  EXPECT_FALSE(doc["references"][1].contains("compared_with")) << doc["references"][1].dump();
  EXPECT_FALSE(doc["references"][1].contains("again"));
  EXPECT_EQ(doc["references"][1]["passed_over"][0]["why"], "fp32 matmuls, the reference's bf16");
  EXPECT_NE(r.output.find("      not compared with 00_baseline ("), std::string::npos) << r.output;
  // The eager gap's two sides: every ATen op name of one step, C++ (breakdown/, not rungs.json) and Python.
  const auto& py = eager["result"]["breakdown"];
  EXPECT_EQ(py["events"], "ATen ops");
  const auto cpp = test::read_json(d / "run/breakdown/00_baseline.json");
  EXPECT_FALSE(doc["rungs"][0]["breakdown"].contains("by_name"));
  auto matmuls = [](const nlohmann::json& by_name) {  // one model, one math: the same matmuls issued
    double n = 0;
    for (const auto& e : by_name)
      if (e["name"] == "aten::mm" || e["name"] == "aten::addmm" || e["name"] == "aten::bmm") n += e["count_per_step"].get<double>();
    return n;
  };
  EXPECT_GT(matmuls(cpp["by_name"]), 0);
  EXPECT_EQ(matmuls(cpp["by_name"]), matmuls(py["by_name"])) << cpp["by_name"].dump() << "\n" << py["by_name"].dump();
  EXPECT_GT(cpp["host_ms_per_step"].get<double>(), 0);  // the host's time in the step's calls, both sides
  EXPECT_GT(py["host_ms_per_step"].get<double>(), 0);
  EXPECT_EQ(eager["events_per_step"]["cpp"], cpp["events_per_step"]);
  EXPECT_EQ(eager["events_per_step"]["python"], py["events_per_step"]);
  // ... and by kind of work: each side's matmuls where its breakdown put them
  EXPECT_EQ(eager["category_ms"]["cpp"], cpp["category_ms"]);
  EXPECT_GT(eager["category_ms"]["python"].value("matmul", 0.0), 0) << eager["category_ms"].dump();
  EXPECT_NE(r.output.find(", parity pass\n      ATen ops a step: C++ "), std::string::npos) << r.output;
  const auto& compiled = doc["references"][1];
  ASSERT_EQ(compiled["status"], "ok") << compiled.dump();
  EXPECT_EQ(compiled["config"]["precision"], "bf16_cast");
  EXPECT_EQ(compiled["config"]["compile"], true);
  EXPECT_EQ(compiled["config"]["model"]["padded_vocab"], 104);  // tiny's 97 padded as vocab_padding pads
  EXPECT_EQ(compiled["parity"]["verdict"], "pass") << compiled.dump();
  EXPECT_NEAR(compiled["parity"]["grad_norm_ratio"].get<double>(), 1.0, kPrecisionGradTol) << compiled.dump();
  EXPECT_EQ(compiled["parity"]["params_compared"], eager["parity"]["params_compared"]);
  EXPECT_LE(compiled["parity"]["worst_param_dev"].get<double>(), kPrecisionParamGradTol) << compiled.dump();
  // torch.compile both ways (the model alone; the model returning its loss), each timed, the faster the figure
  EXPECT_EQ(compiled["config"]["compile_scopes"], nlohmann::json({"model", "model_and_loss"}));
  const auto& res = compiled["result"];
  const auto& scopes = res["compile_scopes"];
  ASSERT_EQ(scopes.size(), 2u) << res.dump();
  const std::string faster = scopes["model"]["median_step_s"] <= scopes["model_and_loss"]["median_step_s"] ? "model" : "model_and_loss";
  EXPECT_EQ(res["compile_scope"], faster);
  EXPECT_EQ(res["tokens_per_sec"], scopes[faster]["tokens_per_sec"]);
  EXPECT_EQ(res["step_s"], scopes[faster]["step_s"]);  // the ratio's interval is the faster form's repetitions
  EXPECT_NE(r.output.find("torch " + res["torch_version"].get<std::string>() + ", compiled: " + faster + ")"),
            std::string::npos) << r.output;
  EXPECT_FALSE(eager["result"].contains("compile_scope"));

  // An interpreter that cannot run the script: an error entry naming it, the ladder's rungs kept, the run partial
  // and its exit code 1 (one that is not there at all is refused before anything runs: ownership_test.cpp).
  auto bad = test::run_gpt2bench("ladder --profile " + profile + " --out " + (d / "bad") + " --rung ref_torch_eager",
                                 "GPT2BENCH_PYTHON=/bin/false");
  EXPECT_EQ(bad.exit_code, 1) << bad.output;
  const auto doc2 = test::read_json(d / "bad/rungs.json");
  ASSERT_EQ(doc2["references"].size(), 1u);
  EXPECT_EQ(doc2["references"][0]["status"], "error");
  EXPECT_EQ(doc2["status"], "partial");
  EXPECT_NE(doc2["references"][0]["error"].get<std::string>().find("/bin/false"), std::string::npos);
}

// At batch_scaling's batch ref_torch_compile is judged as the C++ rungs there are: against the baseline's step at
// that batch (in micro-batches of the profile's), not the C++ top's trajectory.
TEST(Cli, AReferenceAtBatchScalingsBatchIsJudgedAgainstTheBaselineThere) {
  test::TempDir d;
  std::string body = tiny_profile_with("variants: [batch_scaling]\nreferences: [ref_torch_compile]\n"
                                       "settings: {vocab_multiple: 8, max_batch: 4}\n");
  const auto profile = test::write_tiny_profile(d, body);
  auto r = test::run_gpt2bench("ladder --profile " + profile + " --out " + (d / "run"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto doc = test::read_json(d / "run/rungs.json");
  ASSERT_EQ(doc["rungs"][1]["spec"]["batch"], 4) << doc["rungs"][1].dump();
  EXPECT_EQ(doc["rungs"][1]["parity"]["against"], "baseline at batch 4");
  ASSERT_EQ(doc["references"].size(), 2u) << doc["references"].dump();
  const auto& at4 = doc["references"][1];
  ASSERT_EQ(at4["config"]["batch"], 4) << at4.dump();
  EXPECT_EQ(at4["parity"]["against"], "baseline at batch 4") << at4["parity"].dump();
  EXPECT_EQ(at4["parity"]["judged_as"], "precision");
  EXPECT_EQ(at4["parity"]["verdict"], "pass") << at4["parity"].dump();
}

// `reference-config` prints what the ladder writes for a reference and runs it with (less the tokens file and the
// time budget, which only a ladder run has): --warm compiles from it the graphs the reference compiles later.
TEST(Cli, ReferenceConfigPrintsTheConfigTheLadderRunsTheReferenceWith) {
  test::TempDir d;
  std::string body =
      tiny_profile_with("variants: []\nreferences: [ref_torch_compile]\nsettings: {vocab_multiple: 8}\n");
  const auto profile = test::write_tiny_profile(d, body);
  auto r = test::run_gpt2bench("ladder --profile " + profile + " --out " + (d / "run") + " --rung ref_torch_compile",
                               "GPT2BENCH_PYTHON=/bin/true");  // no Python run: the config is written before it
  ASSERT_EQ(r.exit_code, 1) << r.output;  // so the reference has no result: an error, the run partial
  auto written = test::read_json(d / "run/reference/ref_torch_compile_b2.config.json");
  written.erase("tokens");
  written.erase("budget_s");
  auto printed = test::run_gpt2bench("reference-config --profile " + profile);
  ASSERT_EQ(printed.exit_code, 0) << printed.output;
  EXPECT_EQ(nlohmann::json::parse(printed.output), written);
  auto at8 = nlohmann::json::parse(test::run_gpt2bench("reference-config --profile " + profile + " --batch 8").output);
  EXPECT_EQ(at8["batch"], 8);
  EXPECT_EQ(at8["parity_eager"], true);  // another batch than the profile's (batch_scaling's): parity uncompiled
  auto eager = nlohmann::json::parse(
      test::run_gpt2bench("reference-config --profile " + profile + " --name ref_torch_eager").output);
  EXPECT_EQ(eager["compile"], false);
  EXPECT_EQ(eager["precision"], "fp32");

  auto bad = test::run_gpt2bench("reference-config --profile " + profile + " --name ref_torch_compiled");
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.output.find("unknown reference rung 'ref_torch_compiled'"), std::string::npos) << bad.output;
  bad = test::run_gpt2bench("reference-config --profile " + profile + " --batch 0");
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.output.find("--batch takes a whole number >= 1, got '0'"), std::string::npos) << bad.output;
  bad = test::run_gpt2bench("reference-config");
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.output.find("missing --profile"), std::string::npos) << bad.output;
  auto help = test::run_gpt2bench("reference-config --help");
  EXPECT_EQ(help.exit_code, 0);
  EXPECT_NE(help.output.find("--warm CONFIG"), std::string::npos) << help.output;
}

TEST(Cli, MisspelledKeyFailsAndWritesNothing) {
  test::TempDir d;
  const auto profile = test::write_tiny_profile(d, std::string(kTinyProfile) + "reps: 3\n");
  auto r = test::run_gpt2bench("ladder --profile " + profile + " --out " + (d / "run"));
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("profile.yaml:12: unknown key 'reps'"), std::string::npos) << r.output;
  EXPECT_FALSE(files::exists(d / "run"));
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
  for (const char* bad : {"--steps 0", "--steps x", "--batch -2", "--nproc 2x"}) {
    r = test::run_gpt2bench(std::string("ddp-check --profile x.yaml --out /tmp/never ") + bad);
    EXPECT_EQ(r.exit_code, 2) << bad << ": " << r.output;
    EXPECT_NE(r.output.find("takes a whole number >= 1"), std::string::npos) << bad << ": " << r.output;
  }
  r = test::run_gpt2bench("doctor --device cuda:x");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("unknown device 'cuda:x'"), std::string::npos) << r.output;
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
                   "batch: 2\nwarmup_steps: 0\nsteps: 1\nrepetitions: 2\nparity_steps: 0\nvariants: []\n");
  r = test::run_gpt2bench("ladder --profile " + (d / "p.yaml") + " --out " + (d / "run"));
  EXPECT_EQ(r.exit_code, 0) << r.output;
}

// add_one and leave_one_out: one rung per variant after the baseline, each with its parity verdict.
TEST(Cli, AddOneAndLeaveOneOutPlans) {
  for (const char* plan : {"add_one", "leave_one_out"}) {
    test::TempDir d;
    std::string body =
        tiny_profile_with(std::string("plan: ") + plan + "\nvariants: [mask_on_the_fly, native_layers, sdpa]");
    const auto profile = test::write_tiny_profile(d, body);
    auto r = test::run_gpt2bench("ladder --profile " + profile + " --out " + (d / "run"));
    ASSERT_EQ(r.exit_code, 0) << r.output;
    auto rungs = test::read_json(d / "run/rungs.json")["rungs"];
    const bool add = std::string(plan) == "add_one";
    ASSERT_EQ(rungs.size(), add ? 4u : 5u) << plan;  // leave_one_out also runs "all"
    const size_t first = add ? 1 : 2;
    EXPECT_EQ(rungs[first]["name"], (add ? "01_add_" : "02_drop_") + std::string("mask_on_the_fly"));
    for (size_t i = first; i < rungs.size(); ++i) {
      EXPECT_EQ(rungs[i]["status"], "ok");
      EXPECT_EQ(rungs[i]["parity"]["verdict"], "pass") << rungs[i]["name"];
      EXPECT_EQ(rungs[i]["applied"].size(), add ? 1u : 2u);
    }
  }
}

TEST(Cli, ConflictingRecipeIsRefusedBeforeAnythingRuns) {
  test::TempDir d;
  std::string body = tiny_profile_with("plan: recipes\nrecipes: {both: [bf16_cast, fp16_autocast]}");
  auto r = test::run_gpt2bench("ladder --profile " + test::write_tiny_profile(d, body) + " --out " + (d / "run"));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("'bf16_cast' conflicts with 'fp16_autocast'"), std::string::npos) << r.output;
  EXPECT_FALSE(files::exists(d / "run"));
}

TEST(Cli, ProfileWritesASummaryAndATracePerRung) {
  test::TempDir d;
  std::string body = tiny_profile_with("variants: [mask_on_the_fly, sdpa]\nbreakdown_steps: 1");
  const auto profile = test::write_tiny_profile(d, body);
  auto r = test::run_gpt2bench("breakdown --profile " + profile + " --out " + (d / "prof"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  for (const char* rung : {"00_baseline", "01_mask_on_the_fly", "02_sdpa"}) {
    auto summary = test::read_json(d / (std::string("prof/breakdown/") + rung + ".json"));
    EXPECT_EQ(summary["rung"], rung);
    EXPECT_GT(summary["events_per_step"].get<double>(), 0);
    EXPECT_TRUE(summary["memory"].contains("activations_and_other"));
    auto trace = test::read_json(d / (std::string("prof/breakdown/") + rung + ".trace.json"));
    EXPECT_FALSE(trace["traceEvents"].empty());
  }
  auto base = test::read_json(d / "prof/breakdown/00_baseline.json");
  auto otf = test::read_json(d / "prof/breakdown/01_mask_on_the_fly.json");
  EXPECT_GT(base["memory"]["buffers"].get<int64_t>(), 0);
  EXPECT_EQ(otf["memory"]["buffers"].get<int64_t>(), 0);  // the mask buffer is gone
  r = test::run_gpt2bench("breakdown --profile " + profile + " --out " + (d / "p2") + " --rung sdpa");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(files::exists(d / "p2/breakdown/02_sdpa.json"));
  EXPECT_FALSE(files::exists(d / "p2/breakdown/00_baseline.json"));
  r = test::run_gpt2bench("breakdown --profile " + profile + " --out " + (d / "p3") + " --rung nonesuch");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("no rung named 'nonesuch'"), std::string::npos) << r.output;
}

// The small preset as cpu-mini.yaml runs it (dropout 0): SDPA replaces the attention's ops (mask, softmax,
// batched matmuls and their backward) with a few fused ones. In fp32: emulated bf16 takes minutes on a Zen 3.
TEST(Cli, SmallPresetSdpaRungHasFewerAttentionOpsThanTheBaseline) {
  test::TempDir d;
  test::write_text(d / "profile.yaml", "name: mini-sdpa\nmodel: {preset: gpt2-mini, dropout: 0.0}\ndata: synthetic\n"
                                       "device: cpu\nbatch: 4\nwarmup_steps: 1\nsteps: 2\nvariants: [sdpa]\n");
  auto r = test::run_gpt2bench("breakdown --profile " + (d / "profile.yaml") + " --out " + (d / "p"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  auto base = test::read_json(d / "p/breakdown/00_baseline.json");
  auto sdpa = test::read_json(d / "p/breakdown/01_sdpa.json");
  EXPECT_LT(sdpa["category_events"]["attention"].get<double>(), base["category_events"]["attention"].get<double>());
}

// docs/variants.md's variant table is the registry's: regenerate it with list-variants --markdown.
TEST(Cli, DocsVariantTableMatchesTheRegistry) {
  const std::string readme = test::read_text(std::string(GPT2BENCH_SOURCE_DIR) + "/docs/variants.md");
  const auto begin = readme.find("<!-- variants:begin");
  const auto end = readme.find("<!-- variants:end -->");
  ASSERT_NE(begin, std::string::npos);
  ASSERT_NE(end, std::string::npos);
  const std::string table = readme.substr(readme.find('\n', begin) + 1, end - readme.find('\n', begin) - 1);
  const auto r = test::run_gpt2bench("list-variants --markdown");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(table, r.output) << "docs/variants.md's variant table is out of date: paste `gpt2bench list-variants --markdown`";
}

// The CUDA caching allocator's setting (memory.h: settle_device_allocator), here and in the Python reference rungs:
// expandable segments, unless the user set their own, which is kept. Said by the doctor of a CUDA build.
TEST(DeviceAllocator, ExpandableSegmentsUnlessTheUserSetTheirOwn) {
  const std::string said = settle_device_allocator();
  const char* user = std::getenv("PYTORCH_CUDA_ALLOC_CONF");
  ASSERT_NE(user, nullptr) << "set for the processes this one starts";
  if (said.find("(the user's)") == std::string::npos) {
    EXPECT_STREQ(user, "expandable_segments:True");
    EXPECT_EQ(said.rfind("PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True (gpt2bench's default", 0), 0u) << said;
  }
  EXPECT_EQ(settle_device_allocator(), said);  // once
  if (!build_has_cuda()) return;  // a CPU build's doctor does not say it
  auto r = test::run_gpt2bench("doctor", "-u PYTORCH_CUDA_ALLOC_CONF -u PYTORCH_ALLOC_CONF");
  EXPECT_NE(r.output.find("CUDA caching allocator: PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True (gpt2bench's"),
            std::string::npos) << r.output;
  r = test::run_gpt2bench("doctor", "PYTORCH_CUDA_ALLOC_CONF=max_split_size_mb:512");
  EXPECT_NE(r.output.find("CUDA caching allocator: PYTORCH_CUDA_ALLOC_CONF=max_split_size_mb:512 (the user's)"),
            std::string::npos) << r.output;
}

TEST(Cli, DoctorAndListVariantsRunWithoutAGpu) {
  if (detect_device("auto").cuda()) GTEST_SKIP() << "skipped: this machine has a GPU (the test checks the CPU-only output)";
  auto r = test::run_gpt2bench("doctor");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("device:"), std::string::npos);
  // what the build has beside libtorch (a CPU build: neither)
  EXPECT_NE(r.output.find(build_has_cuda() ? ", cuBLASLt calls: " : ", cuBLASLt calls: no, cuDNN frontend graphs: no\n"),
            std::string::npos) << r.output;
  r = test::run_gpt2bench("list-variants");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("tf32             rung 2   parity precision  skipped here: TF32 tensor cores need"),
            std::string::npos)
      << r.output;
}

}  // namespace
}  // namespace gpt2
