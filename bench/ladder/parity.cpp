#include "bench/ladder/parity.h"

#include <cmath>
#include <string>

namespace gpt2 {

ParityResult judge_parity(ParityClass cls, const Trajectory& t, const std::vector<double>& base) {
  const std::vector<double>& losses = t.losses;
  ParityResult r;
  r.losses = losses;
  r.baseline_losses = base;
  bool finite = std::isfinite(t.first_batch_after);
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
  switch (cls) {
    case ParityClass::kExact:
      r.rule = "|loss - baseline| <= " + std::to_string(kExactTol) + " at every step (fp32, same math)";
      r.verdict = r.max_abs_dev <= kExactTol ? "pass" : "fail";
      break;
    case ParityClass::kPrecision:
      r.rule = "|loss - baseline| <= " + std::to_string(kPrecisionTol) + " at every step (reduced precision)";
      r.verdict = r.max_abs_dev <= kPrecisionTol ? "pass" : "fail";
      break;
    case ParityClass::kProblem:
      r.rule = "a different problem: loss finite, first batch's loss lower after the steps (" +
               std::to_string(losses.front()) + " -> " + std::to_string(t.first_batch_after) + ")";
      r.verdict = t.first_batch_after < losses.front() ? "pass" : "fail";
      break;
  }
  return r;
}

}  // namespace gpt2
