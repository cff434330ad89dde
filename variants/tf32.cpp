#include "variants/all.h"

const gpt2::Variant gpt2::variants::tf32{.name = "tf32", .published_rung = 2, .parity = ParityClass::kPrecision,
    .why = "float32 matmuls on TF32 tensor cores (matmul precision high): tensor-core speed, 10-bit mantissa in the products",
    .source = "seed 000 rung 2; build-nanogpt",
    .supports = [](const DeviceInfo& d) -> Support {
      if (!d.cuda()) return {false, "TF32 tensor cores need a CUDA device of sm80+; this is a CPU"};
      if (!d.tf32) return {false, "TF32 tensor cores need sm80+ (Ampere or newer); this is sm" + std::to_string(d.cc_major) + std::to_string(d.cc_minor)};
      return {};
    },
    .apply = [](StepSpec& s) { s.tf32 = true; }};
