#include "model/layers.h"

#include <torch/autograd.h>

#include <cmath>
#include <optional>
#include <vector>

#include "kernels/attention.h"
#include "kernels/autocast.h"
#include "kernels/bias_gelu.h"
#include "kernels/fp8_linear.h"
#include "kernels/gelu_epilogues.h"
#include "kernels/lt_linear.h"

namespace gpt2 {

at::Tensor gelu_tanh_scratch(const at::Tensor& x) {
  const double k = std::sqrt(2.0 / M_PI);
  return 0.5 * x * (1.0 + at::tanh(k * (x + 0.044715 * at::pow(x, 3))));
}

DenseImpl::DenseImpl(int64_t in, int64_t out, bool with_bias)
    : weight(register_parameter("weight", at::zeros({out, in}))) {
  if (with_bias) bias = register_parameter("bias", at::zeros({out}));
}

LayerNormImpl::LayerNormImpl(int64_t d, LayerImpl i) : dim(d), impl(i) {
  scale = register_parameter("scale", at::ones({d}));
  shift = register_parameter("shift", at::zeros({d}));
}

at::Tensor LayerNormImpl::forward(const at::Tensor& x) {
  if (impl == LayerImpl::kNative) return at::layer_norm(x, {dim}, scale, shift, kEps);
  auto mean = x.mean(-1, /*keepdim=*/true);
  auto var = x.var(-1, /*unbiased=*/false, /*keepdim=*/true);
  return scale * ((x - mean) / at::sqrt(var + kEps)) + shift;
}

namespace {
// ATen's linear, the op Python's F.linear and nn.Linear call: for a contiguous (B, T, C) input with a bias,
// one addmm over the B·T rows with the bias in the GEMM (cuBLASLt's epilogue on CUDA). libtorch's C++
// nn::Linear::forward (torch::nn::functional::linear) instead runs matmul and then `output += bias` on a
// 3-D input: one more elementwise pass over every biased Linear's output, forward, that the Python step
// does not make — found by setting the two steps' ATen ops side by side (the report's eager gap).
// Under fp8_linears the same in FP8 over the (B·T, C) rows (kernels/fp8_linear.h), under lt_linears with the GEMMs'
// algorithms `lt` names (kernels/lt_linear.h). `with_bias`: false for the forward_bias_apart forms, which add the
// bias later.
at::Tensor linear(const at::Tensor& x, const Dense& l, bool fp8,
                  const std::optional<kernels::GemmAlgorithms>& lt, bool with_bias = true) {
  const at::Tensor b = with_bias ? l->bias : at::Tensor();
  if (!fp8 && !lt) return at::linear(x, l->weight, b);
  const at::Tensor rows = x.reshape({-1, x.size(-1)});
  const at::Tensor y = fp8 ? kernels::fp8_linear(rows, l->weight, b.defined() ? std::optional(b) : std::nullopt)
                           : kernels::lt_linear(rows, l->weight, b, *lt);
  std::vector<int64_t> sizes = x.sizes().vec();
  sizes.back() = y.size(-1);
  return y.view(sizes);
}

const kernels::GemmAlgorithms kNoAlgorithms;  // linear_bias_gelu's table without lt_linears (no copy a call)

std::optional<kernels::GemmAlgorithms> lt_table(const ModelOptions& o) {
  if (!o.lt_linears) return std::nullopt;
  return o.gemm_algorithms;
}

// Linear + bias + GELU(tanh) as one GEMM with the activation in its epilogue (cuBLASLt on CUDA).
// ATen has no derivative for that op, so backward recomputes the pre-activation with one addmm:
// the epilogue saves a kernel and the (B·T, 4C) pre-activation's memory, for one extra GEMM.
struct LinearGeluFn : torch::autograd::Function<LinearGeluFn> {
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, at::Tensor x, at::Tensor w, at::Tensor b) {
    x = kernels::cast_as_autocast(x), w = kernels::cast_as_autocast(w), b = kernels::cast_as_autocast(b);
    ctx->save_for_backward({x, w, b});
    return at::_addmm_activation(b, x, w.t(), 1, 1, /*use_gelu=*/true);  // (N, 4C)
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grad) {
    const auto saved = ctx->get_saved_variables();
    const auto &x = saved[0], &w = saved[1], &b = saved[2];
    const auto pre = at::addmm(b, x, w.t());
    const auto d_pre = at::gelu_backward(grad[0], pre, "tanh");
    return {d_pre.mm(w), d_pre.t().mm(x), d_pre.sum(0)};
  }
};
}  // namespace

FeedForwardImpl::FeedForwardImpl(const ModelOptions& o)
    : impl(o.layers),
      fused_bias_gelu(o.fused_bias_gelu),
      fused_gelu_backward(o.fused_gelu_backward),
      gelu_backward_slab(o.gelu_backward_slab),
      gelu_epilogues(o.gelu_epilogues),
      fp8(o.fp8_linears),
      lt(lt_table(o)) {
  fc1 = register_module("fc1", Dense(o.n_embd, 4 * o.n_embd));
  fc2 = register_module("fc2", Dense(4 * o.n_embd, o.n_embd));
}

at::Tensor FeedForwardImpl::forward(const at::Tensor& x) {
  if (gelu_epilogues && !fp8)  // fc1, GELU and fc2 as one function of (B·T, C) rows, GELU in both epilogues
    return kernels::mlp_gelu_epilogues(x.reshape({-1, x.size(-1)}), fc1->weight, fc1->bias, fc2->weight, fc2->bias)
        .view(x.sizes());
  return linear(activations(x), fc2, fp8, lt);
}

