#include "bench/ladder/parity.h"

#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdio>
#include <string>

namespace gpt2 {

namespace {
std::string percent(double x) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%g%%", 100 * x);
  return buf;
}
}  // namespace

ParityResult judge_parity(ParityClass cls, const Trajectory& t, const Trajectory& baseline) {
  const std::vector<double>& losses = t.losses;
  const std::vector<double>& base = baseline.losses;
  ParityResult r;
  r.losses = losses;
  r.baseline_losses = base;
  r.grad_norm = t.first_grad_norm;
  r.baseline_grad_norm = baseline.first_grad_norm;
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
    r.verdict = t.first_batch_after < losses.front() ? "pass" : "fail";
    return r;
  }
  const bool exact = cls == ParityClass::kExact;
  const double tol = exact ? kExactTol : kPrecisionTol, grad_tol = exact ? kExactGradTol : kPrecisionGradTol;
  r.rule = "|loss - baseline| <= " + std::to_string(tol) + " at every step (" +
           (exact ? "fp32, same math" : "reduced precision") + ")";
  bool pass = r.max_abs_dev <= tol;
  if (r.grad_norm > 0 && r.baseline_grad_norm > 0) {
    r.grad_norm_ratio = r.grad_norm / r.baseline_grad_norm;
    r.rule += "; first step's gradient norm within " + percent(grad_tol) + " of the baseline's (" +
              std::to_string(r.grad_norm) + " vs " + std::to_string(r.baseline_grad_norm) + ")";
    pass = pass && std::abs(r.grad_norm_ratio - 1) <= grad_tol;
  } else {
    r.rule += "; first step's gradient norm not compared (not known on one side: a step the gradient scaler skipped)";
  }
  r.verdict = pass ? "pass" : "fail";
  return r;
}

nlohmann::json to_json(const ParityResult& p, ParityClass declared) {
  return {{"class", to_string(declared)}, {"verdict", p.verdict}, {"rule", p.rule}, {"max_abs_dev", p.max_abs_dev},
          {"losses", p.losses}, {"baseline_losses", p.baseline_losses}, {"grad_norm", p.grad_norm},
          {"baseline_grad_norm", p.baseline_grad_norm}, {"grad_norm_ratio", p.grad_norm_ratio},
          {"judged_as", to_string(p.judged_as)}, {"first_batch_after", p.first_batch_after}};
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
  return p;
}

}  // namespace gpt2
