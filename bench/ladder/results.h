// defines: TeeReporter (console + Google Benchmark JSON kept in memory and
//          flushed after each rung), RungRecord (what rungs.json holds per rung), summary_table
#pragma once
#include <benchmark/benchmark.h>
#include <nlohmann/json.hpp>

#include <functional>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "bench/ladder/parity.h"
#include "bench/measure/choice.h"
#include "bench/measure/clocks.h"
#include "bench/measure/stats.h"
#include "config/profile.h"
#include "variants/registry.h"

namespace gpt2 {

enum class RungStatus { kPending, kOk, kSkipped, kDiverged, kOom, kInterrupted, kError };
std::string to_string(RungStatus s);
RungStatus rung_status_from(const std::string& s);  // throws std::invalid_argument on an unknown name

// The processes a rung may end (recording nothing) before --resume records it as an error instead of running it
// again: one such end may be a deadline's kill of a sound rung; a second in the same rung is the rung's.
constexpr int64_t kProcessEndsARungMayCause = 2;

// What a rung is: resolved from the plan and the device, then fixed (a run never writes it) — but for a kept rung
// (RungKind::kKept), whose recipe is settled when it starts, from the rungs before it (bench/ladder/kept.h).
struct RungPlanned {
  ResolvedRung rung;                  // name, variants applied and skipped, the StepSpec as planned
  std::string benchmark_name;
  RungKind kind = RungKind::kRecipe;
  std::string compare_to;             // the rung it is measured against ("" for the baseline)
  std::string variant;                // the variant it adds (or, dropping one, removes); "" if none
  bool ties = false;                  // a kept rung that also takes the extras that tied the top (kept.h)
  FlopModel flops;                    // the MFU numerator (model/config.h)
  // MFU's denominator: the device's dense bf16 tensor-core peak (datasheet; on the CPU the best
  // matmul rate measured in any precision), the same for every rung; none for an unknown GPU.
  std::optional<double> mfu_peak;
  std::string mfu_basis;
  bool mfu_unreliable = false;  // the MFU peak was raised to a rate a rung achieved: MFU shown as "?"
  std::optional<double> datasheet_peak;  // the datasheet peak of the precision the rung computes in
  double measured_peak = 0;              // the matmul rate measured here in that precision
  // batch_scaling's own rung: it searches the batch the rungs on the top then take.
  bool searches_own_batch() const { return rung.spec.search_batch && !on_the_top(kind); }
};

// The parts of what happened when a rung ran, each read from and written into its rungs.json entry (`rung`).
// The timed repetitions as run.
struct RungTiming {
  int64_t steps = 0;  // timed steps per repetition (the time budget may take fewer than the profile's)
  int64_t warmup_steps = 0;
  int64_t parity_steps = 0;   // its parity run's steps (the budget may take fewer than the profile's; 0 = the profile's)
  double warmup_step_s = 0;   // the last warm-up step's time: what the budget's fit is based on
  std::string budget_note;    // what the time budget changed for this rung ("" = nothing)
  std::vector<double> rep_tokens_per_sec, rep_step_ms;  // one per repetition
  double final_loss = 0;
  int64_t diverged_at = 0;  // the first step with a non-finite loss (1-based, warm-up included), 0 if none
  // Where the rung's wall time went, in seconds: what a lease's plan needs (most of a rung at the budget's floor is
  // not its timed steps). "choices": its settings timed; "search": the batch search; "build": its step built and
  // warmed up; "beside": the rung it is paired with, built and timed beside it; "timed": its repetitions;
  // "breakdown", "parity": those passes.
  std::map<std::string, double> seconds;
  void write(nlohmann::json& rung) const;  // "ran", "repetitions", "diverged_at_step"
  void read(const nlohmann::json& rung);
};
struct RungMemory {
  int64_t peak_alloc_bytes = 0, peak_reserved_bytes = 0;
  // What the device (the process, on a CPU) held when its step was built, the earlier rungs' step freed: a figure
  // that grows from rung to rung is memory left behind ({allocated_bytes, reserved_bytes}; null before it ran).
  nlohmann::json held_at_start;
  void write(nlohmann::json& rung) const;  // "held_at_start" (the peaks are in "median")
  void read(const nlohmann::json& rung);
};
// A data-parallel rung: per rank, its last repetition; tok/s over N times the one-process rung's.
struct RankFigures {
  std::vector<double> step_ms, peak_alloc_bytes;
  std::optional<double> scaling_efficiency;
  void write(nlohmann::json& rung) const;  // "rank_step_ms", "rank_peak_alloc_bytes", "scaling_efficiency"
  void read(const nlohmann::json& rung);
};

// The breakdown pass: its summary and memory (rungs.json's "breakdown"), or {"skipped"|"error": why}; null before
// it ran. The FLOPs a token counted from its op shapes go into "flops" (flops_json).
struct RungBreakdown {
  nlohmann::json summary;
  std::optional<double> counted_flops_per_token;
  void write(nlohmann::json& rung) const;
  void read(const nlohmann::json& rung);
};
// Ends that are not the rung's verdict: a device it left unusable (kept by --resume, not rerun), and the processes
// that ended in it recording nothing (a crash, a kill): it is said ahead ("in_flight") so --resume can count them,
// running it again after one and recording an error after kProcessEndsARungMayCause (run_dir.h).
struct ProcessEnds {
  bool device_fault = false;
  bool in_flight = false;
  int64_t ended = 0;
  void write(nlohmann::json& rung, bool pending) const;  // "device_fault", "in_flight", "ended_processes"
  void read(const nlohmann::json& rung);
};

// Paired timing (docs/measurement.md: Pairs): the rung it was measured against, timed beside it repetition by
// repetition (that rung's tok/s in each pair), or why it was timed alone.
struct RungPairing {
  std::string with;
  std::vector<double> with_tokens_per_sec;
  std::vector<double> core_shares;  // each side's repetitions on a CPU: the share of its cores the process got
  std::string alone;  // why it was timed alone ("" where paired, or before it ran)
  void write(nlohmann::json& rung, const std::vector<double>& own_tokens_per_sec) const;  // "paired"
  void read(const nlohmann::json& rung);
};

// What happened when it ran.
struct RungOutcome {
  RungStatus status = RungStatus::kPending;  // skipped: an earlier rung's step here
  std::string error;
  int64_t batch = 0;  // the batch it ran at (batch_scaling's choice after any back-off); 0 = the planned one
  RungTiming timing;
  RungMemory memory;
  RankFigures per_rank;
  ParityResult parity;
  // Settings settled by timing (bench/measure/choice.h): the candidate each ran with; other ranks are told it alone.
  std::vector<Choice> choices;
  std::string sdpa_backend_used = "n/a";
  RungBreakdown breakdown;
  nlohmann::json batch_search = nlohmann::json::array();  // batch_scaling's tries
  std::optional<ClockSummary> clocks;  // NVML's clocks, power, temperature over the timed repetitions
  RungPairing pairing;
  nlohmann::json kept;     // a kept rung: which extras joined and why (bench/ladder/kept.h); null otherwise
  ProcessEnds ends;
};

// One rung: the plan and, once it has run, the outcome; rungs.json holds both.
struct RungRecord {
  RungPlanned plan;
  RungOutcome out;

