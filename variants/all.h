// defines: gpt2::variants::* (one descriptor per file in variants/) and registry() — THE registry
//          list. Adding a variant = one file in variants/ plus its line here and in all.cpp.
#pragma once
#include <vector>

#include "variants/variant.h"

namespace gpt2 {
namespace variants {
extern const Variant mask_on_the_fly;
extern const Variant tf32;
extern const Variant fused_adamw;
extern const Variant pinned_memory;
extern const Variant bf16_cast;
extern const Variant native_layers;
extern const Variant sdpa;
extern const Variant fuse_qkv;
extern const Variant fuse_bias_gelu;
extern const Variant cuda_graph;
extern const Variant vocab_padding;
extern const Variant batch_scaling;
extern const Variant ddp;
extern const Variant bf16_autocast;
extern const Variant fp16_autocast;
extern const Variant weight_tying;
extern const Variant fused_classifier;
extern const Variant fused_gelu_backward;
extern const Variant gelu_epilogues;
extern const Variant fused_residual_norm;
extern const Variant fp8_linears;
extern const Variant sync_every_step;
extern const Variant adamw_one_launch;
extern const Variant adamw_in_backward;
extern const Variant gemm_algorithms;
extern const Variant cudnn_attention;
}  // namespace variants

// Every variant, in the order the default ladder applies them.
const std::vector<const Variant*>& registry();

}  // namespace gpt2
