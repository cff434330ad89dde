#include "bench/ladder/ladder.h"

#include <benchmark/benchmark.h>

#include <algorithm>
#include <csignal>
#include <functional>
#include <iostream>
#include <memory>

#include "bench/ladder/kept.h"
#include "bench/ladder/lost_device.h"
#include "bench/ladder/plan.h"
#include "bench/ladder/reference.h"
#include "bench/ladder/reference_rungs.h"
#include "bench/ladder/run_dir.h"
#include "bench/ladder/rung.h"
#include "bench/ladder/select.h"
#include "bench/ladder/slow_window.h"
#include "bench/runtime/nvtx.h"
#include "common/errors.h"
#include "common/files.h"
#include "common/python.h"

namespace gpt2 {

namespace {

// The rung that measures the same step on one process: the data-parallel rung without ddp.
const RungRecord* single_process_twin(const std::vector<RungRecord>& records, const RungRecord& r) {
  for (const auto& o : records) {
    if (o.out.status != RungStatus::kOk || ranks(o.spec()) != 1) continue;
    StepSpec a = o.spec(), b = r.spec();
    a.dist = b.dist;
    a.executor = b.executor;  // ddp runs eagerly where the single-process rung may use a CUDA graph
    if (a == b) return &o;
  }
  return nullptr;
}

extern "C" void on_signal(int sig) { g_signal = sig; }

// Google Benchmark's counters for one repetition (`step_s`: its mean step time).
void set_counters(benchmark::State& st, RungRecord& rec, double step_s, std::vector<RungRecord>& records,
                  Peaks* peaks) {
  const double tps = static_cast<double>(rec.tokens_per_step()) / step_s;
  if (peaks) peaks->hold(rec, rec.flops_per_token() * tps, records);  // before any MFU is taken
  st.counters["tokens_per_sec"] = tps;
  st.counters["step_ms"] = 1e3 * step_s;
  st.counters["peak_alloc_bytes"] = static_cast<double>(rec.out.memory.peak_alloc_bytes);
  st.counters["peak_reserved_bytes"] = static_cast<double>(rec.out.memory.peak_reserved_bytes);
  st.counters["loss"] = rec.out.timing.final_loss;
  st.counters["flops_per_token"] = rec.flops_per_token();
  if (const auto mfu = rec.mfu(tps)) st.counters["mfu"] = *mfu;
  if (const auto own = rec.mfu_vs_precision_peak(tps)) st.counters["mfu_vs_precision_peak"] = *own;
  st.counters["mfu_vs_measured_peak"] = rec.mfu_vs_measured_peak(tps);
  if (ranks(rec.spec()) > 1) {
    st.counters["world_size"] = ranks(rec.spec());
    if (auto single = single_process_twin(records, rec)) {
      rec.out.per_rank.scaling_efficiency = tps / (ranks(rec.spec()) * single->median_tokens_per_sec());
      st.counters["scaling_efficiency"] = *rec.out.per_rank.scaling_efficiency;
    }
  }
}

// A rung begins: said ahead in rungs.json (a process that ends in it recording nothing leaves it said, for
// --resume), a kept rung settled, its share of the time budget; then built, warmed up, paired with the rung it is
// measured against and fitted to that share. A kept rung with nothing to keep ends skipped.
void start_rung(RungRecord& rec, size_t i, size_t n_rungs, RungRunner& ladder, std::vector<RungRecord>& records) {
  rec.out.ends.in_flight = true;
  if (ladder.save_running) ladder.save_running();
  if (rec.plan.kind == RungKind::kKept && !ladder.settle(rec, records)) return;
  if (rec.plan.kind == RungKind::kControl)
    rec.out.breakdown.summary = {{"skipped", "the top's step again: its breakdown is the top's"}};
  const double started = ladder.budget.elapsed_s();
  const int64_t shares = rec.budget_shares();  // before its search sets its batch
  const double share = ladder.budget.share_s(ladder.rungs_to_run - ladder.rungs_started) * static_cast<double>(shares);
  ladder.rungs_started += shares;
  std::cerr << "[" << i + 1 << "/" << n_rungs << "] " << rec.name() << ": build + " << ladder.warmup_steps()
            << " warm-up steps\n";
  ladder.take_top_batch(rec, records);
  ladder.build(rec, share);
  ladder.pair(rec, records);
  ladder.fit(rec, share, started);
  lost_device_exit().inject(rec, ladder.dev);
}

// One timed repetition, one Google Benchmark iteration timed by hand: the rung and its partner by turns, the partner
// first in odd repetitions, so that a steady drift cancels by twos. A stop (a signal), a divergence or a failure
// ends the rung; Google Benchmark records the rest as skipped, with why.
void timed_repetition(benchmark::State& st, RungRecord& rec, bool is_baseline, RungRunner& ladder,
                      std::vector<RungRecord>& records) {
  const int64_t rep = static_cast<int64_t>(rec.out.timing.rep_step_ms.size());
  if (rec.out.status != RungStatus::kPending) {  // ended in an earlier repetition, or before (not run, oom, error)
    st.SkipWithError(first_line(rec.out.error).c_str());
    return;
  }
  try {
    bool stopped = false;
    const bool beside_first = ladder.partner && rep % 2 == 1;
    if (beside_first) ladder.partner_repetition(rec, stopped);
    const double total_s = stopped ? 0 : ladder.repetition(rec, stopped);
    if (ladder.partner && !beside_first && !stopped) ladder.partner_repetition(rec, stopped);
    if (stopped) {
      ladder.release();
      rec.out.status = RungStatus::kInterrupted;
      rec.out.error = "interrupted during repetition " + std::to_string(rep + 1);
      st.SkipWithError(rec.out.error.c_str());
      return;
    }
    st.SetIterationTime(total_s);
    if (rec.out.timing.diverged_at) {  // no counters: a non-finite one would not be JSON
      ladder.finish(rec, is_baseline, &records);
      st.SkipWithError(rec.out.error.c_str());
      return;
    }
    set_counters(st, rec, total_s / static_cast<double>(rec.out.timing.steps), records, ladder.peaks);
    ladder.replan(rec);
  } catch (const std::exception& e) {
    ladder.fail(rec, e);
    st.SkipWithError(first_line(rec.out.error).c_str());
  }
}

// The rung's repetitions as one Google Benchmark (its manual-time idiom: Iterations(1), Repetitions(N)), reported
// to `reporter`, which keeps Google Benchmark's JSON and console table.
void time_repetitions(RungRecord& rec, bool is_baseline, RungRunner& ladder, std::vector<RungRecord>& records,
                      TeeReporter& reporter) {
  if (rec.out.status == RungStatus::kPending) slow_window().open(rec.name());
  auto fn = [&](benchmark::State& st) {
    for (auto _ : st) timed_repetition(st, rec, is_baseline, ladder, records);
  };
  benchmark::RegisterBenchmark(rec.plan.benchmark_name.c_str(), fn)
      ->UseManualTime()
      ->Iterations(1)
      ->Repetitions(static_cast<int>(ladder.prof.repetitions))
      ->Unit(benchmark::kMillisecond);
  benchmark::RunSpecifiedBenchmarks(&reporter);
  benchmark::ClearRegisteredBenchmarks();
}

// After its last repetition: its clocks, the breakdown pass (one process), then parity (RungRunner::finish).
void end_rung(RungRecord& rec, bool is_baseline, RungRunner& ladder, std::vector<RungRecord>& records,
              const std::string& out_dir) {
  if (ladder.clocks) {
    rec.out.clocks = ladder.clocks->take();
    if (rec.throttled()) std::cerr << "    THROTTLED: " << rec.out.clocks->throttled_why << "\n";
  }
  if (ladder.prof.breakdown_steps > 0 && ranks(rec.spec()) == 1 && !rec.out.breakdown.summary.contains("skipped"))
    ladder.breakdown_pass(rec, out_dir);
  ladder.finish(rec, is_baseline, &records);
}

// One rung's life, top to bottom: begun (build, warm-up, partner, fit), its timed repetitions, its breakdown pass
// and parity; then rungs.json and results.json rewritten, and its line said. Any failure ends the rung with its
// status (oom, error, interrupted, diverged), and the next rung starts on a clean device.
void run_rung(size_t i, RungRunner& ladder, std::vector<RungRecord>& records, const std::string& out_dir,
              TeeReporter& reporter, RunWriter& writer) {
  RungRecord& rec = records[i];
  NvtxRange rung_range(rec.plan.benchmark_name.c_str());  // nsys shows the ladder's structure
  struct InFlight {  // what a lost device records (bench/ladder/lost_device.h)
    explicit InFlight(RungRecord& r) { lost_device_exit().set_in_flight(&r); }
    ~InFlight() { lost_device_exit().set_in_flight(nullptr); }
  } in_flight(rec);
  if (!ladder.abort_reason.empty() || g_signal) {
    rec.out.status = g_signal ? RungStatus::kInterrupted : RungStatus::kError;
    rec.out.error = g_signal ? "not run: interrupted" : "not run: " + ladder.abort_reason;
  }
  auto guarded = [&](const std::function<void()>& stage) {
    try {
      if (rec.out.status == RungStatus::kPending) stage();
    } catch (const std::exception& e) {
      ladder.fail(rec, e);
    }
  };
  guarded([&] { start_rung(rec, i, records.size(), ladder, records); });
  time_repetitions(rec, i == 0, ladder, records, reporter);
  guarded([&] { end_rung(rec, i == 0, ladder, records, out_dir); });
  writer.flush(records, "running");
  std::cerr << rung_line(rec, compared_with(records, rec)) << "\n";
  if (const std::string took = seconds_line(rec); !took.empty()) std::cerr << took << "\n";
}

// The summary table and the exit code: 130 interrupted, 1 on an error or a lost rank, else 0.
int conclude(const std::vector<RungRecord>& ran, const RungRunner& ladder, const RunWriter& writer, const std::string& dir) {
  std::cout << "\n" << summary_table(ran, ladder.dev.cuda());
  if (const auto& refs = writer.references(); !refs.empty()) {
    std::cout << "reference rungs (the same step in Python PyTorch; not in the speed-ups):\n";
    for (const auto& ref : refs) std::cout << reference_line(ref) << "\n";
  }
  std::cout << "\nresults: " << writer.results_path()
            << "\n         " << writer.rungs_path() << "\n";
  bool errored = references_failed(writer.references());
  for (const auto& r : ran) errored = errored || r.out.status == RungStatus::kError;
  if (nothing_measured(ran)) {
    std::cout << "\nno rung was measured: each ended diverged, out of memory or in error (above)\n";
    errored = true;
  }
  if (const std::string failed = parity_failures(ran); !failed.empty()) std::cout << "\n" << failed;
  if (const auto moved = disturbed_rungs(ran); !moved.empty()) {
    std::cout << "\nDISTURBED: the machine's speed moved more than these rungs' differences while they were timed; "
                 "their ratios are not claimed:\n";
    for (const auto& m : moved) std::cout << "    " << m << "\n";
  }
  if (g_signal) {
    std::cout << "\ninterrupted: the finished rungs are saved; gpt2bench ladder --resume " << dir << " runs the rest\n";
    return 130;
  }
  if (!ladder.abort_reason.empty()) std::cout << "\naborted: " << ladder.abort_reason << "\n";
  return errored || !ladder.abort_reason.empty() ? 1 : 0;
}

// The run's first line, and a warning where its repetitions are too few to tell a difference from noise.
void say_start(const std::vector<RungRecord>& records, const Profile& prof, const DeviceInfo& dev, const Dist* dist) {
  std::cerr << "gpt2bench: " << records.size() << " rung(s) of profile '" << prof.name << "' on " << dev.name << " ("
            << (dev.cuda() ? "cuda" : "cpu") << ", torch " << torch_version()
            << (dist ? ", " + std::to_string(dist->world_size()) + " processes, " + dist->backend() : std::string())
            << ")\n";
  if (prof.repetitions < 5)
    std::cerr << "gpt2bench: warning: " << prof.repetitions << " repetitions per rung: too few to tell a real "
              << "difference from noise (the median's interval and the U test want 5 or more; GPUs 9)\n";
}

// The rungs that ran (or ended without running): those the filter left out stay "pending" in rungs.json and out of
// the summary.
std::vector<RungRecord> rungs_that_ran(const std::vector<RungRecord>& records) {
  std::vector<RungRecord> ran;
  for (const auto& r : records)
    if (r.out.status != RungStatus::kPending) ran.push_back(r);
  return ran;
}

// Beyond the profile, what must hold before anything is measured or written: one batch of every rung's in the
// data, and the Python the selected references run.
void check_inputs(const LadderOptions& o, const Profile& prof, const std::vector<RungRecord>& records,
                  const TokenData& data) {
  for (const auto& r : records)
    if (r.out.status != RungStatus::kSkipped) Loader(data.train, r.spec().batch, r.spec().model.context, 0, ranks(r.spec()));
  if (!selected_references(o.rung_filter, prof).empty()) check_python_runs(project_python());
}

// --resume of a complete run with nothing selected left to run: said, and nothing written (its peaks stand too).
bool left_as_it_is(const LadderOptions& o, const Profile& prof, const std::vector<RungRecord>& records, const Kept& kept) {
  if (!o.resume || !kept.complete || runs_to_make(o.rung_filter, prof, records, kept.references) != 0) return false;
  std::cout << o.out_dir << " is complete: nothing to run (its rungs, references and peaks stand as they are)\n";
  return true;
}

// The run directory made (a new run) or found (--resume), and locked for this process (run_dir.h: RunLock).
std::unique_ptr<RunLock> claim_run_dir(const LadderOptions& o) {
  if (!o.resume) files::create_dirs(o.out_dir);
  else if (!files::is_dir(o.out_dir)) throw std::runtime_error(o.out_dir + ": nothing to resume (no such directory)");
  return std::make_unique<RunLock>(o.out_dir);
}

// The parity reference: the baseline's losses over K steps from the seed's weights and data. Out of
// memory (the fp32 baseline at batch 32 on an 80 GB GPU) leaves the rungs to run without parity.
void parity_reference(RungRunner& ladder, const StepSpec& baseline) {
  const Profile& prof = ladder.prof;
  if (prof.parity_steps <= 0 || g_signal) return;
  std::cerr << "gpt2bench: parity reference, " << prof.parity_steps << " baseline steps...\n";
  ladder.baseline_spec = baseline;
  try {
    ladder.baseline =
        loss_trajectory(baseline, ladder.dev, ladder.data.train, prof.seed, static_cast<int>(prof.parity_steps));
  } catch (const c10::OutOfMemoryError& e) {
    ladder.release();
    ladder.reference_error = "the baseline ran out of memory at batch " + std::to_string(baseline.batch) + " (" +
                             first_line(e.what_without_backtrace()) + ")";
    std::cerr << "gpt2bench: no parity reference: " << ladder.reference_error << "; the rungs run without parity\n";
  }
}

// Google Benchmark set up once a process: its context (kept until exit: its Shutdown() leaves a dangling pointer
// that a second ladder in the same process, as tests/choice_test.cpp runs, would write through) and its flags.
void start_benchmark(const Profile& prof, const DeviceInfo& dev) {
  static const bool started = [&] {
    benchmark::AddCustomContext("device", dev.name);
    benchmark::AddCustomContext("device_type", dev.cuda() ? "cuda" : "cpu");
    benchmark::AddCustomContext("torch_version", torch_version());
    benchmark::AddCustomContext("git_sha", git_sha());
    benchmark::AddCustomContext("profile", prof.name);
    benchmark::AddCustomContext("world_size", std::to_string(dev.world_size));
    // (colour: TeeReporter's own console reporter decides; Google Benchmark's flag is for its default one)
    static std::vector<std::string> args = {"gpt2bench", "--benchmark_counters_tabular=true"};
    static std::vector<char*> argv;  // Google Benchmark keeps argv[0] (its context's executable)
    for (auto& a : args) argv.push_back(a.data());
    int argc = static_cast<int>(argv.size());
    benchmark::Initialize(&argc, argv.data());
    return true;
  }();
  (void)started;
}

// The ladder: each rung --rung selects, one after the other (run_rung), with the run's progress after each; then
// the other ranks told that the data-parallel rungs are done.
void run_rungs(const LadderOptions& o, RungRunner& ladder, std::vector<RungRecord>& records, RunWriter& writer,
               TeeReporter& reporter) {
  if (std::any_of(records.begin(), records.end(), [&](const RungRecord& r) { return rung_selected(o.rung_filter, r); }))
    writer.attach(&reporter);  // --rung may select reference rungs alone
  start_benchmark(ladder.prof, ladder.dev);
  int64_t done = 0;
  for (size_t i = 0; i < records.size(); ++i) {
    if (!rung_selected(o.rung_filter, records[i])) continue;
    run_rung(i, ladder, records, o.out_dir, reporter, writer);
    std::cerr << "gpt2bench: " << ladder.budget.progress(++done, ladder.rungs_to_run) << "\n";
  }
  if (ladder.dist) {
    ladder.dist->post("done");
    if (ladder.abort_reason.empty()) ladder.dist->barrier();  // every rank has read it (follow): the store may go
  }
}

}  // namespace

int run_ladder(const LadderOptions& o) {
  // 1. Everything that can fail on bad input, before DIR is touched.
  Profile prof = load_profile(o.profile_path);
  const auto env = dist_env_from_environment();
  const DeviceInfo dev = rank_device(o.device.empty() ? prof.device : o.device, !o.device.empty(), env);
  std::vector<RungRecord> records = plan_rungs(prof, dev);
  check_rung_filter(o.rung_filter, records, prof);
  const TimeBudget budget(run_budget_s(prof, dev));
  (void)hang_limit_s(dev), (void)slow_window();  // GPT2BENCH_HANG_S, _FAULT_SLOW refused before DIR is touched
  const TokenData data = load_token_data(prof.data, prof.model.vocab_size, prof.seed);
  check_inputs(o, prof, records, data);
  std::unique_ptr<Dist> dist;
  if (env && env->world_size > 1) dist = std::make_unique<Dist>(*env, dev, std::chrono::seconds(prof.dist_timeout_s));
  auto meter = make_memory_meter(dev);
  if (dist && dist->rank() != 0) {  // the other ranks write nothing: they follow rank 0's data-parallel rungs
    meter->set_limit(prof.settings.cpu_memory_budget);
    // rank 0's budget: a data-parallel rung's warm-up steps are every rank's (ranks step together)
    RungRunner follower{.prof = prof, .dev = dev, .data = data, .meter = *meter, .dist = dist.get(), .budget = budget};
    if (prof.parity_steps > 0) follower.baseline.losses.assign(prof.parity_steps, 0.0);  // only its length is used
    return follower.follow(records);
  }
  const std::string build_id = gpt2::build_id();
  const auto lock = claim_run_dir(o);  // one process a run directory, from here to the end
  Kept kept = resume_or_start(o.resume, o.out_dir, prof, records, build_id, dev);
  resettle_kept(records, prof, dev);
  if (left_as_it_is(o, prof, records, kept)) return 0;
  // From here on Ctrl-C / SIGTERM stop the rung in flight at its next step; the finished rungs stay on disk.
  auto old_int = std::signal(SIGINT, on_signal), old_term = std::signal(SIGTERM, on_signal);
  say_start(records, prof, dev, dist.get());

  // 2. The peaks, the writer, the parity reference.
  Peaks peaks(dev);
  peaks.measure_for(records, kept.measured);
  RunWriter writer(o.out_dir, run_header(prof, dev, records, build_id, o.rung_filter), std::move(kept), &peaks);
  const LostDeviceExit::Armed armed(lost_device_exit(), dev, records, writer);
  // From here on the CPU runs out of memory as a GPU does: at the allocation that goes over the
  // budget, wherever it is (batch search, build, warm-up, timed steps, breakdown, parity).
  meter->set_limit(prof.settings.cpu_memory_budget);
  RungRunner ladder{.prof = prof, .dev = dev, .data = data, .meter = *meter, .dist = dist.get(),
                    .clocks = make_clock_sampler(dev), .budget = budget};
  ladder.rungs_to_run = runs_to_make(o.rung_filter, prof, records, writer.references());
  ladder.choices.keep(records);
  ladder.save_running = [&writer, &records] { writer.flush(records, "running"); };
  ladder.peaks = &peaks;
  if (budget.limited())
    std::cerr << "gpt2bench: time budget " << format_duration(budget.total_s()) << " for " << ladder.rungs_to_run
              << " rung(s): each takes the timed steps that fit its share (at least 1 per repetition)\n";
  writer.flush(records, "running");
  parity_reference(ladder, records[0].plan.rung.spec);

  // 3. The rungs under Google Benchmark, the results rewritten after each.
  TeeReporter reporter(o.verbose);
  run_rungs(o, ladder, records, writer, reporter);
  // 4. The Python reference rungs, on the same device, data and batch; beside the rungs, not in them.
  if (!g_signal && ladder.abort_reason.empty()) run_reference_rungs(o, ladder, records, writer);
  std::signal(SIGINT, old_int), std::signal(SIGTERM, old_term);
  const std::vector<RungRecord> ran = rungs_that_ran(records);
  writer.flush(records, run_status(ran, g_signal != 0, !ladder.abort_reason.empty(), references_failed(writer.references())));
  return conclude(ran, ladder, writer, o.out_dir);
}

}  // namespace gpt2
