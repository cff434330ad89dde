// defines: KeptExtras, choose_kept, kept_recipe — the kept rungs (RungKind::kKept): the top, and its rung at the
//          profile's batch, with every extra whose top+<extra> rung beat the top in this run, so that the fastest
//          rung is the one a user would train with (docs/variants.md: The plan).
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

// Of the exact extras with a top+<extra> rung in `records`: those that ran ok, passed parity and whose tok/s
// interval lies above 1 against both the top and its second timing, by more than an anti-variant's drift; of
// extras that conflict, the larger gain (docs/variants.md: The plan). `ties`: also those whose interval reaches 1
// against both (not measurably slower), their entries marked "tie".
KeptExtras choose_kept(const std::vector<RungRecord>& records, bool ties = false);

// A kept rung's recipe: its planned one less what the kept extras conflict with, plus them, resolved on `base`.
ResolvedRung kept_recipe(const RungRecord& r, const std::vector<std::string>& kept, const StepSpec& base,
                         const DeviceInfo& dev);

// The names of the extras a kept rung's `why` (rungs.json's "kept") says were kept: --resume settles it again.
std::vector<std::string> kept_variants(const nlohmann::json& why);

}  // namespace gpt2
