// defines: judge_parity — the verdict on a rung's losses and first gradient against the baseline's, by parity class;
//          ParityResult's JSON (a rung's and a reference rung's "parity" in rungs.json)
#pragma once
#include <nlohmann/json_fwd.hpp>

#include <string>
#include <vector>

#include "bench/step/train_step.h"
#include "variants/variant.h"

namespace gpt2 {

struct ParityResult {
  std::string verdict = "n/a";  // pass | fail | n/a
  std::string rule;             // what was checked, with the tolerances
  ParityClass judged_as = ParityClass::kExact;
  double max_abs_dev = 0;
  std::vector<double> losses, baseline_losses;
  double grad_norm = 0, baseline_grad_norm = 0;  // the first step's whole-gradient norms; 0: not known
  double grad_norm_ratio = 0;                    // grad_norm / baseline_grad_norm; 0: not compared
  double first_batch_after = 0;                  // problem: the first batch's loss after the steps
};

// Tolerances on |loss - baseline loss| at every one of the K parity steps.
constexpr double kExactTol = 1e-3;      // fp32, the same math in another order or layout
constexpr double kPrecisionTol = 0.25;  // TF32/bf16/fp16 arithmetic, or a padded vocabulary (~2% of ln 50257)
// Tolerances on |first-step gradient norm / the baseline's - 1| (same weights, same batch). AdamW is
// blind to a gradient scaled as a whole, so the losses pass with one summed over ranks, or a loss
// scale left in; this sees a factor of 2 in any class.
constexpr double kExactGradTol = 1e-3;
constexpr double kPrecisionGradTol = 0.1;

// exact/precision: the losses within the tolerance at every step, and the first step's gradient norm
// within its tolerance where both are known; problem (e.g. another batch, so another gradient):
// finite, and the first batch's loss lower after the K steps than at step 1 (it is trained on, so it
// falls unless training is broken). Non-finite losses always fail; no losses is "n/a".
ParityResult judge_parity(ParityClass cls, const Trajectory& t, const Trajectory& baseline);

// `class` is the class the rung declares (a reference's: the one it was judged as); `judged_as` the one
// applied (a data-parallel rung without an equal global batch is judged as another problem).
nlohmann::json to_json(const ParityResult& p, ParityClass declared);
ParityResult parity_result_from(const nlohmann::json& j);  // --resume: what to_json wrote

}  // namespace gpt2
