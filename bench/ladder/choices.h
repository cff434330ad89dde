// defines: ChoiceTimings — the ladder's side of a setting settled by timing (bench/measure/choice.h): each chooser
//          a rung's step wants, run once a run for each key, recorded in the rung's `choices`.
#pragma once
#include <map>
#include <string>
#include <vector>

#include "bench/ladder/results.h"

namespace gpt2 {

class ChoiceTimings {
 public:
  // --resume: the choices of the rungs that ran stand for the rungs still to run with the same key.
  void keep(const std::vector<RungRecord>& records);
  // Each chooser of this stage (before or after the batch search) that the rung's step wants and that the rung was
  // not told (a follower is): an earlier rung's timing of the same key if there is one (the same inputs, so the
  // same candidate, whatever the noise of a second timing says), else timed now. Said on the console.
  void settle(RungRecord& r, const DeviceInfo& dev, bool after_batch_search);

 private:
  std::map<std::string, Choice> timed_;  // by setting and key
};

// The rung's choices as a follower is told them ("sdpa_backend=cudnn classifier_chunk=2048"), and back.
std::string announce_choices(const RungRecord& r);
void take_announced_choices(RungRecord& r, const std::string& words);

}  // namespace gpt2
