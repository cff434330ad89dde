// The fused residual-add + LayerNorm: the ATen reference, the dispatch to the CUDA kernels, the autograd function.
#include "kernels/residual_norm.h"

#include <ATen/ATen.h>
#include <torch/autograd.h>

#include <optional>

#include "kernels/philox.h"

namespace gpt2::kernels {
namespace {

void check_args(const at::Tensor& x, const at::Tensor& r, const at::Tensor& gamma, const at::Tensor& beta,
                const at::Tensor& bias) {
  TORCH_CHECK(x.dim() == 2 && x.sizes() == r.sizes() && x.is_contiguous() && r.is_contiguous(),
              "add_layer_norm: x and r must be contiguous (N, C) tensors of one shape, got ", x.sizes(), " and ",
              r.sizes());
  TORCH_CHECK(gamma.dim() == 1 && gamma.size(0) == x.size(1) && beta.sizes() == gamma.sizes(),
              "add_layer_norm: gamma and beta must be (C) with C = ", x.size(1), ", got ", gamma.sizes(), " and ",
              beta.sizes());
  TORCH_CHECK(r.scalar_type() == x.scalar_type() && gamma.scalar_type() == x.scalar_type() &&
                  beta.scalar_type() == x.scalar_type() && at::isFloatingType(x.scalar_type()),
              "add_layer_norm: x, r, gamma and beta must share one floating dtype");
  TORCH_CHECK(!bias.defined() || (bias.sizes() == gamma.sizes() && bias.scalar_type() == x.scalar_type()),
              "add_layer_norm: the bias must be (C) with C = ", x.size(1), " of x's dtype, got ", bias.sizes(), " ",
              bias.scalar_type());
}

void check_p(double p) {
  TORCH_CHECK(p >= 0 && p < 1, "add_layer_norm: the dropout probability must be in [0, 1), got ", p);
}

struct AddLayerNorm : torch::autograd::Function<AddLayerNorm> {
  static torch::autograd::variable_list forward(torch::autograd::AutogradContext* ctx, const at::Tensor& x,
                                                const at::Tensor& r, const at::Tensor& gamma, const at::Tensor& beta,
                                                const std::optional<at::Tensor>& bias, double eps, double p,
                                                bool forward_held, bool backward_held) {
    // bias is optional here, not an undefined tensor: autograd takes none for an input it need not track
    AddNormForward f = add_layer_norm_forward(x, r, gamma, beta, eps, p, bias.value_or(at::Tensor()), forward_held);
    f.held = backward_held;
    ctx->save_for_backward({f.s, f.mean, f.rstd, gamma, beta, f.keep, f.rng});
    ctx->saved_data["p"] = p;
    ctx->saved_data["biased"] = f.biased;
    ctx->saved_data["held"] = f.held;
    return {f.s, f.y};
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grad) {
    const auto saved = ctx->get_saved_variables();
    const AddNormForward f{saved[0], at::Tensor(), saved[1], saved[2], saved[5], saved[6],
                           ctx->saved_data["p"].toDouble(), ctx->saved_data["biased"].toBool(),
                           ctx->saved_data["held"].toBool()};
    const at::Tensor dy = grad[1].defined() ? grad[1].contiguous() : at::zeros_like(f.s);
    const at::Tensor ds_out = grad[0].defined() ? grad[0].contiguous() : at::Tensor();
    AddNormBackward b = add_layer_norm_backward(ds_out, dy, f, saved[3], saved[4]);
    return {b.ds, b.dr, b.dgamma, b.dbeta, b.dbias, at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

}  // namespace

AddNormForward add_layer_norm_forward_reference(const at::Tensor& x, const at::Tensor& r, const at::Tensor& gamma,
                                                const at::Tensor& beta, double eps, double p, const at::Tensor& keep,
                                                const at::Tensor& bias) {
  check_args(x, r, gamma, beta, bias);
  check_p(p);
  const bool biased = bias.defined();
  // the branch: r + bias rounded once to the dtype, as the kernel (and a linear's biased output) rounds it
  const at::Tensor branch = biased ? (r.to(at::kFloat) + bias.to(at::kFloat)).to(r.scalar_type()) : r;
  if (p == 0) {
    at::Tensor s = x + branch;
    auto [y, mean, rstd] = at::native_layer_norm(s, {x.size(1)}, gamma, beta, eps);
    return {s, y, mean, rstd, {}, {}, 0, biased};
  }
  at::Tensor kept = keep.defined() ? keep : at::empty_like(x, at::kBool).bernoulli_(1.0 - p);
  TORCH_CHECK(kept.scalar_type() == at::kBool && kept.sizes() == x.sizes(),
              "add_layer_norm: the dropout mask must be bool of x's shape ", x.sizes());
  // in fp32 and rounded once, as the kernel does: x + r·(keep·scale)
  at::Tensor s =
      (x.to(at::kFloat) + branch.to(at::kFloat) * (kept.to(at::kFloat) * dropout_mask(p).scale)).to(x.scalar_type());
  auto [y, mean, rstd] = at::native_layer_norm(s, {x.size(1)}, gamma, beta, eps);
  return {s, y, mean, rstd, kept, {}, p, biased};
}

AddNormForward add_layer_norm_forward(const at::Tensor& x, const at::Tensor& r, const at::Tensor& gamma,
                                      const at::Tensor& beta, double eps, double p, const at::Tensor& bias,
                                      bool held) {
  check_args(x, r, gamma, beta, bias);
  check_p(p);
  return x.is_cuda() ? add_layer_norm_forward_cuda(x, r, gamma, beta, eps, p, bias, held)
                     : add_layer_norm_forward_reference(x, r, gamma, beta, eps, p, {}, bias);
}

bool holds_rows(int64_t C, at::ScalarType dtype) {
  const int64_t pack = 16 / static_cast<int64_t>(c10::elementSize(dtype));
  return C % pack == 0 && C / pack <= 32 * kMaxHeldPacks;
}

at::Tensor dropout_keep_mask(uint64_t seed, uint64_t offset, int64_t N, int64_t C, double p) {
  check_p(p);
  const DropoutMask drop = dropout_mask(p, seed, offset);
  at::Tensor keep = at::empty({N, C}, at::kBool);
  bool* out = keep.data_ptr<bool>();
  for (int64_t e = 0; e < N * C; e += 4) {
    const uint32_t four = drop.keeps<4>(static_cast<uint64_t>(e));
    for (int64_t k = 0; k < 4 && e + k < N * C; ++k) out[e + k] = (four >> k) & 1u;
  }
  return keep;
}

AddNormBackward add_layer_norm_backward_reference(const at::Tensor& ds_out, const at::Tensor& dy,
                                                  const AddNormForward& f, const at::Tensor& gamma,
                                                  const at::Tensor& beta) {
  auto [dx, dgamma, dbeta] = at::native_layer_norm_backward(dy, f.s, {f.s.size(1)}, f.mean, f.rstd, gamma, beta,
                                                            {true, true, true});
  at::Tensor ds = ds_out.defined() ? ds_out + dx : dx;
  at::Tensor keep = f.keep;
  if (!keep.defined() && f.rng.defined()) {  // a CUDA forward's: its mask drawn again from its (seed, offset)
    const at::Tensor rng = f.rng.cpu();
    const auto seed = static_cast<uint64_t>(rng[0].item<int64_t>());
    const auto offset = static_cast<uint64_t>(rng[1].item<int64_t>());
    keep = dropout_keep_mask(seed, offset, f.s.size(0), f.s.size(1), f.p).to(f.s.device());
  }
  at::Tensor dr =
      keep.defined() ? (ds.to(at::kFloat) * (keep.to(at::kFloat) * dropout_mask(f.p).scale)).to(ds.scalar_type()) : ds;
  at::Tensor dbias = f.biased ? dr.to(at::kFloat).sum(0).to(dr.scalar_type()) : at::Tensor();
  return {ds, dgamma, dbeta, dr, dbias};
}

AddNormBackward add_layer_norm_backward(const at::Tensor& ds_out, const at::Tensor& dy, const AddNormForward& f,
                                        const at::Tensor& gamma, const at::Tensor& beta) {
  TORCH_CHECK(dy.sizes() == f.s.sizes() && (!ds_out.defined() || ds_out.sizes() == f.s.sizes()),
              "add_layer_norm_backward: dy and ds_out must have s's shape ", f.s.sizes());
  return dy.is_cuda() ? add_layer_norm_backward_cuda(ds_out, dy, f, gamma, beta)
                      : add_layer_norm_backward_reference(ds_out, dy, f, gamma, beta);
}

std::pair<at::Tensor, at::Tensor> add_layer_norm(const at::Tensor& x, const at::Tensor& r, const at::Tensor& gamma,
                                                 const at::Tensor& beta, double eps, double p,
                                                 const at::Tensor& bias, Traversal traversal) {
  const int64_t C = x.size(-1);
  const auto dt = x.scalar_type();
  const auto rows = [&](const at::Tensor& t) { return t.to(dt).reshape({-1, C}).contiguous(); };
  auto out = AddLayerNorm::apply(rows(x), rows(r), gamma.to(dt), beta.to(dt),
                                 bias.defined() ? std::optional<at::Tensor>(bias.to(dt)) : std::nullopt, eps, p,
                                 traversal.forward_held, traversal.backward_held);
  return {out[0].view(x.sizes()), out[1].view(x.sizes())};
}

}  // namespace gpt2::kernels
