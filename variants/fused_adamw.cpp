#include "variants/all.h"

const gpt2::Variant gpt2::variants::fused_adamw{.name = "fused_adamw", .published_rung = 3,
    .why = "One fused AdamW kernel over all parameters (at::_fused_adamw_), step count on the device",
    .source = "seed 000 rung 3; seed 002",
    .apply = [](StepSpec& s) { s.optimizer.kind = OptimizerKind::kAdamwFused; }};
