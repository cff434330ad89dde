// defines: Choice, time_candidates, Chooser, choosers — one mechanism for a setting settled by timing its candidates
//          on the rung's own shapes (settings.sdpa_backend: fastest, settings.classifier_chunk: fastest). The ladder
//          runs the choosers (bench/ladder/choices.h); rungs.json keeps each rung's `choices`; the report lists them.
#pragma once
#include <nlohmann/json_fwd.hpp>

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "bench/runtime/device_info.h"
#include "bench/step/step_spec.h"

namespace gpt2 {

struct ChoiceTry {
  std::string candidate;
  std::optional<double> ms;  // median time of one trial; none: it cannot run here
  std::string why;           // why it cannot, when it cannot
};

// One setting's choice for one rung.
struct Choice {
  std::string setting;    // "sdpa_backend", "classifier_chunk"
  std::string key;        // what was timed, in words: rungs with the same key share one timing
  std::string rule;       // how the winner was picked, in words
  std::string chosen;
  std::string incumbent;  // what would run without the choice ("": none); kept unless beaten by more than `margin`
  double margin = 0;
  std::vector<ChoiceTry> tries;
  std::string timed_for;  // the rung whose timing this is, where another rung with the same key took it
};
void to_json(nlohmann::json& j, const Choice& c);
Choice choice_from(const nlohmann::json& j);

// Times `candidates` for `c`: `trial` returns seconds of one pass, or throws where one cannot run. Each is tried
// once, then timed `rounds` times in turns; the fastest median wins unless the incumbent is within the margin.
// A single candidate is chosen untimed; none that runs: std::runtime_error with every reason.
Choice time_candidates(Choice c, const std::vector<std::string>& candidates, int rounds,
                       const std::function<double(const std::string&)>& trial);

// Of a part's choice (one GEMM, one direction) into the whole's tries: the incumbent's and the fastest other's (or,
// where none ran, the first one's reason), named "<part>:<candidate>".
void keep_tries(const Choice& one, Choice& all);

// A setting settled by timing; its instances are in bench/measure/choosers.cpp.
struct Chooser {
  std::string setting;
  bool after_batch_search = false;  // timed at the batch the rung runs, else at the planned one (before any search)
  std::function<bool(const StepSpec&)> wanted;                        // the step asks for it
  std::function<std::string(const StepSpec&)> key;                   // what it times, in words
  std::function<Choice(const StepSpec&, const DeviceInfo&)> choose;   // time_candidates on the step's shapes
  std::function<void(StepSpec&, const std::string&)> apply;           // the chosen candidate into the step
};
// Every chooser, in the order a rung runs them (choosers.cpp; tests add theirs while they run).
std::vector<Chooser>& choosers();
const Chooser* find_chooser(const std::string& setting);

}  // namespace gpt2
