// defines: rung_selected, selected_references, check_rung_filter, searched_batch, runs_to_make — what a run's
//          --rung selects, and what is left to run.
#pragma once
#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "bench/ladder/results.h"

namespace gpt2 {

// --rung REGEX selects the rungs whose name ("05_bf16_cast") or benchmark name ("gpt2-scaled/05_bf16_cast") it
// finds; a leading '-' negates it. Only the rungs still pending are selected.
bool rung_selected(const std::string& filter, const RungRecord& r);
// The profile's reference rungs the filter selects (a reference's benchmark name: "<preset>/<name>").
std::vector<std::string> selected_references(const std::string& filter, const Profile& prof);
// Checked before anything runs or is written, naming the rungs there are. Returns how many it selects.
int64_t check_rung_filter(const std::string& filter, const std::vector<RungRecord>& records, const Profile& prof);

// batch_scaling's batch, for ref_torch_compile's second run: its one-process rung's once it ran, 0 while that
// rung is still to run, none without one (or where it failed, or runs data-parallel).
std::optional<int64_t> searched_batch(const std::vector<RungRecord>& records);
// What the time budget is shared among: the rungs to run (not those --resume keeps; batch_scaling's with a share for
// its search: RungRecord::budget_shares) and the reference runs to make after them, each with its rung timed again.
int64_t runs_to_make(const std::string& filter, const Profile& prof, const std::vector<RungRecord>& records,
                     const nlohmann::json& kept_references);

}  // namespace gpt2
