// The kept rungs (bench/ladder/kept.h): which extras join the top, from the top+<extra> rungs' outcomes, and the
// recipe that makes.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "bench/ladder/kept.h"
#include "bench/runtime/device.h"
#include "common/files.h"
#include "config/presets.h"
#include "helpers.h"
#include "variants/registry.h"

namespace gpt2 {
namespace {

RungRecord ran(const std::string& name, RungKind kind, const std::string& variant, double tps,
               const std::string& compare_to = "13_top") {
  RungRecord r;
  r.plan.rung.name = name;
  r.plan.kind = kind;
  r.plan.variant = variant;
  r.plan.compare_to = kind == RungKind::kExtra ? compare_to : "";
  r.out.status = RungStatus::kOk;
  r.out.timing.rep_tokens_per_sec = {tps * 0.99, tps, tps * 1.01};
  r.out.parity.verdict = "pass";
  return r;
}

const nlohmann::json& entry(const KeptExtras& k, const std::string& variant) {
  for (const auto& e : k.why)
    if (e["variant"] == variant) return e;
  static const nlohmann::json none;
  return none;
}

// Kept: the exact extras whose rung beat the top beyond noise, the larger gain first; of two that conflict the
// larger gain; not a slower one nor one within noise, a failed or unrun one, nor an extra that changes precision,
// the problem or slows on purpose.
// An extra that ran at another batch than the top's (backed off: out of memory at the top's) is another step: not
// compared with the top, nor kept, nor its anti-variant's ratio taken as drift; and the top timed again at another
// batch is not the second timing an extra at the top's batch must beat. The first H100 run: 12 at 64; the extras
// but 17_top+fused_classifier, and 22_top_again, at 32.
TEST(Kept, AnExtraAtAnotherBatchThanTheTopsIsNotComparedWithIt) {
  auto at = [](RungRecord r, int64_t batch) {
    r.plan.rung.spec.batch = 64;
    r.out.batch = batch;
    return r;
  };
  std::vector<RungRecord> rs = {
      at(ran("12_top", RungKind::kLadder, "batch_scaling", 100), 64),
      at(ran("17_top+fused_classifier", RungKind::kExtra, "fused_classifier", 108, "12_top"), 64),
      at(ran("20_top+fused_residual_norm", RungKind::kExtra, "fused_residual_norm", 114, "12_top"), 32),
      at(ran("21_top+sync_every_step", RungKind::kExtra, "sync_every_step", 105, "12_top"), 32),
      at(ran("22_top_again", RungKind::kControl, "", 106, "12_top"), 32),
  };
  rs[3].plan.rung.anti = true;
  rs[4].plan.compare_to = "12_top";
  const KeptExtras k = choose_kept(rs);
  EXPECT_EQ(entry(k, "fused_residual_norm")["kept"], false);
  EXPECT_EQ(entry(k, "fused_residual_norm")["why"], "ran at batch 32, 12_top at 64: another step, not compared");
  // 17 at the top's batch: against the top alone (22_top_again ran at 32), and no drift from 21 at 32
  EXPECT_EQ(entry(k, "fused_classifier")["kept"], true) << k.why;
  EXPECT_FALSE(entry(k, "fused_classifier").contains("again")) << k.why;
  EXPECT_EQ(k.variants, (std::vector<std::string>{"fused_classifier"}));
}

TEST(Kept, TheExtrasThatBeatTheTopLargestGainFirst) {
  std::vector<RungRecord> rs = {
      ran("13_top", RungKind::kLadder, "vocab_padding", 100),
      ran("14_top+bf16_autocast", RungKind::kExtra, "bf16_autocast", 150),  // precision: never a candidate
      ran("15_top+weight_tying", RungKind::kExtra, "weight_tying", 150),    // another problem: never
      ran("16_top+sync_every_step", RungKind::kExtra, "sync_every_step", 90),  // anti: never
      ran("17_top+fused_classifier", RungKind::kExtra, "fused_classifier", 104),
      ran("18_top+fused_gelu_backward", RungKind::kExtra, "fused_gelu_backward", 103),
      ran("19_top+gelu_epilogues", RungKind::kExtra, "gelu_epilogues", 106),
      ran("20_top+fused_residual_norm", RungKind::kExtra, "fused_residual_norm", 101),  // 99-101 vs 100-102: noise
  };
  KeptExtras k = choose_kept(rs);
  EXPECT_EQ(k.variants, (std::vector<std::string>{"gelu_epilogues", "fused_classifier"}));
  ASSERT_EQ(k.why.size(), 4u) << k.why;  // the four exact extras
  EXPECT_TRUE(entry(k, "gelu_epilogues")["kept"].get<bool>());
  EXPECT_NEAR(entry(k, "gelu_epilogues")["ratio"].get<double>(), 1.06, 1e-12);
  // every pair of the 3 x 3 repetitions' ratios: 104.94/101 .. 107.06/99, covering 90%
  EXPECT_EQ(entry(k, "gelu_epilogues")["why"], "faster than 13_top (1.060x; 1.039-1.081x at 90%)");
  EXPECT_NEAR(entry(k, "gelu_epilogues")["interval"]["low"].get<double>(), 106 * 0.99 / 101, 1e-12);
  EXPECT_EQ(entry(k, "fused_gelu_backward")["kept"], false);
  EXPECT_EQ(entry(k, "fused_gelu_backward")["why"], "conflicts with gelu_epilogues, which gained more");
  EXPECT_EQ(entry(k, "fused_residual_norm")["kept"], false);
  EXPECT_EQ(entry(k, "fused_residual_norm")["why"].get<std::string>().rfind("not measurably faster than 13_top (1.010x; ", 0), 0u)
      << entry(k, "fused_residual_norm");
  EXPECT_TRUE(entry(k, "bf16_autocast").is_null());
  EXPECT_EQ(kept_variants(k.why), (std::vector<std::string>{"fused_classifier", "gelu_epilogues"}));  // rung order

  // A rung that failed parity, errored or did not run is not evidence; nothing beat the top: nothing kept.
  rs[4].out.parity.verdict = "fail";
  rs[5].out.status = RungStatus::kError;
  rs[6].out.status = RungStatus::kPending;
  k = choose_kept(rs);
  EXPECT_TRUE(k.variants.empty());
  EXPECT_EQ(entry(k, "fused_classifier")["why"], "its rung failed parity");
  EXPECT_EQ(entry(k, "fused_gelu_backward")["why"], "its rung: error");
  EXPECT_EQ(entry(k, "gelu_epilogues")["why"], "not run");
  // The top did not run here (13 the same step as 12): compared with what it was, as the extra's own line is.
  rs[0].out.status = RungStatus::kSkipped;
  rs[0].plan.compare_to = "12_batch";
  rs.insert(rs.begin(), ran("12_batch", RungKind::kLadder, "batch_scaling", 90));
  rs[8].out.timing.rep_tokens_per_sec = {95, 95, 95};  // fused_residual_norm, now 1.056x its 89.1-90.9
  k = choose_kept(rs);
  EXPECT_EQ(k.variants, (std::vector<std::string>{"fused_residual_norm"}));
  EXPECT_EQ(entry(k, "fused_residual_norm")["compared_with"], "12_batch");
}

// The ties' kept rung (at the profile's batch) also takes an extra not measurably slower than the top nor than its
// second timing: adamw_one_launch's 0.24 ms a step was 0.1% of the H200's step at batch 128 and 1.4% at 8.
TEST(Kept, TheTiesRungAlsoTakesWhatIsNotMeasurablySlowerThanEitherTimingOfTheTop) {
  std::vector<RungRecord> rs = {
      ran("13_top", RungKind::kLadder, "vocab_padding", 100),
      ran("14_top+fused_classifier", RungKind::kExtra, "fused_classifier", 108),      // beats both
      ran("15_top+adamw_one_launch", RungKind::kExtra, "adamw_one_launch", 101),      // ties both
      ran("16_top+fused_residual_norm", RungKind::kExtra, "fused_residual_norm", 99),  // ties the first alone
      ran("17_top+gelu_epilogues", RungKind::kExtra, "gelu_epilogues", 90),           // slower
      ran("18_top_again", RungKind::kControl, "", 102),
  };
  rs.back().plan.compare_to = "13_top";
  EXPECT_EQ(choose_kept(rs).variants, std::vector<std::string>{"fused_classifier"});
  const KeptExtras k = choose_kept(rs, true);
  EXPECT_EQ(k.variants, (std::vector<std::string>{"fused_classifier", "adamw_one_launch"}));
  EXPECT_FALSE(entry(k, "fused_classifier").contains("tie"));
  EXPECT_EQ(entry(k, "adamw_one_launch")["tie"], true);
  EXPECT_TRUE(entry(k, "adamw_one_launch")["why"].get<std::string>().ends_with("; not measurably slower either: a tie"))
      << entry(k, "adamw_one_launch");
  EXPECT_EQ(entry(k, "fused_residual_norm")["kept"], false);  // 99 against 102: measurably slower
  EXPECT_FALSE(entry(k, "fused_residual_norm").contains("tie"));
  EXPECT_EQ(entry(k, "gelu_epilogues")["kept"], false);
}

// The top timed again after the extras (RungKind::kControl): an extra must beat it too, so that the machine's
// drift between the top and the extras is not kept for a gain; the smaller of the two ratios orders the gains.
TEST(Kept, AnExtraMustBeatTheTopTimedAgainAfterTheExtrasToo) {
  std::vector<RungRecord> rs = {
      ran("13_top", RungKind::kLadder, "vocab_padding", 100),
      ran("14_top+fused_classifier", RungKind::kExtra, "fused_classifier", 108),
      ran("15_top+fused_gelu_backward", RungKind::kExtra, "fused_gelu_backward", 110),
      ran("16_top+gelu_epilogues", RungKind::kExtra, "gelu_epilogues", 104),
      ran("17_top+fused_residual_norm", RungKind::kExtra, "fused_residual_norm", 99),
      ran("18_top_again", RungKind::kControl, "", 105),  // the machine sped up 5% while the extras ran
  };
  rs.back().plan.compare_to = "13_top";
  KeptExtras k = choose_kept(rs);
  // fused_gelu_backward gains 1.048x over the later timing, fused_classifier 1.029x: each beats both timings;
  // gelu_epilogues beat the first timing only (drift), fused_residual_norm neither.
  EXPECT_EQ(k.variants, (std::vector<std::string>{"fused_gelu_backward", "fused_classifier"}));
  const auto& e = entry(k, "fused_classifier");
  EXPECT_EQ(e["compared_with"], "13_top");
  EXPECT_NEAR(e["ratio"].get<double>(), 1.08, 1e-12);
  EXPECT_EQ(e["again"]["rung"], "18_top_again");
  EXPECT_NEAR(e["again"]["ratio"].get<double>(), 108.0 / 105, 1e-12);
  EXPECT_EQ(e["why"], "faster than 13_top (1.080x; 1.059-1.102x at 90%) and than 18_top_again, the top timed again "
                      "after the extras (1.029x; 1.008-1.049x at 90%)");
  EXPECT_EQ(entry(k, "gelu_epilogues")["kept"], false);
  EXPECT_EQ(entry(k, "gelu_epilogues")["why"],
            "faster than 13_top (1.040x; 1.019-1.061x at 90%), but not measurably faster than 18_top_again, the top "
            "timed again after the extras (0.990x; 0.971-1.010x at 90%)");
  EXPECT_EQ(entry(k, "fused_residual_norm")["why"].get<std::string>().rfind(
                "not measurably faster than 13_top (0.990x; 0.970-1.010x at 90%) and than 18_top_again", 0),
            0u)
      << entry(k, "fused_residual_norm");
  // The machine slowed instead: an extra faster than the later timing alone is not kept either.
  rs.back().out.timing.rep_tokens_per_sec = {94.05, 95, 95.95};
  k = choose_kept(rs);
  EXPECT_EQ(k.variants, (std::vector<std::string>{"fused_gelu_backward", "fused_classifier"}));
  EXPECT_EQ(entry(k, "gelu_epilogues")["why"], "conflicts with fused_gelu_backward, which gained more");  // faster
  rs[4].out.timing.rep_tokens_per_sec = {98, 98, 98};  // 0.98x the top, 1.03x the later timing
  k = choose_kept(rs);
  EXPECT_EQ(entry(k, "fused_residual_norm")["kept"], false);
  EXPECT_EQ(entry(k, "fused_residual_norm")["why"].get<std::string>().rfind(
                "not measurably faster than 13_top (0.980x; 0.970-0.990x at 90%), but faster than 18_top_again", 0),
            0u)
      << entry(k, "fused_residual_norm");
  // A control that failed (or did not run) is no timing: the first alone decides, as without one.
  rs.back().out.timing.rep_tokens_per_sec = {105 * 0.99, 105, 105 * 1.01};
  rs.back().out.status = RungStatus::kError;
  k = choose_kept(rs);
  EXPECT_EQ(k.variants, (std::vector<std::string>{"fused_gelu_backward", "fused_classifier"}));
  EXPECT_EQ(entry(k, "gelu_epilogues")["why"], "conflicts with fused_gelu_backward, which gained more");
  EXPECT_FALSE(entry(k, "fused_classifier").contains("again"));
}

// An anti-variant's rung (slowed on purpose) found faster than both timings of the top bounds the machine's drift:
// an extra's gain no larger than that is not kept. On a CPU sync_every_step adds nothing, and one run measured it
// 1.18x and 1.13x the top's two timings, above fused_classifier's 1.15x and 1.10x.
TEST(Kept, AnExtraMustGainMoreThanAnAntiVariantFoundFaster) {
  std::vector<RungRecord> rs = {
      ran("13_top", RungKind::kLadder, "vocab_padding", 100),
      ran("14_top+fused_classifier", RungKind::kExtra, "fused_classifier", 115),
      ran("15_top+gelu_epilogues", RungKind::kExtra, "gelu_epilogues", 125),
      ran("16_top+sync_every_step", RungKind::kExtra, "sync_every_step", 118),
      ran("17_top_again", RungKind::kControl, "", 104.5),
  };
  rs[3].plan.rung.anti = true;
  rs.back().plan.compare_to = "13_top";
  KeptExtras k = choose_kept(rs);
  EXPECT_EQ(k.variants, (std::vector<std::string>{"gelu_epilogues"}));  // 1.196x over the second timing
  EXPECT_EQ(entry(k, "fused_classifier")["kept"], false);
  const std::string why = entry(k, "fused_classifier")["why"];
  EXPECT_NE(why.find(", but by no more than 16_top+sync_every_step, slowed on purpose and yet 1.129x the top timed "
                     "before and after it: the machine's drift"), std::string::npos) << why;
  EXPECT_TRUE(entry(k, "sync_every_step").is_null());  // never a candidate itself
  // Slower than the top, as slowed on purpose should be: no bound; both kept.
  rs[3].out.timing.rep_tokens_per_sec = {89.1, 90, 90.9};
  k = choose_kept(rs);
  EXPECT_EQ(k.variants, (std::vector<std::string>{"gelu_epilogues", "fused_classifier"}));
  // Faster than the first timing alone: the drift between the timings, which the control answers for.
  rs[3].out.timing.rep_tokens_per_sec = {103, 104, 105};
  k = choose_kept(rs);
  EXPECT_EQ(k.variants, (std::vector<std::string>{"gelu_epilogues", "fused_classifier"}));
}

// The recipe: the kept rung's planned one, less what a kept extra conflicts with (fuse_bias_gelu goes where
// gelu_epilogues comes), plus the kept extras; resolved as any rung is.
TEST(Kept, TheRecipeIsThePlannedOneWithTheKeptExtrasInPlaceOfWhatTheyConflictWith) {
  const DeviceInfo cpu = detect_device("cpu");
  const StepSpec base = baseline_spec(load_model_preset("gpt2-124m", GPT2BENCH_SOURCE_DIR "/profiles"), 8, cpu);
  RungRecord r;
  r.plan.rung = resolve("21_top+kept", {"fused_adamw", "native_layers", "fuse_bias_gelu", "vocab_padding"}, base, cpu);
  const ResolvedRung k = kept_recipe(r, {"gelu_epilogues", "fused_classifier"}, base, cpu);
  EXPECT_EQ(k.name, "21_top+kept");
  EXPECT_EQ(k.applied, (std::vector<std::string>{"fused_adamw", "native_layers", "vocab_padding", "fused_classifier",
                                                 "gelu_epilogues"}));
  EXPECT_TRUE(k.spec.model.gelu_epilogues);
  EXPECT_FALSE(k.spec.model.fused_bias_gelu);
  EXPECT_EQ(k.spec.model.classifier_chunk, base.settings.classifier_chunk);
  EXPECT_EQ(k.parity, r.plan.rung.parity);  // exact extras: the class the planned recipe had
}

// End to end on the tiny model: the kept rungs settle from the extras' rungs of the same run directory, also when
// they run in a --resume after the extras; a later --resume keeps the recipe a finished kept rung ran. Which extras
// are faster on a loaded 2-core machine is noise, so the extras' outcomes are set before the resume: fused_classifier
// 10x the top, every other candidate half of it.
// Where batch_scaling's search keeps the profile's batch (max_batch there), nothing changed the problem: the top
// and the extras on it are judged against the baseline by their variants' class, not as another problem.
TEST(Cli, ABatchScalingThatKeepsTheBatchChangesNoProblem) {
  test::TempDir d;
  const auto profile = test::write_tiny_profile(
      d, "name: k\nmodel: tiny\ndata: synthetic\ndevice: cpu\nbatch: 2\nwarmup_steps: 1\nsteps: 1\n"
         "repetitions: 2\nparity_steps: 2\nbreakdown_steps: 0\nsettings: {max_batch: 2}\n");
  auto r = test::run_gpt2bench("ladder --profile " + profile + " --out " + (d / "run") +
                               " --rung '00_baseline|batch_scaling|top\\+fused_classifier|top\\+weight_tying'");
  ASSERT_TRUE(r.exit_code == 0 || r.exit_code == 3) << r.output;
  const auto j = test::read_json(d / "run/rungs.json");
  int judged = 0;
  for (const auto& x : j["rungs"]) {
    if (x["status"] != "ok" || x["name"] == "00_baseline") continue;
    ++judged;
    EXPECT_EQ(x["spec"]["batch"], 2) << x["name"];
    EXPECT_EQ(x["parity"]["against"], "baseline") << x["name"];
    EXPECT_EQ(x["parity"]["judged_as"], x["name"].get<std::string>().ends_with("weight_tying") ? "problem" : "precision")
        << x["name"];
  }
  EXPECT_EQ(judged, 3) << j.dump();
}

TEST(Cli, KeptRungsSettleFromTheExtrasRungsAndKeepTheirRecipeOnResume) {
  test::TempDir d;
  const auto profile = test::write_tiny_profile(
      d, "name: k\nmodel: tiny\ndata: synthetic\ndevice: cpu\nbatch: 2\nwarmup_steps: 1\nsteps: 2\n"
         "repetitions: 3\nparity_steps: 2\nbreakdown_steps: 0\nsettings: {max_batch: 4}\n");
  const std::string out = d / "run";
  auto r = test::run_gpt2bench("ladder --profile " + profile + " --out " + out + " --rung=-kept");
  ASSERT_TRUE(r.exit_code == 0 || r.exit_code == 3) << r.output;  // 3: a tiny bf16 rung's parity
  auto doc = [&] { return test::read_json(out + "/rungs.json"); };
  auto named = [](const nlohmann::json& rungs, const std::string& suffix) {
    for (const auto& x : rungs)
      if (x["name"].get<std::string>().ends_with(suffix)) return x;
    ADD_FAILURE() << "no rung *" << suffix;
    return nlohmann::json();
  };
  nlohmann::json j = doc();
  EXPECT_EQ(named(j["rungs"], "_top+kept")["status"], "pending");
  EXPECT_EQ(named(j["rungs"], "_planned_batch+kept")["status"], "pending");
  EXPECT_EQ(named(j["rungs"], "_planned_batch+kept+ties")["status"], "pending");
  // Each extra at the batch the top's search chose (its ratio to the top is its variant's alone), no search of
  // its own.
  const auto searched_top = named(j["rungs"], "12_batch_scaling");
  ASSERT_EQ(searched_top["status"], "ok") << searched_top;
  EXPECT_EQ(searched_top["batch_search"][0]["stage"], "search");
  for (const auto& x : j["rungs"]) {
    if (x["kind"] != "extra" || x["status"] == "skipped") continue;
    EXPECT_EQ(x["spec"]["batch"], searched_top["spec"]["batch"]) << x["name"];
    ASSERT_FALSE(x["batch_search"].empty()) << x["name"];
    EXPECT_EQ(x["batch_search"][0]["stage"], "top") << x["name"];
    EXPECT_EQ(x["batch_search"][0]["from"], "12_batch_scaling") << x["name"];
    // Its parity judged against the top's trajectory (the same batch, the same problem), by what its own variants
    // change: so a fusion that writes a gradient wrong is seen, where "the first batch's loss fell" would pass it.
    if (x["status"] != "ok") continue;
    EXPECT_EQ(x["parity"]["class"], "problem") << x["name"];  // its recipe holds batch_scaling
    // (where the search kept the profile's batch, a loaded machine's budget, the problem is the baseline's)
    const bool moved = searched_top["spec"]["batch"] != 2;
    // another model: another problem, its own check (at the profile's batch, as the baseline's)
    if (x["variant"] == "weight_tying") {
      EXPECT_EQ(x["parity"]["against"], "baseline") << x["name"];
      EXPECT_EQ(x["parity"]["judged_as"], "problem") << x["name"];
      continue;
    }
    // one that changes the math (another precision) against the baseline's fp32 step at that batch: the top's own
    // rounding is no reference for it
    const std::string batch = std::to_string(searched_top["spec"]["batch"].get<int64_t>());
    const bool same_math = find_variant(x["variant"].get<std::string>())->parity == ParityClass::kExact;
    EXPECT_EQ(x["parity"]["against"], !moved ? "baseline" : same_math ? "12_batch_scaling" : "baseline at batch " + batch)
        << x["name"];
    // the top's bf16, or another precision on the same problem (fp16_autocast runs where the CPU has AVX512-FP16)
    EXPECT_EQ(x["parity"]["judged_as"], "precision") << x["name"];
    if (moved && same_math) {
      EXPECT_EQ(x["parity"]["baseline_losses"], searched_top["parity"]["losses"]) << x["name"];
      EXPECT_NE(x["parity"]["rule"].get<std::string>().find("|loss - 12_batch_scaling's|"), std::string::npos)
          << x["parity"]["rule"];
    } else if (moved) {
      EXPECT_EQ(x["parity"]["baseline_losses"], searched_top["parity"]["baseline_losses"]) << x["name"];
    }
    EXPECT_GT(x["parity"]["params_compared"].get<int64_t>(), 0) << x["name"];
  }
  // The top at its batch: against the baseline's fp32 step there (in micro-batches of the profile's batch), by the
  // class of its precision, parameter by parameter
  const bool moved = searched_top["spec"]["batch"] != 2;
  EXPECT_EQ(searched_top["parity"]["against"],
            moved ? "baseline at batch " + std::to_string(searched_top["spec"]["batch"].get<int64_t>()) : "baseline");
  EXPECT_EQ(searched_top["parity"]["judged_as"], "precision");
  EXPECT_GT(searched_top["parity"]["params_compared"].get<int64_t>(), 0);
  if (moved) {
    EXPECT_NE(r.output.find("parity reference at batch "), std::string::npos) << r.output;
  }
  // The top timed again after the extras, at its batch, without a breakdown pass of its own (the top's).
  const auto again = named(j["rungs"], "_top_again");
  ASSERT_EQ(again["status"], "ok") << again;
  EXPECT_EQ(again["kind"], "control");
  EXPECT_EQ(again["spec"], searched_top["spec"]);
  EXPECT_EQ(again["breakdown"]["skipped"], "the top's step again: its breakdown is the top's");
  EXPECT_EQ(again["parity"]["against"], "12_batch_scaling");  // the same step: the same trajectory
  EXPECT_EQ(again["parity"]["max_abs_dev"], 0.0) << again["parity"];
  // Every repetition of the top at 1,000 tok/s and of each extra at a multiple of it (a loaded machine's real
  // repetitions can spread a hundredfold: then no ratio is beyond noise); fused_gelu_backward's at `gelu`.
  auto set_extras = [&](nlohmann::json& j, double classifier, double gelu = 0.5) {
    for (auto& x : j["rungs"]) {
      const bool top = x["name"] == "12_batch_scaling" || x["kind"] == "control";  // the top, timed twice
      if ((x["kind"] != "extra" && !top) || !x.contains("repetitions")) continue;
      const double f = top                                    ? 1.0
                       : x["variant"] == "fused_classifier"   ? classifier
                       : x["variant"] == "fused_gelu_backward" ? gelu
                                                              : 0.5;
      for (auto& v : x["repetitions"]["tokens_per_sec"]) v = 1000.0 * f;
      if (x.contains("paired") && x["paired"].contains("with_tokens_per_sec"))  // the top beside it, as faked
        for (auto& v : x["paired"]["with_tokens_per_sec"]) v = 1000.0;
      if (x.contains("paired") && x["paired"].contains("core_shares"))  // on a quiet machine (ctest -j: a busy one)
        for (auto& v : x["paired"]["core_shares"]) v = 1.0;
      x["parity"]["verdict"] = "pass";
    }
  };
  const nlohmann::json first = j;
  set_extras(j, 10.0, 1.0);  // fused_gelu_backward ties the top
  test::write_text(out + "/rungs.json", j.dump(2));
  r = test::run_gpt2bench("ladder --resume " + out + " --rung=");  // the kept rungs the first run left out
  ASSERT_TRUE(r.exit_code == 0 || r.exit_code == 3) << r.output;
  j = doc();
  const auto top = named(j["rungs"], "12_batch_scaling"), kept_top = named(j["rungs"], "_top+kept"),
             kept_planned = named(j["rungs"], "_planned_batch+kept");
  for (const auto& k : {kept_top, kept_planned}) {
    EXPECT_EQ(k["kind"], "kept");
    // fused_classifier, fused_gelu_backward, gelu_epilogues, fused_residual_norm; adamw_one_launch,
    // adamw_in_backward, gemm_algorithms and cudnn_attention, skipped here
    ASSERT_EQ(k["kept"].size(), 8u) << k;
    for (size_t i = 4; i < 8; ++i) EXPECT_EQ(k["kept"][i]["why"], "its rung: skipped") << k["kept"];
    EXPECT_EQ(kept_variants(k["kept"]), std::vector<std::string>{"fused_classifier"}) << k["kept"];
    for (const auto& e : k["kept"])  // beside the top, judged (the skipped one: no timing to judge)
      if (e["why"] != "its rung: skipped") {
        EXPECT_EQ(e["again"]["rung"], again["name"]) << e;
      }
    ASSERT_EQ(k["status"], "ok") << k;
    EXPECT_EQ(k["applied"].back(), "fused_classifier");
    EXPECT_EQ(k["spec"]["model"]["classifier_chunk"], 1024);
    EXPECT_NE(r.output.find(k["name"].get<std::string>() + ": kept fused_classifier"), std::string::npos) << r.output;
  }
  // At the profile's batch again, with the extra that tied the top too (the optimizer's fixed cost a step is lost in
  // a large batch's noise), compared with the kept rung there.
  const auto kept_ties = named(j["rungs"], "_planned_batch+kept+ties");
  ASSERT_EQ(kept_ties["status"], "ok") << kept_ties;
  EXPECT_EQ(kept_ties["ties"], true);
  EXPECT_EQ(kept_ties["compare_to"], kept_planned["name"]);
  EXPECT_EQ(kept_variants(kept_ties["kept"]), (std::vector<std::string>{"fused_classifier", "fused_gelu_backward"}));
  for (const auto& e : kept_ties["kept"]) {
    EXPECT_EQ(e.value("tie", false), e["variant"] == "fused_gelu_backward") << e;
    if (e["variant"] == "fused_gelu_backward") {
      EXPECT_TRUE(e["why"].get<std::string>().ends_with("; not measurably slower either: a tie")) << e;
    }
  }
  EXPECT_EQ(kept_ties["spec"]["batch"], 2);
  const std::string said = ": kept fused_classifier, fused_gelu_backward (a tie)";
  EXPECT_NE(r.output.find(kept_ties["name"].get<std::string>() + said), std::string::npos) << r.output;
  const auto planned_applied = kept_planned["applied"].get<std::vector<std::string>>();
  EXPECT_EQ(std::count(planned_applied.begin(), planned_applied.end(), "batch_scaling"), 0);  // the profile's batch
  EXPECT_EQ(kept_planned["spec"]["batch"], 2);
  // The top+kept rung at the batch the top's search chose, not a search of its own.
  EXPECT_EQ(kept_top["spec"]["batch"], top["spec"]["batch"]);
  EXPECT_EQ(kept_top["batch_search"][0]["stage"], "top");
  EXPECT_EQ(kept_top["batch_search"][0]["from"], "12_batch_scaling");

  r = test::run_gpt2bench("ladder --resume " + out);  // nothing left to run: the kept rungs as they ran
  ASSERT_TRUE(r.exit_code == 0 || r.exit_code == 3) << r.output;
  j = doc();
  EXPECT_EQ(named(j["rungs"], "_top+kept")["applied"], kept_top["applied"]);
  EXPECT_EQ(named(j["rungs"], "_top+kept")["spec"]["model"]["classifier_chunk"], 1024);
  EXPECT_EQ(named(j["rungs"], "_planned_batch+kept")["applied"], kept_planned["applied"]);
  EXPECT_EQ(named(j["rungs"], "_planned_batch+kept+ties")["applied"], kept_ties["applied"]);
  // Nothing tied the top beyond what beat it: the ties' rung is the kept rung's step, skipped.
  j = first;
  set_extras(j, 10.0);
  test::write_text(out + "/rungs.json", j.dump(2));
  r = test::run_gpt2bench("ladder --resume " + out + " --rung=kept.ties");
  ASSERT_TRUE(r.exit_code == 0 || r.exit_code == 3) << r.output;
  EXPECT_EQ(named(doc()["rungs"], "_planned_batch+kept+ties")["error"],
            "no extra tied the top beyond those that beat it: the kept rung's step");
  // No extra beat the top: both skipped, saying so, every candidate with why.
  j = first;
  set_extras(j, 0.5);
  test::write_text(out + "/rungs.json", j.dump(2));
  r = test::run_gpt2bench("ladder --resume " + out + " --rung=");
  ASSERT_TRUE(r.exit_code == 0 || r.exit_code == 3) << r.output;
  j = doc();
  for (const char* k : {"_top+kept", "_planned_batch+kept", "_planned_batch+kept+ties"}) {
    const auto x = named(j["rungs"], k);
    EXPECT_EQ(x["status"], "skipped") << x;
    EXPECT_EQ(x["error"], std::string(x["ties"] ? "no extra beat or tied" : "no extra beat") +
                              " the top rung in this run (rungs.json: kept)");
    ASSERT_EQ(x["kept"].size(), 8u);  // as above
    EXPECT_EQ(x["kept"][0]["why"].get<std::string>().rfind("not measurably faster than 12_batch_scaling (0.500x; ", 0), 0u)
        << x["kept"][0];
  }
  // Its breakdown pass belongs to the ladder: the breakdown command refuses it by name.
  r = test::run_gpt2bench("breakdown --profile " + profile + " --rung top+kept --out " + (d / "bd"));
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("is settled by a ladder run"), std::string::npos) << r.output;
  // The top's second timing has no breakdown pass in the ladder (the top's step again), nor in a breakdown run of
  // every rung; there each extra runs at the batch the top's search chose, as in the ladder.
  r = test::run_gpt2bench("breakdown --profile " + profile + " --out " + (d / "all"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_FALSE(files::exists(d / ("all/breakdown/" + again["name"].get<std::string>() + ".json")));
  auto batch_of = [&](const std::string& rung) {
    return test::read_json(d / ("all/breakdown/" + rung + ".json"))["batch"].get<int64_t>();
  };
  int extras = 0;
  for (const auto& x : first["rungs"]) {
    if (x["kind"] != "extra" || x["status"] != "ok") continue;
    ++extras;
    EXPECT_EQ(batch_of(x["name"]), batch_of("12_batch_scaling")) << x["name"];
  }
  EXPECT_GE(extras, 4);
  // By name it is the top's step as any other: at the batch a search for the top chose, not one of its own.
  r = test::run_gpt2bench("breakdown --profile " + profile + " --rung top_again --out " + (d / "again"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::string at = again["name"].get<std::string>() + ": at 12_batch_scaling's batch ";
  const auto where = r.output.find(at);
  ASSERT_NE(where, std::string::npos) << r.output;
  const auto pass = test::read_json(d / ("again/breakdown/" + again["name"].get<std::string>() + ".json"));
  EXPECT_EQ(pass["batch"].get<int64_t>(), std::stoll(r.output.substr(where + at.size()))) << r.output;
}

}  // namespace
}  // namespace gpt2
