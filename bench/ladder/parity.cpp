#include "bench/ladder/parity.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <string>

#include "common/format.h"
#include "variants/registry.h"

namespace gpt2 {

namespace {
std::string ratio_text(double x) { return strf("%.4gx", x); }

std::string percent(double x) { return strf("%g%%", 100 * x); }

// The parameter whose first gradient norm is furthest from the baseline's, over the larger of that norm and
// `floor` (a share of the whole norm): a gradient zero in exact arithmetic (a key bias's) is rounding noise on
// both sides, not a large ratio.
void compare_by_parameter(const Trajectory& t, const Trajectory& baseline, double floor, ParityResult& r) {
  std::map<std::string, double> base(baseline.first_grad_norms.begin(), baseline.first_grad_norms.end());
  double worst = -1;
  for (const auto& [name, norm] : t.first_grad_norms) {
    const auto it = base.find(name);
    if (it == base.end()) continue;
    ++r.params_compared;
    const double dev = std::abs(norm - it->second) / std::max(it->second, floor);
    if (!(dev <= worst)) {  // NaN too
      worst = dev, r.worst_param = name, r.worst_param_dev = dev;
      // zero on both sides is the same gradient; zero on one side only, as far as can be (JSON has no inf)
      r.worst_param_ratio = it->second != 0 ? norm / it->second : norm == 0 ? 1.0 : std::numeric_limits<double>::max();
    }
  }
}
// A class's tolerances: on the losses, the first gradient's norm, each parameter's, and that comparison's floor.
struct Band {
  double loss, grad, param, param_floor;
  const char* words;
};
Band band(ParityClass cls) {
  switch (cls) {
    case ParityClass::kExact: return {kExactTol, kExactGradTol, kExactGradTol, kExactParamFloor, "fp32, same math"};
    case ParityClass::kFp8: return {kFp8Tol, kFp8GradTol, kFp8ParamGradTol, kPrecisionParamFloor, "FP8 matmuls"};
    default: return {kPrecisionTol, kPrecisionGradTol, kPrecisionParamGradTol, kPrecisionParamFloor, "reduced precision"};
  }
}
}  // namespace

ParityResult judge_parity(ParityClass cls, const Trajectory& t, const Trajectory& baseline, const std::string& against) {
  const std::vector<double>& losses = t.losses;
  const std::vector<double>& base = baseline.losses;
  const std::string them = against.empty() ? "the baseline" : against;
  ParityResult r;
  r.losses = losses;
  r.baseline_losses = base;
  r.grad_norm = t.first_grad_norm;
  r.baseline_grad_norm = baseline.first_grad_norm;
  r.grad_norms = t.first_grad_norms;
  r.against = against;
  r.judged_as = cls;
  r.first_batch_after = t.first_batch_after;
  bool finite = std::isfinite(t.first_batch_after) && std::isfinite(t.first_grad_norm);
  for (double l : losses) finite = finite && std::isfinite(l);
  for (size_t i = 0; i < losses.size() && i < base.size(); ++i)
    r.max_abs_dev = std::max(r.max_abs_dev, std::abs(losses[i] - base[i]));
  if (losses.empty()) {
    r.rule = "no parity steps";
    return r;
  }
  if (!finite) {
    r.verdict = "fail";
    r.rule = "loss must stay finite";
    return r;
  }
  if (cls == ParityClass::kProblem) {
    r.rule = "a different problem: loss finite, first batch's loss lower after the steps (" +
             std::to_string(losses.front()) + " -> " + std::to_string(t.first_batch_after) + ")";
    const bool starts = base.empty() || std::abs(losses.front() - base.front()) <= kProblemStartTol;
    if (!base.empty())
      r.rule += strf("; step 1's loss within %g of %s's (%f)%s", kProblemStartTol, them.c_str(), base.front(),
                     starts ? "" : ": OUTSIDE");
    r.verdict = starts && t.first_batch_after < losses.front() ? "pass" : "fail";
    return r;
  }
  const Band b = band(cls);
  compare_by_parameter(t, baseline, b.param_floor * baseline.first_grad_norm, r);
  r.rule = "|loss - " + (against.empty() ? std::string("baseline") : against) + "'s| <= " + std::to_string(b.loss) +
           " at every step (" + b.words + ")";
  bool pass = r.max_abs_dev <= b.loss;
  if (r.grad_norm > 0 && r.baseline_grad_norm > 0) {
    r.grad_norm_ratio = r.grad_norm / r.baseline_grad_norm;
    r.rule += "; first step's gradient norm within " + percent(b.grad) + " of " + them + "'s (" +
              std::to_string(r.grad_norm) + " vs " + std::to_string(r.baseline_grad_norm) + ")";
    pass = pass && std::abs(r.grad_norm_ratio - 1) <= b.grad;
    if (r.params_compared > 0) {  // and parameter by parameter: a kernel that writes one gradient wrong
      const bool within = r.worst_param_dev <= b.param;
      r.rule += "; each of its " + std::to_string(r.params_compared) + " parameters' within " + percent(b.param) +
                " of the larger of its norm and " + percent(b.param_floor) + " of the whole's (furthest: " +
                r.worst_param + ", " + ratio_text(r.worst_param_ratio) + (within ? ")" : ": OUTSIDE)");
      pass = pass && within;
    }
  } else {
    r.rule += "; first step's gradient norm not compared (not known on one side: a step the gradient scaler skipped)";
  }
  r.verdict = pass ? "pass" : "fail";
  return r;
}

Trajectory trajectory_of(const ParityResult& p) {
  return {p.losses, p.first_batch_after, p.grad_norm, p.grad_norms};
}

ParityClass class_between(const std::vector<std::string>& applied, const std::vector<std::string>& on) {
  ParityClass cls = ParityClass::kExact;
  auto loosest_not_in = [&cls](const std::vector<std::string>& a, const std::vector<std::string>& b) {
    for (const auto& name : a) {
      if (std::find(b.begin(), b.end(), name) != b.end()) continue;
      const Variant* v = find_variant(name);
      cls = std::max(cls, v ? v->parity : ParityClass::kProblem);
    }
  };
  loosest_not_in(applied, on);
  loosest_not_in(on, applied);
  return cls;
}

ParityClass class_at_equal_batch(const std::vector<std::string>& applied) {
  ParityClass cls = ParityClass::kExact;
  for (const auto& name : applied)
    if (const Variant* v = find_variant(name); v && !v->searches_batch) cls = std::max(cls, v->parity);
  return cls;
}

nlohmann::json to_json(const ParityResult& p, ParityClass declared) {
  nlohmann::json j = {{"class", to_string(declared)}, {"verdict", p.verdict}, {"rule", p.rule}, {"max_abs_dev", p.max_abs_dev},
          {"losses", p.losses}, {"baseline_losses", p.baseline_losses}, {"grad_norm", p.grad_norm},
          {"baseline_grad_norm", p.baseline_grad_norm}, {"grad_norm_ratio", p.grad_norm_ratio},
          {"judged_as", to_string(p.judged_as)}, {"first_batch_after", p.first_batch_after},
          {"worst_param", p.worst_param}, {"worst_param_ratio", p.worst_param_ratio}, {"worst_param_dev", p.worst_param_dev},
          {"params_compared", p.params_compared}, {"against", p.against.empty() ? "baseline" : p.against}};
  nlohmann::json norms = nlohmann::json::object();  // what a rung judged against this one compares with
  for (const auto& [name, norm] : p.grad_norms) norms[name] = norm;
  j["grad_norms"] = norms;
  return j;
}

ParityResult parity_result_from(const nlohmann::json& j) {
  ParityResult p;
  p.verdict = j.at("verdict").get<std::string>();
  p.rule = j.at("rule").get<std::string>();
  p.max_abs_dev = j.at("max_abs_dev").get<double>();
  p.losses = j.at("losses").get<std::vector<double>>();
  p.baseline_losses = j.at("baseline_losses").get<std::vector<double>>();
  p.grad_norm = j.value("grad_norm", 0.0);
  p.baseline_grad_norm = j.value("baseline_grad_norm", 0.0);
  p.grad_norm_ratio = j.value("grad_norm_ratio", 0.0);
  p.judged_as = parity_class_from(j.value("judged_as", j.value("class", std::string("exact"))));
  p.first_batch_after = j.value("first_batch_after", 0.0);
  p.worst_param = j.value("worst_param", std::string());
  p.worst_param_ratio = j.value("worst_param_ratio", 0.0);
  p.worst_param_dev = j.value("worst_param_dev", 0.0);
  p.params_compared = j.value("params_compared", int64_t{0});
  if (const std::string against = j.value("against", std::string("baseline")); against != "baseline") p.against = against;
  const nlohmann::json norms = j.value("grad_norms", nlohmann::json::object());
  for (const auto& [name, norm] : norms.items()) p.grad_norms.emplace_back(name, norm.get<double>());
  return p;
}

}  // namespace gpt2
