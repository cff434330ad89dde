// defines: GPT2 (the model), canonical_parameters, init_weights
#pragma once
#include <torch/nn/module.h>
#include <torch/nn/modules/container/modulelist.h>
#include <torch/nn/modules/dropout.h>
#include <torch/nn/modules/embedding.h>
#include <torch/nn/modules/linear.h>

#include <string>
#include <utility>
#include <vector>

#include "model/config.h"
#include "model/layers.h"

namespace gpt2 {

// Built at zero (LayerNorms at 1 and 0): init_weights draws every weight.
struct GPT2Impl : torch::nn::Module {
  explicit GPT2Impl(const ModelOptions& o);
  at::Tensor forward(const at::Tensor& idx);  // (B, T) int64 -> logits (B, T, Vp)
  at::Tensor hidden(const at::Tensor& idx);   // (B, T) int64 -> the final norm's output (B, T, C), the head's input
  at::Tensor hidden_fused_residual_norm(at::Tensor x);  // the blocks and final norm on the embeddings, fused adds

  ModelOptions opts;
  torch::nn::Embedding tok_emb{nullptr};  // (Vp, C)
  torch::nn::Embedding pos_emb{nullptr};  // (context, C)
  torch::nn::Dropout drop_emb{nullptr};
  torch::nn::ModuleList blocks{nullptr};  // L × Block
  LayerNorm final_norm{nullptr};
  at::Tensor head_weight;                 // (Vp, C), bias-free; IS tok_emb->weight when tied
};
TORCH_MODULE(GPT2);

// The model's parameters in the seed model's layout and order (separate q/k/v, unpadded vocab,
// head listed unless tied), each a view into the live parameter: the fused QKV weight appears as
// three row slices, a padded embedding as its first vocab_size rows. Weights written through these
// views are the same math whatever the implementation, which is what parity runs rely on.
std::vector<std::pair<std::string, at::Tensor>> canonical_parameters(GPT2Impl& m);

// PyTorch's default initialisation (Linear: U(±1/√fan_in) for weight and bias; Embedding: N(0,1);
// LayerNorm: 1 and 0), drawn on the CPU in fp32 from `seed` in canonical order and copied in, so
// every variant of the same options starts from the same weights on any device. Padded vocab rows
// are zero. `keep`: the draws are kept for the next model of the same seed and shapes, in host memory for the
// process's life (a GPU run builds each rung's step two or three times; the draws took 0.7 s each on a Zen 4).
void init_weights(GPT2Impl& m, uint64_t seed, bool keep = false);

}  // namespace gpt2
