// defines: classifier_chunk_chooser, classifier_chunk_candidates, pick_classifier_chunk, choose_classifier_chunk,
//          classifier_chunk_key — settings.classifier_chunk: fastest, the fused classifier's chunk chosen for a rung
//          by timing each candidate on its LM head (bench/measure/choice.h).
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "bench/measure/choice.h"
#include "bench/runtime/device_info.h"
#include "bench/step/step_spec.h"

namespace gpt2 {

// `first`, twice, four times ... that many tokens, the last all `tokens` in one chunk: each chunk past the first
// reads and writes the head's fp32 gradient once more, a larger one holds more logits at once.
std::vector<int64_t> classifier_chunk_candidates(int64_t first, int64_t tokens);

// time_candidates over the chunks, `trial(chunk)` one forward + backward at that chunk; the fastest median wins.
Choice pick_classifier_chunk(const std::vector<int64_t>& candidates, int rounds,
                             const std::function<double(int64_t)>& trial);

// The same on the device for the step's LM head and loss (kernels::linear_cross_entropy): its tokens a step, model
// width, padded vocabulary and dtype, candidates from settings.classifier_chunk. Each round's time is the mean
// of `iters` passes.
Choice choose_classifier_chunk(const StepSpec& spec, const DeviceInfo& dev, int rounds = 7, int iters = 2);

// What choose_classifier_chunk times, in words ("N=8192 C=768 V=50304 BFloat16 from 1024"): rungs with the same
// head share one timing.
std::string classifier_chunk_key(const StepSpec& spec);

// settings.classifier_chunk: fastest with the fused classifier, timed at the batch the rung runs.
Chooser classifier_chunk_chooser();

}  // namespace gpt2
