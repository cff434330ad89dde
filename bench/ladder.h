// defines: LadderOptions, run_ladder — profile -> rungs -> Google Benchmark -> results.json + rungs.json
#pragma once
#include <string>

namespace gpt2 {

struct LadderOptions {
  std::string profile_path;
  std::string out_dir;
  std::string device;        // overrides the profile's device when set
  std::string rung_filter;   // Google Benchmark --benchmark_filter regex over rung names
};

// Returns the process exit code. Everything that can be checked (profile, recipes, device, data)
// is checked before DIR is touched; results are rewritten atomically after every rung.
int run_ladder(const LadderOptions& o);

}  // namespace gpt2
