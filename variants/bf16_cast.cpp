#include "variants/all.h"

const gpt2::Variant gpt2::variants::bf16_cast{.name = "bf16_cast", .published_rung = 5, .parity = ParityClass::kPrecision,
    .why = "Cast the whole model to bf16: weights, gradients and optimizer state (half the memory, bf16 math)",
    .source = "seed 000 rung 5",
    .conflicts = {"bf16_autocast", "fp16_autocast"},
    .supports = needs_bf16,
    .apply = [](StepSpec& s) { s.precision = Precision::kBf16Cast; }};
