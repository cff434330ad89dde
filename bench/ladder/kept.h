// defines: KeptExtras, choose_kept, kept_recipe — the kept rungs (RungKind::kKept, config/profile.h): the ladder's
//          top, and its rung at the profile's batch, with every extra that beat the top in this run. An extra's
//          top+<extra> rung says whether it is faster there; the kept rungs put the winners together, so that the
//          run's fastest rung is the one a user would train with (issue 15: "a kernel that does not beat what it
//          replaces on the GPU is not kept" — decided per device, per run, from the rungs that measured it).
#pragma once
#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "bench/ladder/results.h"

namespace gpt2 {

struct KeptExtras {
  std::vector<std::string> variants;             // the extras that join, the largest gain first
  nlohmann::json why = nlohmann::json::array();  // per candidate: variant, rung, ratio (if measured), kept, why
};

// The candidates are the exact extras that slow nothing on purpose (fusions: not a changed precision, problem or
// an anti-variant) with a top+<extra> rung in `records`. One is kept when its rung ran ok, passed parity and is
// measurably faster than the rung it is compared with (the top) and than the top timed again after the extras
// (RungKind::kControl, where it ran and passed parity): the Hodges-Lehmann interval of its repetitions' tok/s over
// each timing's lies above 1 (a gain within noise joins nothing, nor the machine's drift between the timings), and
// its gain (the smaller of its two ratios) is larger than an anti-variant's rung found faster than both timings
// (slowed on purpose: its gain is the machine's drift); of extras that conflict, the larger gain.
KeptExtras choose_kept(const std::vector<RungRecord>& records);

// A kept rung's recipe: its planned one less what the kept extras conflict with, plus them, resolved on `base`.
ResolvedRung kept_recipe(const RungRecord& r, const std::vector<std::string>& kept, const StepSpec& base,
                         const DeviceInfo& dev);

// The names of the extras a kept rung's `why` (rungs.json's "kept") says were kept: --resume settles it again.
std::vector<std::string> kept_variants(const nlohmann::json& why);

}  // namespace gpt2
