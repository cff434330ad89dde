#include "variants/all.h"

const gpt2::Variant gpt2::variants::sdpa{.name = "sdpa", .published_rung = 7,
    .why = "scaled_dot_product_attention(is_causal): FlashAttention-style kernels, no T×T scores in memory",
    .source = "seed 000 rung 7; seeds 001-004",
    .apply = [](StepSpec& s) {
      s.model.attention = AttentionImpl::kSdpa;
      s.sdpa_backend = s.settings.sdpa_backend;
    }};
