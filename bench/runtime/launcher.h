// defines: launch_local — `--nproc N`: N copies of this program on this machine with torchrun's
//          environment (RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT)
#pragma once
#include <string>
#include <vector>

namespace gpt2 {

// Starts `args` as ranks 0..nproc-1, forwards SIGINT/SIGTERM, waits. When one fails the others get `grace_s` to
// stop, then are terminated. Returns 0, or the first failure's exit code (1 for a signal).
int launch_local(int nproc, const std::vector<std::string>& args, int grace_s = 60);

}  // namespace gpt2
