#include "bench/ladder/ladder.h"

#include <benchmark/benchmark.h>

#include <ATen/ATen.h>
#include <regex.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdlib>
#include <functional>
#include <iomanip>
#include <iostream>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <thread>

#include "bench/ladder/backoff.h"
#include "bench/ladder/budget.h"
#include "bench/measure/clocks.h"
#include "bench/measure/sdpa_choice.h"
#include "bench/runtime/datasheet.h"
#include "bench/runtime/device.h"
#include "bench/runtime/graph_capture.h"
#include "bench/runtime/dist.h"
#include "bench/runtime/memory.h"
#include "bench/runtime/nvtx.h"
#include "bench/ladder/kept.h"
#include "bench/ladder/lost_device.h"
#include "bench/ladder/parity.h"
#include "bench/ladder/peaks.h"
#include "bench/ladder/reference.h"
#include "common/python.h"
#include "config/profile.h"
#include "bench/measure/breakdown.h"
#include "bench/ladder/results.h"
#include "bench/ladder/run_dir.h"
#include "bench/step/train_step.h"
#include "common/errors.h"
#include "common/files.h"

namespace gpt2 {

namespace {

// batch_scaling: the largest power-of-two batch that fits, trying upwards from the profile's (as a
// power of two) to settings.max_batch. "Fits" means no out-of-memory error over two steps of the
// rung's own step (a CUDA-graph step captures and replays): on the CPU, within
// settings.cpu_memory_budget. Each try is recorded; the rung then checks the answer (backoff.h).
// Under a time budget (`seconds` finite) the search also stops before a batch whose rung would take
// more than `seconds` at the floor of `floor_steps` steps, judged from the last probe's step time.
int64_t find_batch(const StepSpec& spec, const DeviceInfo& dev, const at::Tensor& tokens, uint64_t seed,
                   MemoryMeter& meter, nlohmann::json& trace, double seconds = INFINITY, int64_t floor_steps = 0) {
  int64_t b = 1, best = 0;
  double step_s = 0;
  const auto search_start = std::chrono::steady_clock::now();
  while (b * 2 <= spec.batch) b *= 2;
  for (; b <= spec.settings.max_batch; b *= 2) {
    StepSpec s = spec;
    s.batch = b;  // per rank: a data-parallel rung searches on rank 0 alone, then all ranks use it
    s.search_batch = false;
    s.dist.backend = "none";
    empty_cache(dev);
    meter.reset_peak();
    try {
      TrainStep ts(s, dev, tokens, seed);
      ts.step();
      synchronize(dev);
      const auto t1 = std::chrono::steady_clock::now();
      ts.step();
      synchronize(dev);
      step_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t1).count();
    } catch (const c10::OutOfMemoryError& e) {  // the same path a rung's OOM takes: caught, cache freed
      empty_cache(dev);
      trace.push_back({{"batch", b}, {"fits", false}, {"stage", "search"}, {"why", first_line(e.what_without_backtrace())}});
      break;
    }
    const MemoryStats mem = meter.read();
    trace.push_back({{"batch", b}, {"fits", true}, {"stage", "search"}, {"peak_alloc_bytes", mem.peak_allocated},
                     {"peak_reserved_bytes", mem.peak_reserved}});
    best = b;
    // The next batch's rung, at about twice this step time, with the search so far spent.
    const double spent = std::chrono::duration<double>(std::chrono::steady_clock::now() - search_start).count();
    const double next = 2 * step_s * static_cast<double>(floor_steps + 2);
    if (b * 2 <= spec.settings.max_batch && spent + next > seconds) {
      trace.push_back({{"batch", b * 2}, {"fits", false}, {"stage", "search"},
                       {"why", "over the time budget: about " + format_duration(next) + " for its probe and the rung at " +
                                   format_duration(2 * step_s) + " a step, " + format_duration(seconds - spent) + " left"}});
      break;
    }
  }
  empty_cache(dev);
  if (best == 0) throw std::runtime_error("batch_scaling: no batch from " + std::to_string(spec.batch) + " up fits");
  return best;
}

// A choice timed once a run for each key (the SDPA kernel for an attention, the chunk for an LM head): an earlier
// rung's timing of the same key (`reused`), else `time()`'s, kept for the rungs after it with `rung` its maker.
template <typename Choice, typename Time>
Choice timed_once(std::map<std::string, Choice>& timed, const std::string& key, const std::string& rung, Time time,
                  bool& reused) {
  const auto it = timed.find(key);
  reused = it != timed.end();
  if (reused) return it->second;
  Choice c = time();
  c.timed_for = rung;
  timed[key] = c;
  c.timed_for.clear();  // the rung's own timing
  return c;
}

// --resume: a finished rung's timing stands for the rungs still to run with its key.
template <typename Choice>
void keep_timing(std::map<std::string, Choice>& timed, const std::string& key, const std::optional<Choice>& c,
                 const RungRecord& r) {
  if (!c || r.out.status == RungStatus::kPending) return;
  if (const auto [it, fresh] = timed.emplace(key, *c); fresh && it->second.timed_for.empty()) it->second.timed_for = r.name();
}

// settings.sdpa_backend: fastest — time each SDPA kernel on the rung's attention (at its planned
// batch, before any batch search, which then searches with the kernel chosen) and run the rung with
// the fastest; the tries go into rungs.json. A rung whose attention an earlier rung of the run timed
// (`timed`, by sdpa_attention_key) takes that choice: the same inputs, so the same kernel, whatever
// the noise of a second timing says. Nothing to do for a rung told its kernel or not on SDPA.
using SdpaTimings = std::map<std::string, SdpaChoice>;
void choose_sdpa(RungRecord& r, const DeviceInfo& dev, SdpaTimings& timed) {
  const StepSpec s = r.spec();
  if (s.model.attention != AttentionImpl::kSdpa || s.sdpa_backend != SdpaBackend::kFastest) return;
  const std::string key = sdpa_attention_key(s);
  bool reused = false;
  const SdpaChoice c = timed_once(timed, key, r.name(), [&] { return choose_sdpa_backend(s, dev); }, reused);
  r.out.sdpa_chosen = c.chosen;
  r.out.sdpa_choice = c;
  if (reused) {
    std::cerr << "    SDPA kernel: " << to_string(c.chosen) << " (timed for " << c.timed_for << " on the same attention, "
              << key << ")\n";
    return;
  }
  std::ostringstream tries;
  tries.precision(3);
  for (const auto& t : c.tries)
    if (t.ms) tries << (tries.tellp() > 0 ? ", " : "") << to_string(t.backend) << " " << *t.ms << " ms";
  std::cerr << "    SDPA kernels timed on this attention: " << tries.str() << " -> " << to_string(c.chosen)
            << " (PyTorch's own choice: " << c.pytorch_choice << ")\n";
}

// settings.classifier_chunk: fastest — time the fused classifier at each candidate chunk on the rung's LM head (at
// the batch it runs, after any search) and run the rung with the fastest; the tries go into rungs.json. A rung
// whose head an earlier rung timed takes that choice, as choose_sdpa does. Nothing to do for a rung told its
// chunk, or without the fused classifier.
using ChunkTimings = std::map<std::string, ChunkChoice>;
void choose_chunk(RungRecord& r, const DeviceInfo& dev, ChunkTimings& timed) {
  const StepSpec s = r.spec();
  if (s.model.classifier_chunk <= 0 || !s.settings.classifier_chunk_fastest || r.out.chunk_chosen) return;
  const std::string key = classifier_chunk_key(s);
  bool reused = false;
  const ChunkChoice c = timed_once(timed, key, r.name(), [&] { return choose_classifier_chunk(s, dev); }, reused);
  r.out.chunk_chosen = c.chosen;
  r.out.chunk_choice = c;
  if (reused) {
    std::cerr << "    classifier chunk: " << c.chosen << " tokens (timed for " << c.timed_for << " on the same head, "
              << key << ")\n";
    return;
  }
  if (c.tries.size() == 1 && !c.tries[0].ms) {
    std::cerr << "    classifier chunk: " << c.chosen << " tokens (one chunk holds the step's tokens: nothing to time)\n";
    return;
  }
  std::ostringstream tries;
  tries.precision(3);
  for (const auto& t : c.tries) {
    tries << (tries.tellp() > 0 ? ", " : "") << t.chunk << ": ";
    if (t.ms) tries << *t.ms << " ms";
    else tries << t.why;
  }
  std::cerr << "    classifier chunks timed on this head: " << tries.str() << " -> " << c.chosen << " tokens\n";
}

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

// The step every recipe edits: the baseline at the profile's model, batch, settings and learning rate.
StepSpec recipe_base(const Profile& prof, const DeviceInfo& dev) {
  StepSpec base = baseline_spec(prof.model, prof.batch, dev);
  base.settings = prof.settings;
  base.optimizer.lr = prof.lr;
  return base;
}

// A kept rung's recipe settled: the extras that beat the top (or, on --resume, those a finished one kept).
void settle_kept(RungRecord& r, const std::vector<std::string>& kept, const Profile& prof, const DeviceInfo& dev) {
  r.plan.rung = kept_recipe(r, kept, recipe_base(prof, dev), dev);
  r.plan.flops = flop_model(r.plan.rung.spec.model);
}

// --resume: a kept rung that finished before gets the recipe it ran.
void resettle_kept(std::vector<RungRecord>& records, const Profile& prof, const DeviceInfo& dev) {
  for (auto& r : records)
    if (r.plan.kind == RungKind::kKept && r.out.status != RungStatus::kPending && !kept_variants(r.out.kept).empty())
      settle_kept(r, kept_variants(r.out.kept), prof, dev);
}

// The profile's rungs resolved for this device: specs, skipped variants, the FLOPs and peaks of
// each. A rung whose variants are all skipped here is an earlier rung again: marked, never timed
// (but a kept rung, planned as the rung it adds to until it starts, and the top's control, the top again on purpose).
std::vector<RungRecord> plan_rungs(const Profile& prof, const DeviceInfo& dev) {
  const StepSpec base = recipe_base(prof, dev);
  std::vector<RungRecord> records;
  for (const auto& plan : expand_plan(prof)) {
    RungRecord r;
    r.plan.rung = resolve(plan.name, plan.variants, base, dev);
    r.plan.kind = plan.kind;
    r.plan.compare_to = plan.compare_to;
    r.plan.variant = plan.variant;
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

std::atomic<int> g_signal{0};
extern "C" void on_signal(int sig) { g_signal = sig; }

nlohmann::json opt_json(const std::optional<double>& v) { return v ? nlohmann::json(*v) : nlohmann::json(); }

// Everything the rungs share, and the steps each rung takes. A data-parallel rung takes exactly
// the same steps on every rank, in the same order (their collectives pair up): rank 0 under
// Google Benchmark, the other ranks in follow(), told the rung and its batch by rank 0.
struct Ladder {
  const Profile& prof;
  const DeviceInfo& dev;
  const TokenData& data;
  MemoryMeter& meter;
  Dist* dist;  // nullptr: one process
  Trajectory baseline;  // the parity reference: the baseline's K losses and first gradient
  std::unique_ptr<TrainStep> live;  // the rung being timed, kept across its repetitions
  std::string abort_reason;         // set once the run cannot go on (a lost rank)
  std::string reference_error;      // why there is no parity reference (it ran out of memory)
  std::unique_ptr<ClockSampler> clocks;  // NVML over the timed steps (unavailable on the CPU)
  TimeBudget budget{0};      // the run's time budget (bench/ladder/budget.h)
  int64_t rungs_to_run = 0;  // selected by --rung and not done already
  int64_t rungs_started = 0;
  SdpaTimings sdpa_timed{};  // settings.sdpa_backend: fastest — one timing an attention (choose_sdpa)
  ChunkTimings chunk_timed{};  // settings.classifier_chunk: fastest — one timing a head (choose_chunk)
  std::function<void()> save_running{};  // rungs.json written as it stands (rank 0; none on the other ranks)
  Peaks* peaks = nullptr;  // the run's matmul peaks (rank 0), held at or above every rate a rung achieves

  bool rank0() const { return !dist || dist->rank() == 0; }
  // --resume: the kept rungs' SDPA timings (at their planned batch) and classifier chunk timings stand for the
  // rungs still to run.
  void keep_timings(const std::vector<RungRecord>& records) {
    for (const auto& r : records) {
      keep_timing(sdpa_timed, sdpa_attention_key(r.plan.rung.spec), r.out.sdpa_choice, r);
      keep_timing(chunk_timed, classifier_chunk_key(r.spec()), r.out.chunk_choice, r);
    }
  }
  // A kept rung, as it starts: the extras that beat the top in this run join it (bench/ladder/kept.h); none
  // did: skipped, it would be the top again.
  bool settle(RungRecord& r, const std::vector<RungRecord>& records) {
    const KeptExtras k = choose_kept(records);
    r.out.kept = k.why;
    if (k.variants.empty()) {
      r.out.status = RungStatus::kSkipped;
      r.out.error = "no extra beat the top rung in this run (rungs.json: kept)";
      std::cerr << "    " << r.name() << ": " << r.out.error << "\n";
      return false;
    }
    settle_kept(r, k.variants, prof, dev);
    std::string names;
    for (const auto& v : k.variants) names += (names.empty() ? "" : ", ") + v;
    std::cerr << "    " << r.name() << ": kept " << names << "\n";
    return true;
  }
  // An extra, kept or control rung on top of batch_scaling's runs at the batch the top's search chose, not a search
  // of its own: its ratio to the top is its variants' alone (a fusion that frees memory would otherwise count the bigger
  // batch it fits as its gain, and the kept rule would keep it for that), the extras and the kept rungs are
  // compared at one batch, ref_torch_compile's second run's, and no search's time is spent. Out of memory there:
  // halved, as any batch_scaling rung.
  void take_top_batch(RungRecord& r, const std::vector<RungRecord>& records) {
    if (!on_the_top(r.plan.kind)) return;
    const RungRecord* top = compared_with(records, r);
    if (r.plan.rung.spec.search_batch && r.out.batch == 0 && top && top->plan.rung.spec.search_batch &&
        top->out.batch > 0) {
      r.out.batch = top->out.batch;
      r.out.batch_search.push_back({{"batch", r.out.batch}, {"stage", "top"}, {"from", top->name()}});
      std::cerr << "    " << r.name() << ": at " << top->name() << "'s batch " << r.out.batch << "\n";
    }
  }

  // Warm-up steps a rung takes: the profile's, and under a time budget at least one, whose time the
  // budget's fit is based on.
  int64_t warmup_steps() const { return std::max<int64_t>(prof.warmup_steps, budget.limited() ? 1 : 0); }
  RungCost cost(int64_t warmups) const {
    return {prof.repetitions, prof.steps, prof.parity_steps, prof.breakdown_steps, warmups};
  }

  // Batch search (rank 0), the TrainStep, warm-up. Followers are told the batch. A searched batch
  // is checked by the rung itself: out of memory in its build or warm-up halves it (one process).
  // `seconds`: this rung's share of the time budget (infinite without one).
  void build(RungRecord& r, double seconds = INFINITY) {
    live.reset();
    // A follower is told its batch; an extra or kept rung the top's (take_top_batch). Either way no search, but a
    // batch_scaling rung on one process still backs off if the rung itself runs out of memory.
    const bool searched = r.plan.rung.spec.search_batch && r.out.batch == 0;
    choose_sdpa(r, dev, sdpa_timed);  // a follower is told the kernel too
    if (searched) {
      const int64_t floor_steps = warmup_steps() + cost(0).floor_steps();
      r.out.batch = find_batch(r.spec(), dev, data.train, prof.seed, meter, r.out.batch_search,
                               budget.limited() && ranks(r.spec()) == 1 ? seconds : INFINITY, floor_steps);
      std::cerr << "    batch_scaling chose batch " << r.out.batch << "\n";
    }
    choose_chunk(r, dev, chunk_timed);  // at the batch it runs; a follower is told the chunk too
    if (dist && rank0() && ranks(r.spec()) > 1)
      dist->post(r.name() + " " + std::to_string(r.spec().batch) + " " + to_string(r.spec().sdpa_backend) + " " +
                 std::to_string(r.spec().model.classifier_chunk));
    auto attempt = [&](int64_t batch) {
      r.out.batch = batch;
      release();
      meter.reset_peak();
      r.out.held_at_start = held();
      live = std::make_unique<TrainStep>(r.spec(), dev, data.train, prof.seed, dist);
      r.out.warmup_steps = 0;
      for (int64_t w = 0; w < warmup_steps(); ++w) {
        const double t0 = budget.elapsed_s();
        live->step();
        synchronize(dev);
        r.out.warmup_step_s = budget.elapsed_s() - t0;
        r.out.warmup_steps = w + 1;
        // No more warm-up once the rung's floor at this step time would take its whole share.
        if (r.out.warmup_step_s * static_cast<double>(cost(0).floor_steps()) > seconds) break;
      }
      synchronize(dev);
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

  // The timed steps per repetition and whether the breakdown pass runs: the profile's, or under a
  // time budget what fits this rung's share (what is left of it after build and warm-up). Data-
  // parallel rungs keep the profile's (every rank must take the same steps).
  void fit(RungRecord& r, double share_s, double started_s) {
    r.out.steps = prof.steps;
    r.out.parity_steps = prof.parity_steps;
    if (!budget.limited() || ranks(r.spec()) > 1) return;
    const double left = share_s - (budget.elapsed_s() - started_s);
    const RungFit f = fit_rung(left, r.out.warmup_step_s, cost(r.out.warmup_steps));
    r.out.steps = f.steps;
    r.out.parity_steps = f.parity_steps;
    std::string note;
    if (f.steps < prof.steps) note = std::to_string(f.steps) + " of " + std::to_string(prof.steps) + " timed steps per repetition";
    if (!f.breakdown) note += std::string(note.empty() ? "" : "; ") + "no breakdown pass";
    if (f.parity_steps < prof.parity_steps)
      note += "; " + std::to_string(f.parity_steps) + " of " + std::to_string(prof.parity_steps) + " parity steps";
    if (note.empty()) return;
    r.out.budget_note = note + " (time budget: " + format_duration(left) + " left for this rung at " +
                        format_duration(r.out.warmup_step_s) + " a step)";
    if (!f.breakdown) r.out.breakdown = {{"skipped", "over the time budget"}};
    std::cerr << "    " << r.out.budget_note << "\n";
  }

  // What the device holds now (after release(): what nothing of ours should still hold), said on the console where it
  // is over kHeldWarnBytes: memory left behind by what ran before, which a later rung or reference cannot have.
  static constexpr int64_t kHeldWarnBytes = int64_t{1} << 30;
  nlohmann::json held() {
    const MemoryStats m = meter.read();
    if (m.allocated > kHeldWarnBytes || m.reserved > kHeldWarnBytes)
      std::cerr << "    warning: " << std::fixed << std::setprecision(2) << m.allocated / 1e9 << " GB allocated, "
                << m.reserved / 1e9 << " GB reserved on the device before it starts: left behind by what ran before\n"
                << std::defaultfloat;
    return {{"allocated_bytes", m.allocated}, {"reserved_bytes", m.reserved}};
  }

  // Frees the live step and gives the device a clean state for what comes next, whatever the last
  // thing did (a failed capture, an out-of-memory error): never throws.
  void release() noexcept {
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

  // One repetition's timed steps: CUDA events (or the clock) at step boundaries, one host wait at
  // the end. Returns the repetition's device time; records losses, memory and, over all ranks,
  // per-rank step times and memory. `stopped`: a signal ended it early.
  double repetition(RungRecord& r, bool& stopped) {
    auto timer = make_step_timer(dev);
    if (clocks) clocks->start();
    const TimedSteps t = time_steps(r.out.steps, [&] { return live->step(); }, *timer, [] { return g_signal != 0; });
    if (clocks) clocks->stop();
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
      r.out.diverged_at = r.out.warmup_steps + static_cast<int64_t>(r.out.rep_step_ms.size()) * r.out.steps + bad + 1;
    }
    r.out.final_loss = all[-1].item<double>();
    r.out.rep_step_ms.push_back(1e3 * step_s);
    r.out.rep_tokens_per_sec.push_back(static_cast<double>(r.tokens_per_step()) / step_s);
    r.out.peak_alloc_bytes = mem.peak_allocated;
    r.out.peak_reserved_bytes = mem.peak_reserved;
    if (dist && ranks(r.spec()) > 1) {
      const auto g = dist->allgather({1e3 * step_s, static_cast<double>(mem.peak_allocated)});
      r.out.rank_step_ms.clear(), r.out.rank_peak_alloc_bytes.clear();
      for (size_t k = 0; k + 1 < g.size(); k += 2) r.out.rank_step_ms.push_back(g[k]), r.out.rank_peak_alloc_bytes.push_back(g[k + 1]);
    }
    return total;
  }

  // The profiling pass (one process): its summary goes into the rung; its own failure (out of
  // memory included) is recorded in the profile and leaves the rung's measurements standing.
  void breakdown_pass(RungRecord& r, const std::string& out_dir) {
    release();
    std::cerr << "    breakdown pass: " << prof.breakdown_steps << " steps\n";
    try {
      const Breakdown p = breakdown_rung(r.spec(), dev, data.train, prof.seed, static_cast<int>(prof.warmup_steps),
                                         static_cast<int>(prof.breakdown_steps), meter);
      write_breakdown(out_dir, r.plan.rung.name, p);
      r.out.breakdown = to_json(p.summary);
      r.out.breakdown.erase("by_name");  // every op or kernel name: in breakdown/<rung>.json, not in rungs.json
      r.out.breakdown["memory"] = to_json(p.memory);
      if (p.summary.counted_flops_per_step > 0)
        r.out.counted_flops_per_token = p.summary.counted_flops_per_step / static_cast<double>(r.tokens_per_step());
    } catch (const std::exception& e) {
      const bool oom = dynamic_cast<const c10::OutOfMemoryError*>(&e) != nullptr;
      r.out.breakdown = {{"error", (oom ? "out of memory in the breakdown pass: " : "the breakdown pass failed: ") + error_text(e)}};
      std::cerr << "    " << first_line(r.out.breakdown["error"].get<std::string>()) << "\n";
    }
    release();
  }

  // Where a one-process rung at another batch than the baseline's (batch_scaling's) is judged: against the rung it
  // is built on at that batch (a fusion's extra, top+kept and top_again on the top), whose trajectory is the same
  // problem's, where it differs from it only by exact variants, by its variants' class at an equal batch; else
  // nowhere (nullptr: the baseline, by the rung's own class).
  const RungRecord* parity_anchor(const RungRecord& r, const std::vector<RungRecord>* records) const {
    if (!records || records->empty() || ranks(r.spec()) > 1 || r.spec().batch == prof.batch) return nullptr;
    const RungRecord* on = compared_with(*records, r);
    if (!on || on->spec().batch != r.spec().batch || ranks(on->spec()) > 1 || !has_trajectory(on->out.parity) ||
        !differs_only_exactly(r.plan.rung.applied, on->plan.rung.applied))
      return nullptr;
    return on;
  }

  // After the last repetition: free the step, then the parity run (every rank, for DDP). A parity
  // run that runs out of memory leaves the rung's measurements standing: parity n/a, with why.
  void finish(RungRecord& r, bool is_baseline, const std::vector<RungRecord>* records = nullptr) {
    release();
    if (r.out.diverged_at) {
      r.out.status = RungStatus::kDiverged;
      r.out.error = "non-finite loss at step " + std::to_string(r.out.diverged_at);
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
    try {
      // fit() set the steps: the profile's, or fewer at the budget's floor (one process only)
      const Trajectory t = loss_trajectory(s, dev, data.train, prof.seed, static_cast<int>(r.out.parity_steps), dist);
      if (const RungRecord* on = parity_anchor(r, records)) {
        r.out.parity = judge_parity(class_at_equal_batch(r.plan.rung.applied), t, trajectory_of(on->out.parity), on->name());
      } else {
        r.out.parity = baseline.losses.empty() ? ParityResult{} : judge_parity(cls, t, baseline);
        if (baseline.losses.empty()) r.out.parity.rule = "no parity reference: " + reference_error;
      }
    } catch (const c10::OutOfMemoryError& e) {
      r.out.parity = ParityResult{};
      r.out.parity.rule = "out of memory in the parity run at batch " + std::to_string(s.batch) + ": " +
                      first_line(e.what_without_backtrace());
    }
    release();
  }

  // A failed rung: out of memory is "oom" (with the batch tried), the rest "error" (the full text
  // here, the first line in tables). A lost rank ends the run: every later rung would wait on it. A lost device
  // ends the process, before anything is freed (bench/ladder/lost_device.h).
  void fail(RungRecord& r, const std::exception& e) {
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

  // The rung a reference was compared with, timed again right after the reference: its step, batch and SDPA
  // kernel, warm-up and repetitions as the ladder times a rung, no parity run or breakdown pass (both are the
  // rung's own). A copy: the rung's record, its repetitions and results.json stay as the ladder timed them.
  // The C++ side timed before and after the Python one shows what the drift between them makes of the ratio.
  RungRecord retime(const RungRecord& with, double share) {
    RungRecord again = with;
    again.out.rep_step_ms.clear(), again.out.rep_tokens_per_sec.clear(), again.out.batch_search.clear();
    again.out.diverged_at = 0;
    const double started = budget.elapsed_s();
    build(again, share);
    fit(again, share, started);
    for (int64_t rep = 0; rep < prof.repetitions; ++rep) {
      bool stopped = false;
      repetition(again, stopped);
      if (stopped) {
        again.out.status = RungStatus::kInterrupted;
        break;
      }
    }
    release();
    if (clocks) again.out.clocks = to_json(clocks->take());
    if (again.out.diverged_at) again.out.status = RungStatus::kDiverged;
    return again;
  }

  // Ranks other than 0: run the data-parallel rungs rank 0 announces, until it says "done"; then
  // meet rank 0 at a barrier, since rank 0 hosts the store the messages come through and must not
  // end (taking the store with it) before every rank has read "done". GPT2BENCH_TEST_FOLLOWER_DELAY_MS
  // (tests) makes a follower slow to read each message, as a loaded machine can.
  int follow(std::vector<RungRecord>& records) {
    const char* delay = std::getenv("GPT2BENCH_TEST_FOLLOWER_DELAY_MS");
    auto next = [&] {
      if (delay) std::this_thread::sleep_for(std::chrono::milliseconds(std::atoi(delay)));
      return dist->next_message();
    };
    for (std::string msg; (msg = next()) != "done";) {
      std::istringstream in(msg);
      std::string name;
      int64_t batch = 0;
      std::string sdpa;
      int64_t chunk = 0;
      in >> name >> batch >> sdpa >> chunk;
      auto it = std::find_if(records.begin(), records.end(), [&](const RungRecord& r) { return r.plan.rung.name == name; });
      if (it == records.end() || batch <= 0) throw DistError("rank 0 announced an unknown rung '" + msg + "'");
      RungRecord& r = *it;
      r.out.batch = batch;
      r.out.sdpa_chosen = sdpa_backend_from(sdpa);
      if (chunk > 0) r.out.chunk_chosen = chunk;
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
};

// Google Benchmark's counters for one repetition (`step_s`: its mean step time).
void set_counters(benchmark::State& st, RungRecord& rec, double step_s, std::vector<RungRecord>& records,
                  Peaks* peaks) {
  const double tps = static_cast<double>(rec.tokens_per_step()) / step_s;
  if (peaks) peaks->hold(rec, rec.flops_per_token() * tps, records);  // before any MFU is taken
  st.counters["tokens_per_sec"] = tps;
  st.counters["step_ms"] = 1e3 * step_s;
  st.counters["peak_alloc_bytes"] = static_cast<double>(rec.out.peak_alloc_bytes);
  st.counters["peak_reserved_bytes"] = static_cast<double>(rec.out.peak_reserved_bytes);
  st.counters["loss"] = rec.out.final_loss;
  st.counters["flops_per_token"] = rec.flops_per_token();
  if (const auto mfu = rec.mfu(tps)) st.counters["mfu"] = *mfu;
  if (const auto own = rec.mfu_vs_precision_peak(tps)) st.counters["mfu_vs_precision_peak"] = *own;
  st.counters["mfu_vs_measured_peak"] = rec.mfu_vs_measured_peak(tps);
  if (ranks(rec.spec()) > 1) {
    st.counters["world_size"] = ranks(rec.spec());
    if (auto single = single_process_twin(records, rec)) {
      rec.out.scaling_efficiency = tps / (ranks(rec.spec()) * single->median_tokens_per_sec());
      st.counters["scaling_efficiency"] = *rec.out.scaling_efficiency;
    }
  }
}

// One repetition of rung `i` as one Google Benchmark iteration: build on the first, then the timed
// steps; after the last, the profiling pass and the parity run. Any failure ends the rung with its
// status (oom, error, interrupted, diverged) and the next rung starts on a clean device.
void run_repetition(benchmark::State& st, RungRecord& rec, size_t i, size_t n_rungs, Ladder& ladder,
                    std::vector<RungRecord>& records, const std::string& out_dir) {
  const Profile& prof = ladder.prof;
  const int64_t rep = static_cast<int64_t>(rec.out.rep_step_ms.size());
  NvtxRange rung_range(rec.plan.benchmark_name.c_str());  // nsys shows the ladder's structure
  struct InFlight {  // what a lost device records (bench/ladder/lost_device.h)
    explicit InFlight(RungRecord& r) { lost_device_exit().set_in_flight(&r); }
    ~InFlight() { lost_device_exit().set_in_flight(nullptr); }
  } in_flight(rec);
  if (rec.out.status == RungStatus::kPending && (!ladder.abort_reason.empty() || g_signal)) {
    rec.out.status = g_signal ? RungStatus::kInterrupted : RungStatus::kError;
    rec.out.error = g_signal ? "not run: interrupted" : "not run: " + ladder.abort_reason;
  }
  if (rec.out.status != RungStatus::kPending) {  // ended in an earlier repetition (diverged, oom, error) or not run
    st.SkipWithError(first_line(rec.out.error).c_str());
    return;
  }
  try {
    if (rep == 0) {  // written ahead: a process that ends in this rung recording nothing leaves it said (--resume)
      rec.out.in_flight = true;
      if (ladder.save_running) ladder.save_running();
    }
    if (rep == 0 && rec.plan.kind == RungKind::kKept && !ladder.settle(rec, records)) {
      st.SkipWithError(rec.out.error.c_str());
      return;
    }
    if (rep == 0) {
      if (rec.plan.kind == RungKind::kControl)
        rec.out.breakdown = {{"skipped", "the top's step again: its breakdown is the top's"}};
      const double started = ladder.budget.elapsed_s();
      const int64_t shares = rec.budget_shares();  // before its search sets its batch
      const double share = ladder.budget.share_s(ladder.rungs_to_run - ladder.rungs_started) * static_cast<double>(shares);
      ladder.rungs_started += shares;
      std::cerr << "[" << i + 1 << "/" << n_rungs << "] " << rec.plan.rung.name << ": build + "
                << ladder.warmup_steps() << " warm-up steps\n";
      ladder.take_top_batch(rec, records);
      ladder.build(rec, share);
      ladder.fit(rec, share, started);
      lost_device_exit().inject(rec, ladder.dev);
    }
    bool stopped = false;
    const double total_s = ladder.repetition(rec, stopped);
    if (stopped) {
      ladder.release();
      rec.out.status = RungStatus::kInterrupted;
      rec.out.error = "interrupted during repetition " + std::to_string(rep + 1);
      st.SkipWithError(rec.out.error.c_str());
      return;
    }
    st.SetIterationTime(total_s);
    if (rec.out.diverged_at) {  // no counters: a non-finite one would not be JSON
      ladder.finish(rec, i == 0, &records);
      st.SkipWithError(rec.out.error.c_str());
      return;
    }
    set_counters(st, rec, total_s / static_cast<double>(rec.out.steps), records, ladder.peaks);
    if (rep + 1 < prof.repetitions) return;
    if (ladder.clocks) {
      rec.out.clocks = to_json(ladder.clocks->take());
      if (rec.throttled()) std::cerr << "    THROTTLED: " << rec.out.clocks["throttled_why"].get<std::string>() << "\n";
    }
    if (prof.breakdown_steps > 0 && ranks(rec.spec()) == 1 && !rec.out.breakdown.contains("skipped")) {
      ladder.breakdown_pass(rec, out_dir);
      if (!rec.out.breakdown.contains("error")) {
        st.counters["events_per_step"] = rec.out.breakdown["events_per_step"].get<double>();
        st.counters["busy_fraction"] = rec.out.breakdown["busy_fraction"].get<double>();
        st.counters["profile_overhead"] = rec.out.breakdown["overhead"].get<double>();
      }
    }
    ladder.finish(rec, i == 0, &records);
  } catch (const std::exception& e) {
    ladder.fail(rec, e);
    st.SkipWithError(first_line(rec.out.error).c_str());
  }
}

// --rung REGEX selects the rungs whose name ("05_bf16_cast") or benchmark name
// ("gpt2-scaled/05_bf16_cast") it finds; a leading '-' negates it. Our filter alone decides: only the
// selected rungs are registered with Google Benchmark, whose own filter (matched against
// ".../iterations:1/repeats:5/manual_time") would read an anchored regex differently.
// POSIX extended regular expressions (glibc's matcher: no backtracking, so no pattern can take exponential time)
// of at most kMaxRungFilter characters (parsing nests by groups: 20,000 crashed std::regex).
constexpr size_t kMaxRungFilter = 1000;

class RungRegex {
 public:
  explicit RungRegex(const std::string& filter) {
    if (filter.size() > kMaxRungFilter)
      throw std::runtime_error("--rung takes a pattern of at most " + std::to_string(kMaxRungFilter) +
                               " characters (this one has " + std::to_string(filter.size()) + ")");
    const std::string pattern = filter[0] == '-' ? filter.substr(1) : filter;
    if (const int rc = ::regcomp(&re_, pattern.c_str(), REG_EXTENDED | REG_NOSUB)) {
      char why[256];
      ::regerror(rc, &re_, why, sizeof(why));
      throw std::runtime_error("--rung '" + filter + "' is not a valid regular expression (" + why + ")");
    }
  }
  ~RungRegex() { ::regfree(&re_); }
  RungRegex(const RungRegex&) = delete;
  RungRegex& operator=(const RungRegex&) = delete;
  bool found_in(const std::string& s) const { return ::regexec(&re_, s.c_str(), 0, nullptr, 0) == 0; }

 private:
  regex_t re_;
};

bool name_selected(const std::string& filter, const std::string& name, const std::string& benchmark_name) {
  if (filter.empty()) return true;
  const RungRegex re(filter);
  return (re.found_in(name) || re.found_in(benchmark_name)) != (filter[0] == '-');
}

bool rung_selected(const std::string& filter, const RungRecord& r) {
  return r.out.status == RungStatus::kPending && name_selected(filter, r.plan.rung.name, r.plan.benchmark_name);
}

// The profile's reference rungs the filter selects (a reference's benchmark name: "<preset>/<name>").
// ref_torch_compile runs again at batch_scaling's batch when that rung is planned.
std::vector<std::string> selected_references(const std::string& filter, const Profile& prof) {
  std::vector<std::string> out;
  for (const auto& n : prof.references)
    if (name_selected(filter, n, prof.model.preset + "/" + n)) out.push_back(n);
  return out;
}

// Checked before anything runs or is written, naming the rungs there are. Returns how many it selects.
int64_t check_rung_filter(const std::string& filter, const std::vector<RungRecord>& records, const Profile& prof) {
  if (!filter.empty()) RungRegex{filter};
  std::string names;
  int64_t selected = static_cast<int64_t>(selected_references(filter, prof).size());
  for (const auto& r : records) {
    selected += rung_selected(filter, r);
    names += (names.empty() ? "" : ", ") + r.plan.rung.name;
  }
  for (const auto& n : prof.references) names += ", " + n;
  if (selected == 0 && !filter.empty())
    throw std::runtime_error("--rung '" + filter + "' matches no rung to run (rungs: " + names + ")");
  return selected;
}

// The run's time budget in seconds (0 = none): the profile's budget_minutes, else 15 minutes on a
// CPU (make ladder on any 2-core machine) and none on a GPU.
double run_budget_s(const Profile& prof, const DeviceInfo& dev) {
  if (prof.budget_minutes) return *prof.budget_minutes * 60;
  return dev.cuda() ? 0 : 15 * 60;
}

// rungs.json without its rungs: the profile, device (with its datasheet row), build, MFU basis, the measured peaks.
nlohmann::json run_header(const Profile& prof, const DeviceInfo& dev, const std::vector<RungRecord>& records,
                          const std::string& build_id, const std::string& rung_filter) {
  nlohmann::json doc = {{"profile", {{"name", prof.name}, {"path", prof.path}, {"plan", prof.plan},
                                     {"batch", prof.batch}, {"warmup_steps", prof.warmup_steps},
                                     {"steps", prof.steps}, {"repetitions", prof.repetitions},
                                     {"parity_steps", prof.parity_steps}, {"seed", prof.seed},
                                     {"budget_s", run_budget_s(prof, dev)},
                                     {"budget_basis", prof.budget_minutes ? "profile (budget_minutes)"
                                                      : dev.cuda() ? "none (a GPU's default)" : "15 minutes (a CPU's default)"},
                                     {"data", prof.data.synthetic ? "synthetic" : prof.data.train_glob}}},
                        {"device", dev},
                        {"build", {{"torch", torch_version()}, {"cuda", build_has_cuda()}, {"git_sha", git_sha()}}}};
  if (const auto row = dev.cuda() ? find_datasheet(dev.name) : std::nullopt)
    doc["device"]["datasheet"] = {{"model", row->model}, {"bf16_tflops", row->bf16_tflops},
                                  {"fp16_tflops", row->fp16_tflops}, {"tf32_tflops", row->tf32_tflops},
                                  {"fp32_tflops", row->fp32_tflops},
                                  {"memory_bandwidth_gbs", row->memory_bandwidth_gbs}, {"source", row->source}};
  doc["mfu"] = {{"definition", "model FLOPs/s (matmuls only: flops.formula) / mfu peak, the same for every rung"},
                {"peak", records.empty() ? nlohmann::json() : opt_json(records[0].plan.mfu_peak)},
                {"basis", records.empty() ? "" : records[0].plan.mfu_basis},
                {"also", "median.mfu_vs_precision_peak: over the datasheet peak of the rung's own precision; "
                         "median.mfu_vs_measured_peak: over the matmul rate measured here in that precision"}};
  doc["host_allocator"] = settle_host_allocator();  // set at start-up (cli_main); "" where not glibc
  if (dev.cuda()) doc["device_allocator"] = settle_device_allocator();  // likewise
  doc["rung_filter"] = rung_filter;  // --resume keeps it
  doc["fingerprint"] = fingerprint(prof, records);
  doc["build_id"] = build_id;
  return doc;
}

// The parity reference: the baseline's losses over K steps from the seed's weights and data. Out of
// memory (the fp32 baseline at batch 32 on an 80 GB GPU) leaves the rungs to run without parity.
void parity_reference(Ladder& ladder, const StepSpec& baseline) {
  const Profile& prof = ladder.prof;
  if (prof.parity_steps <= 0) return;
  std::cerr << "gpt2bench: parity reference, " << prof.parity_steps << " baseline steps...\n";
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

// One Google Benchmark per pending rung: one iteration = one repetition's steps, timed on the
// device at step boundaries and reported with one SetIterationTime (one host wait a repetition).
void register_rungs(std::vector<RungRecord>& records, Ladder& ladder, const std::string& filter, const std::string& out_dir) {
  const DeviceInfo& dev = ladder.dev;
  benchmark::AddCustomContext("device", dev.name);
  benchmark::AddCustomContext("device_type", dev.cuda() ? "cuda" : "cpu");
  benchmark::AddCustomContext("torch_version", torch_version());
  benchmark::AddCustomContext("git_sha", git_sha());
  benchmark::AddCustomContext("profile", ladder.prof.name);
  benchmark::AddCustomContext("world_size", std::to_string(dev.world_size));
  const size_t n = records.size();
  for (size_t i = 0; i < n; ++i) {
    RungRecord* rec = &records[i];
    if (!rung_selected(filter, *rec)) continue;
    auto fn = [rec, i, n, &ladder, &records, out_dir](benchmark::State& st) {
      for (auto _ : st) run_repetition(st, *rec, i, n, ladder, records, out_dir);
    };
    benchmark::RegisterBenchmark(rec->plan.benchmark_name.c_str(), fn)
        ->UseManualTime()
        ->Iterations(1)
        ->Repetitions(static_cast<int>(ladder.prof.repetitions))
        ->Unit(benchmark::kMillisecond);
  }
}

void run_benchmarks(TeeReporter& reporter) {
  // (colour: TeeReporter's own console reporter decides; Google Benchmark's flag is for its default one)
  std::vector<std::string> args = {"gpt2bench", "--benchmark_counters_tabular=true"};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  int argc = static_cast<int>(argv.size());
  benchmark::Initialize(&argc, argv.data());
  if (!g_signal) benchmark::RunSpecifiedBenchmarks(&reporter);
  benchmark::ClearRegisteredBenchmarks();
}

// The summary table and the exit code: 130 interrupted, 1 on an error or a lost rank, else 0.
int conclude(const std::vector<RungRecord>& ran, const Ladder& ladder, const RunWriter& writer, const std::string& dir) {
  std::cout << "\n" << summary_table(ran, ladder.dev.cuda());
  if (const auto& refs = writer.references(); !refs.empty()) {
    std::cout << "reference rungs (the same step in Python PyTorch; not in the speed-ups):\n";
    for (const auto& ref : refs) std::cout << reference_line(ref) << "\n";
  }
  std::cout << "\nresults: " << writer.results_path()
            << "\n         " << writer.rungs_path() << "\n";
  bool parity_failed = false, errored = references_failed(writer.references());
  for (const auto& r : ran) {
    parity_failed = parity_failed || r.out.parity.verdict == "fail";
    errored = errored || r.out.status == RungStatus::kError;
  }
  if (parity_failed) std::cout << "\n!! PARITY FAILED on at least one rung: see the parity column and rungs.json\n";
  if (g_signal) {
    std::cout << "\ninterrupted: the finished rungs are saved; gpt2bench ladder --resume " << dir << " runs the rest\n";
    return 130;
  }
  if (!ladder.abort_reason.empty()) std::cout << "\naborted: " << ladder.abort_reason << "\n";
  return errored || !ladder.abort_reason.empty() ? 1 : 0;
}

// batch_scaling's batch, for ref_torch_compile's second run: its one-process rung's once it ran, 0 while that
// rung is still to run, none without one (or where it failed, or runs data-parallel).
std::optional<int64_t> searched_batch(const std::vector<RungRecord>& records) {
  const auto it = std::find_if(records.begin(), records.end(),
                               [](const RungRecord& r) { return r.plan.rung.spec.search_batch; });
  if (it == records.end() || ranks(it->spec()) != 1) return std::nullopt;
  if (it->ok()) return it->spec().batch;
  return it->out.status == RungStatus::kPending ? std::optional<int64_t>(0) : std::nullopt;
}

// What the time budget is shared among: the rungs to run (not those --resume keeps; batch_scaling's with a share for
// its search: RungRecord::budget_shares) and the reference runs to make after them, each with its C++ rung timed again.
int64_t runs_to_make(const std::string& filter, const Profile& prof, const std::vector<RungRecord>& records,
                     const nlohmann::json& kept_references) {
  int64_t rungs = 0;
  for (const auto& r : records)
    if (rung_selected(filter, r)) rungs += r.budget_shares();
  return rungs + 2 * static_cast<int64_t>(references_to_run(selected_references(filter, prof), prof.batch,
                                                            searched_batch(records), kept_references)
                                              .size());  // each reference, and its C++ rung timed again
}

// The profile's reference rungs the --rung filter selects, after the ladder, each with its share of
// the time budget; ref_torch_compile again at the batch batch_scaling settled on. After each, the C++ rung it is
// compared with is timed again (Ladder::retime), a share of its own.
void run_reference_rungs(const LadderOptions& o, Ladder& ladder, const std::vector<RungRecord>& records,
                         RunWriter& writer) {
  const Profile& prof = ladder.prof;
  nlohmann::json refs = writer.references();  // --resume: those the earlier run finished, kept
  const auto selected = selected_references(o.rung_filter, prof);
  auto sb = searched_batch(records);
  if (sb == 0) sb.reset();  // batch_scaling's rung still pending after the ladder: --rung left it out
  const auto to_run = references_to_run(selected, prof.batch, sb, refs);
  for (const auto& t : references_to_run(selected, prof.batch, sb, nlohmann::json::array()))
    if (std::find(to_run.begin(), to_run.end(), t) == to_run.end())
      std::cerr << "[ref] " << t.first << " at batch " << t.second << ": kept from the earlier run\n";
  for (size_t i = 0; i < to_run.size() && !g_signal; ++i) {
    const auto& [name, batch] = to_run[i];
    const auto runs_left = static_cast<int64_t>(2 * (to_run.size() - i));  // each reference, then its rung again
    const double share = ladder.budget.limited() ? ladder.budget.share_s(runs_left) : -1;
    std::cerr << "[ref] " << name << " at batch " << batch << ": Python " << project_python() << "\n";
    ladder.release();  // the Python process shares the device: what this one held, and holds still, is said
    const nlohmann::json held = ladder.held();
    if (ladder.clocks) {  // NVML while the Python process runs: the samples before it dropped
      ladder.clocks->take_samples();
      ladder.clocks->start();
    }
    nlohmann::json ref = run_reference(name, reference_config(name, prof, ladder.dev, batch), ladder.data.train,
                                       o.out_dir, share);
    if (ladder.clocks) {
      ladder.clocks->stop();
      attach_reference_clocks(ref, ladder.clocks->take_samples());
    }
    ref["cpp_process_held"] = held;
    if (g_signal && ref["status"] != "ok") {  // the stop reached the Python process too: not its failure
      ref["status"] = "interrupted", ref["error"] = "not finished: interrupted (--resume runs it again)";
      ref.erase("failure");
    }
    compare_reference(ref, records, ladder.baseline);
    std::cerr << reference_line(ref) << "\n";
    const auto with = std::find_if(records.begin(), records.end(), [&](const RungRecord& r) {
      return ref.contains("compared_with") && r.name() == ref["compared_with"].get<std::string>();
    });
    if (with != records.end() && !g_signal) {
      std::cerr << "[ref] " << with->name() << " timed again after " << name << ": build + " << ladder.warmup_steps()
                << " warm-up steps\n";
      try {
        compare_again(ref, ladder.retime(*with, ladder.budget.limited() ? ladder.budget.share_s(runs_left - 1) : INFINITY));
      } catch (const std::exception& e) {
        ref["again"] = {{"rung", with->name()}, {"error", error_text(e)}};
        auto with_this = refs;  // a lost device ends the process here: the reference's own figures kept
        with_this.push_back(ref);
        writer.set_references(with_this);
        lost_device_exit().check(error_text(e));
        ladder.release();
      }
      std::cerr << again_line(ref) << "\n";
    }
    refs.push_back(ref);
    writer.set_references(refs);
    writer.flush(records, "running");
  }
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

}  // namespace

int run_ladder(const LadderOptions& o) {
  // 1. Everything that can fail on bad input, before DIR is touched.
  Profile prof = load_profile(o.profile_path);
  const auto env = dist_env_from_environment();
  const DeviceInfo dev = rank_device(o.device.empty() ? prof.device : o.device, !o.device.empty(), env);
  std::vector<RungRecord> records = plan_rungs(prof, dev);
  check_rung_filter(o.rung_filter, records, prof);
  const TimeBudget budget(run_budget_s(prof, dev));
  (void)hang_limit_s(dev);  // GPT2BENCH_HANG_S read (and refused) before DIR is touched
  const TokenData data = load_token_data(prof.data, prof.model.vocab_size, prof.seed);
  check_inputs(o, prof, records, data);
  std::unique_ptr<Dist> dist;
  if (env && env->world_size > 1) dist = std::make_unique<Dist>(*env, dev, std::chrono::seconds(prof.dist_timeout_s));
  auto meter = make_memory_meter(dev);
  if (dist && dist->rank() != 0) {  // the other ranks write nothing: they follow rank 0's data-parallel rungs
    meter->set_limit(prof.settings.cpu_memory_budget);
    Ladder follower{prof, dev, data, *meter, dist.get(), {}, nullptr, {}, {}, nullptr};
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
  Ladder ladder{prof, dev, data, *meter, dist.get(), {}, nullptr, {}, {}, make_clock_sampler(dev), budget};
  ladder.rungs_to_run = runs_to_make(o.rung_filter, prof, records, writer.references());
  ladder.keep_timings(records);
  ladder.save_running = [&writer, &records] { writer.flush(records, "running"); };
  ladder.peaks = &peaks;
  if (budget.limited())
    std::cerr << "gpt2bench: time budget " << format_duration(budget.total_s()) << " for " << ladder.rungs_to_run
              << " rung(s): each takes the timed steps that fit its share (at least 1 per repetition)\n";
  writer.flush(records, "running");
  parity_reference(ladder, records[0].plan.rung.spec);

  // 3. The rungs under Google Benchmark, the results rewritten after each.
  register_rungs(records, ladder, o.rung_filter, o.out_dir);
  std::set<std::string> told;  // Google Benchmark reports a rung twice: its repetitions, then their aggregates
  TeeReporter reporter(
      [&](const std::string& name) {
        writer.flush(records, "running");
        for (const auto& r : records)
          if (name.rfind(r.plan.benchmark_name + "/", 0) == 0 && told.insert(r.plan.rung.name).second)
            std::cerr << rung_line(r, compared_with(records, r)) << "\n"
                      << "gpt2bench: " << ladder.budget.progress(static_cast<int64_t>(told.size()), ladder.rungs_to_run)
                      << "\n";
      },
      o.verbose);
  const bool any_rung = std::any_of(records.begin(), records.end(),
                                    [&](const RungRecord& r) { return rung_selected(o.rung_filter, r); });
  if (any_rung) {  // --rung may select reference rungs alone
    writer.attach(&reporter);
    run_benchmarks(reporter);
  }
  if (dist) {
    dist->post("done");
    if (ladder.abort_reason.empty()) dist->barrier();  // every rank has read it (follow): the store may go
  }
  // 4. The Python reference rungs, on the same device, data and batch; beside the rungs, not in them.
  if (!g_signal && ladder.abort_reason.empty()) run_reference_rungs(o, ladder, records, writer);
  std::signal(SIGINT, old_int), std::signal(SIGTERM, old_term);
  const std::vector<RungRecord> ran = rungs_that_ran(records);
  writer.flush(records, run_status(ran, g_signal != 0, !ladder.abort_reason.empty(), references_failed(writer.references())));
  benchmark::Shutdown();
  return conclude(ran, ladder, writer, o.out_dir);
}

int run_breakdown(const BreakdownOptions& o) {
  Profile prof = load_profile(o.profile_path);
  DeviceInfo dev = detect_device(o.device.empty() ? prof.device : o.device);
  std::vector<RungRecord> records = plan_rungs(prof, dev);
  const TokenData data = load_token_data(prof.data, prof.model.vocab_size, prof.seed);
  std::vector<RungRecord*> chosen;
  for (auto& r : records) {
    const bool named = r.plan.rung.name == o.rung || r.plan.rung.name.substr(3) == o.rung;
    if (named && r.plan.kind == RungKind::kKept)
      throw std::runtime_error("rung '" + r.name() + "' is settled by a ladder run (the extras that beat the top "
                               "there): its breakdown pass is part of `gpt2bench ladder --rung " + r.name() + "`");
    // Every rung but the top's second timing (the top's step again), or the one named.
    const bool all = o.rung.empty() && r.plan.kind != RungKind::kControl;
    if ((all || named) && r.out.status == RungStatus::kPending && ranks(r.spec()) == 1 && r.plan.kind != RungKind::kKept)
      chosen.push_back(&r);
  }
  if (chosen.empty()) {
    std::string names;
    for (const auto& r : records) names += (names.empty() ? "" : ", ") + r.plan.rung.name;
    throw std::runtime_error("no rung named '" + o.rung + "' to profile (rungs: " + names + ")");
  }
  const int steps = static_cast<int>(std::max<int64_t>(1, prof.breakdown_steps));
  auto meter = make_memory_meter(dev);
  std::printf("%-28s %10s %10s %9s %9s %9s %9s %9s %9s\n", "rung", "events", "step ms", "data", "forward", "loss",
              "backward", "optim", "overhead");
  SdpaTimings sdpa_timed;
  ChunkTimings chunk_timed;
  for (RungRecord* r : chosen) {
    choose_sdpa(*r, dev, sdpa_timed);
    if (r->plan.rung.spec.search_batch) {
      // As in the ladder (take_top_batch): a rung on the top at the batch the top's search chose, searched here
      // for the top where it is not among the rungs asked for.
      // The top as planned: past the rungs the plan skipped (13_ddp on one process); none run yet.
      const RungRecord* top = on_the_top(r->plan.kind) ? compared_with(records, *r, [](const RungRecord& o) {
        return o.out.status != RungStatus::kSkipped;
      }) : nullptr;
      RungRecord& owner = top && top->plan.rung.spec.search_batch ? records[static_cast<size_t>(top - records.data())] : *r;
      if (owner.out.batch == 0) {
        choose_sdpa(owner, dev, sdpa_timed);
        owner.out.batch = find_batch(owner.spec(), dev, data.train, prof.seed, *meter, owner.out.batch_search);
      }
      r->out.batch = owner.out.batch;
      if (&owner != r)
        std::fprintf(stderr, "    %s: at %s's batch %lld\n", r->name().c_str(), owner.name().c_str(),
                     static_cast<long long>(r->out.batch));
    }
    choose_chunk(*r, dev, chunk_timed);
    const Breakdown p = breakdown_rung(r->spec(), dev, data.train, prof.seed, static_cast<int>(prof.warmup_steps),
                                       steps, *meter);
    write_breakdown(o.out_dir, r->plan.rung.name, p);
    auto ph = [&](const char* k) { return p.summary.phase_ms.count(k) ? p.summary.phase_ms.at(k) : 0.0; };
    std::printf("%-28s %10.0f %10.2f %9.2f %9.2f %9.2f %9.2f %9.2f %8.1f%%\n", r->plan.rung.name.c_str(),
                p.summary.events_per_step, p.summary.step_ms, ph("data"), ph("forward"), ph("loss"), ph("backward"),
                ph("optimizer"), 100 * p.summary.overhead);
  }
  std::printf("(events per step: %s; phase times in ms per step; written to %s/breakdown/)\n",
              dev.cuda() ? "kernel launches" : "ATen ops", o.out_dir.c_str());
  return 0;
}

}  // namespace gpt2
