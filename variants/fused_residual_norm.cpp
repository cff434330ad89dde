#include "variants/all.h"

const gpt2::Variant gpt2::variants::fused_residual_norm{.name = "fused_residual_norm", .kind = VariantKind::kExtra,
    .why = "Each residual add (with the branch's bias and dropout) fused with the LayerNorm after it, forward and "
           "backward, one pass over the row (our CUDA kernels; ATen elsewhere)",
    .source = "llm.c's fused residual forward and LayerNorm backward",
    .apply = [](StepSpec& s) {
      s.model.fused_residual_norm = true;
      use_residual_norm(s.model, s.settings.residual_norm);  // fastest: the sweeps until chosen (choosers.h)
    }};
