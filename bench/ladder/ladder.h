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

// Returns the process exit code. Bad input is refused before DIR is touched; results are rewritten atomically
// after every rung; SIGINT/SIGTERM stops at the next step (exit 130), and `resume` runs what is not complete.
int run_ladder(const LadderOptions& o);

}  // namespace gpt2
