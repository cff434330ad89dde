#include "bench/ladder/kept.h"

#include <algorithm>

#include "bench/measure/stats.h"
#include "common/format.h"

namespace gpt2 {
namespace {

// "1.026x; 1.01-1.04x at 97%": the medians' ratio, then the interval noise alone leaves it.
std::string ratio_text(double r, const RatioInterval& ri) {
  return strf("%.3fx; %.3f-%.3fx at %.0f%%", r, ri.low, ri.high, 100 * ri.level);
}

// An extra's rung against one timing of the top: its ratio and interval into `e`; whether it is beyond noise. Timed
// beside it: the pairs' ratio and interval, and never beyond noise where the machine moved more than that.
bool beats(const RungRecord& r, const RungRecord& top, nlohmann::json& e, double& ratio) {
  if (const auto p = r.paired(); p && r.out.pairing.with == top.name()) {
    ratio = p->ratio.median;
    const bool moved = disturbed(*p);
    e = {{"rung", top.name()}, {"ratio", ratio}, {"paired", true},
         {"interval", {{"low", p->ratio.low}, {"high", p->ratio.high}, {"level", p->ratio.level}}},
         {"text", strf("%.3fx; %.3f-%.3fx at %.0f%%, paired%s", ratio, p->ratio.low, p->ratio.high,
                       100 * p->ratio.level, moved ? strf(", disturbed: moved %.2fx", p->movement).c_str() : "")}};
    return !moved && p->ratio.low > 1.0;
  }
  ratio = r.median_tokens_per_sec() / top.median_tokens_per_sec();
  const RatioInterval ri = ratio_interval(r.out.timing.rep_tokens_per_sec, top.out.timing.rep_tokens_per_sec);
  e = {{"rung", top.name()}, {"ratio", ratio}, {"interval", {{"low", ri.low}, {"high", ri.high}, {"level", ri.level}}},
       {"text", ratio_text(ratio, ri)}};
  return ri.low > 1.0;  // beyond what noise alone could make of the repetitions
}

// The top timed again after the extras, where it ran at r's batch: the second timing r must beat; else none (a
// top timed again at another batch is another step).
const RungRecord* again_at(const RungRecord* again, const RungRecord& r) {
  return again && again->spec().batch == r.spec().batch ? again : nullptr;
}

// An anti-variant's rung (slowed on purpose; on a CPU sync_every_step adds nothing) measured faster than the top
// before and after it (`again`, where it ran) is the machine's drift, not a gain: the largest such gain (the smaller
// of its two ratios), said in `text`; 1 where none.
double anti_variant_drift(const std::vector<RungRecord>& records, const RungRecord* again, std::string& text) {
  double drift = 1;
  for (const auto& r : records) {
    if (r.plan.kind != RungKind::kExtra || !r.plan.rung.anti || !r.ok()) continue;
    const RungRecord* top = compared_with(records, r);
    if (!top || r.spec().batch != top->spec().batch) continue;  // at another batch: another step, not drift
    nlohmann::json before, after;
    double ratio = 0, ratio_after = 0;
    bool faster = beats(r, *top, before, ratio);
    const RungRecord* later = again_at(again, r);
    if (later) {
      faster = beats(r, *later, after, ratio_after) && faster;
      ratio = std::min(ratio, ratio_after);
    }
    if (faster && ratio > drift) {
      drift = ratio;
      text = strf("%s, slowed on purpose and yet %.3fx the top%s: the machine's drift", r.name().c_str(), ratio,
                  later ? " timed before and after it" : "");
    }
  }
  return drift;
}

// Faster than the top timed before it and, where it ran, after it (`later`): a gain, not the drift between them,
// and more than the anti-variants' drift. Its gain (`ratio`) is the smaller of the two ratios; the entry says why.
bool judged_faster(const RungRecord& r, const RungRecord& top, const RungRecord* later, double drift,
                   const std::string& drift_text, nlohmann::json& e, double& ratio) {
  nlohmann::json before, after;
  double ratio_after = 0;
  const bool faster_before = beats(r, top, before, ratio);
  e["ratio"] = ratio;
  e["interval"] = before["interval"];
  e["compared_with"] = top.name();
  std::string why = (faster_before ? "faster than " : "not measurably faster than ") + top.name() + " (" +
                    before["text"].get<std::string>() + ")";
  bool faster = faster_before;
  if (later) {
    const bool faster_after = beats(r, *later, after, ratio_after);
    e["again"] = after;
    e["again"].erase("text");
    const std::string than = later->name() + ", the top timed again after the extras (" +
                             after["text"].get<std::string>() + ")";
    if (faster_before == faster_after) why += " and than " + than;
    else if (faster_before) why += ", but not measurably faster than " + than;
    else why += ", but faster than " + than;
    faster = faster_before && faster_after;
    ratio = std::min(ratio, ratio_after);
  }
  if (faster && ratio <= drift) {
    why += ", but by no more than " + drift_text;
    faster = false;
  }
  e["why"] = why;
  return faster;
}

// Not measurably slower than the top, nor than its second timing where it ran: each interval (judged_faster's
// entry) reaches 1.
bool tied(const nlohmann::json& e) {
  auto reaches_one = [](const nlohmann::json& x) { return x["interval"]["high"].get<double>() >= 1.0; };
  const bool moved = e.value("why", "").find("disturbed") != std::string::npos;  // its pairs say nothing, no tie
  return !moved && reaches_one(e) && (!e.contains("again") || reaches_one(e["again"]));
}

}  // namespace

KeptExtras choose_kept(const std::vector<RungRecord>& records, bool ties) {
  struct Gain {
    std::string variant;
    double ratio;
    size_t entry;
  };
  KeptExtras k;
  std::vector<Gain> gains;
  // The top timed again after the extras, where it ran and passed parity: the second timing each must beat.
  const auto found = std::find_if(records.begin(), records.end(), [](const RungRecord& r) {
    return r.plan.kind == RungKind::kControl && r.ok() && r.out.parity.verdict != "fail";
  });
  const RungRecord* again = found == records.end() ? nullptr : &*found;
  std::string drift_text;
  const double drift = anti_variant_drift(records, again, drift_text);
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
    } else if (r.spec().batch != top->spec().batch) {
      // Backed off to a smaller batch (out of memory at the top's): its tok/s holds the batch's effect too. On the
      // first H100 run, memory left behind made every extra but one back off from 64 to 32, and the top timed again
      // with them: extras at 32 were held against the top at 64.
      e["why"] = "ran at batch " + std::to_string(r.spec().batch) + ", " + top->name() + " at " +
                 std::to_string(top->spec().batch) + ": another step, not compared";
    } else if (double ratio = 0; judged_faster(r, *top, again_at(again, r), drift, drift_text, e, ratio)) {
      gains.push_back({r.plan.variant, ratio, k.why.size()});
    } else if (ties && tied(e)) {
      e["tie"] = true;
      e["why"] = e["why"].get<std::string>() + "; not measurably slower either: a tie";
      gains.push_back({r.plan.variant, ratio, k.why.size()});
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
