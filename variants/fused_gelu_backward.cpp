#include "variants/all.h"

const gpt2::Variant gpt2::variants::fused_gelu_backward{.name = "fused_gelu_backward", .kind = VariantKind::kExtra,
    .why = "The MLP's Linear+GELU keeps its pre-activation (a cuBLASLt epilogue on CUDA); its backward makes GELU' "
           "and the bias gradient in one pass (our CUDA kernel; ATen elsewhere)",
    .source = "llm.c's GELU backward with the bias reduction",
    .conflicts = {"fuse_bias_gelu"},
    .apply = [](StepSpec& s) {
      s.model.fused_gelu_backward = true;
      use_gelu_backward_slab(s.model, s.settings.gelu_backward_slab);  // fastest: choosers.h
    }};
