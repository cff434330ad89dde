#include "variants/all.h"

const gpt2::Variant gpt2::variants::fused_gelu_backward{.name = "fused_gelu_backward", .kind = VariantKind::kExtra,
    .why = "The MLP's Linear+GELU keeps its pre-activation (on CUDA the GEMM's GELU_AUX_BIAS epilogue writes it "
           "beside the GELU: no GELU kernel); its backward makes GELU' and the bias gradient in one pass (our CUDA "
           "kernel; ATen elsewhere), where fuse_bias_gelu's epilogue recomputes it with a GEMM",
    .source = "llm.c's GELU backward with the bias reduction",
    .conflicts = {"fuse_bias_gelu"},
    .apply = [](StepSpec& s) { s.model.fused_gelu_backward = true; }};
