#include "variants/all.h"

const gpt2::Variant gpt2::variants::bf16_autocast{.name = "bf16_autocast", .parity = ParityClass::kPrecision, .kind = VariantKind::kExtra,
    .why = "Autocast forward and loss to bf16 over fp32 master weights (the usual mixed precision)",
    .source = "seed 002",
    .conflicts = {"bf16_cast", "fp16_autocast"},
    .supports = needs_bf16,
    .apply = [](StepSpec& s) { s.precision = Precision::kBf16Autocast; }};
