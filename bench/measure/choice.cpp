#include "bench/measure/choice.h"

#include <nlohmann/json.hpp>

#include <stdexcept>

#include "bench/measure/stats.h"
#include "common/errors.h"

namespace gpt2 {

Choice time_candidates(Choice c, const std::vector<std::string>& candidates, int rounds,
                       const std::function<double(const std::string&)>& trial) {
  c.tries.clear();
  if (candidates.size() == 1) {  // nothing to choose, nothing timed
    c.tries.push_back({candidates[0], std::nullopt, "not timed: the only candidate"});
    c.chosen = candidates[0];
    return c;
  }
  std::vector<std::vector<double>> times(candidates.size());
  for (const auto& name : candidates) {
    ChoiceTry t{name, std::nullopt, ""};
    try {
      (void)trial(name);
      t.ms = 0;  // runs: timed below
    } catch (const std::exception& e) {
      t.why = first_line(error_text(e));
    }
    c.tries.push_back(t);
  }
  for (int round = 0; round < rounds; ++round)
    for (size_t i = 0; i < c.tries.size(); ++i)
      if (c.tries[i].ms) times[i].push_back(trial(c.tries[i].candidate));
  const ChoiceTry* best = nullptr;
  const ChoiceTry* own = nullptr;
  for (size_t i = 0; i < c.tries.size(); ++i) {
    if (!c.tries[i].ms) continue;
    c.tries[i].ms = 1e3 * median(times[i]);
    if (!best || *c.tries[i].ms < *best->ms) best = &c.tries[i];
    if (c.tries[i].candidate == c.incumbent) own = &c.tries[i];
  }
  if (!best) {
    std::string why;
    for (const auto& t : c.tries) why += (why.empty() ? "" : "; ") + t.candidate + ": " + t.why;
    throw std::runtime_error("no " + c.setting + " candidate runs here (" + why + ")");
  }
  c.chosen = own && *best->ms >= *own->ms * (1 - c.margin) ? own->candidate : best->candidate;
  return c;
}

void keep_tries(const Choice& one, Choice& all) {
  const ChoiceTry* best = nullptr;
  for (const ChoiceTry& t : one.tries) {
    if (t.candidate == one.incumbent) all.tries.push_back({one.setting + ":" + t.candidate, t.ms, t.why});
    else if (!best || (t.ms && (!best->ms || *t.ms < *best->ms))) best = &t;
  }
  if (best) all.tries.push_back({one.setting + ":" + best->candidate, best->ms, best->why});
}

void to_json(nlohmann::json& j, const Choice& c) {
  nlohmann::json tries = nlohmann::json::array();
  for (const auto& t : c.tries) {
    nlohmann::json e = {{"candidate", t.candidate}};
    if (t.ms) e["ms"] = *t.ms;
    else e["why"] = t.why;
    tries.push_back(e);
  }
  j = {{"setting", c.setting}, {"key", c.key}, {"rule", c.rule}, {"chosen", c.chosen}, {"tries", tries}};
  if (!c.incumbent.empty()) j["incumbent"] = c.incumbent, j["margin"] = c.margin;
  if (!c.timed_for.empty()) j["timed_for"] = c.timed_for;
}

Choice choice_from(const nlohmann::json& j) {
  Choice c{j.at("setting").get<std::string>(), j.value("key", ""), j.value("rule", ""),
           j.at("chosen").get<std::string>(), j.value("incumbent", ""), j.value("margin", 0.0), {},
           j.value("timed_for", "")};
  for (const auto& e : j.value("tries", nlohmann::json::array())) {
    ChoiceTry t{e.at("candidate").get<std::string>(), std::nullopt, e.value("why", "")};
    if (e.contains("ms")) t.ms = e["ms"].get<double>();
    c.tries.push_back(t);
  }
  return c;
}

const Chooser* find_chooser(const std::string& setting) {
  for (const auto& c : choosers())
    if (c.setting == setting) return &c;
  return nullptr;
}

}  // namespace gpt2
