// defines: judge_parity — the verdict on a rung's losses against the baseline's, by parity class
#pragma once
#include <string>
#include <vector>

#include "bench/step/train_step.h"
#include "variants/variant.h"

namespace gpt2 {

struct ParityResult {
  std::string verdict = "n/a";  // pass | fail | n/a
  std::string rule;             // what was checked, with the tolerance
  double max_abs_dev = 0;
  std::vector<double> losses, baseline_losses;
};

// Tolerances on |loss - baseline loss| at every one of the K parity steps.
constexpr double kExactTol = 1e-3;      // fp32, the same math in another order or layout
constexpr double kPrecisionTol = 0.25;  // TF32/bf16/fp16 arithmetic, or a padded vocabulary (~2% of ln 50257)

// exact/precision: within the tolerance at every step; problem (e.g. another batch): finite, and
// the first batch's loss lower after the K steps than at step 1 (it is trained on, so it falls
// unless training is broken). Non-finite losses always fail; no losses is "n/a".
ParityResult judge_parity(ParityClass cls, const Trajectory& t, const std::vector<double>& baseline);

}  // namespace gpt2
