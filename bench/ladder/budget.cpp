#include "bench/ladder/budget.h"
#include "common/format.h"

#include <algorithm>
#include <chrono>
#include <cmath>

namespace gpt2 {

RungFit fit_rung(double seconds, double step_s, const RungCost& c) {
  RungFit fit{c.max_steps, true, c.parity_steps};
  if (step_s <= 0) return fit;
  const double budget_steps = seconds / step_s;  // the rung's share in its own step times
  auto steps_that_fit = [&](double fixed) {
    const double room = budget_steps - fixed - static_cast<double>(c.parity_steps);
    return static_cast<int64_t>(std::floor(room / (static_cast<double>(std::max<int64_t>(1, c.repetitions)) * c.pair_weight)));
  };
  const int64_t with_breakdown = steps_that_fit(c.breakdown_cost_steps());
  if (with_breakdown >= 1) {
    fit.steps = std::min(c.max_steps, with_breakdown);
    return fit;
  }
  fit.breakdown = c.breakdown_steps == 0 || c.keep_breakdown;  // nothing to drop, or not to be dropped
  const double fixed = fit.breakdown ? c.breakdown_cost_steps() : 0.0;
  fit.steps = std::clamp<int64_t>(steps_that_fit(fixed), 1, c.max_steps);
  if (steps_that_fit(fixed) < 1) {  // one step a repetition is still over: a shorter parity run
    const int64_t room =
        static_cast<int64_t>(std::floor(budget_steps - fixed - static_cast<double>(c.repetitions) * c.pair_weight));
    fit.parity_steps = std::clamp<int64_t>(room, std::min(c.parity_steps, kParityFloorSteps), c.parity_steps);
  }
  return fit;
}

TimeBudget::TimeBudget(double total_s, std::function<double()> now) : total_s_(total_s), now_(std::move(now)) {
  if (!now_)
    now_ = [] { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); };
  start_ = now_();
}

double TimeBudget::elapsed_s() const { return now_() - start_; }

double TimeBudget::share_s(int64_t rungs_left) const {
  if (!limited()) return INFINITY;
  return std::max(0.0, total_s_ - elapsed_s()) / static_cast<double>(std::max<int64_t>(1, rungs_left));
}

std::string format_duration(double s) {
  s = std::max(0.0, s);
  const long t = std::lround(s);
  // Under 10 s the digits stay: "0s a step" said nothing of a 258 ms step.
  if (s > 0 && s < 1) return strf("%ldms", std::max(1L, std::lround(s * 1000)));
  if (s > 0 && s < 9.95) return strf("%.1fs", s);
  if (t < 60) return strf("%lds", t);
  if (t < 3600) return strf("%ldm%02lds", t / 60, t % 60);
  return strf("%ldh%02ldm", t / 3600, (t % 3600) / 60);
}

std::string TimeBudget::progress(int64_t done, int64_t total) {
  const double e = elapsed_s();
  double pace = done > 0 ? e / static_cast<double>(done) : 0;
  // The rungs done since the last line: their pace, and the share of the budget each was given then.
  const double last = done > last_done_ ? (e - last_s_) / static_cast<double>(done - last_done_) : 0;
  const double last_share = std::max(0.0, total_s_ - last_s_) / static_cast<double>(std::max<int64_t>(1, total - last_done_));
  pace = std::max(pace, last);
  last_s_ = e;
  last_done_ = done;
  std::string out = std::to_string(done) + "/" + std::to_string(total) + " rungs, " + format_duration(e) + " elapsed";
  if (done <= 0 || done >= total) return out;
  const double left = pace * static_cast<double>(total - done);
  if (!limited()) return out + ", about " + format_duration(left) + " left";
  // Rungs at their floor do not shrink with the budget: once the last took over twice their share, or the budget is
  // spent, the rest is told at their pace (an emulated-bf16 CPU ran 27 minutes of a 15-minute budget).
  if (e < total_s_ && !(last > kOverShare * last_share))
    return out + ", about " + format_duration(std::min(left, total_s_ - e)) + " left (budget " +
           format_duration(total_s_) + ")";
  return out + ", about " + format_duration(left) + " left: past the " + format_duration(total_s_) +
         " budget, the rungs at their floor";
}

}  // namespace gpt2
