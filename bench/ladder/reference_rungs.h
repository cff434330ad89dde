// defines: run_reference_rungs, fits_beside — the stage after the rungs: the profile's Python reference rungs
//          (bench/ladder/reference.h), each with the C++ rung it is compared with timed again, its repetitions
//          alternating with the reference's (paired timing) where both fit on the device, else after it.
#pragma once
#include <vector>

#include "bench/ladder/ladder.h"
#include "bench/ladder/results.h"
#include "bench/ladder/rung.h"
#include "bench/ladder/run_dir.h"

namespace gpt2 {

// Paired timing needs the reference and its C++ rung on the device at once: where the rung held at most this share
// of the device's memory, the reference (the same step) is taken to fit beside it. B=8 on an H100: the baseline 35%.
constexpr double kPairedMemoryShare = 0.4;
// Whether the reference's repetitions are paired with those of `with` (its C++ rung) on `dev`: always on a CPU.
bool fits_beside(const RungRecord& with, const DeviceInfo& dev);

// The references --rung selects, each with its share of the time budget; ref_torch_compile again at the batch
// batch_scaling settled on. After each, its C++ rung is timed again (RungRunner::retime), a share of its own.
void run_reference_rungs(const LadderOptions& o, RungRunner& ladder, const std::vector<RungRecord>& records,
                         RunWriter& writer);

}  // namespace gpt2
