#include "bench/ladder/choices.h"

#include <iostream>
#include <sstream>

namespace gpt2 {
namespace {

std::string id(const std::string& setting, const std::string& key) { return setting + " | " + key; }

void say(const Choice& c, bool reused) {
  std::cerr << "    " << c.setting << ": " << c.chosen;
  if (reused) {
    std::cerr << " (timed for " << c.timed_for << " on the same " << c.key << ")\n";
    return;
  }
  if (c.tries.size() == 1 && !c.tries[0].ms) {
    std::cerr << " (" << c.tries[0].why << ")\n";
    return;
  }
  std::ostringstream tries, cannot;
  tries.precision(3);
  for (const auto& t : c.tries) {
    if (t.ms) tries << (tries.tellp() > 0 ? ", " : "") << t.candidate << " " << *t.ms << " ms";
    else cannot << (cannot.tellp() > 0 ? ", " : "") << t.candidate;
  }
  std::cerr << " (timed on " << c.key << ": " << tries.str();
  if (cannot.tellp() > 0) std::cerr << "; cannot run here: " << cannot.str() << " (rungs.json says why)";
  if (!c.incumbent.empty()) std::cerr << "; without the choice: " << c.incumbent;
  std::cerr << ")\n";
}

}  // namespace

void ChoiceTimings::keep(const std::vector<RungRecord>& records) {
  for (const auto& r : records) {
    if (r.out.status == RungStatus::kPending) continue;
    for (const auto& c : r.out.choices)
      if (const auto [it, fresh] = timed_.emplace(id(c.setting, c.key), c); fresh && it->second.timed_for.empty())
        it->second.timed_for = r.name();
  }
}

void ChoiceTimings::settle(RungRecord& r, const DeviceInfo& dev, bool after_batch_search) {
  for (const Chooser& chooser : choosers()) {
    const StepSpec s = r.spec();
    if (chooser.after_batch_search != after_batch_search || !chooser.wanted(s) || r.choice(chooser.setting)) continue;
    const std::string key = chooser.key(s);
    const auto it = timed_.find(id(chooser.setting, key));
    const bool reused = it != timed_.end();
    Choice c = reused ? it->second : chooser.choose(s, dev);
    c.setting = chooser.setting, c.key = key;  // the chooser's, whatever its timing filled in
    if (!reused) (timed_[id(c.setting, key)] = c).timed_for = r.name();
    say(c, reused);
    r.out.choices.push_back(c);
  }
}

std::string announce_choices(const RungRecord& r) {
  std::string words;
  for (const auto& c : r.out.choices) words += (words.empty() ? "" : " ") + c.setting + "=" + c.chosen;
  return words;
}

void take_announced_choices(RungRecord& r, const std::string& words) {
  std::istringstream in(words);
  for (std::string w; in >> w;) {
    const auto eq = w.find('=');
    if (eq == std::string::npos) throw std::runtime_error("rank 0 announced a choice without '=': '" + w + "'");
    Choice c;
    c.setting = w.substr(0, eq), c.chosen = w.substr(eq + 1);
    r.out.choices.push_back(c);
  }
}

}  // namespace gpt2
