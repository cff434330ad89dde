// defines: ChunkChoice, classifier_chunk_candidates, pick_classifier_chunk, choose_classifier_chunk,
//          classifier_chunk_key — settings.classifier_chunk: fastest, the fused classifier's chunk chosen for a
//          rung by timing each candidate on its LM head, recorded (as settings.sdpa_backend: fastest does for the
//          attention kernel).
#pragma once
#include <nlohmann/json_fwd.hpp>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "bench/runtime/device_info.h"
#include "bench/step/step_spec.h"

namespace gpt2 {

struct ChunkTry {
  int64_t chunk = 0;         // tokens a chunk
  std::optional<double> ms;  // median time of one forward + backward; none: it cannot run here
  std::string why;           // why it cannot (out of memory, ...), when it cannot
};
struct ChunkChoice {
  int64_t chosen = 0;
  std::vector<ChunkTry> tries;
  std::string timed_for;  // the rung whose timing this is, where another rung with the same head took it
};
void to_json(nlohmann::json& j, const ChunkChoice& c);
ChunkChoice chunk_choice_from(const nlohmann::json& j);

// `first`, twice, four times ... that many tokens, the last all `tokens` in one chunk: each chunk past the first
// reads and writes the head's fp32 gradient once more, a larger one holds more logits at once.
std::vector<int64_t> classifier_chunk_candidates(int64_t first, int64_t tokens);

// `trial(chunk)`: seconds of one forward + backward at that chunk; it throws where the chunk cannot run (out of
// memory). Each candidate is tried once (warm-up, and whether it runs), then timed `rounds` times in turns; the
// fastest median wins. Throws std::runtime_error, every reason listed, when none runs. A single candidate is
// chosen untimed.
ChunkChoice pick_classifier_chunk(const std::vector<int64_t>& candidates, int rounds,
                                  const std::function<double(int64_t)>& trial);

// The same on the device for the step's LM head and loss (kernels::linear_cross_entropy): its tokens a step, model
// width, padded vocabulary and dtype, candidates from settings.classifier_chunk. Each round's time is the mean
// of `iters` passes.
ChunkChoice choose_classifier_chunk(const StepSpec& spec, const DeviceInfo& dev, int rounds = 7, int iters = 2);

// What choose_classifier_chunk times, in words ("N=8192 C=768 V=50304 BFloat16"): rungs with the same head
// share one timing.
std::string classifier_chunk_key(const StepSpec& spec);

}  // namespace gpt2
