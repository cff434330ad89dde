#include "bench/ladder/rung.h"

#include <ATen/ATen.h>

#include <chrono>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <numeric>
#include <sstream>
#include <thread>

#include "bench/ladder/backoff.h"
#include "bench/ladder/batch_search.h"
#include "bench/ladder/kept.h"
#include "bench/ladder/lost_device.h"
#include "bench/ladder/plan.h"
#include "bench/ladder/slow_window.h"
#include "bench/measure/breakdown.h"
#include "bench/measure/stats.h"
#include "common/errors.h"
#include "common/files.h"

namespace gpt2 {

std::atomic<int> g_signal{0};

namespace {
// Adds the seconds from its making to its end to `into` (a rung's ran.seconds).
class Lap {
 public:
  Lap(const TimeBudget& clock, double& into) : clock_(clock), into_(into), start_(clock.elapsed_s()) {}
  ~Lap() { into_ += clock_.elapsed_s() - start_; }
  Lap(const Lap&) = delete;
  Lap& operator=(const Lap&) = delete;

 private:
  const TimeBudget& clock_;
  double& into_;
  double start_;
};

// A CPU run's sentinel for other work on the machine: of the time its threads were ready to run, the share they ran
// (Linux's schedstat: run time over run time + run-queue wait, over the threads alive at both ends). 1 where the
// kernel does not say; about 1 alone, whatever the threads' idle time.
class CoreShare {
 public:
  CoreShare() : start_(read()) {}
  double share() const {
    double ran = 0, waited = 0;
    for (const auto& [tid, end] : read())
      if (const auto it = start_.find(tid); it != start_.end())
        ran += end.first - it->second.first, waited += end.second - it->second.second;
    return ran + waited > 0 ? ran / (ran + waited) : 1.0;
  }

