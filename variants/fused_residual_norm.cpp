#include "variants/all.h"

const gpt2::Variant gpt2::variants::fused_residual_norm{.name = "fused_residual_norm", .kind = VariantKind::kExtra,
    .why = "Each residual add fused with the LayerNorm after it, forward and backward (our CUDA kernels; ATen "
           "elsewhere): the stream and the normed input from one pass over the row, not an add kernel then a norm; "
           "the branch's last linear leaves its bias to that pass, whose backward sums the bias's gradient beside "
           "LayerNorm's (no reduce kernel of its own); in training the branch's dropout is drawn in the same pass "
           "(Philox, graph-safe)",
    .source = "llm.c's fused residual forward and LayerNorm backward",
    .apply = [](StepSpec& s) { s.model.fused_residual_norm = true; }};
