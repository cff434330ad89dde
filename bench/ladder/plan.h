// defines: recipe_base, plan_rungs, settle_kept, resettle_kept — the profile's rungs resolved for this device: the
//          first stage of a run (plan -> rung -> record -> results files).
#pragma once
#include <string>
#include <vector>

#include "bench/ladder/results.h"

namespace gpt2 {

// The step every recipe edits: the baseline at the profile's model, batch, settings and learning rate.
StepSpec recipe_base(const Profile& prof, const DeviceInfo& dev);

// The profile's rungs resolved for this device: specs, skipped variants, the FLOPs and peaks of each. A rung whose
// variants are all skipped here is an earlier rung again: marked, never timed (but a kept rung, planned as the rung
// it adds to until it starts, and the top's control, the top again on purpose).
std::vector<RungRecord> plan_rungs(const Profile& prof, const DeviceInfo& dev);

// A kept rung's recipe settled: the extras that beat the top (or, on --resume, those a finished one kept).
void settle_kept(RungRecord& r, const std::vector<std::string>& kept, const Profile& prof, const DeviceInfo& dev);
// --resume: a kept rung that finished before gets the recipe it ran.
void resettle_kept(std::vector<RungRecord>& records, const Profile& prof, const DeviceInfo& dev);

}  // namespace gpt2
