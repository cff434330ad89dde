#include "model/gpt2.h"

#include <ATen/core/Generator.h>
#include <ATen/CPUGeneratorImpl.h>
#include <c10/util/StringUtil.h>
#include <torch/nn/modules/container/modulelist.h>

#include <cmath>
#include <mutex>
#include <string>
#include <tuple>
#include <vector>

#include "kernels/residual_norm.h"

namespace gpt2 {

GPT2Impl::GPT2Impl(const ModelOptions& o) : opts(o) {
  const int64_t Vp = o.padded_vocab();
  // Zeros, not libtorch's draws, for the embeddings and head: init_weights draws them (0.45 s a build of 124M).
  auto zeros = [](int64_t rows, int64_t cols) {
    return torch::nn::EmbeddingOptions(rows, cols)._weight(at::zeros({rows, cols}));
  };
  tok_emb = register_module("tok_emb", torch::nn::Embedding(zeros(Vp, o.n_embd)));
  pos_emb = register_module("pos_emb", torch::nn::Embedding(zeros(o.context, o.n_embd)));
  drop_emb = register_module("drop_emb", torch::nn::Dropout(o.dropout));
  blocks = register_module("blocks", torch::nn::ModuleList());
  for (int64_t i = 0; i < o.n_layer; ++i) blocks->push_back(Block(o));
  final_norm = register_module("final_norm", LayerNorm(o.n_embd, o.layers));
  // Bias-free head; tied, it is the embedding's tensor itself (registered once, as tok_emb's).
  if (o.tie_weights) {
    head_weight = tok_emb->weight;
  } else {
    head_weight = register_parameter("head_weight", at::zeros({Vp, o.n_embd}));
  }
}

at::Tensor GPT2Impl::hidden(const at::Tensor& idx) {
  const int64_t T = idx.size(1);
  TORCH_CHECK(T <= opts.context, "sequence length ", T, " exceeds the model's context ", opts.context);
  auto pos = at::arange(T, idx.options());
  auto x = drop_emb(tok_emb(idx) + pos_emb(pos));  // (B, T, C)
  if (opts.fused_residual_norm) return hidden_fused_residual_norm(x);
  for (const auto& b : *blocks) x = b->as<BlockImpl>()->forward(x);
  return final_norm(x);
}

// The same blocks with every residual add fused with the LayerNorm after it — the block's ln2, the next block's
// ln1, and after the last block the final norm — so the stream x and the normed h come out of one kernel; in
// training the branch's dropout (drop_resid's p) is drawn in that kernel too, and the branch's last linear
// (out_proj, fc2) leaves its bias to it: the bias is added there and its gradient summed in that kernel's
// backward, where the linear's backward would sum it in a reduce kernel of its own.
at::Tensor GPT2Impl::hidden_fused_residual_norm(at::Tensor x) {
  auto norm = [&](const LayerNorm& ln, const at::Tensor& s, const std::pair<at::Tensor, at::Tensor>& branch,
                  double p) {
    const auto& [r, bias] = branch;
    return kernels::add_layer_norm(s, r, ln->scale, ln->shift, LayerNormImpl::kEps, p, bias,
                                   {opts.residual_norm_held_forward, opts.residual_norm_held_backward});
  };
  at::Tensor h = blocks[0]->as<BlockImpl>()->ln1(x);
  for (size_t i = 0; i < blocks->size(); ++i) {
    auto& b = *blocks[i]->as<BlockImpl>();
    const double p = b.drop_resid->is_training() ? b.drop_resid->options.p() : 0.0;
    std::tie(x, h) = norm(b.ln2, x, b.attn->forward_bias_apart(h), p);
    const LayerNorm& next = i + 1 < blocks->size() ? blocks[i + 1]->as<BlockImpl>()->ln1 : final_norm;
    std::tie(x, h) = norm(next, x, b.ff->forward_bias_apart(h), p);
  }
  return h;
}

at::Tensor GPT2Impl::forward(const at::Tensor& idx) { return at::linear(hidden(idx), head_weight); }  // (B, T, Vp)

std::vector<std::pair<std::string, at::Tensor>> canonical_parameters(GPT2Impl& m) {
  const auto& o = m.opts;
  const int64_t C = o.n_embd;
  std::vector<std::pair<std::string, at::Tensor>> out;
  auto add = [&](std::string name, const at::Tensor& t) { out.emplace_back(std::move(name), t); };
  add("tok_emb.weight", m.tok_emb->weight.narrow(0, 0, o.vocab_size));
  add("pos_emb.weight", m.pos_emb->weight);
  for (size_t i = 0; i < m.blocks->size(); ++i) {
    auto& b = *m.blocks[i]->as<BlockImpl>();
    const std::string p = "blocks." + std::to_string(i) + ".";
    add(p + "ln1.scale", b.ln1->scale);
    add(p + "ln1.shift", b.ln1->shift);
    const char* names[3] = {"query", "key", "value"};
    Dense sep[3] = {b.attn->query, b.attn->key, b.attn->value};
    for (int j = 0; j < 3; ++j) {
      at::Tensor w = b.attn->qkv ? b.attn->qkv->weight.narrow(0, j * C, C) : sep[j]->weight;
      add(p + "attn." + names[j] + ".weight", w);
      if (o.qkv_bias) add(p + "attn." + names[j] + ".bias", b.attn->qkv ? b.attn->qkv->bias.narrow(0, j * C, C) : sep[j]->bias);
    }
    add(p + "attn.out_proj.weight", b.attn->out_proj->weight);
    add(p + "attn.out_proj.bias", b.attn->out_proj->bias);
    add(p + "ln2.scale", b.ln2->scale);
    add(p + "ln2.shift", b.ln2->shift);
    add(p + "ff.fc1.weight", b.ff->fc1->weight);
    add(p + "ff.fc1.bias", b.ff->fc1->bias);
    add(p + "ff.fc2.weight", b.ff->fc2->weight);
    add(p + "ff.fc2.bias", b.ff->fc2->bias);
  }
  add("final_norm.scale", m.final_norm->scale);
  add("final_norm.shift", m.final_norm->shift);
  if (!o.tie_weights) add("head_weight", m.head_weight.narrow(0, 0, o.vocab_size));
  return out;
}

void init_weights(GPT2Impl& m, uint64_t seed, bool keep) {
  at::NoGradGuard no_grad;
  auto gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  // Padded rows (never targets, never inputs) start at zero.
  m.tok_emb->weight.zero_();
  if (!m.opts.tie_weights) m.head_weight.zero_();
  const auto params = canonical_parameters(m);
  // The last kept draws, and what they were drawn for: the seed, n_embd (the biases' fan-in), each name and shape.
  static std::mutex mutex;
  static std::string kept_for;
  static std::vector<at::Tensor> kept;
  std::string key;
  if (keep) {
    key = std::to_string(seed) + " " + std::to_string(m.opts.n_embd);
    for (const auto& [name, view] : params) key += " " + name + c10::str(view.sizes());
    const std::lock_guard<std::mutex> lock(mutex);
    if (key == kept_for) {
      for (size_t i = 0; i < params.size(); ++i) params[i].second.copy_(kept[i]);
      return;
    }
  }
  std::vector<at::Tensor> drawn;
  for (const auto& [name, view] : params) {
    auto cpu = at::empty(view.sizes(), at::kFloat);
    // Tied, the embedding is the head, drawn as the head (as `tok_emb.weight = head.weight` leaves it; std 0.021 at
    // C=768, GPT-2's 0.02): as an embedding, N(0, 1), the logits start at std √C and 124M's loss at ~480, not ln V.
    const bool tied_head = m.opts.tie_weights && name == "tok_emb.weight";
    if (name.ends_with("emb.weight") && !tied_head) {
      cpu.normal_(0.0, 1.0, gen);
    } else if (name.ends_with(".scale")) {
      cpu.fill_(1.0);
    } else if (name.ends_with(".shift")) {
      cpu.fill_(0.0);
    } else {
      // nn.Linear's reset_parameters: kaiming_uniform(a=√5) gives U(±1/√fan_in); the bias the same bound.
      const int64_t fan_in = name.ends_with(".bias") ? m.opts.n_embd * (name.find("fc2") != std::string::npos ? 4 : 1)
                                                      : view.size(1);
      const double bound = 1.0 / std::sqrt(static_cast<double>(fan_in));
      cpu.uniform_(-bound, bound, gen);
    }
    view.copy_(cpu);
    if (keep) drawn.push_back(cpu);
  }
  if (keep) {
    const std::lock_guard<std::mutex> lock(mutex);
    kept_for = std::move(key), kept = std::move(drawn);
  }
}

}  // namespace gpt2
