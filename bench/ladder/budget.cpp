#include "bench/ladder/budget.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>

namespace gpt2 {

RungFit fit_rung(double seconds, double step_s, const RungCost& c) {
  RungFit fit{c.max_steps, true, c.parity_steps};
  if (step_s <= 0) return fit;
  const double budget_steps = seconds / step_s;  // the rung's share in its own step times
  auto steps_that_fit = [&](double fixed) {
    const double room = budget_steps - fixed - static_cast<double>(c.parity_steps);
    return static_cast<int64_t>(std::floor(room / static_cast<double>(std::max<int64_t>(1, c.repetitions))));
  };
  const int64_t with_breakdown = steps_that_fit(c.breakdown_cost_steps());
  if (with_breakdown >= 1) {
    fit.steps = std::min(c.max_steps, with_breakdown);
    return fit;
  }
  fit.breakdown = c.breakdown_steps == 0;  // nothing to drop when there is no pass
  fit.steps = std::clamp<int64_t>(steps_that_fit(0), 1, c.max_steps);
  if (steps_that_fit(0) < 1) {  // one step a repetition is still over: a shorter parity run
    const int64_t room = static_cast<int64_t>(std::floor(budget_steps)) - c.repetitions;
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
  char buf[32];
  const long t = std::lround(std::max(0.0, s));
  if (t < 60) std::snprintf(buf, sizeof buf, "%lds", t);
  else if (t < 3600) std::snprintf(buf, sizeof buf, "%ldm%02lds", t / 60, t % 60);
  else std::snprintf(buf, sizeof buf, "%ldh%02ldm", t / 3600, (t % 3600) / 60);
  return buf;
}

std::string TimeBudget::progress(int64_t done, int64_t total) {
  const double e = elapsed_s();
  double pace = done > 0 ? e / static_cast<double>(done) : 0;
  if (done > last_done_) pace = std::max(pace, (e - last_s_) / static_cast<double>(done - last_done_));
  last_s_ = e;
  last_done_ = done;
  std::string out = std::to_string(done) + "/" + std::to_string(total) + " rungs, " + format_duration(e) + " elapsed";
  if (done <= 0 || done >= total) return out;
  double left = pace * static_cast<double>(total - done);
  if (limited()) left = std::min(left, std::max(0.0, total_s_ - e));
  return out + ", about " + format_duration(left) + " left" + (limited() ? " (budget " + format_duration(total_s_) + ")" : "");
}

}  // namespace gpt2
