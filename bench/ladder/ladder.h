// defines: LadderOptions, run_ladder — profile -> rungs -> Google Benchmark -> results.json + rungs.json
#pragma once
#include <string>

namespace gpt2 {

struct LadderOptions {
  std::string profile_path;
  std::string out_dir;
  std::string device;        // overrides the profile's device when set
  std::string rung_filter;   // --rung: a regex over rung and benchmark names ('-' negates); see rung_selected
  bool resume = false;       // out_dir holds an earlier run of the same profile and build: run the rest
  bool verbose = false;      // also Google Benchmark's own console table
};

// Returns the process exit code. Everything that can be checked (profile, recipes, device, data)
// is checked before DIR is touched; results are rewritten atomically after every rung. SIGINT or
// SIGTERM stops the rung in flight at its next step and leaves valid results (exit code 130);
// `resume` then runs what is not complete (ok, skipped, diverged and oom rungs are).
int run_ladder(const LadderOptions& o);

}  // namespace gpt2
