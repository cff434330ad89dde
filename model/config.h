// defines: ModelOptions (plain data describing a GPT-2), AttentionImpl, LayerImpl, flops_per_token,
//          parameter_count, flop_model (presets are read by config/presets.h)
// No libtorch here: this header is included by the StepSpec, the variants and the CLI.
#pragma once
#include <cstdint>
#include <map>
#include <string>

namespace gpt2 {

enum class AttentionImpl {
  kManualBuffer,    // softmax(QK^T/sqrt(d)) with a T×T causal mask registered as a buffer (seed baseline)
  kManualOnTheFly,  // the same math, the mask built inside forward (no buffer)
  kSdpa,            // at::scaled_dot_product_attention(is_causal=true)
};
enum class LayerImpl {
  kScratch,  // LayerNorm and GELU written out of elementary ops, as the seed model
  kNative,   // at::layer_norm and at::gelu(approximate="tanh")
};

struct ModelOptions {
  std::string preset = "custom";
  int64_t vocab_size = 50257;   // tokens the data uses
  int64_t vocab_pad_to = 1;     // embedding/head rows rounded up to a multiple of this (1 = no padding)
  int64_t context = 1024;       // T, also the position-embedding table size
  int64_t n_embd = 768;         // C
  int64_t n_head = 12;
  int64_t n_layer = 12;         // L
  double dropout = 0.1;
  bool qkv_bias = false;
  bool tie_weights = false;     // head.weight shares the token embedding
  AttentionImpl attention = AttentionImpl::kManualBuffer;
  LayerImpl layers = LayerImpl::kScratch;
  bool fused_qkv = false;       // one (C -> 3C) matmul instead of three
  bool fused_bias_gelu = false; // FeedForward's first Linear+GELU as one addmm with a GELU epilogue
  int64_t classifier_chunk = 0; // > 0: head + cross-entropy fused, this many tokens at a time (kernels/classifier.h)
  int classifier_threads = 512; // its CUDA kernel's threads a row (256, 512, 1024), the row staged in shared memory or not
  bool classifier_staged = false;
  bool classifier_exp2 = false;  // its exponentials in base 2 (kernels::SoftmaxLaunch)
  bool classifier_beside = false;  // each chunk's softmax pass on a side stream, beside the chunk before's GEMMs
  bool fused_gelu_backward = false;  // FeedForward's Linear+GELU keeps its pre-activation; our fused backward (kernels/bias_gelu.h)
  int64_t gelu_backward_slab = 32;   // its CUDA kernel's rows a block
  bool fused_residual_norm = false;  // each residual add (and its branch's bias and dropout) fused with the LayerNorm after
                                     // it (kernels/residual_norm.h)
  bool residual_norm_held_forward = false;   // its CUDA kernels keep each row in registers between their sweeps,
  bool residual_norm_held_backward = false;  // each way apart
  bool fp8_linears = false;     // the blocks' linear layers in FP8, scaled per tensor (kernels/fp8_linear.h)
  bool gelu_epilogues = false;  // FeedForward's bias, GELU and their backward in cuBLASLt epilogues (kernels/gelu_epilogues.h)
  bool cudnn_attention = false; // fused QKV + SDPA through our cuDNN graphs (kernels/attention.h): no cat in backward
  std::string cudnn_forward_plan, cudnn_backward_plan;  // their plans by cuDNN's names ("": its heuristic's first)
  bool lt_linears = false;      // the blocks' linear layers through kernels::lt_linear, each GEMM by the algorithm
  std::map<std::string, int> gemm_algorithms;  // this table names for its key (kernels/lt_linear.h), else ATen's

  int64_t padded_vocab() const { return (vocab_size + vocab_pad_to - 1) / vocab_pad_to * vocab_pad_to; }
  bool operator==(const ModelOptions&) const = default;
};

// Parameter count of the model the options describe (embedding, blocks, final norm, head),
// computed from shapes, so it can be checked against the built module.
int64_t parameter_count(const ModelOptions& m);
// Model FLOPs of one trained token (forward + backward), matmuls only — the MFU numerator:
//   6 · (L·12·C² + Vp·C)  the blocks' weight matmuls and the LM head, counted once whether tied or
//                         not, at the padded vocabulary it computes; embedding lookups are not matmuls
// + 6 · L·C·T            causal attention (QKᵀ and A·V over the lower triangle: the llm.c/nanoGPT
//                         convention); the non-causal count, what a T×T manual attention computes, is
//                         12 · L·C·T.
struct FlopModel {
  double matmul_weights = 0;     // L·12·C² + Vp·C
  double blocks = 0, head = 0;   // its two parts: L·12·C², Vp·C
  double attention_causal = 0;   // 6·L·C·T per token
  double attention_full = 0;     // 12·L·C·T per token
  double per_token() const { return 6 * matmul_weights + attention_causal; }
  double per_token_full_attention() const { return 6 * matmul_weights + attention_full; }
  // Where a token's model FLOPs go: the blocks' weight matmuls, the LM head, causal attention (sum 1).
  // GPT-2 124M at T=1024: 0.639, 0.290, 0.071; profiles/models/gpt2-scaled.yaml keeps them.
  struct Shares { double blocks, lm_head, attention; };
  Shares shares() const { return {6 * blocks / per_token(), 6 * head / per_token(), attention_causal / per_token()}; }
  std::string formula;           // the formula with this model's numbers, for rungs.json
};
FlopModel flop_model(const ModelOptions& m);
double flops_per_token(const ModelOptions& m);  // flop_model(m).per_token()

std::string to_string(AttentionImpl a);
std::string to_string(LayerImpl l);


}  // namespace gpt2
