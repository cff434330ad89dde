#include "variants/all.h"

const gpt2::Variant gpt2::variants::native_layers{.name = "native_layers", .published_rung = 6,
    .why = "libtorch's fused LayerNorm and GELU(tanh) kernels instead of the from-scratch compositions",
    .source = "seed 000 rung 6",
    .apply = [](StepSpec& s) { s.model.layers = LayerImpl::kNative; }};
