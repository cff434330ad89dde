// defines: LayerNorm, FeedForward, CausalSelfAttention, Block — the GPT-2 layers, each with the
//          from-scratch (seed) and the native/fused implementations side by side, picked by ModelOptions.
#pragma once
#include <torch/nn/module.h>
#include <torch/nn/modules/dropout.h>

#include <map>
#include <optional>
#include <string>
#include <utility>

#include "kernels/attention.h"
#include "model/config.h"

namespace gpt2 {

at::Tensor gelu_tanh_scratch(const at::Tensor& x);  // 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³)))

// nn::Linear's parameters, weight (out, in) and bias (out) unless `bias` is false, at zero: init_weights draws them
// (nn::Linear draws its own first, 0.39 s of a 124M model's build on a Zen 4); linear() in layers.cpp runs them.
struct DenseImpl : torch::nn::Module {
  DenseImpl(int64_t in, int64_t out, bool bias = true);
  at::Tensor weight, bias;
};
TORCH_MODULE(Dense);

struct LayerNormImpl : torch::nn::Module {
  LayerNormImpl(int64_t dim, LayerImpl impl);
  at::Tensor forward(const at::Tensor& x);  // (..., C) -> (..., C)
  at::Tensor scale, shift;                  // (C), (C)
  int64_t dim;
  LayerImpl impl;
  static constexpr double kEps = 1e-5;
};
TORCH_MODULE(LayerNorm);

struct FeedForwardImpl : torch::nn::Module {
  explicit FeedForwardImpl(const ModelOptions& o);
  at::Tensor forward(const at::Tensor& x);  // (B, T, C) -> (B, T, C)
  // The output without fc2's bias, and that bias, for a caller that adds it in a kernel of its own (the fused
  // residual norm); under gelu_epilogues (fc2's bias inside that function) the output with it and no bias.
  std::pair<at::Tensor, at::Tensor> forward_bias_apart(const at::Tensor& x);
  at::Tensor activations(const at::Tensor& x);  // GELU(fc1(x)), (B, T, 4C): fc2's input (not under gelu_epilogues)
  Dense fc1{nullptr};                      // (4C, C) + (4C)
  Dense fc2{nullptr};                      // (C, 4C) + (C)
  LayerImpl impl;
  bool fused_bias_gelu;
  bool fused_gelu_backward;
  int64_t gelu_backward_slab;
  bool gelu_epilogues;
  bool fp8;  // fp8_linears
  std::optional<std::map<std::string, int>> lt;  // under lt_linears: the GEMMs' algorithms (kernels/lt_linear.h)
};
TORCH_MODULE(FeedForward);

struct CausalSelfAttentionImpl : torch::nn::Module {
  explicit CausalSelfAttentionImpl(const ModelOptions& o);
  at::Tensor forward(const at::Tensor& x);  // (B, T, C) -> (B, T, C)
  // The output without out_proj's bias, and that bias (FeedForward's forward_bias_apart says why).
  std::pair<at::Tensor, at::Tensor> forward_bias_apart(const at::Tensor& x);
  at::Tensor attend(const at::Tensor& x);  // the heads' outputs side by side, (B, T, C): out_proj's input
  // Separate projections (seed) or one fused (3C, C) projection, never both.
  Dense query{nullptr}, key{nullptr}, value{nullptr};  // (C, C) each
  Dense qkv{nullptr};                                   // (3C, C)
  Dense out_proj{nullptr};                              // (C, C) + (C)
  torch::nn::Dropout attn_dropout{nullptr};
  at::Tensor mask;  // (T, T) float, 1 above the diagonal; only with AttentionImpl::kManualBuffer
  int64_t n_head, head_dim;
  AttentionImpl impl;
  double dropout;
  bool fp8;  // fp8_linears
  bool cudnn;  // cudnn_attention
  kernels::CudnnPlans cudnn_plans;
  std::optional<std::map<std::string, int>> lt;  // under lt_linears (FeedForward's)
};
TORCH_MODULE(CausalSelfAttention);

struct BlockImpl : torch::nn::Module {
  explicit BlockImpl(const ModelOptions& o);
  at::Tensor forward(at::Tensor x);  // pre-LN: x + drop(attn(ln1(x))); x + drop(ff(ln2(x)))
  LayerNorm ln1{nullptr}, ln2{nullptr};
  CausalSelfAttention attn{nullptr};
  FeedForward ff{nullptr};
  torch::nn::Dropout drop_resid{nullptr};
};
TORCH_MODULE(Block);

}  // namespace gpt2
