#include "bench/ladder/plan.h"

#include <algorithm>

#include "bench/ladder/kept.h"
#include "bench/runtime/device.h"

namespace gpt2 {

StepSpec recipe_base(const Profile& prof, const DeviceInfo& dev) {
  StepSpec base = baseline_spec(prof.model, prof.batch, dev);
  base.settings = prof.settings;
  base.optimizer.lr = prof.lr;
  return base;
}

void settle_kept(RungRecord& r, const std::vector<std::string>& kept, const Profile& prof, const DeviceInfo& dev) {
  r.plan.rung = kept_recipe(r, kept, recipe_base(prof, dev), dev);
  r.plan.flops = flop_model(r.plan.rung.spec.model);
}

void resettle_kept(std::vector<RungRecord>& records, const Profile& prof, const DeviceInfo& dev) {
  for (auto& r : records)
    if (r.plan.kind == RungKind::kKept && r.out.status != RungStatus::kPending && !kept_variants(r.out.kept).empty())
      settle_kept(r, kept_variants(r.out.kept), prof, dev);
}

std::vector<RungRecord> plan_rungs(const Profile& prof, const DeviceInfo& dev) {
  const StepSpec base = recipe_base(prof, dev);
  std::vector<RungRecord> records;
  for (const auto& plan : expand_plan(prof)) {
    RungRecord r;
    r.plan.rung = resolve(plan.name, plan.variants, base, dev);
    r.plan.kind = plan.kind;
    r.plan.compare_to = plan.compare_to;
    r.plan.variant = plan.variant;
    r.plan.ties = plan.ties;
    r.plan.benchmark_name = prof.model.preset + "/" + plan.name;
    r.plan.flops = flop_model(r.plan.rung.spec.model);
    r.plan.datasheet_peak = datasheet_peak_flops(dev, math_mode(r.plan.rung.spec));
    records.push_back(std::move(r));
  }
  for (size_t i = 1; i < records.size(); ++i) {
    auto& r = records[i];
    if (r.plan.rung.skipped.empty() || r.plan.kind == RungKind::kKept || r.plan.kind == RungKind::kControl) continue;
    // An extra (or add_one) rung is about its variant: without it here, it measures nothing of it (an
    // fp16_autocast extra on a CPU without fp16 was the top of the ladder in fp32, bf16_cast removed).
    if (r.plan.kind == RungKind::kExtra || r.plan.kind == RungKind::kAddOne) {
      const auto& sk = r.plan.rung.skipped;
      const auto it = std::find_if(sk.begin(), sk.end(), [&](const auto& k) { return k.variant == r.plan.variant; });
      if (it != sk.end()) {
        r.out.status = RungStatus::kSkipped;
        r.out.error = it->variant + " does not run here: " + it->reason;
        continue;
      }
    }
    for (size_t j = 0; j < i; ++j)
      if (records[j].plan.rung.spec == r.plan.rung.spec && records[j].out.status == RungStatus::kPending) {
        r.out.status = RungStatus::kSkipped;
        std::string names;
        for (const auto& k : r.plan.rung.skipped) names += (names.empty() ? "" : ", ") + k.variant;
        r.out.error = "the same step as " + records[j].plan.rung.name + " here (skipped here: " + names + ")";
        break;
      }
  }
  return records;
}

}  // namespace gpt2
