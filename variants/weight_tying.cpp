#include "variants/all.h"

const gpt2::Variant gpt2::variants::weight_tying{.name = "weight_tying", .parity = ParityClass::kProblem, .kind = VariantKind::kExtra,
    .why = "Share the token embedding with the output head (GPT-2's own choice): 38.6M fewer parameters at 124M",
    .source = "seeds 001, 003",
    .apply = [](StepSpec& s) { s.model.tie_weights = true; }};
