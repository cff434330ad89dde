// The fused classifier: the ATen reference of its softmax-cross-entropy pass, the dispatch to the CUDA
// kernel, and the chunked, differentiable linear + cross-entropy built on them.
#include "kernels/classifier.h"

#include <ATen/ATen.h>
#include <torch/autograd.h>

#include <algorithm>
#include <atomic>
#include <string>
#include <tuple>

#include "kernels/autocast.h"

namespace gpt2::kernels {
namespace {

void check_xent_args(const at::Tensor& logits, const at::Tensor& targets) {
  TORCH_CHECK(logits.dim() == 2 && logits.is_contiguous() && at::isFloatingType(logits.scalar_type()),
              "softmax_xent_backward_: logits must be a contiguous floating (n, V) tensor, got ", logits.sizes(), " ",
              logits.scalar_type());
  TORCH_CHECK(targets.dim() == 1 && targets.scalar_type() == at::kLong && targets.size(0) == logits.size(0),
              "softmax_xent_backward_: targets must be int64 (n) with n = ", logits.size(0), ", got ", targets.sizes(),
              " ", targets.scalar_type());
  TORCH_CHECK(targets.device() == logits.device(), "softmax_xent_backward_: targets on ", targets.device(),
              ", logits on ", logits.device());
}

// Whether this libtorch's addmm with out_dtype takes an fp32 `self` beside bf16/fp16 factors: the first version
// of that overload checked "self and mat2 must have the same dtype", later ones "self dtype must match either
// out_dtype or mat1 dtype". Found out once, at the first accumulation (the check throws before any CUDA call,
// so also inside a graph capture).
std::atomic<bool> g_addmm_fp32_self{true};

// dw = zᵀ·h for the first chunk (beta 0: dw's memory is neither cleared first nor read), dw += zᵀ·h after it.
// A dw in fp32 from bf16/fp16 z and h is written by cuBLAS itself on CUDA (mm's and addmm's out_dtype; where
// addmm refuses the fp32 dw, the chunk's product goes through an fp32 temporary), elsewhere through a temporary.
void dw_from_chunk(at::Tensor& dw, const at::Tensor& z, const at::Tensor& h, bool first) {
  if (z.scalar_type() == dw.scalar_type()) {
    at::addmm_out(dw, dw, z.t(), h, first ? 0.0 : 1.0, 1.0);
  } else if (dw.is_cuda()) {
    if (first) {
      at::mm_out(dw, z.t(), h, at::kFloat);
      return;
    }
    if (g_addmm_fp32_self) {
      try {
        at::addmm_out(dw, dw, z.t(), h, at::kFloat, 1.0, 1.0);
        return;
      } catch (const c10::Error& e) {  // that dtype check alone; anything else is the caller's
        if (std::string(e.what_without_backtrace()).find("dtype") == std::string::npos) throw;
        g_addmm_fp32_self = false;
      }
    }
    dw.add_(at::mm(z.t(), h, at::kFloat));
  } else if (first) {
    dw.copy_(at::mm(z.t(), h));
  } else {
    dw.add_(at::mm(z.t(), h));
  }
}

// (mean loss, dloss/dh, dloss/dw), chunk_tokens rows at a time; the gradients only when asked for. Over several
// chunks dw is summed in fp32, and the backward rounds it once into w's dtype as it scales it; in one chunk it is
// one GEMM in w's dtype (cuBLAS sums in fp32 and rounds once as well), without an fp32 copy to write and read.
// With `beside`, each chunk's softmax pass runs on the side stream while the caller's stream makes the chunk
// before's dh and dw: two chunks' logits are held at once, the ops and their order on each stream unchanged.
std::tuple<at::Tensor, at::Tensor, at::Tensor> chunked(const at::Tensor& h, const at::Tensor& w,
                                                       const at::Tensor& targets, int64_t chunk_tokens, bool grads,
                                                       SoftmaxLaunch launch, SideStream* beside) {
  const int64_t n_rows = h.size(0);
  const double scale = 1.0 / static_cast<double>(n_rows);
  const bool one_chunk = n_rows <= chunk_tokens;
  at::Tensor loss = at::zeros({}, h.options().dtype(at::kFloat));
  at::Tensor dh = grads ? at::empty_like(h) : at::Tensor();
  at::Tensor dw;
  if (grads)
    dw = n_rows == 0 ? at::zeros_like(w) : at::empty(w.sizes(), w.options().dtype(one_chunk ? w.scalar_type() : at::kFloat));
  if (one_chunk || !grads) beside = nullptr;
  at::Tensor before;  // the last chunk's gradient of its logits, waiting for its GEMMs
  int64_t before_row = 0;
  auto gemms = [&](const at::Tensor& z, int64_t i) {
    at::Tensor dh_rows = dh.narrow(0, i, z.size(0));  // whole rows of a contiguous tensor: written in place by the GEMM
    at::mm_out(dh_rows, z, w);
    dw_from_chunk(dw, z, h.narrow(0, i, z.size(0)), /*first=*/i == 0);
  };
  for (int64_t i = 0; i < n_rows; i += chunk_tokens) {
    const int64_t n = std::min(chunk_tokens, n_rows - i);
    at::Tensor z = at::mm(h.narrow(0, i, n), w.t());  // (n, V): the only logits there are, this chunk's
    auto softmax = [&, z, i, n]() mutable {
      loss.add_(softmax_xent_backward_(z, targets.narrow(0, i, n), scale, launch).sum());
    };
    if (!beside) {
      softmax();
      if (grads) gemms(z, i);
      continue;
    }
    beside->join();  // the chunk before's softmax is done: its GEMMs may start, beside this chunk's softmax
    beside->run(softmax);
    if (before.defined()) gemms(before, before_row);
    before = z, before_row = i;
  }
  if (beside) {
    beside->join();
    gemms(before, before_row);
  }
  return {loss.mul_(scale), dh, dw};
}

struct LinearCrossEntropy : torch::autograd::Function<LinearCrossEntropy> {
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& h, const at::Tensor& w,
                            const at::Tensor& targets, int64_t chunk_tokens, bool grads, SoftmaxLaunch launch,
                            SideStream* beside) {
    auto [loss, dh, dw] = chunked(h, w, targets, chunk_tokens, grads, launch, beside);
    ctx->save_for_backward({dh, dw});
    return loss;
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grad_out) {
    const auto saved = ctx->get_saved_variables();
    const at::Tensor g = grad_out[0].to(at::kFloat).reshape({1});
    const at::ScalarType dtype = saved[0].scalar_type();  // h's, which is w's
    return {scaled_gradient(saved[0], g, dtype), scaled_gradient(saved[1], g, dtype), at::Tensor(), at::Tensor(),
            at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

}  // namespace

at::Tensor softmax_xent_backward_reference_(at::Tensor& logits, const at::Tensor& targets, double scale) {
  check_xent_args(logits, targets);
  const at::Tensor z = logits.to(at::kFloat);
  const at::Tensor t = targets.view({-1, 1});
  const at::Tensor lse = at::logsumexp(z, 1, /*keepdim=*/true);
  const at::Tensor losses = (lse - z.gather(1, t)).view(-1);  // gather checks the targets' range
  at::Tensor d = (z - lse).exp_();
  d.scatter_add_(1, t, at::full({t.size(0), 1}, -1.0f, d.options()));
  logits.copy_(d.mul_(scale));
  return losses;
}

at::Tensor scaled_gradient_reference(const at::Tensor& kept, const at::Tensor& g, at::ScalarType dtype) {
  // g one-element, not 0-dim: it then takes part in type promotion, so each product is made in fp32 (a 0-dim g
  // would be cast to bf16 first) and rounded once into `out`
  at::Tensor out = at::empty(kept.sizes(), kept.options().dtype(dtype));
  return at::mul_out(out, kept, g);
}

at::Tensor scaled_gradient(const at::Tensor& kept, const at::Tensor& g, at::ScalarType dtype) {
  TORCH_CHECK(kept.scalar_type() == dtype || kept.scalar_type() == at::kFloat, "scaled_gradient: a ", dtype,
              " gradient from ", kept.scalar_type(), " (expected ", dtype, " or Float)");
  TORCH_CHECK(g.numel() == 1 && g.dim() == 1 && g.scalar_type() == at::kFloat && g.device() == kept.device(),
              "scaled_gradient: g must be one fp32 element (shape [1]) on ", kept.device(), ", got ", g.sizes(), " ",
              g.scalar_type(), " on ", g.device());
  const bool ours = kept.is_cuda() && (dtype == at::kFloat || dtype == at::kBFloat16 || dtype == at::kHalf);
  return ours ? scaled_gradient_cuda(kept.contiguous(), g, dtype) : scaled_gradient_reference(kept, g, dtype);
}

at::Tensor softmax_xent_backward_(at::Tensor& logits, const at::Tensor& targets, double scale,
                                  SoftmaxLaunch launch) {
  if (!logits.is_cuda()) return softmax_xent_backward_reference_(logits, targets, scale);  // checks them itself
  check_xent_args(logits, targets);
  return softmax_xent_backward_cuda_(logits, targets, scale, launch);
}

at::Tensor linear_cross_entropy(const at::Tensor& h, const at::Tensor& w, const at::Tensor& targets,
                                int64_t chunk_tokens, SoftmaxLaunch launch, SideStream* beside) {
  TORCH_CHECK(h.dim() == 2 && w.dim() == 2 && h.size(1) == w.size(1), "linear_cross_entropy: h (N, C) and w (V, C), got ",
              h.sizes(), " and ", w.sizes());
  TORCH_CHECK(chunk_tokens > 0, "linear_cross_entropy: chunk_tokens must be positive, got ", chunk_tokens);
  TORCH_CHECK(h.scalar_type() == w.scalar_type(), "linear_cross_entropy: h and w must share one dtype, got ",
              h.scalar_type(), " and ", w.scalar_type());
  const bool grads = at::GradMode::is_enabled() && (h.requires_grad() || w.requires_grad());
  return LinearCrossEntropy::apply(cast_as_autocast(h), cast_as_autocast(w), targets, chunk_tokens, grads, launch,
                                   beside);
}

}  // namespace gpt2::kernels
