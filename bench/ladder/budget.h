// defines: TimeBudget, RungFit/fit_rung — the ladder's time budget, as Google Benchmark's min-time: each rung an
//          equal share of the time left, as many timed steps per repetition as fit it after its warm-up (1 at
//          least, the profile's at most), and its breakdown pass only if that fits too.
#pragma once
#include <algorithm>
#include <cstdint>
#include <functional>
#include <string>

namespace gpt2 {

// Parity runs no shorter than this under a budget: the first loss checks the forward at the seed's
// weights, the second the backward and the optimizer's first update.
constexpr int64_t kParityFloorSteps = 2;

// What one rung costs, in its own step times, besides what it has spent on build and warm-up.
struct RungCost {
  int64_t repetitions = 5;
  int64_t max_steps = 10;       // the profile's timed steps per repetition: the most a rung takes
  int64_t parity_steps = 5;     // its parity run
  int64_t breakdown_steps = 2;  // its breakdown pass: warm-up + this many unprofiled + profiled + 1 with shapes
  int64_t warmup_steps = 1;     // the breakdown pass's own warm-up
  bool keep_breakdown = false;  // a kept rung: its pass stays however short its share (what a reference is set beside)
  double pair_weight = 1;       // a timed step's cost with the rung timed beside it: (its step + that one's) / its step
  double breakdown_cost_steps() const { return breakdown_steps > 0 ? warmup_steps + 2.0 * breakdown_steps + 1 : 0; }
  // What a rung takes however short its share: its repetitions of one step and its shortest parity run.
  int64_t floor_steps() const { return repetitions + std::min(parity_steps, kParityFloorSteps); }
};

struct RungFit {
  int64_t steps = 0;      // timed steps per repetition
  bool breakdown = true;  // whether its breakdown pass fits
  int64_t parity_steps = 0;  // its parity run's steps
};

// The most timed steps per repetition (1..cost.max_steps) that fit `seconds` at `step_s` a step with the parity run
// and breakdown pass: the breakdown is dropped first (unless cost.keep_breakdown), then timed steps down to 1, then
// parity steps down to kParityFloorSteps; at that floor the rung runs even over its share.
RungFit fit_rung(double seconds, double step_s, const RungCost& cost);

class TimeBudget {
 public:
  // total_s <= 0: no budget (every rung takes the profile's steps). `now`: seconds on a steady
  // clock (tests give a fake one).
  explicit TimeBudget(double total_s, std::function<double()> now = {});
  bool limited() const { return total_s_ > 0; }
  double total_s() const { return total_s_; }
  double elapsed_s() const;
  // The share of the time left for the next rung, with `rungs_left` rungs (it included) to run.
  double share_s(int64_t rungs_left) const;
  // "4m10s elapsed, about 6m left" after `done` of `total` rungs: the rest at the slower of the pace so far and the
  // last rung's, within the budget while the rungs fit their shares, past it (and said so) once they do not.
  std::string progress(int64_t done, int64_t total);
  static constexpr double kOverShare = 2.0;

 private:
  double total_s_;
  std::function<double()> now_;
  double start_;
  double last_s_ = 0;       // elapsed at the last progress line
  int64_t last_done_ = 0;   // rungs done then
};

std::string format_duration(double seconds);  // "258ms", "4.7s", "45s", "4m10s", "1h02m"

}  // namespace gpt2
