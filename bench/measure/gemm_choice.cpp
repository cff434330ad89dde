#include "bench/measure/gemm_choice.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <set>
#include <sstream>
#include <stdexcept>

#include "bench/measure/choosers.h"
#include "bench/runtime/device.h"
#include "bench/step/train_step.h"
#include "common/errors.h"
#include "kernels/gemm_survey.h"

namespace gpt2 {
namespace {

std::string dotted(std::string name) {  // "qkv forward" -> "qkv.forward": a chosen string has no spaces
  std::replace(name.begin(), name.end(), ' ', '.');
  return name;
}

std::vector<int64_t> stored(int64_t rows, int64_t cols, bool transposed) {
  return transposed ? std::vector<int64_t>{cols, rows} : std::vector<int64_t>{rows, cols};
}

// The epilogue's vector and pre-activation for one GEMM (out: M × N), as the step passes them.
kernels::LtEpilogue epilogue_for(const LinearGemm& lg, const at::TensorOptions& opts) {
  const kernels::StepGemm& g = lg.gemm;
  if (lg.epilogue == "bias") return {kernels::LtEpilogue::kBias, at::randn({g.N}, opts), {}};
  if (lg.epilogue == "gelu_aux_bias")
    return {kernels::LtEpilogue::kGeluAuxBias, at::randn({g.N}, opts), at::empty({g.M, g.N}, opts)};
  return {};
}

// ATen's candidates, and the heuristic's on a CUDA device with cuBLASLt in a 16-bit dtype; where cuBLASLt lists
// nothing, one "lt0" that fails saying why (`no_list`).
std::vector<std::string> gemm_candidates(const LinearGemm& lg, const DeviceInfo& dev, const at::Tensor& a,
                                         const at::Tensor& b, const at::Tensor& out, const kernels::LtEpilogue& e,
                                         std::string& no_list) {
  const bool lt = dev.cuda() && kernels::gemm_survey_built() && a.scalar_type() != at::kFloat;
  std::vector<std::string> candidates;
  if (!lt || lg.epilogue != "gelu_aux_bias") candidates.push_back("aten");  // ATen has no GELU_AUX_BIAS
  if (!lt) return candidates;
  try {
    const size_t n = kernels::lt_algorithms(lg.gemm, a, b, out, e).size();
    for (size_t i = 0; i < n; ++i) candidates.push_back("lt" + std::to_string(i));
    if (n == 0) no_list = "cuBLASLt's heuristic lists no algorithm for this GEMM";
  } catch (const std::exception& ex) {
    no_list = first_line(error_text(ex));
  }
  if (!no_list.empty()) candidates.push_back("lt0");
  return candidates;
}

// One GEMM's candidates timed alone: ATen's call as the step makes it, and each heuristic algorithm.
Choice time_gemm(const LinearGemm& lg, const DeviceInfo& dev, at::ScalarType dtype, int rounds, int iters) {
  const kernels::StepGemm& g = lg.gemm;
  const auto opts = at::device(torch_device(dev)).dtype(dtype);
  const at::Tensor a = at::randn(stored(g.M, g.K, g.a_transposed), opts);
  const at::Tensor b = at::randn(stored(g.K, g.N, g.b_transposed), opts);
  const kernels::LtEpilogue e = epilogue_for(lg, opts);
  at::Tensor out = at::empty({g.M, g.N}, opts);
  const at::Tensor a_op = g.a_transposed ? a.t() : a, b_op = g.b_transposed ? b.t() : b;
  std::string no_list;
  const std::vector<std::string> candidates = gemm_candidates(lg, dev, a, b, out, e, no_list);
  const Choice c{dotted(g.name), "", "", "", candidates[0], 0.01, {}, ""};
  return time_candidates(c, candidates, rounds, [&](const std::string& name) {
    if (name != "aten" && !no_list.empty()) throw std::runtime_error(no_list);
    return seconds_per_pass(dev, iters, [&] {
      if (name != "aten") return kernels::lt_gemm(g, a, b, out, e, std::stoi(name.substr(2)));
      if (e.kind == kernels::LtEpilogue::kBias) (void)at::addmm_out(out, e.vec, a_op, b_op);
      else (void)at::mm_out(out, a_op, b_op);
    });
  });
}

}  // namespace

std::vector<LinearGemm> lt_linear_gemms(const StepSpec& spec) {
  const auto& m = spec.model;
  const int64_t rows = spec.batch * m.context, C = m.n_embd;
  const std::string dtype = c10::toString(attention_dtype(spec));
  const bool apart = m.fused_residual_norm;  // the projection's and fc2's biases added by the residual kernel
  std::vector<LinearGemm> out;
  std::set<std::string> keys;
  auto linear = [&](const std::string& name, int64_t in, int64_t features, const std::string& epilogue) {
    for (const auto& g : kernels::linear_gemms(name, rows, in, features)) {
      const std::string e = g.name == name + " forward" ? epilogue : "";
      if (keys.insert(kernels::gemm_key(g, e, dtype)).second) out.push_back({g, e});
    }
  };
  if (m.fused_qkv) linear("qkv", C, 3 * C, m.qkv_bias ? "bias" : "");
  else linear("query", C, C, m.qkv_bias ? "bias" : "");  // key and value alike
  linear("proj", C, C, apart ? "" : "bias");
  if (m.gelu_epilogues) return out;  // the MLP is one function of its own (kernels/gelu_epilogues.h)
  if (m.fused_gelu_backward) linear("fc1", C, 4 * C, "gelu_aux_bias");
  else if (!m.fused_bias_gelu) linear("fc1", C, 4 * C, "bias");
  linear("fc2", 4 * C, C, apart ? "" : "bias");
  return out;
}

std::string gemm_algorithms_key(const StepSpec& spec) {
  std::ostringstream o;
  o << "rows=" << spec.batch * spec.model.context << " " << c10::toString(attention_dtype(spec)) << ":";
  const std::string forward = " forward";
  for (const LinearGemm& lg : lt_linear_gemms(spec)) {
    const auto& g = lg.gemm;
    if (g.name.size() > forward.size() && g.name.ends_with(forward))
      o << (o.str().back() == ':' ? " " : ", ") << g.name.substr(0, g.name.size() - forward.size()) << " " << g.K
        << "->" << g.N << (lg.epilogue.empty() ? "" : " " + lg.epilogue);
  }
  return o.str();
}

Choice choose_gemm_algorithms(const StepSpec& spec, const DeviceInfo& dev, int rounds, int iters) {
  Choice all{"gemm_algorithms", gemm_algorithms_key(spec),
             "each GEMM's median time alone on its shape, ATen's call against each algorithm of cuBLASLt's heuristic "
             "list (ltN: the Nth); what runs without the choice (ATen's call; for fc1's GELU_AUX_BIAS forward, which "
             "ATen has not, lt0) kept unless another is faster by more than the margin; the tries: its time and the "
             "fastest other's",
             "", "aten", 0.01, {}, ""};
  for (const LinearGemm& lg : lt_linear_gemms(spec)) {
    const Choice one = time_gemm(lg, dev, attention_dtype(spec), rounds, iters);
    all.chosen += (all.chosen.empty() ? "" : ",") + one.setting + ":" + one.chosen;
    keep_tries(one, all);
  }
  empty_cache(dev);
  return all;
}

void use_gemm_algorithms(StepSpec& spec, const std::string& chosen) {
  const std::vector<LinearGemm> gemms = lt_linear_gemms(spec);
  const std::string dtype = c10::toString(attention_dtype(spec));
  std::istringstream in(chosen);
  for (std::string entry; std::getline(in, entry, ',');) {
    const auto colon = entry.find(':');
    const auto it = std::find_if(gemms.begin(), gemms.end(),
                                 [&](const LinearGemm& lg) { return dotted(lg.gemm.name) == entry.substr(0, colon); });
    if (colon == std::string::npos || it == gemms.end())
      throw std::runtime_error("gemm_algorithms: '" + entry + "' names none of this step's GEMMs (" +
                               gemm_algorithms_key(spec) + ")");
    const std::string algo = entry.substr(colon + 1);
    if (algo == "aten") continue;
    if (algo.rfind("lt", 0) != 0 || algo.size() < 3 || algo.find_first_not_of("0123456789", 2) != std::string::npos)
      throw std::runtime_error("gemm_algorithms: '" + entry + "': aten or ltN expected after the colon");
    spec.model.gemm_algorithms[kernels::gemm_key(it->gemm, it->epilogue, dtype)] = std::stoi(algo.substr(2));
  }
}

}  // namespace gpt2
