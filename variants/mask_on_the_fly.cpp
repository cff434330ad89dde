#include "variants/all.h"

const gpt2::Variant gpt2::variants::mask_on_the_fly{.name = "mask_on_the_fly", .published_rung = 1,
    .why = "Build the causal mask inside forward instead of keeping a T×T buffer: the buffer's memory goes away",
    .source = "seed 000 rung 1",
    .apply = [](StepSpec& s) { if (s.model.attention == AttentionImpl::kManualBuffer) s.model.attention = AttentionImpl::kManualOnTheFly; }};
