// defines: launch_local — `--nproc N`: N copies of this program on this machine with torchrun's
//          environment (RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT)
#pragma once
#include <string>
#include <vector>

namespace gpt2 {

// Starts `args` (argv[0] first) as ranks 0..nproc-1, forwards SIGINT/SIGTERM to them, and waits.
// When one rank fails, the others get `grace_s` seconds to stop on their own (they notice the lost
// rank themselves), then are terminated. Returns 0 if every rank exited 0, else the first failure's
// exit code (1 for a rank killed by a signal).
int launch_local(int nproc, const std::vector<std::string>& args, int grace_s = 60);

}  // namespace gpt2