std::pair<at::Tensor, at::Tensor> FeedForwardImpl::forward_bias_apart(const at::Tensor& x) {
  if (gelu_epilogues && !fp8) return {forward(x), at::Tensor()};
  return {linear(activations(x), fc2, fp8, lt, /*with_bias=*/false), fc2->bias};
}

at::Tensor FeedForwardImpl::activations(const at::Tensor& x) {
  at::Tensor h;  // (B, T, 4C)
  if (fused_gelu_backward && !fp8) {  // the pre-activation kept, our kernel in the backward
    h = kernels::linear_bias_gelu(x.reshape({-1, x.size(-1)}), fc1->weight, fc1->bias, gelu_backward_slab,
                                  lt ? *lt : kNoAlgorithms)
            .view({x.size(0), x.size(1), -1});
  } else if (fused_bias_gelu && !fp8) {
    // One GEMM with bias and GELU(tanh) in its epilogue, on (B·T, C) rows.
    auto rows = x.reshape({-1, x.size(-1)});
    h = LinearGeluFn::apply(rows, fc1->weight, fc1->bias).view({x.size(0), x.size(1), -1});
  } else {
    h = linear(x, fc1, fp8, lt);
    h = impl == LayerImpl::kNative ? at::gelu(h, "tanh") : gelu_tanh_scratch(h);
  }
  return h;
}

CausalSelfAttentionImpl::CausalSelfAttentionImpl(const ModelOptions& o)
    : n_head(o.n_head),
      head_dim(o.n_embd / o.n_head),
      impl(o.attention),
      dropout(o.dropout),
      fp8(o.fp8_linears),
      cudnn(o.cudnn_attention),
      cudnn_plans{o.cudnn_forward_plan, o.cudnn_backward_plan},
      lt(lt_table(o)) {
  const int64_t C = o.n_embd;
  if (o.fused_qkv) {
    qkv = register_module("qkv", Dense(C, 3 * C, o.qkv_bias));
  } else {
    query = register_module("query", Dense(C, C, o.qkv_bias));
    key = register_module("key", Dense(C, C, o.qkv_bias));
    value = register_module("value", Dense(C, C, o.qkv_bias));
  }
  out_proj = register_module("out_proj", Dense(C, C));
  attn_dropout = register_module("attn_dropout", torch::nn::Dropout(o.dropout));
  if (impl == AttentionImpl::kManualBuffer)
    mask = register_buffer("mask", at::triu(at::ones({o.context, o.context}), /*diagonal=*/1));
}

at::Tensor CausalSelfAttentionImpl::forward(const at::Tensor& x) { return linear(attend(x), out_proj, fp8, lt); }

std::pair<at::Tensor, at::Tensor> CausalSelfAttentionImpl::forward_bias_apart(const at::Tensor& x) {
  return {linear(attend(x), out_proj, fp8, lt, /*with_bias=*/false), out_proj->bias};
}

at::Tensor CausalSelfAttentionImpl::attend(const at::Tensor& x) {
  const int64_t B = x.size(0), T = x.size(1), C = x.size(2);
  if (qkv && impl == AttentionImpl::kSdpa)  // the heads read from the projection's (B, T, 3C) output
    return kernels::causal_attention(linear(x, qkv, fp8, lt), n_head, is_training() ? dropout : 0.0, cudnn,
                                     cudnn_plans);
  at::Tensor q, k, v;  // (B, T, C) each
  if (qkv) {
    auto parts = linear(x, qkv, fp8, lt).split(C, /*dim=*/2);
    q = parts[0], k = parts[1], v = parts[2];
  } else {
    q = linear(x, query, fp8, lt), k = linear(x, key, fp8, lt), v = linear(x, value, fp8, lt);
  }
  // (B, T, C) -> (B, nh, T, hd)
  auto heads = [&](const at::Tensor& t) { return t.view({B, T, n_head, head_dim}).transpose(1, 2); };
  q = heads(q), k = heads(k), v = heads(v);

  at::Tensor y;  // (B, nh, T, hd)
  if (impl == AttentionImpl::kSdpa) {
    y = at::scaled_dot_product_attention(q, k, v, {}, is_training() ? dropout : 0.0, /*is_causal=*/true);
  } else {
    auto scores = at::matmul(q, k.transpose(2, 3));  // (B, nh, T, T)
    at::Tensor causal;                                // (T, T) bool, true above the diagonal
    if (impl == AttentionImpl::kManualBuffer)
      causal = mask.to(at::kBool).slice(0, 0, T).slice(1, 0, T);
    else
      causal = at::triu(at::ones({T, T}, x.options().dtype(at::kBool)), /*diagonal=*/1);
    scores.masked_fill_(causal, -std::numeric_limits<double>::infinity());
    auto weights = at::softmax(scores / std::sqrt(static_cast<double>(head_dim)), -1);
    y = at::matmul(attn_dropout(weights), v);
  }
  return y.transpose(1, 2).contiguous().view({B, T, C});
}

BlockImpl::BlockImpl(const ModelOptions& o) {
  ln1 = register_module("ln1", LayerNorm(o.n_embd, o.layers));
  attn = register_module("attn", CausalSelfAttention(o));
  ln2 = register_module("ln2", LayerNorm(o.n_embd, o.layers));
  ff = register_module("ff", FeedForward(o));
  drop_resid = register_module("drop_resid", torch::nn::Dropout(o.dropout));
}

at::Tensor BlockImpl::forward(at::Tensor x) {
  x = x + drop_resid(attn(ln1(x)));
  return x + drop_resid(ff(ln2(x)));
}

}  // namespace gpt2
