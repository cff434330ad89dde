// defines: run_reference_rungs — the stage after the rungs: the profile's Python reference rungs
//          (bench/ladder/reference.h), each followed by the C++ rung it is compared with, timed again.
#pragma once
#include <vector>

#include "bench/ladder/ladder.h"
#include "bench/ladder/results.h"
#include "bench/ladder/rung.h"
#include "bench/ladder/run_dir.h"

namespace gpt2 {

// The references --rung selects, each with its share of the time budget; ref_torch_compile again at the batch
// batch_scaling settled on. After each, its C++ rung is timed again (RungRunner::retime), a share of its own.
void run_reference_rungs(const LadderOptions& o, RungRunner& ladder, const std::vector<RungRecord>& records,
                         RunWriter& writer);

}  // namespace gpt2
