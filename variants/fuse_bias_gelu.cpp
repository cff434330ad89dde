#include "variants/all.h"

const gpt2::Variant gpt2::variants::fuse_bias_gelu{.name = "fuse_bias_gelu", .published_rung = 8,
    .why = "FeedForward's bias + GELU(tanh) in the matmul's epilogue (at::_addmm_activation, cuBLASLt on CUDA)",
    .source = "seed 000 rung 8 (torch.compile), by hand",
    .apply = [](StepSpec& s) { s.model.fused_bias_gelu = true; }};
