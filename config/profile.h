// defines: Profile (a YAML run profile, validated), RungPlan, load_profile, expand_plan
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "bench/step/step_spec.h"
#include "model/config.h"
#include "model/shard.h"

namespace gpt2 {

// What a rung is in its plan, written into rungs.json: the report reads it instead of parsing names.
enum class RungKind {
  kBaseline,  // rung 0: the empty recipe
  kLadder,    // the cumulative ladder: the previous rung plus one variant
  kExtra,     // an extra variant on top of the full ladder
  kAddOne,    // add_one: the baseline plus one variant (and what it requires)
  kAll,       // leave_one_out: every listed variant
  kDropOne,   // leave_one_out: all but one
  kRecipe,    // plan: recipes
  kKept,      // the ladder's top (or its rung before batch_scaling) plus the extras that beat the top: settled
              // when it starts, from the top+<extra> rungs' outcomes (bench/ladder/kept.h)
  kControl,   // the top timed again after the extras: what the run's drift alone makes of a ratio between rungs
              // timed minutes apart (the kept rule's second comparison)
};
std::string to_string(RungKind k);
// An extra, kept or control rung: built on the ladder's top (or its rung before batch_scaling), at its batch.
inline bool on_the_top(RungKind k) { return k == RungKind::kExtra || k == RungKind::kKept || k == RungKind::kControl; }

struct RungPlan {
  std::string name;                   // "00_baseline", "03_fused_adamw", "05_drop_sdpa", ...
  std::vector<std::string> variants;  // the recipe
  RungKind kind = RungKind::kRecipe;
  std::string compare_to;             // the rung its speed-up is measured against ("" for the baseline)
  std::string variant;                // the variant the rung is about: added (ladder, extra, add_one) or dropped
  bool ties = false;                  // a kept rung that also takes the extras that tied the top (kept.h)
};

struct Profile {
  std::string path, name;
  ModelOptions model;
  DataOptions data;
  std::string device = "auto";
  int64_t batch = 8;
  int64_t warmup_steps = 3;
  int64_t steps = 10;        // timed steps per repetition
  int64_t repetitions = 5;
  int64_t parity_steps = 5;  // K steps compared with the baseline's losses
  int64_t breakdown_steps = 2; // steps of each rung's breakdown pass (0 = none); old name profile_steps
  // The whole run's time budget (budget_minutes; 0 = none). Unset: 15 minutes on a CPU, none on a GPU.
  std::optional<double> budget_minutes;
  uint64_t seed = 1337;
  double lr = 5e-4;              // AdamW's learning rate (the seed's)
  int64_t dist_timeout_s = 300;  // a collective waiting longer fails, naming the lost rank
  // plan: ladder (cumulative: each rung = the previous + one variant), add_one (baseline + each),
  // leave_one_out (all − each), recipes (named rungs as written).
  std::string plan = "ladder";
  // ladder/add_one/leave_one_out over these; absent = every registered variant, [] = the baseline alone
  std::optional<std::vector<std::string>> variants;
  std::vector<RungPlan> recipes;      // plan: recipes
  // Python reference rungs run after the ladder (bench/ladder/reference.h): ref_torch_eager, ref_torch_compile
  std::vector<std::string> references;
  Settings settings;                  // knobs variants read (sdpa backend, vocab multiple, batch bounds)
};

// A rung's name without the number expand_plan puts before it ("07_sdpa" -> "sdpa"): a user may name it so.
std::string rung_label(const std::string& name);

// ConfigError (bench/yaml_reader.h) names file, line, key and what was expected.
Profile load_profile(const std::string& path);
// Rung 0 is always the baseline (the empty recipe).
std::vector<RungPlan> expand_plan(const Profile& p);

}  // namespace gpt2
