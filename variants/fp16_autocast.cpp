#include "variants/all.h"

const gpt2::Variant gpt2::variants::fp16_autocast{.name = "fp16_autocast", .parity = ParityClass::kPrecision, .kind = VariantKind::kExtra,
    .why = "Autocast to fp16 over fp32 master weights with a dynamic gradient scaler (GradScaler)",
    .source = "seed 001; seed 002",
    .conflicts = {"bf16_cast", "bf16_autocast"},
    .supports = needs_fp16,
    .apply = [](StepSpec& s) { s.precision = Precision::kFp16Autocast; }};
