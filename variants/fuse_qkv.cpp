#include "variants/all.h"

const gpt2::Variant gpt2::variants::fuse_qkv{.name = "fuse_qkv", .published_rung = 8,
    .why = "One (C -> 3C) matmul for query, key and value instead of three (what compile's fusion and GPT-2's c_attn do)",
    .source = "seed 000 rung 8 (torch.compile), by hand",
    .apply = [](StepSpec& s) { s.model.fused_qkv = true; }};
