// defines: RungRunner, g_signal — one rung's stages: build (choices, batch search, warm-up), the timed repetitions,
//          the breakdown pass, parity; a failure recorded; a follower rank's side of a data-parallel rung.
#pragma once
#include <nlohmann/json.hpp>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "bench/ladder/budget.h"
#include "bench/ladder/choices.h"
#include "bench/ladder/parity.h"
#include "bench/ladder/peaks.h"
#include "bench/ladder/results.h"
#include "bench/measure/clocks.h"
#include "bench/runtime/memory.h"
#include "bench/step/train_step.h"

namespace gpt2 {

// The signal (SIGINT, SIGTERM) that asks the run to stop at the next step; 0 while none has come.
extern std::atomic<int> g_signal;

// Everything the rungs share, and the steps each rung takes. A data-parallel rung takes exactly the same steps on
// every rank, in the same order (their collectives pair up): rank 0 under Google Benchmark, the other ranks in
// follow(), told the rung, its batch and its choices by rank 0.
struct RungRunner {
  const Profile& prof;
  const DeviceInfo& dev;
  const TokenData& data;
  MemoryMeter& meter;
  Dist* dist;  // nullptr: one process
  Trajectory baseline{};  // the parity reference: the baseline's K losses and first gradient
  std::unique_ptr<TrainStep> live{};  // the rung being timed, kept across its repetitions
  std::unique_ptr<TrainStep> partner{};  // the rung it is measured against, timed beside it (pair)
  double partner_step_s = 0;           // that step's last warm-up step
  std::string abort_reason{};       // set once the run cannot go on (a lost rank)
  std::string reference_error{};    // why there is no parity reference (it ran out of memory)
  std::unique_ptr<ClockSampler> clocks{};  // NVML over the timed steps (unavailable on the CPU)
  TimeBudget budget{0};      // the run's time budget (bench/ladder/budget.h)
  int64_t rungs_to_run = 0;  // selected by --rung and not done already
  int64_t rungs_started = 0;
  ChoiceTimings choices{};   // the settings settled by timing, once a run for each key
  std::function<void()> save_running{};  // rungs.json written as it stands (rank 0; none on the other ranks)
  Peaks* peaks = nullptr;  // the run's matmul peaks (rank 0), held at or above every rate a rung achieves
  StepSpec baseline_spec{};  // the parity reference's step
  std::map<int64_t, Trajectory> baseline_at{};  // its trajectories at other batches (reference_at)

  bool rank0() const { return !dist || dist->rank() == 0; }
  // A kept rung, as it starts: the extras that beat the top in this run join it (bench/ladder/kept.h); none
  // did: skipped, it would be the top again.
  bool settle(RungRecord& r, const std::vector<RungRecord>& records);
  // A rung on the top of batch_scaling's runs at the batch the top's search chose: its ratio to the top is its
  // variants' alone (a fusion that frees memory would count the bigger batch it fits as its gain), no search's
  // time is spent. Out of memory there: halved, as any batch_scaling rung.
  void take_top_batch(RungRecord& r, const std::vector<RungRecord>& records);

  // Warm-up steps a rung takes: the profile's, and under a time budget at least two: the fit is based on the last
  // one's time, and the first's holds one-time work.
  int64_t warmup_steps() const { return std::max<int64_t>(prof.warmup_steps, budget.limited() ? 2 : 0); }
  RungCost cost(int64_t warmups) const;

  // Batch search (rank 0), the TrainStep, warm-up. Followers are told the batch. A searched batch
  // is checked by the rung itself: out of memory in its build or warm-up halves it (one process).
  // `seconds`: this rung's share of the time budget (infinite without one).
  void build(RungRecord& r, double seconds = INFINITY);