  const std::string& name() const { return plan.rung.name; }
  // The step the rung runs: the planned one at the batch it runs at, with its choices applied.
  StepSpec spec() const;
  int64_t tokens_per_step() const { return gpt2::tokens_per_step(spec()); }
  double flops_per_token() const { return plan.flops.per_token(); }
  bool ok() const { return out.status == RungStatus::kOk; }
  const Choice* choice(const std::string& setting) const;
  bool throttled() const { return out.clocks && out.clocks->throttled; }
  double median_tokens_per_sec() const;
  double median_step_ms() const;
  // Its shares of a time budget: two while it is still to search its batch (batch_scaling's rung: a build and a few
  // steps at each batch it tries take about what its own timing does; on an H100 the search left 12_batch_scaling
  // 0 s of a single share, one timed step a repetition), else one.
  int64_t budget_shares() const;
  // Model FLOPs/s over: the headline peak (MFU), the rung's precision's datasheet peak, the
  // matmul rate measured in that precision. nullopt where there is no such peak.
  std::optional<double> mfu(double tokens_per_sec) const;
  std::optional<double> mfu_vs_precision_peak(double tokens_per_sec) const;
  double mfu_vs_measured_peak(double tokens_per_sec) const;
  std::optional<double> mfu() const { return mfu(median_tokens_per_sec()); }
  // Its ratio to the rung it was timed beside; nullopt where it was timed alone.
  std::optional<PairedRatio> paired() const;
};
nlohmann::json to_json(const RungRecord& r);
// The outcome of a rung back from rungs.json (for --resume); the plan is the one resolved now.
void restore(RungRecord& r, const nlohmann::json& j);

// Display reporter for RunSpecifiedBenchmarks: shows the console output and keeps Google
// Benchmark's own JSON document in memory; after each benchmark's runs it calls `on_rung(name)`.
class TeeReporter : public benchmark::BenchmarkReporter {
 public:
  // `console`: also show Google Benchmark's own console table (gpt2bench ladder --verbose). A run of
  // Google Benchmark for each rung: the context is kept from the first.
  explicit TeeReporter(bool console);
  bool ReportContext(const Context& c) override;
  void ReportRuns(const std::vector<Run>& runs) override;
  void Finalize() override;
  // Google Benchmark's JSON with the runs so far, closed so that it parses.
  std::string json_so_far() const;

