#include "variants/all.h"

const gpt2::Variant gpt2::variants::gelu_epilogues{.name = "gelu_epilogues", .kind = VariantKind::kExtra,
    .why = "The MLP's bias + GELU and its backward in cuBLASLt GEMM epilogues (GELU_AUX_BIAS, DGELU_BGRAD; ATen "
           "elsewhere): no elementwise pass over the MLP's 4C activations",
    .source = "cuBLASLt epilogues as apex's fused dense and Transformer Engine use them",
    .conflicts = {"fuse_bias_gelu", "fused_gelu_backward"},
    .apply = [](StepSpec& s) { s.model.gelu_epilogues = true; }};
