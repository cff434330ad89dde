#include "variants/all.h"

const gpt2::Variant gpt2::variants::gelu_epilogues{.name = "gelu_epilogues", .kind = VariantKind::kExtra,
    .why = "The MLP's bias + GELU(tanh) in fc1's GEMM epilogue, which also keeps the pre-activation, and GELU' + "
           "the bias gradient in fc2's input-gradient GEMM epilogue (cuBLASLt GELU_AUX_BIAS, DGELU_BGRAD; ATen "
           "elsewhere): no elementwise pass over the MLP's 4C activations, forward or backward",
    .source = "cuBLASLt epilogues as apex's fused dense and Transformer Engine use them",
    .conflicts = {"fuse_bias_gelu", "fused_gelu_backward"},
    .apply = [](StepSpec& s) { s.model.gelu_epilogues = true; }};
