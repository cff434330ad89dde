// defines: judge_parity — the verdict on a rung's losses and first gradient against the baseline's, by parity class;
//          ParityResult's JSON (a rung's and a reference rung's "parity" in rungs.json)
#pragma once
#include <nlohmann/json_fwd.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
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
  // Parameter by parameter (Trajectory::first_grad_norms), the one whose first-step gradient norm is furthest from
  // the baseline's in ratio, that ratio, and how many parameters were compared (0: not compared).
  std::string worst_param;
  double worst_param_ratio = 0;
  double worst_param_dev = 0;  // what its tolerance is held against (judge_parity: kPrecisionParamFloor)
  int64_t params_compared = 0;
  std::vector<std::pair<std::string, double>> grad_norms;  // this rung's own, by parameter (Trajectory's)
  std::string against;  // the rung judged against ("": the baseline); "baseline_*" above are its figures
  double first_batch_after = 0;                  // problem: the first batch's loss after the steps
};

// `against` for the baseline's step at another batch than the profile's (RungRunner::reference_at), and whether
// `against` names the baseline, at the profile's batch ("") or another.
inline std::string baseline_at_batch(int64_t batch) { return "baseline at batch " + std::to_string(batch); }
inline bool against_baseline(const std::string& against) { return against.empty() || against.rfind("baseline", 0) == 0; }

// Whether `p` holds a finished trajectory, every loss finite: one another rung or a reference can be judged against.
inline bool has_trajectory(const ParityResult& p) {
  return !p.losses.empty() && std::all_of(p.losses.begin(), p.losses.end(), [](double l) { return std::isfinite(l); });
}

// Tolerances on |loss - baseline loss| at every one of the K parity steps.
constexpr double kExactTol = 1e-3;      // fp32, the same math in another order or layout
constexpr double kPrecisionTol = 0.25;  // TF32/bf16/fp16 arithmetic, or a padded vocabulary (~2% of ln 50257)
// Another problem from the same weights starts where the baseline does (about ln V): step 1's loss further off is a
// model drawn wrong (weight_tying's head drawn N(0, 1) started 124M at 482, the baseline at 10.98), not a problem.
constexpr double kProblemStartTol = 1.0;
// Tolerances on |first-step gradient norm / the baseline's - 1| (same weights, same batch). AdamW is
// blind to a gradient scaled as a whole, so the losses pass with one summed over ranks, or a loss
// scale left in; this sees a factor of 2 in any class.
constexpr double kExactGradTol = 1e-3;
constexpr double kPrecisionGradTol = 0.1;
// The same parameter by parameter: exact, as the whole; reduced precision looser, since a small parameter's
// gradient (a LayerNorm's shift) moves more than the whole (8.8% on cpu-mini between bf16_cast and autocast);
// a kernel that zeroes, doubles or halves a gradient is outside it.
constexpr double kPrecisionParamGradTol = 0.25;
// ... of the larger of the parameter's gradient norm and this share of the whole gradient's: a gradient that is zero
// in exact arithmetic (a key bias's) is rounding noise on both sides, whose ratio means nothing (fp32: 5e-10 of the
// whole, 9% apart, in one test; bf16 rounds 2^-8 where fp32 rounds 2^-24).
constexpr double kExactParamFloor = 1e-6;
constexpr double kPrecisionParamFloor = 1e-3;
// FP8 (fp8_linears), from GPT-2 124M's 5 parity steps on the CPU (at::_scaled_mm, bf16 top + FP8 vs fp32): losses
// 0.041 apart (the bf16 top's 0.068), the whole gradient 0.23%, the furthest parameter 22% (a LayerNorm shift's,
// as the bf16 top's). Kept apart from the bf16 band so that a GPU run can move it (docs/measurement.md: Parity).
constexpr double kFp8Tol = 0.25;
constexpr double kFp8GradTol = 0.05;
constexpr double kFp8ParamGradTol = 0.3;

// exact/precision: every step's loss, the first gradient's norm and each parameter's within the class's
// tolerances; problem (another batch): finite, and the first batch's loss lower after K steps. Non-finite losses
// fail; no losses is "n/a". `against`: the rung whose trajectory `baseline` is, where not the baseline's.
ParityResult judge_parity(ParityClass cls, const Trajectory& t, const Trajectory& baseline,
                          const std::string& against = "");

// A judged rung's own trajectory, as a later rung judged against it needs it (across --resume too).
Trajectory trajectory_of(const ParityResult& p);
// The class of a rung's `applied` variants at an equal batch: their loosest, batch_scaling's left out. An extra on
// batch_scaling's top changes no problem against that top, only what its own variants change.
ParityClass class_at_equal_batch(const std::vector<std::string>& applied);
// The loosest class among the variants that separate `applied` from `on` (in one, not the other; an unknown name is
// another problem): exact where a fusion is added, left out or swapped; below kProblem, `on`'s trajectory is the one
// to judge `applied` against (FP8 or autocast on the bf16 top: the same problem, another precision).
ParityClass class_between(const std::vector<std::string>& applied, const std::vector<std::string>& on);

// `class` is the class the rung declares (a reference's: the one it was judged as); `judged_as` the one
// applied (a data-parallel rung without an equal global batch is judged as another problem).
nlohmann::json to_json(const ParityResult& p, ParityClass declared);
ParityResult parity_result_from(const nlohmann::json& j);  // --resume: what to_json wrote

}  // namespace gpt2
