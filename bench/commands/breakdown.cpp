#include "bench/commands/breakdown.h"

#include <algorithm>
#include <cstdio>
#include <stdexcept>

#include "bench/ladder/batch_search.h"
#include "bench/ladder/choices.h"
#include "bench/ladder/plan.h"
#include "bench/measure/breakdown.h"
#include "bench/runtime/device.h"

namespace gpt2 {
namespace {

// The rungs asked for: the one named ("07_sdpa" or "sdpa"), else every one-process rung but the top's second timing
// (the top's step again). A kept rung is settled by a ladder run: refused, saying so.
std::vector<RungRecord*> rungs_asked(std::vector<RungRecord>& records, const std::string& rung) {
  std::vector<RungRecord*> chosen;
  for (auto& r : records) {
    const bool named = r.name() == rung || rung_label(r.name()) == rung;
    if (named && r.plan.kind == RungKind::kKept)
      throw std::runtime_error("rung '" + r.name() + "' is settled by a ladder run (the extras that beat the top "
                               "there): its breakdown pass is part of `gpt2bench ladder --rung " + r.name() + "`");
    const bool all = rung.empty() && r.plan.kind != RungKind::kControl;
    if ((all || named) && r.out.status == RungStatus::kPending && ranks(r.spec()) == 1 && r.plan.kind != RungKind::kKept)
      chosen.push_back(&r);
  }
  if (chosen.empty()) {
    std::string names;
    for (const auto& r : records) names += (names.empty() ? "" : ", ") + r.name();
    throw std::runtime_error("no rung named '" + rung + "' to profile (rungs: " + names + ")");
  }
  return chosen;
}

// batch_scaling's batch as in the ladder (RungRunner::take_top_batch): a rung on the top at the batch the top's
// search chose, searched here for the top (as planned: past the rungs the plan skipped) where it is not asked for.
void settle_batch(RungRecord& r, std::vector<RungRecord>& records, const DeviceInfo& dev, ChoiceTimings& choices,
                  const Profile& prof, const TokenData& data, MemoryMeter& meter) {
  if (!r.plan.rung.spec.search_batch) return;
  const RungRecord* top = on_the_top(r.plan.kind) ? compared_with(records, r, [](const RungRecord& o) {
    return o.out.status != RungStatus::kSkipped;
  }) : nullptr;
  RungRecord& owner = top && top->plan.rung.spec.search_batch ? records[static_cast<size_t>(top - records.data())] : r;
  if (owner.out.batch == 0) {
    choices.settle(owner, dev, false);
    owner.out.batch = find_batch(owner.spec(), dev, data.train, prof.seed, meter, owner.out.batch_search);
  }
  r.out.batch = owner.out.batch;
  if (&owner != &r)
    std::fprintf(stderr, "    %s: at %s's batch %lld\n", r.name().c_str(), owner.name().c_str(),
                 static_cast<long long>(r.out.batch));
}

}  // namespace

int run_breakdown(const BreakdownOptions& o) {
  Profile prof = load_profile(o.profile_path);
  DeviceInfo dev = detect_device(o.device.empty() ? prof.device : o.device);
  std::vector<RungRecord> records = plan_rungs(prof, dev);
  const TokenData data = load_token_data(prof.data, prof.model.vocab_size, prof.seed);
  const std::vector<RungRecord*> chosen = rungs_asked(records, o.rung);
  const int steps = static_cast<int>(std::max<int64_t>(1, prof.breakdown_steps));
  auto meter = make_memory_meter(dev);
  std::printf("%-28s %10s %10s %9s %9s %9s %9s %9s %9s\n", "rung", "events", "step ms", "data", "forward", "loss",
              "backward", "optim", "overhead");
  ChoiceTimings choices;
  for (RungRecord* r : chosen) {
    choices.settle(*r, dev, false);
    settle_batch(*r, records, dev, choices, prof, data, *meter);
    choices.settle(*r, dev, true);
    const Breakdown p = breakdown_rung(r->spec(), dev, data.train, prof.seed, static_cast<int>(prof.warmup_steps),
                                       steps, *meter);
    write_breakdown(o.out_dir, r->name(), p);
    auto ph = [&](const char* k) { return p.summary.phase_ms.count(k) ? p.summary.phase_ms.at(k) : 0.0; };
    std::printf("%-28s %10.0f %10.2f %9.2f %9.2f %9.2f %9.2f %9.2f %8.1f%%\n", r->name().c_str(),
                p.summary.events_per_step, p.summary.step_ms, ph("data"), ph("forward"), ph("loss"), ph("backward"),
                ph("optimizer"), 100 * p.summary.overhead);
  }
  std::printf("(events per step: %s; phase times in ms per step; written to %s/breakdown/)\n",
              dev.cuda() ? "kernel launches" : "ATen ops", o.out_dir.c_str());
  return 0;
}

}  // namespace gpt2
