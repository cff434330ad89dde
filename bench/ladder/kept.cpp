#include "bench/ladder/kept.h"

#include <algorithm>
#include <cstdio>

#include "bench/measure/stats.h"

namespace gpt2 {
namespace {

// "1.026x; 1.01-1.04x at 97%": the medians' ratio, then the interval noise alone leaves it.
std::string ratio_text(double r, const RatioInterval& ri) {
  char buf[80];
  std::snprintf(buf, sizeof(buf), "%.3fx; %.3f-%.3fx at %.0f%%", r, ri.low, ri.high, 100 * ri.level);
  return buf;
}

}  // namespace

KeptExtras choose_kept(const std::vector<RungRecord>& records) {
  struct Gain {
    std::string variant;
    double ratio;
    size_t entry;
  };
  KeptExtras k;
  std::vector<Gain> gains;
  for (const auto& r : records) {
    if (r.plan.kind != RungKind::kExtra) continue;
    const Variant* v = find_variant(r.plan.variant);
    if (!v || !v->keepable()) continue;
    nlohmann::json e = {{"variant", r.plan.variant}, {"rung", r.name()}, {"kept", false}};
    const RungRecord* top = compared_with(records, r);
    if (!r.ok()) {
      e["why"] = r.out.status == RungStatus::kPending ? "not run" : "its rung: " + to_string(r.out.status);
    } else if (r.out.parity.verdict == "fail") {
      e["why"] = "its rung failed parity";
    } else if (!top) {
      e["why"] = "no top rung ran to compare it with";
    } else {
      const double ratio = r.median_tokens_per_sec() / top->median_tokens_per_sec();
      const RatioInterval ri = ratio_interval(r.out.rep_tokens_per_sec, top->out.rep_tokens_per_sec);
      e["ratio"] = ratio;
      e["interval"] = {{"low", ri.low}, {"high", ri.high}, {"level", ri.level}};
      e["compared_with"] = top->name();
      const bool faster = ri.low > 1.0;  // beyond what noise alone could make of the repetitions
      e["why"] = (faster ? "faster than " : "not measurably faster than ") + top->name() + " (" + ratio_text(ratio, ri) + ")";
      if (faster) gains.push_back({r.plan.variant, ratio, k.why.size()});
    }
    k.why.push_back(e);
  }
  std::stable_sort(gains.begin(), gains.end(), [](const Gain& a, const Gain& b) { return a.ratio > b.ratio; });
  for (const auto& g : gains) {
    auto& e = k.why[g.entry];
    const auto clash = std::find_if(k.variants.begin(), k.variants.end(),
                                    [&](const std::string& kept) { return variants_conflict(kept, g.variant); });
    if (clash != k.variants.end()) {
      e["why"] = "conflicts with " + *clash + ", which gained more";
      continue;
    }
    e["kept"] = true;
    k.variants.push_back(g.variant);
  }
  return k;
}

ResolvedRung kept_recipe(const RungRecord& r, const std::vector<std::string>& kept, const StepSpec& base,
                         const DeviceInfo& dev) {
  return resolve(r.name(), recipe_with(r.plan.rung.variants, kept), base, dev);
}

std::vector<std::string> kept_variants(const nlohmann::json& why) {
  std::vector<std::string> out;
  if (!why.is_array()) return out;
  for (const auto& e : why)
    if (e.value("kept", false)) out.push_back(e.at("variant").get<std::string>());
  return out;
}

}  // namespace gpt2
