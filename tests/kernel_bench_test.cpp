// gpt2bench kernels: the timing's schedule on a fake timer (warm-up, passes a round, turns, the ratio), and the
// command end to end on the tiny model (every case, its sides, its JSON, bad input refused by name).
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <csignal>

#include "bench/commands/kernel_bench.h"
#include "bench/ladder/run_dir.h"
#include "bench/runtime/device.h"
#include "helpers.h"
#include "variants/registry.h"

namespace gpt2 {
namespace {

TEST(KernelBench, SidesWarmUpTwiceThenTakeTurnsWithTheSamePassesARound) {
  std::string ran;  // which pass ran, in order
  auto side = [&](char id) { return [&ran, id] { ran += id; }; };
  // A fake device: ours (a) takes 0.5 ms a pass, the other (b) 1 ms; a round's time is the mean pass.
  std::vector<std::pair<char, int>> rounds;  // (side, passes) per round the timer timed
  const RoundTimer timer = [&](const std::function<void()>& pass, int iters) {
    const size_t before = ran.size();
    for (int i = 0; i < iters; ++i) pass();
    const char id = ran.at(before);
    EXPECT_EQ(ran.size() - before, static_cast<size_t>(iters));
    rounds.emplace_back(id, iters);
    return id == 'a' ? 0.5 : 1.0;
  };
  const KernelCase c = time_in_turns("v", "N=1", {{"ours", side('a')}, {"theirs", side('b')}}, 4, 5.0, {timer});
  // warm-up: each side twice, one pass; then 5 ms / the slowest side's 1 ms = 5 passes a round, in turns
  const std::vector<std::pair<char, int>> want = {{'a', 1}, {'a', 1}, {'b', 1}, {'b', 1}, {'a', 5}, {'b', 5},
                                                  {'a', 5}, {'b', 5}, {'a', 5}, {'b', 5}, {'a', 5}, {'b', 5}};
  EXPECT_EQ(rounds, want);
  EXPECT_EQ(c.iters, 5);
  ASSERT_EQ(c.sides.size(), 2u);
  EXPECT_EQ(c.sides[0].ms, std::vector<double>(4, 0.5));
  EXPECT_DOUBLE_EQ(c.sides[0].median_ms, 0.5);
  EXPECT_DOUBLE_EQ(c.sides[1].median_ms, 1.0);
  ASSERT_EQ(c.speedup.size(), 1u);  // theirs over ours: ours twice as fast
  EXPECT_DOUBLE_EQ(c.speedup[0].estimate, 2.0);
  EXPECT_EQ(c.speedup[0].n, 4);
}

TEST(KernelBench, EachSideIsTimedAsItsGraphsReplayOrEagerlySayingWhyNot) {
  std::string ran;
  auto side = [&](char id) { return [&ran, id] { ran += id; }; };
  const RoundTimer timer = [](const std::function<void()>& pass, int iters) {
    for (int i = 0; i < iters; ++i) pass();
    return 1.0;
  };
  // A fake device: ours captures (its replay runs 'A'); the other's capture fails, as an op that syncs would.
  const Replayer replay = [&](const std::function<void()>& pass) -> std::function<void()> {
    pass();  // what capturing it runs
    if (ran == "a") return [&ran] { ran += 'A'; };
    throw std::runtime_error("CUDA graph capture failed: operation not permitted when stream is capturing\nat ...");
  };
  const KernelCase c = time_in_turns("v", "", {{"ours", side('a')}, {"theirs", side('b')}}, 2, 5.0, {timer, replay});
  EXPECT_EQ(ran, "a" "AA" "b" "bb" "AAAAA" "bbbbb" "AAAAA" "bbbbb");  // captured, warm-up, then 2 rounds of 5
  EXPECT_EQ(c.sides[0].timed, "graph");
  EXPECT_EQ(c.sides[1].timed, "eager: CUDA graph capture failed: operation not permitted when stream is capturing");
  EXPECT_EQ(time_in_turns("v", "", {{"ours", side('a')}}, 1, 5.0, {timer}).sides[0].timed, "eager");  // no graphs
}

TEST(KernelBench, PassesARoundStayWithinOneAndAThousand) {
  auto timed = [](double ms) {
    const RoundTimer t = [ms](const std::function<void()>& pass, int iters) {
      for (int i = 0; i < iters; ++i) pass();
      return ms;
    };
    return time_in_turns("v", "", {{"ours", [] {}}}, 1, 5.0, {t}).iters;
  };
  EXPECT_EQ(timed(50.0), 1);     // a pass longer than a round: one
  EXPECT_EQ(timed(1e-6), 1000);  // a pass too short to time alone: at most a thousand
  EXPECT_EQ(timed(0.5), 10);
}

TEST(Cli, KernelsTimesEachOfOurOpsAgainstWhatItReplaces) {
  test::TempDir d;
  const auto profile = test::write_tiny_profile(d, "name: k\nmodel: tiny\ndata: synthetic\ndevice: cpu\nbatch: 2\n");
  auto r = test::run_gpt2bench("kernels --profile " + profile + " --rounds 3 --out " + (d / "kernels.json"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("fused_residual_norm  (N=32 C=32 "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("3 rounds of "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find(" passes, launched eagerly)"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("   ours "), std::string::npos) << r.output;
  const auto doc = test::read_json(d / "kernels.json");
  EXPECT_EQ(doc["complete"], true);
  EXPECT_EQ(doc["rounds"], 3);
  EXPECT_EQ(doc["device"]["type"], "cpu");
  EXPECT_EQ(doc["build"]["cuda"], build_has_cuda());  // what made it, as a run's rungs.json says (the report shows it)
  EXPECT_EQ(doc["build"]["git_sha"], git_sha());
  const std::vector<std::pair<std::string, size_t>> want = {
      {"fused_residual_norm", 2}, {"fused_gelu_backward", 3}, {"gelu_epilogues", 4}, {"fused_classifier", 2}};
  ASSERT_EQ(doc["cases"].size(), want.size() + 7);
  // FP8's case where FP8 runs (sm89+): on the CPU skipped, saying why, and not a failure
  EXPECT_EQ(doc["cases"][4], (nlohmann::json{{"variant", "fp8_linears"},
                                             {"skipped", "FP8 matmuls need a CUDA GPU of sm89+ (FP8 tensor cores)"}}));
  EXPECT_NE(r.output.find("fp8_linears  skipped here: FP8 matmuls need"), std::string::npos) << r.output;
  EXPECT_EQ(doc["cases"][5]["skipped"], find_variant("adamw_one_launch")->supports(detect_device("cpu")).why_not);
  EXPECT_EQ(doc["cases"][6]["skipped"], find_variant("cudnn_attention")->supports(detect_device("cpu")).why_not);
  // the bias-GELU backward's, the softmax cross-entropy's and the classifier backward's CUDA kernels alone:
  // nothing to time on a CPU; each names its kernel, so the report's rows are told apart
  const std::pair<const char*, const char*> alone[] = {{"fused_gelu_backward", "bias_gelu_backward"},
                                                       {"fused_classifier", "softmax_xent_backward_"},
                                                       {"fused_classifier", "scaled_gradient"}};
  for (size_t i = 0; i < 3; ++i)
    EXPECT_EQ(doc["cases"][7 + i], (nlohmann::json{{"variant", alone[i].first}, {"alone", alone[i].second},
                                                   {"skipped", "the CUDA kernel alone: needs a CUDA GPU"}}));
  nlohmann::json quantize = doc["cases"][4];  // FP8's quantization alone: skipped first as FP8 is
  quantize["alone"] = "quantize_fp8";
  EXPECT_EQ(doc["cases"][10], quantize);
  // each said once on the console, by the kernel
  for (const char* line : {"fused_gelu_backward (bias_gelu_backward alone)  skipped here: the CUDA kernel alone",
                           "fused_classifier (softmax_xent_backward_ alone)  skipped here",
                           "fused_classifier (scaled_gradient alone)  skipped here",
                           "fp8_linears (quantize_fp8 alone)  skipped here: FP8 matmuls need"})
    EXPECT_NE(r.output.find(line), std::string::npos) << line << "\n" << r.output;
  // the survey of the step's matmuls against cuBLASLt's heuristic algorithms: a GPU's alone
  EXPECT_EQ(doc["gemms"], (nlohmann::json{{"skipped", "cuBLASLt's heuristics need a CUDA GPU"}}));
  EXPECT_NE(r.output.find("matmuls  skipped here: cuBLASLt's heuristics need a CUDA GPU"), std::string::npos) << r.output;
  // the blocks' matmuls in FP8 against bf16: where fp8_linears runs
  EXPECT_EQ(doc["fp8_gemms"], (nlohmann::json{{"skipped", doc["cases"][4]["skipped"]}}));
  EXPECT_NE(r.output.find("fp8 matmuls  skipped here: FP8 matmuls need"), std::string::npos) << r.output;
  for (size_t i = 0; i < want.size(); ++i) {
    const auto& c = doc["cases"][i];
    EXPECT_EQ(c["variant"], want[i].first);
    ASSERT_EQ(c["sides"].size(), want[i].second) << c["variant"];
    EXPECT_EQ(c["speedup"].size(), want[i].second - 1) << c["variant"];
    for (const auto& s : c["sides"]) {
      EXPECT_EQ(s["timed"], "eager") << s["name"];  // no device graphs on the CPU
      ASSERT_EQ(s["ms"].size(), 3u);
      for (double ms : s["ms"]) EXPECT_GT(ms, 0) << s["name"];
    }
    for (size_t k = 0; k < c["speedup"].size(); ++k) {
      const auto& x = c["speedup"][k];
      EXPECT_LE(x["low"].get<double>(), x["estimate"].get<double>());
      EXPECT_LE(x["estimate"].get<double>(), x["high"].get<double>());
      EXPECT_EQ(x["over"], c["sides"][k + 1]["name"]);  // the medians' ratio, the other side over ours
      EXPECT_DOUBLE_EQ(x["ratio"].get<double>(),
                       c["sides"][k + 1]["median_ms"].get<double>() / c["sides"][0]["median_ms"].get<double>());
    }
  }
  // the residual add and norm with the model's dropout (the tiny preset's 0.1) on the branch, both sides, and the
  // branch's bias gradient, which ours sums in its backward and the step it replaces in the linear's
  EXPECT_NE(doc["cases"][0]["shape"].get<std::string>().find("dropout=0.1"), std::string::npos) << doc["cases"][0];
  EXPECT_EQ(doc["cases"][0]["sides"][0]["name"], "ours: add_layer_norm with the branch's bias (kernels/residual_norm)");
  EXPECT_EQ(doc["cases"][0]["sides"][1]["name"], "ATen: x + dropout(r), then layer_norm; r's gradient summed (the bias's)");
  // the classifier at the padded vocabulary (97 -> 128), the fused_classifier variant's chunk
  EXPECT_NE(doc["cases"][3]["shape"].get<std::string>().find("V=128 chunk=1024"), std::string::npos);
  EXPECT_FALSE(doc["cases"][3].contains("note"));  // 1,024 covers the 32 tokens: one chunk, nothing to compare

  // A chunk smaller than the tokens: ours at it, at twice it ... up to all tokens, then ATen; the fastest named.
  test::TempDir d2;
  const auto chunked = test::write_tiny_profile(
      d2, "name: k\nmodel: tiny\ndata: synthetic\ndevice: cpu\nbatch: 2\nsettings: {classifier_chunk: 12}\n");
  r = test::run_gpt2bench("kernels --profile " + chunked + " --rounds 2 --out " + (d2 / "chunks.json"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto cls = test::read_json(d2 / "chunks.json")["cases"][3];
  ASSERT_EQ(cls["sides"].size(), 4u) << cls;  // 12, 24, 32 tokens a chunk; ATen
  EXPECT_EQ(cls["sides"][0]["name"], "ours: linear_cross_entropy (kernels/classifier), chunk=12 (settings.classifier_chunk: 12)");
  EXPECT_EQ(cls["sides"][1]["name"], "ours: linear_cross_entropy (kernels/classifier), chunk=24");
  EXPECT_EQ(cls["sides"][2]["name"], "ours: linear_cross_entropy (kernels/classifier), chunk=32, all tokens");
  EXPECT_EQ(cls["sides"][3]["name"], "ATen: linear, then cross_entropy");
  size_t fastest = 0;
  for (size_t i = 1; i < 3; ++i)
    if (cls["sides"][i]["median_ms"].get<double>() < cls["sides"][fastest]["median_ms"].get<double>()) fastest = i;
  const char* tokens[] = {"12", "24", "32"};
  EXPECT_EQ(cls["note"], std::string("fastest chunk: ") + tokens[fastest] + " tokens (settings.classifier_chunk: 12)");
  EXPECT_NE(r.output.find("  fastest chunk: "), std::string::npos) << r.output;

  // A case that fails (out of memory, a kernel's error) is said and recorded; the others still run; exit 1.
  r = test::run_gpt2bench("kernels --profile " + profile + " --rounds 2 --out " + (d / "failed.json"),
                          "GPT2BENCH_FAULT_KERNEL=fused_gelu_backward");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("fused_gelu_backward  error: injected fault"), std::string::npos) << r.output;
  const auto failed = test::read_json(d / "failed.json");
  ASSERT_EQ(failed["cases"].size(), doc["cases"].size());
  EXPECT_TRUE(failed["cases"][6].contains("skipped")) << failed["cases"][6];  // skipped here before the fault
  EXPECT_EQ(failed["cases"][1]["error"], "injected fault (GPT2BENCH_FAULT_KERNEL)");
  EXPECT_EQ(failed["cases"][3]["sides"].size(), 2u);  // the classifier ran after it

  // Stopped by SIGTERM at the classifier (a lent GPU's deadline): the file holds the cases before it, not complete.
  r = test::run_gpt2bench("kernels --profile " + profile + " --rounds 2 --out " + (d / "stopped.json"),
                          "GPT2BENCH_FAULT_KERNEL=fused_classifier:term");
  EXPECT_TRUE(r.exit_code == 128 + SIGTERM || r.exit_code == -1) << r.exit_code << r.output;
  EXPECT_EQ(r.output.find("fused_classifier  ("), std::string::npos) << r.output;
  const auto stopped = test::read_json(d / "stopped.json");
  EXPECT_EQ(stopped["complete"], false);
  ASSERT_EQ(stopped["cases"].size(), 3u) << stopped["cases"];
  EXPECT_EQ(stopped["cases"][2]["variant"], "gelu_epilogues");
  EXPECT_TRUE(stopped["gemms"].is_null());
  EXPECT_TRUE(stopped["fp8_gemms"].is_null());

  r = test::run_gpt2bench("kernels --profile " + profile + " --rounds 0");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("--rounds takes a whole number >= 1, got '0'"), std::string::npos) << r.output;
  r = test::run_gpt2bench("kernels --rounds 3");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("missing --profile"), std::string::npos) << r.output;
}

// --only: the cases with a name it finds (a variant, a kernel timed alone, a survey), the file saying so; an
// expression that finds none, or is none, refused before anything runs, naming what there is.
TEST(Cli, KernelsOnlyTimesTheCasesItNames) {
  test::TempDir d;
  const auto profile = test::write_tiny_profile(d, "name: k\nmodel: tiny\ndata: synthetic\ndevice: cpu\nbatch: 2\n");
  auto r = test::run_gpt2bench("kernels --profile " + profile + " --rounds 2 --only 'residual|softmax_xent' --out " +
                               (d / "only.json"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto doc = test::read_json(d / "only.json");
  EXPECT_EQ(doc["only"], "residual|softmax_xent");
  EXPECT_EQ(doc["complete"], true);
  ASSERT_EQ(doc["cases"].size(), 2u) << doc["cases"];
  EXPECT_EQ(doc["cases"][0]["variant"], "fused_residual_norm");
  EXPECT_EQ(doc["cases"][0]["sides"].size(), 2u);
  EXPECT_EQ(doc["cases"][1], (nlohmann::json{{"variant", "fused_classifier"},  // its kernel alone: a GPU's
                                             {"alone", "softmax_xent_backward_"},
                                             {"skipped", "the CUDA kernel alone: needs a CUDA GPU"}}));
  EXPECT_TRUE(doc["gemms"].is_null() && doc["fp8_gemms"].is_null()) << doc;
  EXPECT_EQ(r.output.find("fused_gelu_backward"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("matmuls"), std::string::npos) << r.output;

  r = test::run_gpt2bench("kernels --profile " + profile + " --rounds 2 --only '^gemms$' --out " + (d / "g.json"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto g = test::read_json(d / "g.json");
  EXPECT_TRUE(g["cases"].empty()) << g["cases"];
  EXPECT_EQ(g["gemms"], (nlohmann::json{{"skipped", "cuBLASLt's heuristics need a CUDA GPU"}}));
  EXPECT_TRUE(g["fp8_gemms"].is_null());

  r = test::run_gpt2bench("kernels --profile " + profile + " --only nonesuch --out " + (d / "none.json"));
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("--only 'nonesuch' finds none of: fused_residual_norm, fused_gelu_backward, gelu_epilogues, "
                          "fused_classifier, fp8_linears, adamw_one_launch, cudnn_attention, bias_gelu_backward, "
                          "softmax_xent_backward_, scaled_gradient, quantize_fp8, gemms, fp8_gemms"),
            std::string::npos)
      << r.output;
  EXPECT_FALSE(files::exists(d / "none.json"));
  r = test::run_gpt2bench("kernels --profile " + profile + " --only '('");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("--only '(' is not a valid regular expression ("), std::string::npos) << r.output;
}

}  // namespace
}  // namespace gpt2
