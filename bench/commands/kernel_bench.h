// defines: KernelCase, time_in_turns, case_json, KernelBenchOptions, run_kernel_bench — `gpt2bench kernels`: each of our
//          fused ops against what the step runs in its place, timed in turns on the device, where a step's noise
//          cannot hide a difference of a few percent (the ladder's top+<variant> rungs say it for the whole step).
#pragma once
#include <functional>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <utility>
#include <vector>

#include "bench/measure/stats.h"

namespace gpt2 {

struct TimedSide {
  std::string name;        // what this side runs, in words
  std::string timed;       // "graph": replays of a CUDA graph of the pass, the device's time alone; "eager": the
                           // host launching it each time ("eager: <why>" where the graph's capture failed)
  std::vector<double> ms;  // each round's mean pass, milliseconds
  double median_ms = 0;
};

struct KernelCase {
  std::string variant;                 // the variant that switches ours in
  std::string shape;                   // what it runs on, in words
  int iters = 0;                       // passes a round
  std::vector<TimedSide> sides;        // ours first, then what it replaces
  std::vector<RatioInterval> speedup;  // for each side after the first: its round times over ours, Hodges-Lehmann
                                       // (> 1: ours is faster); the console and "ratio" take ratio(i)
  std::string note;                    // what the sides say beyond the ratios ("" = nothing)
  // side i's median over ours (> 1: ours is faster)
  double ratio(size_t i) const { return sides[i].median_ms / sides[0].median_ms; }
};

// The milliseconds of one pass, the mean of `iters` passes in a row between two marks of the device's timer.
using RoundTimer = std::function<double(const std::function<void()>& pass, int iters)>;
using Pass = std::pair<std::string, std::function<void()>>;  // (name, one forward + backward)
// The pass captured as a device graph, the result replaying it (throws where it cannot); null: passes run eagerly.
using Replayer = std::function<std::function<void()>(const std::function<void()>& pass)>;
struct Timing {
  RoundTimer round;
  Replayer replay = nullptr;
};

// Each pass made a graph's replay where timing.replay can, then warmed up twice; a round takes `iters` passes,
// iters such that the slowest side's round takes about `round_ms` (1 to 1000), and the sides take turns for
// `rounds` rounds, so that drift (clocks, heat, a neighbour) hits them alike (docs/variants.md: Op by op).
KernelCase time_in_turns(std::string variant, std::string shape, const std::vector<Pass>& passes, int rounds,
                         double round_ms, const Timing& timing);

// kernels.json's entry for a case: its sides, their round times and medians, the ratios with their intervals.
nlohmann::json case_json(const KernelCase& c);

struct KernelBenchOptions {
  std::string profile_path;
  std::string device;  // overrides the profile's when set
  std::string out;     // the JSON file to write ("" = none)
  int rounds = 15;
  std::string only;    // a regular expression: only the cases and surveys with a name it finds ("" = all)
};
int run_kernel_bench(const KernelBenchOptions& o);

}  // namespace gpt2
