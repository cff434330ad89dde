#include "variants/all.h"

namespace gpt2 {

const std::vector<const Variant*>& registry() {
  using namespace variants;
  static const std::vector<const Variant*> list = {
      // The cumulative ladder, in seed 000's order (rung 8, torch.compile, is done by hand in three parts).
      &mask_on_the_fly,
      &tf32,
      &fused_adamw,
      &pinned_memory,
      &bf16_cast,
      &native_layers,
      &sdpa,
      &fuse_qkv,
      &fuse_bias_gelu,
      &cuda_graph,
      &vocab_padding,
      &batch_scaling,
      &ddp,
      // Extras: run on top of the full ladder, not part of it.
      &bf16_autocast,
      &fp16_autocast,
      &weight_tying,
      &fused_classifier,
      &fused_gelu_backward,
      &gelu_epilogues,
      &fused_residual_norm,
      &sync_every_step,
      &fp8_linears,
      &adamw_one_launch,
      &adamw_in_backward,
      &gemm_algorithms,
      &cudnn_attention,
  };
  return list;
}

}  // namespace gpt2
