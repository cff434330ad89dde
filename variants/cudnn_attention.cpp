#include "variants/all.h"

namespace {
gpt2::Support needs_cudnn(const gpt2::DeviceInfo& d) {
  if (!d.cuda()) return {false, "cuDNN's fused attention is CUDA's; on the CPU attention is ATen's SDPA either way"};
  if (d.cc_major < 8) return {false, "cuDNN's flash attention needs sm80+"};
  return {};  // a CUDA build without cuDNN's frontend says so when the rung runs (kernels/attention.h)
}
}  // namespace

const gpt2::Variant gpt2::variants::cudnn_attention{.name = "cudnn_attention", .kind = VariantKind::kExtra,
    .why = "The fused QKV projection's attention through our own cuDNN graphs: Q, K, V read in place, and the "
           "backward's dQ, dK, dV written into one (B, T, 3C) gradient, where SDPA's three are concatenated",
    .source = "cuDNN's fused flash attention (its frontend's SDPA graphs, as ATen's MHA.cpp builds them)",
    .requires_ = {"sdpa", "fuse_qkv"},
    .supports = needs_cudnn,
    .apply = [](StepSpec& s) { s.model.cudnn_attention = true; }};
