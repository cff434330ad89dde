// defines: DdpCheckOptions, run_ddp_check — `gpt2bench ddp-check`: K data-parallel steps of the
//          baseline step, each rank writing its losses and a parameter checksum (DIR/rankN.json), so
//          that replicas can be compared bit for bit and N ranks x B with 1 rank x N*B.
#pragma once
#include <cstdint>
#include <optional>
#include <string>

namespace gpt2 {

struct DdpCheckOptions {
  std::string profile_path, out_dir;
  std::string device;            // overrides the profile's device when set
  int steps = 5;
  std::optional<int64_t> batch;  // per rank; the profile's batch when unset
};
// GPT2BENCH_FAULT_RANK/GPT2BENCH_FAULT_STEP (tests): that rank kills itself at that step.
int run_ddp_check(const DdpCheckOptions& o);

}  // namespace gpt2
