// defines: BreakdownOptions, run_breakdown — `gpt2bench breakdown`: the breakdown pass alone, per rung.
#pragma once
#include <string>

namespace gpt2 {

struct BreakdownOptions {
  std::string profile_path, out_dir, device;
  std::string rung;  // a rung's name ("07_sdpa" or "sdpa"); empty = every rung
};
// DIR/breakdown/<rung>.json and .trace.json for each rung asked for, and a table of their phases.
int run_breakdown(const BreakdownOptions& o);

}  // namespace gpt2
