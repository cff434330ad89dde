#include "bench/ladder/results.h"

#include <unistd.h>

#include <algorithm>
#include <iomanip>

#include "bench/ladder/budget.h"
#include "bench/measure/stats.h"
#include "common/enum_names.h"
#include "common/errors.h"
#include "common/files.h"
#include "common/format.h"

namespace gpt2 {

NLOHMANN_JSON_SERIALIZE_ENUM(RungStatus, {{RungStatus::kPending, "pending"}, {RungStatus::kOk, "ok"},
                                         {RungStatus::kSkipped, "skipped"}, {RungStatus::kDiverged, "diverged"},
                                         {RungStatus::kOom, "oom"}, {RungStatus::kInterrupted, "interrupted"},
                                         {RungStatus::kError, "error"}})
std::string to_string(RungStatus s) { return enum_name(s); }
RungStatus rung_status_from(const std::string& s) {
  for (RungStatus k : {RungStatus::kPending, RungStatus::kOk, RungStatus::kSkipped, RungStatus::kDiverged,
                       RungStatus::kOom, RungStatus::kInterrupted, RungStatus::kError})
    if (to_string(k) == s) return k;
  throw std::invalid_argument("unknown rung status '" + s + "'");
}

StepSpec RungRecord::spec() const {
  StepSpec s = plan.rung.spec;
  if (out.batch > 0) s.batch = out.batch, s.search_batch = false;
  for (const auto& c : out.choices)
    if (const Chooser* chooser = find_chooser(c.setting)) chooser->apply(s, c.chosen);
  return s;
}

const Choice* RungRecord::choice(const std::string& setting) const {
  for (const auto& c : out.choices)
    if (c.setting == setting) return &c;
  return nullptr;
}

double RungRecord::median_tokens_per_sec() const { return median(out.timing.rep_tokens_per_sec); }

int64_t RungRecord::budget_shares() const {
  return plan.searches_own_batch() && out.batch == 0 ? 2 : 1;
}
double RungRecord::median_step_ms() const { return median(out.timing.rep_step_ms); }

std::optional<PairedRatio> RungRecord::paired() const {
  if (out.pairing.with.empty() || out.pairing.with_tokens_per_sec.empty() || out.timing.rep_tokens_per_sec.empty())
    return std::nullopt;
  PairedRatio p = paired_ratio(out.timing.rep_tokens_per_sec, out.pairing.with_tokens_per_sec);
  if (!out.pairing.core_shares.empty()) p.core_share = median(out.pairing.core_shares);
  return p;
}

double ratio_to(const RungRecord& r, const RungRecord& against) {
  if (const auto p = r.paired(); p && r.out.pairing.with == against.name()) return p->ratio.median;
  return r.median_tokens_per_sec() / against.median_tokens_per_sec();
}

std::string disturbance(const PairedRatio& p) {
  return strf("moved %.2fx", p.movement) +
         (p.core_share < kBusyCoreShare ? strf(", %.0f%% of its cores", 100 * p.core_share) : std::string());
}

std::vector<std::string> disturbed_rungs(const std::vector<RungRecord>& rungs) {
  std::vector<std::string> out;
  for (const auto& r : rungs)
    if (const auto p = r.ok() ? r.paired() : std::nullopt; p && disturbed(*p))
      out.push_back(r.name() + " (" + disturbance(*p) + ")");
  return out;
}

void RungPairing::write(nlohmann::json& rung, const std::vector<double>& own) const {
  if (!alone.empty()) rung["paired"] = {{"alone", alone}};
  if (with.empty()) return;
  nlohmann::json& j = rung["paired"] = {{"with", with}, {"with_tokens_per_sec", with_tokens_per_sec}};
  PairedRatio p = paired_ratio(own, with_tokens_per_sec);
  if (!core_shares.empty()) {
    j["core_shares"] = core_shares;
    j["core_share"] = p.core_share = median(core_shares);
    j["busy"] = p.core_share < kBusyCoreShare;  // other work took its cores
  }
  if (p.ratios.empty()) return;
  j["ratios"] = p.ratios;
  j["ratio"] = p.ratio.median;
  j["interval"] = {p.ratio.low, p.ratio.high};
  j["level"] = p.ratio.level;
  j["movement"] = p.movement;
  j["disturbed"] = disturbed(p);
}

void RungPairing::read(const nlohmann::json& rung) {
  if (!rung.contains("paired")) return;
  const auto& j = rung["paired"];
  with = j.value("with", "");
  alone = j.value("alone", "");
  if (j.contains("with_tokens_per_sec")) with_tokens_per_sec = j["with_tokens_per_sec"].get<std::vector<double>>();
  if (j.contains("core_shares")) core_shares = j["core_shares"].get<std::vector<double>>();
}

std::optional<double> RungRecord::mfu(double tps) const {
  if (!plan.mfu_peak || *plan.mfu_peak <= 0) return std::nullopt;
  return flops_per_token() * tps / *plan.mfu_peak;
}
std::optional<double> RungRecord::mfu_vs_precision_peak(double tps) const {
  if (!plan.datasheet_peak || *plan.datasheet_peak <= 0) return std::nullopt;
  return flops_per_token() * tps / *plan.datasheet_peak;
}
double RungRecord::mfu_vs_measured_peak(double tps) const {
  return plan.measured_peak > 0 ? flops_per_token() * tps / plan.measured_peak : 0.0;
}

nlohmann::json opt(const std::optional<double>& v) { return v ? nlohmann::json(*v) : nlohmann::json(); }

// The FLOP model with its numbers, and the count from the profiling pass beside it, compared with
// the formula's variant that matches the attention the rung computes (the manual attention
// computes the full T×T matrix; SDPA with is_causal the lower triangle).
nlohmann::json flops_json(const RungRecord& r) {
  const FlopModel& f = r.plan.flops;
  // SDPA's math fallback (e.g. dropout > 0 on the CPU) computes the full matrix as the manual one does.
  const bool manual = r.plan.rung.spec.model.attention != AttentionImpl::kSdpa || r.out.sdpa_backend_used == "math";
  nlohmann::json j = {{"per_token", f.per_token()},
                      {"formula", f.formula},
                      {"matmul_weights", f.matmul_weights},
                      {"attention_causal_per_token", f.attention_causal},
                      {"attention_noncausal_per_token", f.attention_full},
                      {"per_token_noncausal", f.per_token_full_attention()},
                      {"shares", {{"blocks", f.shares().blocks}, {"lm_head", f.shares().lm_head},
                                  {"attention", f.shares().attention}}}};
  if (const auto counted = r.out.breakdown.counted_flops_per_token) {
    const double expect = manual ? f.per_token_full_attention() : f.per_token();
    j["counted_per_token"] = *counted;
    j["counted_compared_with"] = manual ? "per_token_noncausal (this attention computes the full T x T matrix)"
                                        : "per_token (causal SDPA kernel)";
    j["counted_vs_formula"] = *counted / expect;
  }
  return j;
}

// The seed-000 rung a rung reproduces: its highest-numbered variant's (-1 if none, 0 for the baseline).
// Rungs with an extra (not a seed-000 rung) have none.
int published_rung(const ResolvedRung& r) {
  int best = 0;
  for (const auto& v : r.variants) {
    const Variant* var = find_variant(v);
    if (!var || var->extra()) return -1;
    best = std::max(best, var->published_rung);
  }
  return best;
}

// A finished rung's figures: medians, each repetition's, and their spread.
void add_figures(nlohmann::json& j, const RungRecord& r) {
  const double tps = r.median_tokens_per_sec();
  j["median"] = {{"tokens_per_sec", tps}, {"step_ms", r.median_step_ms()},
                 {"mfu", opt(r.mfu(tps))}, {"mfu_vs_precision_peak", opt(r.mfu_vs_precision_peak(tps))},
                 {"mfu_vs_measured_peak", r.mfu_vs_measured_peak(tps)}, {"peak_alloc_bytes", r.out.memory.peak_alloc_bytes},
                 {"peak_reserved_bytes", r.out.memory.peak_reserved_bytes}, {"loss", r.out.timing.final_loss}};
  j["repetitions"] = {{"tokens_per_sec", r.out.timing.rep_tokens_per_sec}, {"step_ms", r.out.timing.rep_step_ms}};
  const MedianInterval ci = median_interval(r.out.timing.rep_tokens_per_sec);
  j["spread"] = {{"tokens_per_sec_ci", {ci.low, ci.high}},
                 {"ci_level", ci.level},
                 {"ci_method", "distribution-free interval of the median from order statistics (binomial)"},
                 {"cv", coefficient_of_variation(r.out.timing.rep_tokens_per_sec)},
                 {"repetitions", ci.n}};
}

nlohmann::json to_json(const RungRecord& r) {
  nlohmann::json skipped = nlohmann::json::array();
  for (const auto& s : r.plan.rung.skipped) skipped.push_back({{"variant", s.variant}, {"reason", s.reason}});
  nlohmann::json j = {
      {"name", r.plan.rung.name},
      {"kind", to_string(r.plan.kind)},
      {"compare_to", r.plan.compare_to},
      {"variant", r.plan.variant},
      {"ties", r.plan.ties},
      {"benchmark", r.plan.benchmark_name},
      {"status", r.out.status},
      {"variants", r.plan.rung.variants},
      {"published_rung", published_rung(r.plan.rung)},
      {"applied", r.plan.rung.applied},
      {"anti_variant", r.plan.rung.anti},  // slowed on purpose: never taken for the run's fastest
      {"skipped", skipped},
      {"spec", r.spec()},  // the step as it ran (batch_scaling's batch); the planned batch beside it
      {"planned_batch", r.plan.rung.spec.batch},
      {"tokens_per_step", r.tokens_per_step()},
      {"flops_per_token", r.flops_per_token()},
      {"precision", to_string(math_mode(r.plan.rung.spec))},  // what its matmuls compute in: the report reads it
      {"flops", flops_json(r)},
      {"peak_flops", {{"mfu", opt(r.plan.mfu_peak)}, {"mfu_basis", r.plan.mfu_basis},
                      {"datasheet", opt(r.plan.datasheet_peak)}, {"measured_matmul", r.plan.measured_peak}}},
      {"parity", to_json(r.out.parity, r.plan.rung.parity)},
  };
  if (!r.out.error.empty()) j["error"] = r.out.error;
  r.out.ends.write(j, r.out.status == RungStatus::kPending);
  j["sdpa_backend_used"] = r.out.sdpa_backend_used;
  if (!r.out.choices.empty()) j["choices"] = r.out.choices;
  r.out.breakdown.write(j);
  if (ranks(r.plan.rung.spec) > 1) {
    j["world_size"] = ranks(r.plan.rung.spec);
    r.out.per_rank.write(j);
  }
  if (!r.out.batch_search.empty()) j["batch_search"] = r.out.batch_search;
  if (r.out.clocks) j["clocks"] = to_json(*r.out.clocks);
  if (!r.out.kept.is_null()) j["kept"] = r.out.kept;
  r.out.memory.write(j);
  r.out.timing.write(j);
  r.out.pairing.write(j, r.out.timing.rep_tokens_per_sec);
  if (r.out.status == RungStatus::kOk) add_figures(j, r);
  return j;
}

void restore(RungRecord& r, const nlohmann::json& j) {
  r.out.status = rung_status_from(j.at("status").get<std::string>());
  r.out.error = j.value("error", "");
  r.out.ends.read(j);
  r.out.batch = j.at("spec").at("batch").get<int64_t>();
  r.out.parity = parity_result_from(j.at("parity"));
  r.out.sdpa_backend_used = j.value("sdpa_backend_used", "n/a");
  for (const auto& c : j.value("choices", nlohmann::json::array())) r.out.choices.push_back(choice_from(c));
  if (j.contains("batch_search")) r.out.batch_search = j["batch_search"];
  if (j.contains("clocks")) r.out.clocks = clock_summary_from(j["clocks"]);
  if (j.contains("kept")) r.out.kept = j["kept"];
  r.out.breakdown.read(j);
  r.out.timing.read(j);
  r.out.memory.read(j);
  r.out.per_rank.read(j);
  r.out.pairing.read(j);
}

void RungBreakdown::write(nlohmann::json& rung) const {
  if (!summary.is_null()) rung["breakdown"] = summary;
}

void RungBreakdown::read(const nlohmann::json& rung) {
  if (rung.contains("breakdown")) summary = rung["breakdown"];
  if (rung.contains("flops") && rung["flops"].contains("counted_per_token"))
    counted_flops_per_token = rung["flops"]["counted_per_token"].get<double>();
}

void ProcessEnds::write(nlohmann::json& rung, bool pending) const {
  if (device_fault) rung["device_fault"] = true;
  if (pending && in_flight) rung["in_flight"] = true;
  if (ended > 0) rung["ended_processes"] = ended;
}

void ProcessEnds::read(const nlohmann::json& rung) {
  device_fault = rung.value("device_fault", false);
  ended = rung.value("ended_processes", int64_t{0});
}

void RungTiming::write(nlohmann::json& rung) const {
  if (diverged_at) rung["diverged_at_step"] = diverged_at;
  if (steps > 0)
    rung["ran"] = {{"warmup_steps", warmup_steps}, {"warmup_step_s", warmup_step_s}, {"steps_per_repetition", steps},
                   {"repetitions", rep_step_ms.size()}, {"parity_steps", parity_steps}, {"budget", budget_note},
                   {"seconds", seconds}};
}

void RungTiming::read(const nlohmann::json& rung) {
  diverged_at = rung.value("diverged_at_step", int64_t{0});
  if (rung.contains("ran")) {
    const auto& ran = rung["ran"];
    steps = ran.at("steps_per_repetition").get<int64_t>();
    warmup_steps = ran.at("warmup_steps").get<int64_t>();
    parity_steps = ran.value("parity_steps", int64_t{0});
    warmup_step_s = ran.at("warmup_step_s").get<double>();
    budget_note = ran.value("budget", "");
    seconds = ran.value("seconds", std::map<std::string, double>{});
  }
  if (rung.contains("repetitions")) {
    rep_tokens_per_sec = rung["repetitions"].at("tokens_per_sec").get<std::vector<double>>();
    rep_step_ms = rung["repetitions"].at("step_ms").get<std::vector<double>>();
  }
  if (rung.contains("median")) final_loss = rung["median"].at("loss").get<double>();
}

void RungMemory::write(nlohmann::json& rung) const {
  if (!held_at_start.is_null()) rung["held_at_start"] = held_at_start;
}

void RungMemory::read(const nlohmann::json& rung) {
  if (rung.contains("held_at_start")) held_at_start = rung["held_at_start"];
  if (rung.contains("median")) {
    peak_alloc_bytes = rung["median"].at("peak_alloc_bytes").get<int64_t>();
    peak_reserved_bytes = rung["median"].at("peak_reserved_bytes").get<int64_t>();
  }
}

void RankFigures::write(nlohmann::json& rung) const {
  rung["rank_step_ms"] = step_ms;
  rung["rank_peak_alloc_bytes"] = peak_alloc_bytes;
  rung["scaling_efficiency"] = scaling_efficiency ? nlohmann::json(*scaling_efficiency) : nlohmann::json();
}

void RankFigures::read(const nlohmann::json& rung) {
  if (rung.contains("rank_step_ms")) step_ms = rung["rank_step_ms"].get<std::vector<double>>();
  if (rung.contains("rank_peak_alloc_bytes")) peak_alloc_bytes = rung["rank_peak_alloc_bytes"].get<std::vector<double>>();
  if (rung.contains("scaling_efficiency") && !rung["scaling_efficiency"].is_null())
    scaling_efficiency = rung["scaling_efficiency"].get<double>();
}

// Colour only on a terminal: a ConsoleReporter of our own does not read --benchmark_color.
TeeReporter::TeeReporter(bool console)
    : console_(isatty(STDOUT_FILENO) ? benchmark::ConsoleReporter::OO_ColorTabular : benchmark::ConsoleReporter::OO_Tabular),
      console_on_(console) {
  json_.SetOutputStream(&json_out_);
  json_.SetErrorStream(&json_err_);
}

bool TeeReporter::ReportContext(const Context& c) {
  if (context_reported_) return true;
  context_reported_ = true;
  console_.SetOutputStream(&GetOutputStream());
  console_.SetErrorStream(&GetErrorStream());
  json_.ReportContext(c);
  return console_on_ ? console_.ReportContext(c) : true;
}

void TeeReporter::ReportRuns(const std::vector<Run>& runs) {
  if (console_on_) console_.ReportRuns(runs);
  json_.ReportRuns(runs);
}

void TeeReporter::Finalize() {
  if (console_on_) console_.Finalize();
}

const RungRecord* compared_with(const std::vector<RungRecord>& rungs, const RungRecord& r,
                                const std::function<bool(const RungRecord&)>& usable) {
  for (std::string name = r.plan.compare_to; !name.empty();) {
    auto it = std::find_if(rungs.begin(), rungs.end(), [&](const RungRecord& o) { return o.plan.rung.name == name; });
    if (it == rungs.end()) return nullptr;
    if (usable ? usable(*it) : it->out.status == RungStatus::kOk) return &*it;
    name = it->plan.compare_to;
  }
  return nullptr;
}

std::string rung_line(const RungRecord& r, const RungRecord* against) {
  if (r.out.status != RungStatus::kOk) {
    return strf("    %s %s: %s", r.plan.rung.name.c_str(), to_string(r.out.status).c_str(),
                clip(first_line(r.out.error), 110).c_str());
  }
  const double t = r.median_tokens_per_sec();
  const auto p = r.paired();
  const std::string how = !against ? "" : p && disturbed(*p) ? " paired, DISTURBED: " + disturbance(*p)
                                      : p                    ? std::string(" paired")
                                                             : std::string(" alone");
  const std::string vs =
      against ? strf("%.2fx vs %s%s", ratio_to(r, *against), against->plan.rung.name.c_str(), how.c_str()) : "-";
  const std::string line = strf("    %s ok: %.0f tok/s, %s, parity %s, cv %.1f%%%s", r.plan.rung.name.c_str(), t,
                                vs.c_str(), r.out.parity.verdict.c_str(),
                                100 * coefficient_of_variation(r.out.timing.rep_tokens_per_sec),
                                r.throttled() ? ", THROTTLED" : "");
  return clip(line, 160);
}

std::string seconds_line(const RungRecord& r) {
  const auto& took = r.out.timing.seconds;
  double total = 0;
  std::string parts;
  for (const char* what : {"choices", "search", "build", "beside", "timed", "breakdown", "parity"}) {
    const auto it = took.find(what);
    if (it == took.end() || it->second < 0.05) continue;
    total += it->second;
    parts += strf("%s%s %s", parts.empty() ? "" : ", ", what, format_duration(it->second).c_str());
  }
  return parts.empty() ? "" : "    took " + format_duration(total) + ": " + parts;
}

std::string TeeReporter::json_so_far() const {
  if (json_out_.str().empty()) return R"({"benchmarks": []})";  // stopped before the first rung began
  return json_out_.str() + "\n  ]\n}\n";
}

bool nothing_measured(const std::vector<RungRecord>& ran) {
  const auto is = [&](RungStatus st) {
    return std::any_of(ran.begin(), ran.end(), [&](const RungRecord& r) { return r.out.status == st; });
  };
  return !is(RungStatus::kOk) && (is(RungStatus::kDiverged) || is(RungStatus::kOom) || is(RungStatus::kError));
}

std::string run_status(const std::vector<RungRecord>& ran, bool interrupted, bool aborted, bool reference_failed) {
  if (interrupted) return "interrupted";
  if (aborted) return "aborted";
  if (reference_failed) return "partial";
  for (const auto& r : ran)
    if (r.out.status == RungStatus::kError || r.out.status == RungStatus::kOom || r.out.status == RungStatus::kInterrupted) return "partial";
  return nothing_measured(ran) ? "partial" : "complete";
}

// The parity verdict's figures in the closing table: the largest loss deviation (and the first gradient's norm
// ratio), or a rung of another problem's first-batch loss before and after.
std::string parity_figures(const ParityResult& p) {
  if (p.verdict == "n/a") return "";
  if (p.judged_as == ParityClass::kProblem && !p.losses.empty())  // losses of another problem
    return strf(" (first batch's loss %.3f -> %.3f)", p.losses.front(), p.first_batch_after);
  if (p.grad_norm_ratio > 0) return strf(" (max dev %.2e, |grad| %.3fx)", p.max_abs_dev, p.grad_norm_ratio);
  return strf(" (max dev %.2e)", p.max_abs_dev);
}

// Under the closing table: the rungs parity was judged against instead of the baseline, units, MFU's basis.
std::string table_footer(const std::vector<std::string>& anchors, bool cuda, const std::string& mfu_basis) {
  std::ostringstream s;
  for (const auto& a : anchors)
    s << "(parity*: judged against " << a
      << (against_baseline(a) ? ", its fp32 step in micro-batches" : ", the rung they are built on at their batch")
      << "; docs/measurement.md: Parity)\n";
  s << "(ratios paired, vs base their product down to it; ?: the machine's speed moved more than the difference, "
       "not claimed)\n(memory in GB; " << (cuda ? "reserved = CUDA caching allocator" : "peak RSS = process high-water mark")
    << ")\nMFU: model FLOPs/s (matmuls only, rungs.json's flops.formula) over " << mfu_basis << "\n";
  return s.str();
}

std::string parity_failures(const std::vector<RungRecord>& rungs) {
  std::string s;
  for (const auto& r : rungs) {
    const ParityResult& p = r.out.parity;
    if (p.verdict != "fail") continue;
    const std::string ref =
        p.against.empty() ? "the baseline" : against_baseline(p.against) ? "the " + p.against : p.against;
    s += "!! PARITY FAILED: " + r.name() + " against " + ref + ": " +
         (p.worst_param.empty() ? "" : strf("furthest parameter %s %.3fx, ", p.worst_param.c_str(), p.worst_param_ratio)) +
         strf("losses within %.3g (rungs.json's parity.rule: which check; docs/measurement.md: Parity)\n", p.max_abs_dev);
  }
  return s;
}

std::string summary_table(const std::vector<RungRecord>& rungs, bool cuda) {
  std::ostringstream s;
  auto gb = [](int64_t b) { return strf("%.3f", b / 1e9); };
  s << std::left << std::setw(28) << "rung" << std::right << std::setw(12) << "tok/s" << std::setw(9) << "vs prev"
    << std::setw(9) << "vs base" << std::setw(11) << "step ms" << std::setw(12) << "peak alloc" << std::setw(12)
    << (cuda ? "reserved" : "peak RSS") << std::setw(9) << "MFU" << "  parity\n";
  const RungRecord* base = nullptr;
  std::vector<std::string> told;  // each skipped variant's reason is printed once
  std::vector<std::string> anchors;
  for (const auto& r : rungs) {
    s << std::left << std::setw(28) << r.plan.rung.name << std::right;
    if (r.out.status != RungStatus::kOk) {
      s << "  " << to_string(r.out.status) << (r.out.error.empty() ? "" : ": " + r.out.error.substr(0, r.out.error.find('\n'))) << "\n";
      for (const auto& sk : r.plan.rung.skipped) told.push_back(sk.variant);
      continue;
    }
    const double t = r.median_tokens_per_sec();
    const RungRecord* prev = compared_with(rungs, r);
    auto mark = [](const RungRecord& x) { const auto p = x.paired(); return p && disturbed(*p) ? "?" : ""; };
    const std::string vs_prev = prev ? strf("%.2fx%s", ratio_to(r, *prev), mark(r)) : "-";
    // Over the baseline: the product of the paired links down to it (each link's drift cancels), else the medians'.
    double chained = 1;
    std::string shaky;
    for (const RungRecord* at = &r; base && at && at != base; at = compared_with(rungs, *at)) {
      const RungRecord* on = compared_with(rungs, *at);
      chained = on ? chained * ratio_to(*at, *on) : t / base->median_tokens_per_sec();
      if (!on) break;
      shaky = shaky.empty() ? mark(*at) : shaky;
    }
    const std::string vs_base = base ? strf("%.2fx%s", chained, shaky.c_str()) : "-";
    const auto m = r.mfu();
    const std::string mfu = !m ? "-" : r.plan.mfu_unreliable ? "?" : strf("%.2f%%", 100.0 * *m);
    s << std::setw(12) << strf("%.0f", t) << std::setw(9) << vs_prev << std::setw(9) << vs_base << std::setw(11)
      << strf("%.2f", r.median_step_ms()) << std::setw(12) << gb(r.out.memory.peak_alloc_bytes) << std::setw(12)
      << gb(r.out.memory.peak_reserved_bytes) << std::setw(9) << mfu
      << "  " << (r.out.parity.verdict == "fail" ? "FAIL" : r.out.parity.verdict);
    // judged against the rung it is built on at its batch (the top), or the baseline at it: marked, named under the table
    const bool against = !r.out.parity.against.empty() && r.out.parity.judged_as != ParityClass::kProblem;
    if (against) {
      s << "*";
      if (std::find(anchors.begin(), anchors.end(), r.out.parity.against) == anchors.end())
        anchors.push_back(r.out.parity.against);
    }
    s << parity_figures(r.out.parity);
    if (r.throttled()) s << "  THROTTLED: " << r.out.clocks->throttled_why;
    for (const auto& sk : r.plan.rung.skipped)
      if (std::find(told.begin(), told.end(), sk.variant) == told.end()) {
        told.push_back(sk.variant);
        s << "\n" << std::string(30, ' ') << "skipped " << sk.variant << ": " << sk.reason;
      }
    s << "\n";
    if (!base) base = &r;
  }
  return s.str() + table_footer(anchors, cuda, rungs.empty() ? std::string("-") : rungs[0].plan.mfu_basis);
}

}  // namespace gpt2