  // The rung `r` is measured against, built and warmed up beside it (after build: its batch is settled), so that
  // their repetitions alternate and a change in the machine's speed hits both (docs/measurement.md: Pairs).
  // Timed alone, saying why, where there is none, it is data-parallel, or the two do not fit side by side.
  void pair(RungRecord& r, const std::vector<RungRecord>& records);
  // One repetition of the partner's, beside repetition k of `r`'s: its tok/s into r's pairing.
  void partner_repetition(RungRecord& r, bool& stopped);

  // The timed steps per repetition and whether the breakdown pass runs: the profile's, or under a
  // time budget what fits this rung's share (what is left of it after build and warm-up). Data-
  // parallel rungs keep the profile's (every rank must take the same steps).
  void fit(RungRecord& r, double share_s, double started_s);
  // After a timed repetition: where its steps ran over kReplanSlower times slower than the fit assumed (the machine
  // slowed), the repetitions left take the steps that fit what is left of the share at the speed measured. At the
  // floor of one step a repetition it runs over its share, and says so.
  static constexpr double kReplanSlower = 1.2;
  struct Fitted {
    double share_s = 0, started_s = 0, step_s = 0;  // the rung's share of the budget, its start, the step time assumed
    RungCost cost{};
  } fitted{};
  void replan(RungRecord& r);

  // What the device holds now (after release(): what nothing of ours should still hold), said on the console where it
  // is over kHeldWarnBytes: memory left behind by what ran before, which a later rung or reference cannot have.
  static constexpr int64_t kHeldWarnBytes = int64_t{1} << 30;
  nlohmann::json held();

  // Frees the live step and gives the device a clean state for what comes next, whatever the last
  // thing did (a failed capture, an out-of-memory error): never throws.
  void release() noexcept;

  // One repetition's timed steps: CUDA events (or the clock) at step boundaries, one host wait at
  // the end. Returns the repetition's device time; records losses, memory and, over all ranks,
  // per-rank step times and memory. `stopped`: a signal ended it early.
  double repetition(RungRecord& r, bool& stopped);

  // The profiling pass (one process): its summary goes into the rung; its own failure (out of
  // memory included) is recorded in the profile and leaves the rung's measurements standing.
  void breakdown_pass(RungRecord& r, const std::string& out_dir);

  // A one-process rung at another batch than the baseline's is judged against the rung it is built on at that
  // batch where what separates them keeps the math (a fusion, a kernel); nullptr: against the baseline's step.
  const RungRecord* parity_anchor(const RungRecord& r, const std::vector<RungRecord>* records) const;
  // The baseline's trajectory at `batch` over `steps` steps or more: at another batch than the profile's its step
  // in micro-batches (of a divisor of the profile's batch, which fits), kept for the next rung. nullptr where it
  // ran out of memory, with why in `why`.
  const Trajectory* reference_at(int64_t batch, int64_t steps, std::string& why);

  // After the last repetition: free the step, then the parity run (every rank, for DDP). A parity
  // run that runs out of memory leaves the rung's measurements standing: parity n/a, with why.
  void finish(RungRecord& r, bool is_baseline, const std::vector<RungRecord>* records = nullptr);

  // A failed rung: out of memory is "oom" (with the batch tried), the rest "error" (the full text
  // here, the first line in tables). A lost rank ends the run: every later rung would wait on it. A lost device
  // ends the process, before anything is freed (bench/ladder/lost_device.h).
  void fail(RungRecord& r, const std::exception& e);

  // The rung a reference was compared with, timed again after it as the ladder times it (no parity, no breakdown),
  // into a copy: before and after the Python side, it shows what drift makes of the ratio. With `beside` (paired
  // timing: one repetition of the reference), it runs beside each repetition, after it and before it by turns.
  RungRecord retime(const RungRecord& with, double share, const std::function<void()>& beside = {});

  // Ranks other than 0: the data-parallel rungs rank 0 announces until "done", then a barrier (rank 0 hosts the
  // store and must outlive every rank's read). GPT2BENCH_TEST_FOLLOWER_DELAY_MS (tests): a slow follower.
  int follow(std::vector<RungRecord>& records);};

}  // namespace gpt2
