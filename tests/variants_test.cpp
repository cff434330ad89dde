// Every variant: its StepSpec edit, its device support (CPU and faked CUDA devices), its parity
// verdict on the CPU; recipe resolution; plan expansion over the registry.
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include <functional>
#include <map>
#include <tuple>

#include "bench/ladder/parity.h"
#include "bench/ladder/plan.h"
#include "bench/runtime/device.h"
#include "config/profile.h"
#include "bench/step/train_step.h"
#include "config/presets.h"
#include "helpers.h"
#include "variants/registry.h"

namespace gpt2 {
namespace {

using test::cpu;
DeviceInfo fake_gpu(int major) {
  DeviceInfo d;
  d.type = DeviceType::kCuda;
  d.name = "fake sm" + std::to_string(major) + "0";
  d.cc_major = major;
  d.tf32 = d.bf16 = d.flash_attention = major >= 8;
  return d;
}

// What each variant must change in the description, and nothing else checked here.
const std::map<std::string, std::function<bool(const StepSpec&)>>& expected_edits() {
  static const std::map<std::string, std::function<bool(const StepSpec&)>> m = {
      {"mask_on_the_fly", [](const StepSpec& s) { return s.model.attention == AttentionImpl::kManualOnTheFly; }},
      {"tf32", [](const StepSpec& s) { return s.tf32; }},
      {"fused_adamw", [](const StepSpec& s) { return s.optimizer.kind == OptimizerKind::kAdamwFused; }},
      {"pinned_memory", [](const StepSpec& s) { return s.loader.pinned; }},
      {"bf16_cast", [](const StepSpec& s) { return s.precision == Precision::kBf16Cast; }},
      {"native_layers", [](const StepSpec& s) { return s.model.layers == LayerImpl::kNative; }},
      {"sdpa", [](const StepSpec& s) { return s.model.attention == AttentionImpl::kSdpa; }},
      {"fuse_qkv", [](const StepSpec& s) { return s.model.fused_qkv; }},
      {"fuse_bias_gelu", [](const StepSpec& s) { return s.model.fused_bias_gelu; }},
      {"cuda_graph", [](const StepSpec& s) { return s.executor == ExecutorKind::kCudaGraph; }},
      {"vocab_padding", [](const StepSpec& s) { return s.model.padded_vocab() == 50304; }},
      {"batch_scaling", [](const StepSpec& s) { return s.search_batch; }},
      {"ddp", [](const StepSpec& s) { return s.dist.backend == "c10d"; }},
      {"bf16_autocast", [](const StepSpec& s) { return s.precision == Precision::kBf16Autocast; }},
      {"fp16_autocast", [](const StepSpec& s) { return s.precision == Precision::kFp16Autocast; }},
      {"weight_tying", [](const StepSpec& s) { return s.model.tie_weights; }},
      {"sync_every_step", [](const StepSpec& s) { return s.sync_every_step; }},
      // the profile's chunk (settings.classifier_chunk; base_124m leaves it at 1,024)
      {"fused_classifier", [](const StepSpec& s) { return s.model.classifier_chunk == s.settings.classifier_chunk; }},
      {"fused_gelu_backward", [](const StepSpec& s) { return s.model.fused_gelu_backward; }},
      {"gelu_epilogues", [](const StepSpec& s) { return s.model.gelu_epilogues; }},
      {"fused_residual_norm", [](const StepSpec& s) { return s.model.fused_residual_norm; }},
      {"fp8_linears", [](const StepSpec& s) { return s.model.fp8_linears; }},
      {"adamw_one_launch", [](const StepSpec& s) { return s.optimizer.kind == OptimizerKind::kAdamwOneLaunch; }},
      {"adamw_in_backward", [](const StepSpec& s) { return s.optimizer.in_backward; }},
      {"gemm_algorithms", [](const StepSpec& s) { return s.model.lt_linears; }},
      {"cudnn_attention", [](const StepSpec& s) { return s.model.cudnn_attention; }},
  };
  return m;
}

StepSpec base_124m() {
  return baseline_spec(load_model_preset("gpt2-124m", GPT2BENCH_SOURCE_DIR "/profiles"), 8, cpu());
}

TEST(Variants, EveryRegisteredVariantIsDescribedAndTested) {
  EXPECT_EQ(registry().size(), expected_edits().size());
  for (const auto& v : registry()) {
    EXPECT_TRUE(expected_edits().count(std::string(v->name))) << v->name << " has no expected edit";
    EXPECT_FALSE(v->why.empty());
    EXPECT_FALSE(v->source.empty());
  }
}

TEST(Variants, EachEditsItsStepSpecField) {
  const StepSpec base = base_124m();
  for (const auto& v : registry()) {
    StepSpec s = base;
    v->apply(s);
    const auto& edited = expected_edits().at(std::string(v->name));
    EXPECT_FALSE(edited(base)) << v->name << ": the baseline already has the edit";
    EXPECT_TRUE(edited(s)) << v->name;
    EXPECT_FALSE(s == base) << v->name << " changed nothing";
  }
}

TEST(Variants, TheFusedClassifiersChunkIsTheProfiles) {
  StepSpec s = base_124m();
  s.settings.classifier_chunk = 4096;
  find_variant("fused_classifier")->apply(s);
  EXPECT_EQ(s.model.classifier_chunk, 4096);
}

TEST(Variants, SupportOnCpuAndFakedGpus) {
  const std::map<std::string, std::array<bool, 3>> want = {
      // {cpu, sm70, sm80}
      {"tf32", {false, false, true}},          {"pinned_memory", {false, true, true}},
      {"cuda_graph", {false, true, true}},     {"bf16_cast", {true, false, true}},
      {"bf16_autocast", {true, false, true}},  {"ddp", {false, false, false}},
      {"fp16_autocast", {cpu().fp16, true, true}},  // this CPU's flags (below: both ways)
      {"fp8_linears", {false, false, false}},       // sm89+ (below)
      {"adamw_one_launch", {false, true, true}},
      {"adamw_in_backward", {false, true, true}},  // one process (below: two)
      {"gemm_algorithms", {false, true, true}},
      {"cudnn_attention", {false, false, true}},
  };
  const DeviceInfo devs[3] = {cpu(), fake_gpu(7), fake_gpu(8)};  // one process each: ddp is skipped
  for (const auto& v : registry()) {
    auto it = want.find(std::string(v->name));
    for (int i = 0; i < 3; ++i) {
      const Support s = v->supports(devs[i]);
      const bool expect = it == want.end() ? true : it->second[i];
      EXPECT_EQ(s.ok, expect) << v->name << " on " << devs[i].name;
      if (!s.ok) {
        EXPECT_FALSE(s.why_not.empty()) << v->name << " must say why not";
      }
    }
  }
  for (const auto& [major, minor, ok] : {std::tuple{8, 6, false}, std::tuple{8, 9, true}, std::tuple{9, 0, true}}) {
    DeviceInfo g = fake_gpu(major);
    g.cc_minor = minor;
    EXPECT_EQ(find_variant("fp8_linears")->supports(g).ok, ok) << major << minor;
  }
  EXPECT_EQ(find_variant("fp8_linears")->supports(fake_gpu(8)).why_not, "FP8 tensor cores need sm89+; this GPU is sm80");
  DeviceInfo two = cpu();
  two.world_size = 2;
  EXPECT_TRUE(find_variant("ddp")->supports(two).ok);
  DeviceInfo two_gpus = fake_gpu(9);
  two_gpus.world_size = 2;
  EXPECT_EQ(find_variant("adamw_in_backward")->supports(two_gpus).why_not,
            "under DDP a gradient is not whole until its bucket's all-reduce is done");
  // fp16 autocast on a CPU only with a fast fp16 matmul (AVX512-FP16 / AMX-FP16); every GPU has one.
  DeviceInfo cpu16 = cpu();
  cpu16.fp16 = true;
  EXPECT_TRUE(find_variant("fp16_autocast")->supports(cpu16).ok);
  cpu16.fp16 = false;
  const Support no = find_variant("fp16_autocast")->supports(cpu16);
  EXPECT_FALSE(no.ok);
  EXPECT_NE(no.why_not.find("AVX512-FP16"), std::string::npos) << no.why_not;
}

// The docs' table says where a variant runs in one process or in two: ddp (two) and adamw_in_backward (one) both
// run on a GPU.
TEST(Variants, TheTableCountsARunInOneProcessOrInTwo) {
  const std::string table = variants_markdown();
  auto columns = [&](const std::string& name) {  // the last three: CPU, sm80, sm90
    const auto at = table.find("| `" + name + "`");
    if (at == std::string::npos) return std::string("(no row)");
    const std::string row = table.substr(at, table.find('\n', at) - at);
    size_t from = row.size();
    for (int bars = 0; bars < 4 && from > 0;) bars += row[--from] == '|';
    return row.substr(from);
  };
  EXPECT_EQ(columns("ddp"), "| yes | yes | yes |");
  EXPECT_EQ(columns("adamw_in_backward"), "| no | yes | yes |");
  EXPECT_EQ(columns("tf32"), "| no | yes | yes |");
}

// The parity check itself, per variant, on the CPU: K steps of baseline + variant against the
// baseline, judged by the variant's class. Small model, but the real GPT-2 vocabulary so that
// vocab padding means 50257 -> 50304.
TEST(Variants, ParityOnTheCpu) {
  ModelOptions m = test::tiny_model();
  m.vocab_size = 50257;
  m.context = 32;
  StepSpec base = baseline_spec(m, 2, cpu());
  base.settings.max_batch = 4;
  const auto tokens = to_token_tensor(synthetic_corpus(m.vocab_size, 20000, 2));
  const Trajectory reference = loss_trajectory(base, cpu(), tokens, 1, 4);
  for (const auto& v : registry()) {
    if (!v->supports(cpu()).ok) continue;
    StepSpec s = base;
    v->apply(s);
    if (s.search_batch) s.batch = 4, s.search_batch = false;  // what the search finds is another test's
    const Trajectory tr = loss_trajectory(s, cpu(), tokens, 1, 4);
    const ParityResult r = judge_parity(v->parity, tr, reference);
    EXPECT_EQ(r.verdict, "pass") << v->name << ": " << r.rule << ", max dev " << r.max_abs_dev << ", losses "
                                 << at::tensor(tr.losses) << " baseline " << at::tensor(reference.losses);
    if (v->parity == ParityClass::kExact) {
      EXPECT_LT(r.max_abs_dev, 1e-4) << v->name;
      EXPECT_NEAR(r.grad_norm_ratio, 1.0, 1e-4) << v->name;
      // parameter by parameter too, q, k and v apart however stored (fuse_qkv), the padded rows left out (within
      // the exact class's 0.1%: fuse_bias_gelu's fc2 gradient, from a pre-activation its backward makes again by
      // another GEMM, moved 1.1e-4 here)
      EXPECT_EQ(r.params_compared, static_cast<int64_t>(reference.first_grad_norms.size())) << v->name;
      EXPECT_LE(r.worst_param_dev, kExactGradTol) << v->name << ": " << r.worst_param;
    }
  }
}

// fp8_linears runs on sm89+ GPUs alone, but at::_scaled_mm runs on the CPU too: the same step here, judged by its
// own class, passes, and lies further from the baseline than bf16's rung.
TEST(Variants, Fp8LinearsPassTheirOwnParityOnTheCpu) {
  ModelOptions m = test::tiny_model();
  m.vocab_size = 50257;
  m.context = 32;
  const StepSpec base = baseline_spec(m, 2, cpu());
  const auto tokens = to_token_tensor(synthetic_corpus(m.vocab_size, 20000, 2));
  const Trajectory reference = loss_trajectory(base, cpu(), tokens, 1, 4);
  StepSpec bf16 = base, fp8 = base;
  find_variant("bf16_cast")->apply(bf16);
  find_variant("bf16_cast")->apply(fp8);
  find_variant("fp8_linears")->apply(fp8);
  const ParityResult r8 = judge_parity(ParityClass::kFp8, loss_trajectory(fp8, cpu(), tokens, 1, 4), reference);
  const ParityResult r16 = judge_parity(ParityClass::kPrecision, loss_trajectory(bf16, cpu(), tokens, 1, 4), reference);
  EXPECT_EQ(r8.verdict, "pass") << r8.rule;
  EXPECT_NE(r8.rule.find("FP8 matmuls"), std::string::npos) << r8.rule;
  EXPECT_NE(r8.losses, r16.losses);  // the FP8 layers ran
}

// A kernel that writes one small parameter's gradient wrong (a LayerNorm's shift doubled, or never written)
// moves the whole norm by a hair, which the large matrices fill: the per-parameter comparison sees it in every
// class that compares gradients. Names on one side only are not compared; the result keeps the rung's own norms
// and what it was judged against, through its JSON (a later rung is judged against it, across --resume too).
TEST(Parity, OneParametersGradientWrongFailsWhereTheWholeNormPasses) {
  const std::vector<std::pair<std::string, double>> base_norms = {{"head_weight", 100.0}, {"ln.shift", 0.1}};
  const Trajectory base{{5.0, 4.0}, 3.0, std::hypot(100.0, 0.1), base_norms};
  auto judge = [&](ParityClass c, double shift, const std::string& against = "") {
    std::vector<std::pair<std::string, double>> norms = {{"head_weight", 100.0}, {"ln.shift", shift}, {"only_here", 7.0}};
    return judge_parity(c, Trajectory{{5.0, 4.0}, 3.0, std::hypot(100.0, shift), norms}, base, against);
  };
  for (ParityClass c : {ParityClass::kExact, ParityClass::kPrecision}) {
    EXPECT_EQ(judge(c, 0.1).verdict, "pass") << to_string(c);
    for (double wrong : {0.2, 0.05, 0.0}) {
      const ParityResult r = judge(c, wrong);
      EXPECT_NEAR(r.grad_norm_ratio, 1.0, 1e-5) << wrong;  // the whole norm cannot tell
      EXPECT_EQ(r.verdict, "fail") << to_string(c) << " " << wrong << ": " << r.rule;
      EXPECT_EQ(r.worst_param, "ln.shift");
      EXPECT_NE(r.rule.find("(furthest: ln.shift, "), std::string::npos) << r.rule;
      EXPECT_NE(r.rule.find("OUTSIDE"), std::string::npos) << r.rule;
    }
    EXPECT_EQ(judge(c, 0.1).params_compared, 2);  // only_here has nothing to be compared with
  }
  EXPECT_DOUBLE_EQ(judge(ParityClass::kPrecision, 0.2).worst_param_ratio, 2.0);
  EXPECT_EQ(judge(ParityClass::kPrecision, 0.12).verdict, "pass");  // 20%: bf16's small parameters move
  EXPECT_EQ(judge(ParityClass::kExact, 0.1002).verdict, "fail");     // fp32's do not
  EXPECT_EQ(judge(ParityClass::kProblem, 0.0).verdict, "pass");      // another problem: another gradient
  // zero on both sides is the same gradient; a gradient zero in exact arithmetic (a key bias's) is rounding noise
  // on both sides, held to a share of the whole norm, not to its own: fp32's noise within 1e-6 of the whole
  const Trajectory zero_base{{5.0, 4.0}, 3.0, 100.0, {{"head_weight", 100.0}, {"ln.shift", 0.0}}};
  EXPECT_EQ(judge_parity(ParityClass::kExact, zero_base, zero_base).verdict, "pass");
  const Trajectory noise{{5.0, 4.0}, 3.0, 100.0, {{"head_weight", 100.0}, {"key.bias", 3.7e-8}}};
  const Trajectory other_noise{{5.0, 4.0}, 3.0, 100.0, {{"head_weight", 100.0}, {"key.bias", 3.4e-8}}};
  EXPECT_EQ(judge_parity(ParityClass::kExact, other_noise, noise).verdict, "pass");
  const Trajectory bf16_noise{{5.0, 4.0}, 3.0, 100.0, {{"head_weight", 100.0}, {"key.bias", 0.008}}};
  EXPECT_EQ(judge_parity(ParityClass::kPrecision, bf16_noise, noise).verdict, "pass");  // within 0.25 of 0.1% of 100
  EXPECT_EQ(judge_parity(ParityClass::kExact, bf16_noise, noise).verdict, "fail");
  EXPECT_EQ(judge_parity(ParityClass::kPrecision, bf16_noise, noise).worst_param, "key.bias");
  // judged against another rung: said, and kept through the JSON with the rung's own norms
  const ParityResult r = judge(ParityClass::kPrecision, 0.1, "12_batch_scaling");
  EXPECT_NE(r.rule.find("|loss - 12_batch_scaling's|"), std::string::npos) << r.rule;
  EXPECT_NE(r.rule.find("of 12_batch_scaling's ("), std::string::npos) << r.rule;
  const ParityResult back = parity_result_from(to_json(r, ParityClass::kProblem));
  EXPECT_EQ(back.against, "12_batch_scaling");
  EXPECT_EQ(back.grad_norms.size(), 3u);
  EXPECT_EQ(trajectory_of(back).first_grad_norms.size(), 3u);
  EXPECT_EQ(back.worst_param, r.worst_param);
  EXPECT_EQ(to_json(judge(ParityClass::kPrecision, 0.1), ParityClass::kPrecision)["against"], "baseline");
  EXPECT_EQ(parity_result_from(to_json(judge(ParityClass::kPrecision, 0.1), ParityClass::kPrecision)).against, "");
}

// An extra on batch_scaling's top is judged by what its own variants change at that batch.
TEST(Parity, TheClassAtAnEqualBatchLeavesBatchScalingOut) {
  EXPECT_EQ(class_at_equal_batch({"fused_adamw", "batch_scaling", "fused_classifier"}), ParityClass::kExact);
  EXPECT_EQ(class_at_equal_batch({"bf16_cast", "batch_scaling", "fused_residual_norm"}), ParityClass::kPrecision);
  EXPECT_EQ(class_at_equal_batch({"bf16_cast", "batch_scaling", "weight_tying"}), ParityClass::kProblem);
  EXPECT_EQ(class_at_equal_batch({}), ParityClass::kExact);
  // judged against the top wherever what separates them changes no problem, by that loosest class
  const std::vector<std::string> top = {"bf16_cast", "fuse_bias_gelu", "batch_scaling"};
  EXPECT_EQ(class_between(top, top), ParityClass::kExact);                                              // top_again
  EXPECT_EQ(class_between({"bf16_cast", "fuse_bias_gelu", "batch_scaling", "fused_classifier"}, top), ParityClass::kExact);
  EXPECT_EQ(class_between({"bf16_cast", "batch_scaling", "gelu_epilogues"}, top), ParityClass::kExact);  // in another's place
  EXPECT_EQ(class_between({"fuse_bias_gelu", "batch_scaling", "bf16_autocast"}, top), ParityClass::kPrecision);
  EXPECT_EQ(class_between({"bf16_cast", "batch_scaling", "fp8_linears"}, top), ParityClass::kFp8);  // FP8 on the top
  EXPECT_EQ(class_between(top, {"bf16_cast", "batch_scaling", "fp8_linears"}), ParityClass::kFp8);  // either way round
  EXPECT_EQ(class_between({"bf16_cast", "fuse_bias_gelu", "batch_scaling", "weight_tying"}, top), ParityClass::kProblem);
  EXPECT_EQ(class_between({"bf16_cast", "fuse_bias_gelu", "batch_scaling", "no_such_variant"}, top), ParityClass::kProblem);
  // and by the class of all it applies at that batch: FP8's own band, not the bf16 one
  EXPECT_EQ(class_at_equal_batch({"tf32", "bf16_cast", "batch_scaling", "fp8_linears"}), ParityClass::kFp8);
}

// What the H200 recorded (reports/reference/gpu-nvidia-h200/20261204-174111-gpu-124m: two parity steps at B=128,
// judged then as another problem): FP8 beside the bf16 top is within the fp8 band with room (the gradient 0.28%,
// the furthest parameter 1.2% off); a gradient doubled is not. (The ladder now judges it against fp32 at B.)
TEST(Parity, TheFpEightBandHoldsWhatTheH200RecordedBesideTheTop) {
  const nlohmann::json run = test::read_json(GPT2BENCH_SOURCE_DIR "/reports/reference/gpu-nvidia-h200/"
                                                                   "20261204-174111-gpu-124m/rungs.json");
  std::map<std::string, nlohmann::json> rungs;
  for (const auto& r : run["rungs"]) rungs[r["name"].get<std::string>()] = r;
  const nlohmann::json &top = rungs.at("12_batch_scaling"), &fp8 = rungs.at("22_top+fp8_linears");
  const auto applied = [](const nlohmann::json& r) { return r["applied"].get<std::vector<std::string>>(); };
  const ParityClass cls = class_between(applied(fp8), applied(top));
  ASSERT_EQ(cls, ParityClass::kFp8);
  ASSERT_EQ(class_at_equal_batch(applied(fp8)), ParityClass::kFp8);
  const Trajectory on = trajectory_of(parity_result_from(top["parity"]));
  Trajectory mine = trajectory_of(parity_result_from(fp8["parity"]));
  const ParityResult r = judge_parity(cls, mine, on, "12_batch_scaling");
  EXPECT_EQ(r.verdict, "pass") << r.rule;
  EXPECT_EQ(r.max_abs_dev, 0.0);  // equal losses in bf16
  EXPECT_NEAR(r.grad_norm_ratio, 0.9972, 1e-4);
  EXPECT_EQ(r.params_compared, 161);  // every parameter tensor of the untied model
  EXPECT_NEAR(r.worst_param_dev, 0.0116, 1e-4);
  mine.first_grad_norm *= 2;  // a gradient scaled as a whole
  EXPECT_EQ(judge_parity(cls, mine, on, "12_batch_scaling").verdict, "fail");
}

// Why a CPU's bf16 native-layers rungs fail parity at B=16 (docs/measurement.md: Parity; the Zen 4 run of
// 2026-12-06, 12_batch_scaling's ln1.shift 0.71x): ATen's CPU LayerNorm backward sums the shift's gradient in
// bf16, stalling as the sum grows. When a libtorch sums it in fp32 this fails: drop that caveat from the docs.
TEST(Parity, AtensCpuBf16LayerNormSumsTheShiftsGradientInBf16) {
  auto shift_grad_error = [](int64_t rows) {
    at::manual_seed(0);
    const at::Tensor x = at::randn({rows, 192}).to(at::kBFloat16);
    const at::Tensor dy = (at::randn({rows, 192}) * 1e-3 + 1e-3).to(at::kBFloat16);  // a sum that grows
    const at::Tensor w = at::ones({192}, at::kBFloat16), b = at::zeros({192}, at::kBFloat16);
    const auto [y, mean, rstd] = at::native_layer_norm(x, {192}, w, b, 1e-5);
    const at::Tensor shift = std::get<2>(at::native_layer_norm_backward(dy, x, {192}, mean, rstd, w, b, {false, false, true}));
    const at::Tensor exact = dy.to(at::kFloat).sum(0);  // the same bf16 terms summed in fp32
    return ((shift.to(at::kFloat) - exact).norm() / exact.norm()).item<double>();
  };
  EXPECT_LT(shift_grad_error(256), 0.02);    // a short sum: bf16's rounding
  EXPECT_GT(shift_grad_error(16384), 0.3);   // B=16, T=256's rows, as 12_batch_scaling runs on a CPU: 0.87 in 2.13
}

// mask_on_the_fly: the T×T mask buffers (one per layer) are gone from the model's memory.
TEST(Variants, MaskOnTheFlyDropsTheMaskBuffers) {
  StepSpec s = base_124m();
  auto buffer_bytes = [](const StepSpec& spec) {
    GPT2 m(spec.model);
    int64_t b = 0;
    for (const auto& t : m->buffers()) b += t.nbytes();
    return b;
  };
  EXPECT_EQ(buffer_bytes(s), 12 * 1024 * 1024 * 4);  // L × T × T fp32
  find_variant("mask_on_the_fly")->apply(s);
  EXPECT_EQ(buffer_bytes(s), 0);
}

TEST(Parity, Verdicts) {
  auto judge = [](ParityClass c, std::vector<double> l, double after = 1.0) {
    return judge_parity(c, Trajectory{std::move(l), after}, Trajectory{{5.0, 4.0}});
  };
  EXPECT_EQ(judge(ParityClass::kExact, {5.0, 4.0005}).verdict, "pass");
  EXPECT_EQ(judge(ParityClass::kExact, {5.0, 4.1}).verdict, "fail");
  EXPECT_EQ(judge(ParityClass::kPrecision, {5.0, 4.1}).verdict, "pass");
  EXPECT_EQ(judge(ParityClass::kPrecision, {5.0, 4.5}).verdict, "fail");
  EXPECT_EQ(judge(ParityClass::kProblem, {5.0, 6.5}, 4.9).verdict, "pass");  // the first batch's loss fell
  EXPECT_EQ(judge(ParityClass::kProblem, {5.0, 4.5}, 5.1).verdict, "fail");
  EXPECT_EQ(judge(ParityClass::kProblem, {5.9, 5.0}, 4.9).verdict, "pass");  // another batch, the same weights
  const ParityResult far = judge(ParityClass::kProblem, {130.5, 40.0}, 12.25);  // a model drawn wrong
  EXPECT_EQ(far.verdict, "fail");
  EXPECT_NE(far.rule.find("step 1's loss within 1 of the baseline's (5.000000): OUTSIDE"), std::string::npos) << far.rule;
  EXPECT_EQ(judge(ParityClass::kPrecision, {5.0, NAN}).verdict, "fail");
  EXPECT_EQ(judge(ParityClass::kProblem, {5.0, 4.0}, NAN).verdict, "fail");
  EXPECT_EQ(judge_parity(ParityClass::kExact, Trajectory{}, {}).verdict, "n/a");
  EXPECT_NEAR(judge(ParityClass::kExact, {5.0, 4.1}).max_abs_dev, 0.1, 1e-12);
}

// AdamW takes the same step from a gradient scaled as a whole (a gradient summed over ranks instead of
// averaged, a loss scale never undone): the losses cannot tell, the first step's gradient norm can.
TEST(Parity, AWholeGradientScaledFailsWhereTheLossesPass) {
  const Trajectory base{{5.0, 4.0}, 3.0, 2.0};
  auto judge = [&](ParityClass c, double grad_norm) {
    return judge_parity(c, Trajectory{{5.0, 4.0}, 3.0, grad_norm}, base);
  };
  for (ParityClass c : {ParityClass::kExact, ParityClass::kPrecision}) {
    EXPECT_EQ(judge(c, 4.0).verdict, "fail") << to_string(c);  // x2, as 2 ranks summed
    EXPECT_EQ(judge(c, 1.0).verdict, "fail") << to_string(c);
    EXPECT_EQ(judge(c, 2.0).verdict, "pass") << to_string(c);
    EXPECT_DOUBLE_EQ(judge(c, 4.0).grad_norm_ratio, 2.0);
    EXPECT_NE(judge(c, 4.0).rule.find("gradient norm within"), std::string::npos) << judge(c, 4.0).rule;
    EXPECT_EQ(judge(c, 0.0).verdict, "pass");  // not known (a step the fp16 scaler skipped): not compared
    EXPECT_EQ(judge(c, 0.0).grad_norm_ratio, 0.0);
    EXPECT_NE(judge(c, 0.0).rule.find("not compared"), std::string::npos);
    EXPECT_EQ(judge(c, NAN).verdict, "fail");
  }
  EXPECT_EQ(judge(ParityClass::kExact, 2.0 * (1 + 5e-4)).verdict, "pass");
  EXPECT_EQ(judge(ParityClass::kExact, 2.0 * 1.01).verdict, "fail");
  EXPECT_EQ(judge(ParityClass::kPrecision, 2.0 * 1.05).verdict, "pass");  // bf16's gradient
  EXPECT_EQ(judge(ParityClass::kProblem, 4.0).verdict, "pass");  // another batch: another gradient
  EXPECT_EQ(judge_parity(ParityClass::kExact, Trajectory{{5.0, 4.1}, 3.0, 2.0}, base).verdict, "fail");
}

std::string resolve_error(const std::vector<std::string>& names) {
  try {
    resolve("r", names, base_124m(), cpu());
  } catch (const RecipeError& e) {
    return e.what();
  }
  return "";
}

TEST(Resolve, ConflictsRequirementsUnknownsDuplicates) {
  EXPECT_NE(resolve_error({"bf16_cast", "fp16_autocast"}).find("'bf16_cast' conflicts with 'fp16_autocast'"),
            std::string::npos);
  EXPECT_NE(resolve_error({"cuda_graph"}).find("'cuda_graph' requires 'fused_adamw'"), std::string::npos);
  EXPECT_NE(resolve_error({"warp"}).find("unknown variant 'warp'"), std::string::npos);
  EXPECT_NE(resolve_error({"sdpa", "sdpa"}).find("'sdpa' named twice"), std::string::npos);
}

TEST(Resolve, UnsupportedVariantsAreSkippedWithTheReasonAndTheRestApplied) {
  const ResolvedRung r = resolve("r", {"tf32", "native_layers"}, base_124m(), cpu());
  ASSERT_EQ(r.skipped.size(), 1u);
  EXPECT_EQ(r.skipped[0].variant, "tf32");
  EXPECT_NE(r.skipped[0].reason.find("CUDA"), std::string::npos);
  EXPECT_EQ(r.applied, (std::vector<std::string>{"native_layers"}));
  EXPECT_FALSE(r.spec.tf32);
  EXPECT_EQ(r.spec.model.layers, LayerImpl::kNative);
  EXPECT_EQ(r.parity, ParityClass::kExact);
}

TEST(Resolve, OrderIndependentAndLoosestParity) {
  const auto a = resolve("a", {"sdpa", "mask_on_the_fly", "vocab_padding"}, base_124m(), cpu());
  const auto b = resolve("b", {"vocab_padding", "sdpa", "mask_on_the_fly"}, base_124m(), cpu());
  EXPECT_TRUE(a.spec == b.spec);
  EXPECT_EQ(a.spec.model.attention, AttentionImpl::kSdpa);  // registry order: sdpa after mask_on_the_fly
  EXPECT_EQ(a.parity, ParityClass::kPrecision);
  EXPECT_EQ(resolve("c", {"batch_scaling", "bf16_cast"}, base_124m(), cpu()).parity, ParityClass::kProblem);
}

// A rung with an anti-variant applied is marked so: it is never taken for a run's fastest.
TEST(Resolve, AnAntiVariantMarksItsRung) {
  EXPECT_TRUE(resolve("a", {"fused_adamw", "sync_every_step"}, base_124m(), cpu()).anti);
  EXPECT_FALSE(resolve("b", {"fused_adamw", "weight_tying"}, base_124m(), cpu()).anti);
  size_t anti = 0;
  for (const auto& v : registry()) anti += v->anti;
  EXPECT_EQ(anti, 1u);  // sync_every_step
}

TEST(Plan, TheDefaultLadderIsEveryRungThenTheExtrasOnTop) {
  Profile p;  // variants absent: the registry
  const auto rungs = expand_plan(p);
  size_t ladder = 0, extras = 0;
  for (const auto& v : registry()) (v->extra() ? extras : ladder)++;
  ASSERT_EQ(rungs.size(), 1 + ladder + extras + 4);  // and the top again, and the three kept rungs
  EXPECT_EQ(rungs[1].name, "01_mask_on_the_fly");
  EXPECT_EQ(rungs[ladder].variants.size(), ladder);  // the top rung has them all
  // Every rung of the default ladder resolves (no conflicts, requirements met) on any device.
  for (const auto& r : rungs)
    for (const DeviceInfo& d : {cpu(), fake_gpu(8)}) EXPECT_NO_THROW(resolve(r.name, r.variants, base_124m(), d)) << r.name;
  // bf16_autocast on top replaces bf16_cast, which it conflicts with.
  const auto& top_autocast = rungs[ladder + 1];
  EXPECT_EQ(top_autocast.name, std::to_string(ladder + 1) + "_top+bf16_autocast");
  EXPECT_EQ(std::count(top_autocast.variants.begin(), top_autocast.variants.end(), "bf16_cast"), 0);
  EXPECT_EQ(top_autocast.variants.back(), "bf16_autocast");
  // What each rung is and what it is measured against, from the plan (no name parsing anywhere).
  EXPECT_EQ(rungs[0].kind, RungKind::kBaseline);
  EXPECT_EQ(rungs[0].compare_to, "");
  EXPECT_EQ(rungs[2].kind, RungKind::kLadder);
  EXPECT_EQ(rungs[2].compare_to, rungs[1].name);
  EXPECT_EQ(rungs[2].variant, "tf32");
  for (size_t i = ladder + 1; i < ladder + 1 + extras; ++i) {
    EXPECT_EQ(rungs[i].kind, RungKind::kExtra) << rungs[i].name;
    EXPECT_EQ(rungs[i].compare_to, rungs[ladder].name) << rungs[i].name;  // the full ladder, not the extra before
  }
  // Then the top again, after the extras: the same recipe, compared with the top, the kept rule's second timing.
  const auto& again = rungs[ladder + extras + 1];
  EXPECT_EQ(again.name, std::to_string(ladder + extras + 1) + "_top_again");
  EXPECT_EQ(again.kind, RungKind::kControl);
  EXPECT_EQ(again.variants, rungs[ladder].variants);
  EXPECT_EQ(again.compare_to, rungs[ladder].name);
  // Last, the kept rungs, planned as what they add to (the extras that beat the top join when they start), in
  // one process: the top at its batch (batch_scaling's), and the rung before batch_scaling at the profile's, then
  // that with the extras that tied the top too, compared with it.
  const auto& kept_top = rungs[rungs.size() - 3];
  const auto& kept_planned = rungs[rungs.size() - 2];
  const auto& kept_ties = rungs.back();
  EXPECT_EQ(kept_top.name, std::to_string(ladder + extras + 2) + "_top+kept");
  EXPECT_EQ(kept_top.kind, RungKind::kKept);
  EXPECT_EQ(kept_top.compare_to, rungs[ladder - 1].name);  // the top in one process: the rung before ddp
  EXPECT_EQ(rungs[ladder].variant, "ddp");
  std::vector<std::string> top_one_process = rungs[ladder].variants;
  std::erase(top_one_process, "ddp");
  EXPECT_EQ(kept_top.variants, top_one_process);
  EXPECT_EQ(kept_planned.name, std::to_string(ladder + extras + 3) + "_planned_batch+kept");
  EXPECT_EQ(kept_planned.kind, RungKind::kKept);
  const auto before_batch = std::find_if(rungs.begin(), rungs.end(), [](const RungPlan& r) { return r.variant == "batch_scaling"; });
  ASSERT_NE(before_batch, rungs.end());
  EXPECT_EQ(kept_planned.compare_to, before_batch->compare_to);  // 11_vocab_padding: the profile's batch
  EXPECT_EQ(std::count(kept_planned.variants.begin(), kept_planned.variants.end(), "batch_scaling"), 0);
  EXPECT_FALSE(kept_top.ties || kept_planned.ties);
  EXPECT_EQ(kept_ties.name, std::to_string(ladder + extras + 4) + "_planned_batch+kept+ties");
  EXPECT_EQ(kept_ties.kind, RungKind::kKept);
  EXPECT_TRUE(kept_ties.ties);
  EXPECT_EQ(kept_ties.compare_to, kept_planned.name);
  EXPECT_EQ(kept_ties.variants, kept_planned.variants);
  // Without an exact extra to keep (variants listed, none of them extras), no kept rung.
  Profile listed;
  listed.variants = std::vector<std::string>{"fused_adamw", "batch_scaling"};
  const auto plain = expand_plan(listed);
  EXPECT_EQ(plain.back().kind, RungKind::kLadder);
}

// gpu-124m on an H100 (sm90): the FP8 rung is an extra on the top, FP8 applied and nothing else skipped, so that it
// runs at the batch the top's search chose and is judged against it; on an A100 (sm80) it is skipped, saying why.
TEST(Plan, TheFp8RungIsAnExtraOnTheTopWhereTheGpuHasFp8) {
  const Profile prof = load_profile(std::string(GPT2BENCH_SOURCE_DIR) + "/profiles/gpu-124m.yaml");
  DeviceInfo h100 = fake_gpu(9);
  h100.world_size = 2;  // so that the top keeps ddp, as a run on several GPUs does
  const auto records = plan_rungs(prof, h100);
  const auto fp8 = std::find_if(records.begin(), records.end(), [](const RungRecord& r) { return r.plan.variant == "fp8_linears"; });
  ASSERT_NE(fp8, records.end());
  EXPECT_EQ(fp8->plan.kind, RungKind::kExtra);
  EXPECT_TRUE(on_the_top(fp8->plan.kind));  // RungRunner::take_top_batch: the top's searched batch
  EXPECT_TRUE(fp8->plan.rung.spec.model.fp8_linears);
  EXPECT_TRUE(fp8->plan.rung.skipped.empty()) << fp8->plan.rung.skipped[0].variant;
  EXPECT_EQ(fp8->out.status, RungStatus::kPending);
  EXPECT_EQ(fp8->plan.rung.parity, ParityClass::kProblem);  // batch_scaling's batch: another problem than B=8's
  const auto on = std::find_if(records.begin(), records.end(), [&](const RungRecord& r) { return r.name() == fp8->plan.compare_to; });
  ASSERT_NE(on, records.end());
  std::vector<std::string> added = fp8->plan.rung.applied, top = on->plan.rung.applied;
  std::erase(added, "fp8_linears");
  std::erase(top, "gelu_epilogues"), std::erase(top, "fuse_bias_gelu");  // what FP8 conflicts with
  std::erase(added, "gelu_epilogues"), std::erase(added, "fuse_bias_gelu");
  EXPECT_EQ(added, top);
  const auto a100 = plan_rungs(prof, fake_gpu(8));
  const auto skipped = std::find_if(a100.begin(), a100.end(), [](const RungRecord& r) { return r.plan.variant == "fp8_linears"; });
  ASSERT_NE(skipped, a100.end());
  EXPECT_EQ(skipped->out.status, RungStatus::kSkipped);
  EXPECT_NE(skipped->out.error.find("FP8 tensor cores need sm89+"), std::string::npos) << skipped->out.error;
}

TEST(Plan, AddOneAndLeaveOneOutCoverEveryVariant) {
  Profile p;
  p.plan = "add_one";
  const auto added = expand_plan(p);
  EXPECT_EQ(added.size(), 1 + registry().size());
  for (const auto& r : added) EXPECT_NO_THROW(resolve(r.name, r.variants, base_124m(), cpu())) << r.name;
  const auto graph = std::find_if(added.begin(), added.end(), [](const RungPlan& r) { return r.name.ends_with("add_cuda_graph"); });
  ASSERT_NE(graph, added.end());
  EXPECT_EQ(graph->variants, (std::vector<std::string>{"fused_adamw", "cuda_graph"}));  // with what it requires
  EXPECT_EQ(graph->kind, RungKind::kAddOne);
  EXPECT_EQ(graph->variant, "cuda_graph");
  EXPECT_EQ(graph->compare_to, added[0].name);
  p.plan = "leave_one_out";
  size_t ladder = 0;
  for (const auto& v : registry()) ladder += !v->extra();
  const auto all = expand_plan(p);
  EXPECT_EQ(all.size(), 2 + ladder);  // baseline, all, then all but each
  for (const auto& r : all) EXPECT_NO_THROW(resolve(r.name, r.variants, base_124m(), cpu())) << r.name;
  const auto no_fused = std::find_if(all.begin(), all.end(), [](const RungPlan& r) { return r.name.ends_with("drop_fused_adamw"); });
  ASSERT_NE(no_fused, all.end());
  EXPECT_EQ(std::count(no_fused->variants.begin(), no_fused->variants.end(), "cuda_graph"), 0);  // it needs fused_adamw
  EXPECT_EQ(all[1].kind, RungKind::kAll);
  EXPECT_EQ(no_fused->kind, RungKind::kDropOne);
  EXPECT_EQ(no_fused->variant, "fused_adamw");
  EXPECT_EQ(no_fused->compare_to, all[1].name);
  p.variants = std::vector<std::string>{"mask_on_the_fly", "fused_adamw", "sdpa"};
  const auto rungs = expand_plan(p);
  ASSERT_EQ(rungs.size(), 5u);
  EXPECT_EQ(rungs[3].variants, (std::vector<std::string>{"mask_on_the_fly", "sdpa"}));
}

}  // namespace
}  // namespace gpt2