 private:
  benchmark::ConsoleReporter console_;
  benchmark::JSONReporter json_;
  std::ostringstream json_out_, json_err_;
  bool console_on_, context_reported_ = false;
};

// One line for a rung that has ended (what the console shows as it goes): status, tok/s, the ratio
// to the rung it is compared with (`against`), parity, spread. Never longer than 160 characters.
std::string rung_line(const RungRecord& r, const RungRecord* against);
// Where its wall time went ("    took 25s: choices 14s, build 2.9s, timed 2.6s, parity 5.5s"); "" before it ran.
std::string seconds_line(const RungRecord& r);

// No rung measured: none ok, and one at least diverged, out of memory or in error (not merely skipped).
bool nothing_measured(const std::vector<RungRecord>& ran);
// The run's status in rungs.json: interrupted (a signal), aborted (a lost rank), partial (a rung
// ended in error, oom or interrupted, a reference in error, or nothing measured), else complete.
std::string run_status(const std::vector<RungRecord>& ran, bool interrupted, bool aborted, bool reference_failed = false);

// The rung `r` is measured against: its compare_to, or where that one is not `usable`, that one's, and so on; by
// default the ok one (where the planned one did not run).
const RungRecord* compared_with(const std::vector<RungRecord>& rungs, const RungRecord& r,
                                const std::function<bool(const RungRecord&)>& usable = {});

// `r` over the rung it is measured against: the paired ratio where it was timed beside it, else the medians'.
double ratio_to(const RungRecord& r, const RungRecord& against);
// Its rungs that were timed while the machine's speed moved more than their difference (stats.h: disturbed), with
// how far it moved: "01_mask_on_the_fly (moved 1.98x)"; empty where none was.
std::vector<std::string> disturbed_rungs(const std::vector<RungRecord>& rungs);
// How far: "moved 1.98x", and on a CPU shared with other work ", 52% of its cores".
std::string disturbance(const PairedRatio& p);

// The closing table: rung, tok/s, speedup over the previous rung and over the baseline, memory, MFU, parity.
std::string summary_table(const std::vector<RungRecord>& rungs, bool cuda);
// After the table: a line for each rung that failed parity, what it was judged against and how far it was off
// ("" where none failed).
std::string parity_failures(const std::vector<RungRecord>& rungs);

}  // namespace gpt2