 private:
  using Times = std::map<std::string, std::pair<double, double>>;  // thread -> (ran, waited) ns
  static Times read() {
    Times t;
    for (const std::string& dir : files::glob("/proc/self/task/*")) {
      std::ifstream f(dir + "/schedstat");
      double ran = 0, waited = 0;
      if (f >> ran >> waited) t[files::filename(dir)] = {ran, waited};
    }
    return t;
  }
  Times start_;
};
}  // namespace

bool RungRunner::settle(RungRecord& r, const std::vector<RungRecord>& records) {
  const KeptExtras k = choose_kept(records, r.plan.ties);
  r.out.kept = k.why;
  // The ties' rung with no tie kept is the kept rung's step (a tie that lost a conflict displaced nothing).
  const bool tie_kept = std::any_of(k.why.begin(), k.why.end(),
                                    [](const nlohmann::json& e) { return e.value("kept", false) && e.value("tie", false); });
  if (k.variants.empty() || (r.plan.ties && !tie_kept)) {
    r.out.status = RungStatus::kSkipped;
    r.out.error = !k.variants.empty() ? "no extra tied the top beyond those that beat it: the kept rung's step"
                  : r.plan.ties       ? "no extra beat or tied the top rung in this run (rungs.json: kept)"
                                      : "no extra beat the top rung in this run (rungs.json: kept)";
    std::cerr << "    " << r.name() << ": " << r.out.error << "\n";
    return false;
  }
  settle_kept(r, k.variants, prof, dev);
  std::string names;
  for (const auto& e : k.why) {
    if (!e.value("kept", false)) continue;
    names += (names.empty() ? "" : ", ") + e["variant"].get<std::string>();
    if (e.value("tie", false)) names += " (a tie)";
  }
  std::cerr << "    " << r.name() << ": kept " << names << "\n";
  return true;
}

void RungRunner::take_top_batch(RungRecord& r, const std::vector<RungRecord>& records) {
  if (!on_the_top(r.plan.kind)) return;
  const RungRecord* top = compared_with(records, r);
  if (r.plan.rung.spec.search_batch && r.out.batch == 0 && top && top->plan.rung.spec.search_batch &&
      top->out.batch > 0) {
    r.out.batch = top->out.batch;
    r.out.batch_search.push_back({{"batch", r.out.batch}, {"stage", "top"}, {"from", top->name()}});
    std::cerr << "    " << r.name() << ": at " << top->name() << "'s batch " << r.out.batch << "\n";
  }
}

RungCost RungRunner::cost(int64_t warmups) const {
  return {prof.repetitions, prof.steps, prof.parity_steps, prof.breakdown_steps, warmups};
}

void RungRunner::build(RungRecord& r, double seconds) {
  live.reset();
  // A follower is told its batch; an extra or kept rung the top's (take_top_batch). Either way no search, but a
  // batch_scaling rung on one process still backs off if the rung itself runs out of memory.
  const bool searched = r.plan.rung.spec.search_batch && r.out.batch == 0;
  auto& took = r.out.timing.seconds;
  {
    const Lap lap(budget, took["choices"]);
    choices.settle(r, dev, false);  // a follower is told its choices
  }
  if (searched) {
    const Lap lap(budget, took["search"]);
    const int64_t floor_steps = warmup_steps() + cost(0).floor_steps();
    r.out.batch = find_batch(r.spec(), dev, data.train, prof.seed, meter, r.out.batch_search,
                             budget.limited() && ranks(r.spec()) == 1 ? seconds : INFINITY, floor_steps);
    std::cerr << "    batch_scaling chose batch " << r.out.batch << "\n";
  }
  {
    const Lap lap(budget, took["choices"]);
    choices.settle(r, dev, true);  // at the batch it runs
  }
  const Lap lap(budget, took["build"]);
  if (dist && rank0() && ranks(r.spec()) > 1)
    dist->post(r.name() + " " + std::to_string(r.spec().batch) + " " + announce_choices(r));
  auto attempt = [&](int64_t batch) {
    r.out.batch = batch;
    release();
    meter.reset_peak();
    r.out.memory.held_at_start = held();
    live = std::make_unique<TrainStep>(r.spec(), dev, data.train, prof.seed, dist);
    r.out.timing.warmup_steps = 0;
    for (int64_t w = 0; w < warmup_steps(); ++w) {
      const double t0 = budget.elapsed_s();
      slow_window().step(*live);
      synchronize(dev);
      r.out.timing.warmup_step_s = budget.elapsed_s() - t0;
      r.out.timing.warmup_steps = w + 1;
      // No more warm-up once the rung's floor at this step time would take its whole share; never after the
      // first step alone, whose time holds one-time work (a CUDA graph's capture, cuDNN's plans, Adam's state),
      // nor in a data-parallel rung (every rank takes the same steps).
      if (w >= 1 && ranks(r.spec()) == 1 &&
          r.out.timing.warmup_step_s * static_cast<double>(cost(0).floor_steps()) > seconds)
        break;
    }
    synchronize(dev);
    const MemoryStats mem = meter.read();  // alone: the timed steps repeat these shapes, a partner adds its own
    r.out.memory.peak_alloc_bytes = mem.peak_allocated, r.out.memory.peak_reserved_bytes = mem.peak_reserved;
  };
  if (r.plan.rung.spec.search_batch && ranks(r.spec()) == 1) {
    const int64_t chosen = r.out.batch;
    backoff_on_oom(chosen, r.out.batch_search, attempt, [&] { release(); });
    if (r.out.batch != chosen)
      std::cerr << "    out of memory at batch " << chosen << " in the rung: backed off to " << r.out.batch << "\n";
  } else {
    attempt(r.spec().batch);
  }
  r.out.sdpa_backend_used = live->sdpa_backend_used();
  if (clocks) clocks->take();  // samples of an earlier, failed rung are not this one's
}

void RungRunner::fit(RungRecord& r, double share_s, double started_s) {
  r.out.timing.steps = prof.steps;
  r.out.timing.parity_steps = prof.parity_steps;
  if (!budget.limited() || ranks(r.spec()) > 1) return;
  const double left = share_s - (budget.elapsed_s() - started_s);
  RungCost c = cost(r.out.timing.warmup_steps);
  // A breakdown the report sets beside another's stays: the kept rung's (beside the references'), FP8's and the
  // batch-scaling top's it is built on (Findings: where FP8's time went).
  if (partner && r.out.timing.warmup_step_s > 0) c.pair_weight = 1 + partner_step_s / r.out.timing.warmup_step_s;
  c.keep_breakdown = r.plan.kind == RungKind::kKept || class_at_equal_batch(r.plan.rung.applied) == ParityClass::kFp8 ||
                     r.plan.searches_own_batch();
  const RungFit f = fit_rung(left, r.out.timing.warmup_step_s, c);
  fitted = {share_s, started_s, r.out.timing.warmup_step_s, c};
  r.out.timing.steps = f.steps;
  r.out.timing.parity_steps = f.parity_steps;
  std::string note;
  if (f.steps < prof.steps) note = std::to_string(f.steps) + " of " + std::to_string(prof.steps) + " timed steps per repetition";
  if (!f.breakdown) note += std::string(note.empty() ? "" : "; ") + "no breakdown pass";
  if (f.parity_steps < prof.parity_steps)
    note += "; " + std::to_string(f.parity_steps) + " of " + std::to_string(prof.parity_steps) + " parity steps";
  if (note.empty()) return;
  r.out.timing.budget_note = note + " (time budget: " + format_duration(left) + " left for this rung at " +
                      format_duration(r.out.timing.warmup_step_s) + " a step)";
  if (!f.breakdown) r.out.breakdown.summary = {{"skipped", "over the time budget"}};
  std::cerr << "    " << r.out.timing.budget_note << "\n";
}

void RungRunner::replan(RungRecord& r) {
  const int64_t left_reps = prof.repetitions - static_cast<int64_t>(r.out.timing.rep_step_ms.size());
  if (!budget.limited() || ranks(r.spec()) > 1 || fitted.step_s <= 0 || left_reps <= 0 ||
      r.out.timing.rep_step_ms.empty())
    return;
  const double step_s = r.out.timing.rep_step_ms.back() / 1e3;
  if (step_s <= kReplanSlower * fitted.step_s || r.out.timing.steps == 1) return;
  RungCost c = fitted.cost;
  c.repetitions = left_reps, c.max_steps = r.out.timing.steps;
  const double left = fitted.share_s - (budget.elapsed_s() - fitted.started_s);
  const RungFit f = fit_rung(left, step_s, c);
  if (f.steps >= r.out.timing.steps) return;
  std::ostringstream note;
  note << "re-planned after repetition " << r.out.timing.rep_step_ms.size() << ": " << f.steps << " timed step(s) "
       << "per repetition, not " << r.out.timing.steps << " (" << format_duration(step_s) << " a step, "
       << format_duration(fitted.step_s) << " planned)";
  if (static_cast<double>(left_reps) * c.pair_weight * step_s > left)
    note << "; at the floor of one step a repetition, over its share";
  r.out.timing.steps = f.steps;
  r.out.timing.parity_steps = std::min(r.out.timing.parity_steps, f.parity_steps);
  if (!f.breakdown && !r.out.breakdown.summary.contains("skipped"))
    r.out.breakdown.summary = {{"skipped", "over the time budget"}};
  fitted.step_s = step_s;
  r.out.timing.budget_note += (r.out.timing.budget_note.empty() ? "" : "; ") + note.str();
  std::cerr << "    " << note.str() << "\n";
}

nlohmann::json RungRunner::held() {
  const MemoryStats m = meter.read();
  if (m.allocated > kHeldWarnBytes || m.reserved > kHeldWarnBytes)
    std::cerr << "    warning: " << std::fixed << std::setprecision(2) << m.allocated / 1e9 << " GB allocated, "
              << m.reserved / 1e9 << " GB reserved on the device before it starts: left behind by what ran before\n"
              << std::defaultfloat;
  return {{"allocated_bytes", m.allocated}, {"reserved_bytes", m.reserved}};
}

void RungRunner::release() noexcept {
  partner.reset();
  live.reset();
  try {
    synchronize(dev);
  } catch (...) {
  }
  try {
    empty_cache(dev);
  } catch (...) {
  }
}

double RungRunner::repetition(RungRecord& r, bool& stopped) {
  const Lap lap(budget, r.out.timing.seconds["timed"]);
  auto timer = make_step_timer(dev);
  if (clocks) clocks->start();
  const CoreShare cores;
  const TimedSteps t =
      time_steps(r.out.timing.steps, [&] { return slow_window().step(*live); }, *timer, [] { return g_signal != 0; });
  if (clocks) clocks->stop();
  if (partner && !dev.cuda()) r.out.pairing.core_shares.push_back(cores.share());
  stopped = t.stopped;
  if (t.seconds.empty()) return 0;
  double total = 0;
  for (double s : t.seconds) total += s;
  const double step_s = total / static_cast<double>(t.seconds.size());
  const MemoryStats mem = meter.read();
  const auto all = at::stack(t.losses).to(at::kDouble).cpu();  // read after timing
  const auto finite = at::isfinite(all);
  if (!finite.all().item<bool>()) {
    const int64_t bad = at::argmin(finite.to(at::kInt)).item<int64_t>();
    r.out.timing.diverged_at = r.out.timing.warmup_steps + static_cast<int64_t>(r.out.timing.rep_step_ms.size()) * r.out.timing.steps + bad + 1;
  }
  r.out.timing.final_loss = all[-1].item<double>();
  r.out.timing.rep_step_ms.push_back(1e3 * step_s);
  r.out.timing.rep_tokens_per_sec.push_back(static_cast<double>(r.tokens_per_step()) / step_s);
  if (!partner) r.out.memory.peak_alloc_bytes = mem.peak_allocated, r.out.memory.peak_reserved_bytes = mem.peak_reserved;
  if (dist && ranks(r.spec()) > 1) {
    const auto g = dist->allgather({1e3 * step_s, static_cast<double>(mem.peak_allocated)});
    r.out.per_rank.step_ms.clear(), r.out.per_rank.peak_alloc_bytes.clear();
    for (size_t k = 0; k + 1 < g.size(); k += 2) r.out.per_rank.step_ms.push_back(g[k]), r.out.per_rank.peak_alloc_bytes.push_back(g[k + 1]);
  }
  return total;
}

void RungRunner::pair(RungRecord& r, const std::vector<RungRecord>& records) {
  r.out.pairing = {};
  const RungRecord* with = compared_with(records, r);
  if (!with) return;  // the baseline: measured against nothing
  if (ranks(r.spec()) > 1 || ranks(with->spec()) > 1) {
    r.out.pairing.alone = "a data-parallel rung: its ranks take the same steps, none beside them";
    return;
  }
  const Lap lap(budget, r.out.timing.seconds["beside"]);
  try {
    partner = std::make_unique<TrainStep>(with->spec(), dev, data.train, prof.seed);
    for (int64_t w = 0; w < std::max<int64_t>(1, warmup_steps()); ++w) {
      const double t0 = budget.elapsed_s();
      slow_window().step(*partner);
      synchronize(dev);
      partner_step_s = budget.elapsed_s() - t0;
    }
    r.out.pairing.with = with->name();
  } catch (const c10::OutOfMemoryError& e) {
    partner.reset();
    try {
      empty_cache(dev);
    } catch (...) {
    }
    r.out.pairing.alone = "timed alone: out of memory with " + with->name() + " beside it (" +
                          first_line(e.what_without_backtrace()) + ")";
    std::cerr << "    " << r.out.pairing.alone << "\n";
  }
}

void RungRunner::partner_repetition(RungRecord& r, bool& stopped) {
  const Lap lap(budget, r.out.timing.seconds["beside"]);
  auto timer = make_step_timer(dev);
  const CoreShare cores;
  const TimedSteps t =
      time_steps(r.out.timing.steps, [&] { return slow_window().step(*partner); }, *timer, [] { return g_signal != 0; });
  if (!dev.cuda()) r.out.pairing.core_shares.push_back(cores.share());
  stopped = t.stopped;
  if (stopped || t.seconds.empty()) return;
  double total = 0;
  for (double s : t.seconds) total += s;
  r.out.pairing.with_tokens_per_sec.push_back(static_cast<double>(partner->tokens_per_step() * static_cast<int64_t>(t.seconds.size())) / total);
}

void RungRunner::breakdown_pass(RungRecord& r, const std::string& out_dir) {
  const Lap lap(budget, r.out.timing.seconds["breakdown"]);
  release();
  std::cerr << "    breakdown pass: " << prof.breakdown_steps << " steps\n";
  try {
    const Breakdown p = breakdown_rung(r.spec(), dev, data.train, prof.seed, static_cast<int>(prof.warmup_steps),
                                       static_cast<int>(prof.breakdown_steps), meter);
    write_breakdown(out_dir, r.plan.rung.name, p);
    nlohmann::json& summary = r.out.breakdown.summary = to_json(p.summary);
    summary.erase("by_name");  // every op or kernel name: in breakdown/<rung>.json, not in rungs.json
    summary["memory"] = to_json(p.memory);
    if (p.summary.counted_flops_per_step > 0)
      r.out.breakdown.counted_flops_per_token = p.summary.counted_flops_per_step / static_cast<double>(r.tokens_per_step());
  } catch (const std::exception& e) {
    const bool oom = dynamic_cast<const c10::OutOfMemoryError*>(&e) != nullptr;
    r.out.breakdown.summary = {{"error", (oom ? "out of memory in the breakdown pass: " : "the breakdown pass failed: ") + error_text(e)}};
    std::cerr << "    " << first_line(r.out.breakdown.summary["error"].get<std::string>()) << "\n";
  }
  release();
}

const RungRecord* RungRunner::parity_anchor(const RungRecord& r, const std::vector<RungRecord>* records) const {
  if (!records || records->empty() || ranks(r.spec()) > 1 || r.spec().batch == prof.batch) return nullptr;
  const RungRecord* on = compared_with(*records, r);
  if (!on || on->spec().batch != r.spec().batch || ranks(on->spec()) > 1 || !has_trajectory(on->out.parity) ||
      class_between(r.plan.rung.applied, on->plan.rung.applied) != ParityClass::kExact)
    return nullptr;
  return on;
}

const Trajectory* RungRunner::reference_at(int64_t batch, int64_t steps, std::string& why) {
  if (batch == prof.batch) return &baseline;
  if (const auto it = baseline_at.find(batch);
      it != baseline_at.end() && static_cast<int64_t>(it->second.losses.size()) >= steps)
    return &it->second;
  StepSpec s = baseline_spec;
  s.batch = batch;
  s.micro_batch = std::gcd(batch, prof.batch);
  std::cerr << "    parity reference at batch " << batch << ": " << steps << " baseline steps in micro-batches of "
            << s.micro_batch << "\n";
  try {
    return &(baseline_at[batch] = loss_trajectory(s, dev, data.train, prof.seed, static_cast<int>(steps)));
  } catch (const c10::OutOfMemoryError& e) {
    release();
    why = "the baseline ran out of memory at batch " + std::to_string(batch) + " in micro-batches of " +
          std::to_string(s.micro_batch) + " (" + first_line(e.what_without_backtrace()) + ")";
    return nullptr;
  }
}

void RungRunner::finish(RungRecord& r, bool is_baseline, const std::vector<RungRecord>* records) {
  release();
  if (r.out.timing.diverged_at) {
    r.out.status = RungStatus::kDiverged;
    r.out.error = "non-finite loss at step " + std::to_string(r.out.timing.diverged_at);
    return;
  }
  r.out.status = RungStatus::kOk;
  if (is_baseline) {
    r.out.parity.rule = "the reference";
    r.out.parity.losses = baseline.losses;
    r.out.parity.grad_norm = baseline.first_grad_norm;
    return;
  }
  // Data-parallel rungs run it whenever the profile asks (their ranks take it together).
  if (baseline.losses.empty() && !(ranks(r.spec()) > 1 && prof.parity_steps > 0)) {
    r.out.parity.rule = reference_error.empty() ? "no parity steps" : "no parity reference: " + reference_error;
    return;
  }
  // Data-parallel parity is at equal global batch: each of N ranks takes B/N of the rows.
  StepSpec s = r.spec();
  ParityClass cls = r.plan.rung.parity;
  if (ranks(s) > 1) {
    if (s.batch % ranks(s) == 0) s.batch /= ranks(s);
    else cls = ParityClass::kProblem;  // no equal global batch to compare with
  } else if (s.batch == prof.batch) {
    cls = class_at_equal_batch(r.plan.rung.applied);  // batch_scaling kept the profile's batch: the same problem
  }
  const Lap lap(budget, r.out.timing.seconds["parity"]);
  try {
    // fit() set the steps: the profile's, or fewer at the budget's floor (one process only)
    const Trajectory t = loss_trajectory(s, dev, data.train, prof.seed, static_cast<int>(r.out.timing.parity_steps), dist);
    const ParityClass same = class_at_equal_batch(r.plan.rung.applied);
    const bool at_batch = !baseline.losses.empty() && ranks(r.spec()) == 1 && s.batch != prof.batch &&
                          same != ParityClass::kProblem;
    std::string why;
    if (const RungRecord* on = parity_anchor(r, records)) {
      r.out.parity = judge_parity(same, t, trajectory_of(on->out.parity), on->name());
    } else if (const Trajectory* ref = at_batch ? reference_at(s.batch, t.losses.size(), why) : nullptr) {
      r.out.parity = judge_parity(same, t, *ref, baseline_at_batch(s.batch));
    } else {
      r.out.parity = baseline.losses.empty() ? ParityResult{} : judge_parity(cls, t, baseline);
      if (baseline.losses.empty()) r.out.parity.rule = "no parity reference: " + reference_error;
      if (!why.empty()) r.out.parity.rule += "; not at its batch: " + why;
    }
  } catch (const c10::OutOfMemoryError& e) {
    r.out.parity = ParityResult{};
    r.out.parity.rule = "out of memory in the parity run at batch " + std::to_string(s.batch) + ": " +
                    first_line(e.what_without_backtrace());
  }
  release();
}

void RungRunner::fail(RungRecord& r, const std::exception& e) {
  lost_device_exit().check(error_text(e));
  release();
  if (dynamic_cast<const c10::OutOfMemoryError*>(&e)) {
    r.out.status = RungStatus::kOom;
    r.out.error = "out of memory at batch " + std::to_string(r.spec().batch) + ": " + error_text(e);
  } else {
    r.out.status = RungStatus::kError;
    r.out.error = error_text(e);
  }
  if (dist && ranks(r.spec()) > 1) {  // a data-parallel rung failed: was it a lost rank?
    try {
      dynamic_cast<const DistError*>(&e) ? throw DistError(e.what()) : dist->rethrow(e);
    } catch (const DistError& d) {
      r.out.error = d.what();
    }
    abort_reason = r.out.error;  // the other ranks are gone or out of step: later rungs would hang
  }
}

RungRecord RungRunner::retime(const RungRecord& with, double share, const std::function<void()>& beside) {
  RungRecord again = with;
  again.out.timing.rep_step_ms.clear(), again.out.timing.rep_tokens_per_sec.clear(), again.out.batch_search.clear();
  again.out.timing.diverged_at = 0;
  again.out.timing.seconds.clear();
  if (beside) again.plan.rung.spec.search_batch = false;  // out of memory beside a reference: no halved batch, an error
  const double started = budget.elapsed_s();
  build(again, share);
  fit(again, share, started);
  for (int64_t rep = 0; rep < prof.repetitions; ++rep) {
    bool stopped = false;
    const bool beside_first = beside && rep % 2 == 1;  // C++ first, Python first, ...: a steady drift cancels by twos
    if (beside_first) beside();
    if (beside) live->step(), synchronize(dev);  // untimed, as the reference's: neither pays for the other's run
    repetition(again, stopped);
    if (beside && !beside_first && !stopped) beside();
    if (stopped) {
      again.out.status = RungStatus::kInterrupted;
      break;
    }
  }
  release();
  if (clocks) again.out.clocks = clocks->take();
  if (again.out.timing.diverged_at) again.out.status = RungStatus::kDiverged;
  return again;
}

int RungRunner::follow(std::vector<RungRecord>& records) {
  const char* delay = std::getenv("GPT2BENCH_TEST_FOLLOWER_DELAY_MS");
  auto next = [&] {
    if (delay) std::this_thread::sleep_for(std::chrono::milliseconds(std::atoi(delay)));
    return dist->next_message();
  };
  for (std::string msg; (msg = next()) != "done";) {
    std::istringstream in(msg);
    std::string name, chosen;
    int64_t batch = 0;
    in >> name >> batch;
    std::getline(in, chosen);
    auto it = std::find_if(records.begin(), records.end(), [&](const RungRecord& r) { return r.plan.rung.name == name; });
    if (it == records.end() || batch <= 0) throw DistError("rank 0 announced an unknown rung '" + msg + "'");
    RungRecord& r = *it;
    r.out.batch = batch;
    take_announced_choices(r, chosen);
    std::cerr << "[rank " << dist->rank() << "] " << r.plan.rung.name << ": following rank 0\n";
    dist->guarded([&] {
      build(r);
      fit(r, INFINITY, budget.elapsed_s());  // a data-parallel rung: the profile's steps
      bool stopped = false;
      for (int64_t rep = 0; rep < prof.repetitions && !stopped; ++rep) repetition(r, stopped);
      finish(r, false);
    });
  }
  dist->barrier();
  return 0;
}
}  // namespace gpt2
