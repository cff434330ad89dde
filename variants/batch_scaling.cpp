#include "variants/all.h"

const gpt2::Variant gpt2::variants::batch_scaling{.name = "batch_scaling", .published_rung = 10, .parity = ParityClass::kProblem,
    .why = "The largest power-of-two batch that fits (GPU memory, or the CPU budget): more tokens per launch",
    .source = "seed 000 rung 10",
    .apply = [](StepSpec& s) { s.search_batch = true; },
    .searches_batch = true};
