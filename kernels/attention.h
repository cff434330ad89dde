// defines: causal_attention — a block's causal self-attention from its fused QKV output (B, T, 3C): by ATen's
//          SDPA, or (the cudnn_attention extra) by cuDNN's fused flash attention through our own cuDNN graphs, whose
//          backward writes dQ, dK and dV into one (B, T, 3C) tensor: the QKV linear's output gradient as it is,
//          where ATen's SDPA returns three and autograd's split concatenates them (a pass over 3·B·T·C).
#pragma once
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string>
#include <vector>

namespace gpt2::kernels {

// cuDNN's execution plan for each direction, by its name in cuDNN's heuristic list ("eng8_k26=7": engine and knobs);
// "" runs the list's first that builds, what ATen's cuDNN SDPA runs.
struct CudnnPlans {
  std::string forward, backward;
};

// y (B, T, C): the heads of qkv (query, key, value in that order along its last dimension, each n_head heads)
// attend causally with dropout `p` on the weights, scaled by 1/sqrt(head size); differentiable in qkv.
// cudnn = false: split, at::scaled_dot_product_attention, heads back together (the step without the extra).
// cudnn = true: a CUDA tensor through cudnn_causal_attention; anything else is refused with the reason.
at::Tensor causal_attention(const at::Tensor& qkv, int64_t n_head, double p, bool cudnn, const CudnnPlans& plans = {});

// The cuDNN side alone (CUDA builds that found cuDNN's frontend): bf16 or fp16, contiguous, head size a multiple
// of 8 up to 128. Its graphs are built once a process for each shape, dtype and dropout, then kept; a plan named
// that the list lacks or that does not build is refused with the reason.
at::Tensor cudnn_causal_attention(const at::Tensor& qkv, int64_t n_head, double p, const CudnnPlans& plans = {});
// The plans for this attention's forward or backward by name: cuDNN's heuristic list (mode A, ATen's) in its order,
// then its first's engine with one knob changed at a time, each once.
std::vector<std::string> cudnn_attention_plans(const at::Tensor& qkv, int64_t n_head, double p, bool backward);
bool cudnn_attention_built();  // false where the build found no cuDNN frontend (and on a CPU build)

}  // namespace gpt2::kernels
