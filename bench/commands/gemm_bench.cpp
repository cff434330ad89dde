#include "bench/commands/gemm_bench.h"

#include <ATen/ATen.h>

#include <cstdio>
#include <nlohmann/json.hpp>
#include <sstream>

#include "bench/commands/kernel_bench.h"
#include "bench/runtime/device.h"
#include "bench/step/step_spec.h"
#include "common/errors.h"
#include "kernels/fp8_linear.h"
#include "kernels/gemm_survey.h"
#include "variants/registry.h"

namespace gpt2 {
namespace {

// Each side's median and TFLOP/s; after the first (ATen's), its speed over ATen's and its output's difference.
void print_gemm(const KernelCase& c, const nlohmann::json& j) {
  std::printf("%s  (%s; %s)\n", c.variant.c_str(), c.shape.c_str(),
              c.sides[0].timed == "graph" ? "as CUDA graph replays" : "launched eagerly");
  for (size_t i = 0; i < c.sides.size(); ++i) {
    std::printf("  %-80s %9.4f ms %6.0f TFLOP/s", c.sides[i].name.c_str(), c.sides[i].median_ms,
                j["tflops"][i].get<double>());
    if (i > 0)
      std::printf("   %.2fx ATen's speed, differs %.1e", 1 / c.ratio(i), j["max_rel_diff"][i - 1].get<double>());
    std::printf("\n");
  }
  for (const auto& f : j["failed"]) std::printf("  %s\n", f.get<std::string>().c_str());
}

std::string shape_of(const kernels::StepGemm& g, at::ScalarType dtype) {
  std::ostringstream shape;
  shape << "M=" << g.M << " N=" << g.N << " K=" << g.K << " " << c10::toString(dtype) << ", " << g.calls << " a step";
  return shape.str();
}

// The case's JSON: its sides, each side's TFLOP/s, and the differences (the largest over the first side's largest
// element) and failures of the others.
nlohmann::json gemm_json(const KernelCase& c, const kernels::StepGemm& g, const nlohmann::json& diffs,
                         const nlohmann::json& failed) {
  nlohmann::json tflops = nlohmann::json::array();
  for (const auto& side : c.sides) tflops.push_back(g.flops() / (side.median_ms * 1e9));
  nlohmann::json j = case_json(c);
  j.erase("variant");
  j.update({{"name", g.name}, {"M", g.M}, {"N", g.N}, {"K", g.K}, {"calls", g.calls}, {"flops", g.flops()},
            {"tflops", tflops}, {"max_rel_diff", diffs}, {"failed", failed}});
  return j;
}

// The step's operands of g in its layout (random), and the product ATen's at::mm makes of them.
struct Operands {
  at::Tensor a_op, b_op, want;
  double scale;  // want's largest element
};
Operands operands(const kernels::StepGemm& g, const at::TensorOptions& opts) {
  const at::Tensor a = g.a_transposed ? at::randn({g.K, g.M}, opts) : at::randn({g.M, g.K}, opts);
  const at::Tensor b = g.b_transposed ? at::randn({g.N, g.K}, opts) : at::randn({g.K, g.N}, opts);
  Operands o{g.a_transposed ? a.t() : a, g.b_transposed ? b.t() : b, {}, 0};
  o.want = at::mm(o.a_op, o.b_op);
  o.scale = o.want.abs().max().item<double>();
  return o;
}

// One of the step's matmuls: ATen's at::mm against each algorithm of cuBLASLt's heuristic list that runs, in
// turns. An algorithm whose call fails is listed in `failed` with why, and not timed.
nlohmann::json gemm_case(const kernels::StepGemm& g, const DeviceInfo& dev, at::ScalarType dtype, int rounds,
                         const Timing& timing) {
  const auto opts = at::device(torch_device(dev)).dtype(dtype);
  Operands o = operands(g, opts);
  const at::Tensor a = g.a_transposed ? o.a_op.t() : o.a_op, b = g.b_transposed ? o.b_op.t() : o.b_op;
  const at::Tensor out = at::empty({g.M, g.N}, opts);
  std::vector<Pass> sides = {{"ATen: at::mm", [&] { at::mm_out(o.want, o.a_op, o.b_op); }}};
  nlohmann::json diffs = nlohmann::json::array(), failed = nlohmann::json::array();
  const std::vector<kernels::LtAlgo> algos = kernels::heuristic_algos(g, a, b, out, 8);
  for (size_t i = 0; i < algos.size(); ++i) {
    const std::string name = "cuBLASLt #" + std::to_string(i) + ": " + algos[i].config;
    try {
      algos[i].call();
      diffs.push_back((out.to(at::kFloat) - o.want.to(at::kFloat)).abs().max().item<double>() / o.scale);
      sides.emplace_back(name, algos[i].call);
    } catch (const std::exception& e) {
      failed.push_back(name + " failed: " + first_line(error_text(e)));
    }
  }
  const KernelCase c = time_in_turns("matmul " + g.name, shape_of(g, dtype), sides, rounds, 5.0, timing);
  nlohmann::json j = gemm_json(c, g, diffs, failed);
  print_gemm(c, j);
  return j;
}

// One of the blocks' matmuls in FP8 as fp8_linear runs it (kernels/fp8_linear.h: its product's formats and
// accumulation), then with the other accumulation, against ATen's at::mm in the step's dtype. The operands are
// quantized before the timing: their scaling is the fp8_linears quantization case's. "as_run": that side's index.
nlohmann::json fp8_gemm_case(const kernels::StepGemm& g, const DeviceInfo& dev, at::ScalarType dtype, int rounds,
                             const Timing& timing) {
  using kernels::Fp8Product;
  const Fp8Product p = g.product == kernels::StepGemm::kForward     ? kernels::kFp8Forward
                       : g.product == kernels::StepGemm::kInputGrad ? kernels::kFp8InputGrad
                                                                    : kernels::kFp8WeightGrad;
  Operands o = operands(g, at::device(torch_device(dev)).dtype(dtype));
  const kernels::Fp8Operands q = kernels::quantize_fp8_operands(o.a_op, o.b_op, p);
  auto fp8 = [=](bool fast) { return [=] { (void)kernels::fp8_product(q, dtype, fast); }; };
  auto name = [&](bool fast) {
    return std::string("FP8 _scaled_mm ") + c10::toString(p.a) + " x " + c10::toString(p.b) +
           (fast ? ", fast accumulation" : ", exact accumulation") + (fast == p.fast_accum ? " (as fp8_linear)" : "");
  };
  std::vector<Pass> sides = {{"ATen: at::mm", [&] { at::mm_out(o.want, o.a_op, o.b_op); }},
                             {name(p.fast_accum), fp8(p.fast_accum)},
                             {name(!p.fast_accum), fp8(!p.fast_accum)}};
  nlohmann::json diffs = nlohmann::json::array();
  for (bool fast : {p.fast_accum, !p.fast_accum}) {
    const at::Tensor got = kernels::fp8_product(q, dtype, fast);
    diffs.push_back((got.to(at::kFloat) - o.want.to(at::kFloat)).abs().max().item<double>() / o.scale);
  }
  const KernelCase c = time_in_turns("fp8 matmul " + g.name, shape_of(g, dtype), sides, rounds, 5.0, timing);
  nlohmann::json j = gemm_json(c, g, diffs, nlohmann::json::array());
  j["as_run"] = 1;
  print_gemm(c, j);
  return j;
}

using GemmCase = nlohmann::json (*)(const kernels::StepGemm&, const DeviceInfo&, at::ScalarType, int, const Timing&);

// `make` for each of the step's matmuls that `take` says, each failure counted and the survey going on.
template <class Take>
nlohmann::json survey(const StepSpec& s, const DeviceInfo& dev, int rounds, const Timing& timing, int& failed,
                      const OnEachGemm& on_each, GemmCase make, Take take) {
  const auto& m = s.model;
  nlohmann::json out = nlohmann::json::array();
  for (const auto& g : kernels::step_gemms(s.batch * m.context, m.n_embd, m.padded_vocab(), m.n_layer, m.classifier_chunk)) {
    if (!take(g)) continue;
    try {
      out.push_back(make(g, dev, compute_dtype(math_mode(s)), rounds, timing));
    } catch (const std::exception& e) {
      const std::string what = first_line(error_text(e));
      std::printf("matmul %s  error: %s\n", g.name.c_str(), what.c_str());
      out.push_back({{"name", g.name}, {"error", what}});
      ++failed;
    }
    std::fflush(stdout);
    on_each(out);
    empty_cache(dev);
  }
  return out;
}

}  // namespace

nlohmann::json gemm_survey(const StepSpec& s, const DeviceInfo& dev, int rounds, const Timing& timing, int& failed,
                           const OnEachGemm& on_each) {
  if (!dev.cuda() || !kernels::gemm_survey_built()) {
    const std::string why = dev.cuda() ? "this build found no cuBLASLt library" : "cuBLASLt's heuristics need a CUDA GPU";
    std::printf("matmuls  skipped here: %s\n", why.c_str());
    return {{"skipped", why}};
  }
  return survey(s, dev, rounds, timing, failed, on_each, &gemm_case, [](const kernels::StepGemm&) { return true; });
}

nlohmann::json fp8_gemm_survey(const StepSpec& s, const DeviceInfo& dev, int rounds, const Timing& timing, int& failed,
                               const OnEachGemm& on_each) {
  if (const Support fp8 = find_variant("fp8_linears")->supports(dev); !fp8.ok) {
    std::printf("fp8 matmuls  skipped here: %s\n", fp8.why_not.c_str());
    return {{"skipped", fp8.why_not}};
  }
  return survey(s, dev, rounds, timing, failed, on_each, &fp8_gemm_case,
                [](const kernels::StepGemm& g) { return g.in_blocks; });
}

}  // namespace gpt2
