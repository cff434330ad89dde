// defines: the fused residual-add + LayerNorm of a pre-LN block boundary, forward and backward:
//          (s, y) = (x + r, LayerNorm(x + r)) in one pass over the row, where the unfused step writes x + r in
//          one kernel and reads it back in the next; and in the backward, LayerNorm's input gradient added to
//          the residual stream's gradient in the same pass (a CUDA kernel each way on GPUs, ATen elsewhere).
//          In training, the residual branch's dropout is folded in: s = x + dropout(r), its mask drawn in the
//          forward kernel (kernels/philox.h) and drawn again in the backward one for r's gradient: no mask is
//          stored, only the (seed, offset) it came from. The branch's bias may be folded in too: the linear
//          that made r leaves its bias out, s = x + dropout(r + bias), and the bias's gradient (r's summed over
//          the rows, a reduce kernel of its own after the linear's backward otherwise) is summed in the
//          backward's sweep, beside gamma's and beta's.
#pragma once
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <utility>

namespace gpt2::kernels {

struct AddNormForward {
  at::Tensor s, y, mean, rstd;  // s = x + dropout(r) and y = LayerNorm(s), (N × C); the rows' mean and 1/std, (N)
  at::Tensor keep;  // the reference's dropout mask, bool (N × C): r's kept elements; undefined without dropout
  at::Tensor rng;   // the CUDA kernel's instead: the (seed, offset) it drew with, int64 (2) on the device, written
                    // by the kernel (under a CUDA graph, each replay's); the mask is dropout_keep_mask of them
  double p = 0;     // the dropout probability (kept elements are scaled by 1 / (1 - p))
  bool biased = false;  // whether a bias was added to r (its gradient is then summed in the backward)
  bool held = false;    // the backward's CUDA kernel holds each row in registers (kernels/residual_norm_lanes.h)
};
struct AddNormBackward {
  at::Tensor ds, dgamma, dbeta;  // ds = ds_out + LayerNorm'(dy), (N × C): the gradient of x
  at::Tensor dr;                 // the gradient of r: ds·keep / (1 - p); ds itself without dropout
  at::Tensor dbias;              // dr summed over the rows, (C), where the forward was biased; else undefined
};

// How the CUDA kernels traverse a row each way: read again for each sweep, or held in registers where holds_rows.
// Apart, as held rows cost the backward far more registers than the forward (settings.residual_norm).
struct Traversal {
  bool forward_held = false, backward_held = false;
};

// At most this many 16-byte packs a lane of 32 in the held kernels: C up to 1,024 in bf16, 512 in fp32.
constexpr int kMaxHeldPacks = 4;
// Whether the held kernels take rows of C elements of `dtype` (16-byte packs, at most kMaxHeldPacks a lane).
bool holds_rows(int64_t C, at::ScalarType dtype);

// x, r (N × C) contiguous, one dtype; gamma, beta and bias (C) of that dtype, bias undefined for none (then
// s = x + dropout(r)); 0 <= p < 1 the dropout on the branch. The CUDA kernel for CUDA tensors, the reference
// (ATen's native_layer_norm) otherwise; mean and rstd as each computes them. r + bias is rounded to the dtype
// once, as a linear's biased output is.
// `held`: the CUDA kernel keeps the row in registers between its sweeps where holds_rows (else it reads it
// again for each), and f.held asks the same of the backward; the reference has no such choice.
AddNormForward add_layer_norm_forward(const at::Tensor& x, const at::Tensor& r, const at::Tensor& gamma,
                                      const at::Tensor& beta, double eps, double p = 0, const at::Tensor& bias = {},
                                      bool held = false);
// `keep` the mask to apply when p > 0 (undefined: one drawn from the CPU generator).
AddNormForward add_layer_norm_forward_reference(const at::Tensor& x, const at::Tensor& r, const at::Tensor& gamma,
                                                const at::Tensor& beta, double eps, double p = 0,
                                                const at::Tensor& keep = {}, const at::Tensor& bias = {});
// The mask drawn from the current CUDA generator's Philox state (graph-safe: ATen's capture-aware offsets) and
// not stored: f.rng says where it came from.
AddNormForward add_layer_norm_forward_cuda(const at::Tensor& x, const at::Tensor& r, const at::Tensor& gamma,
                                           const at::Tensor& beta, double eps, double p = 0,
                                           const at::Tensor& bias = {}, bool held = false);
// The CUDA kernels' mask, drawn here on the host: kernels/philox.h for (seed, offset) over N × C elements.
at::Tensor dropout_keep_mask(uint64_t seed, uint64_t offset, int64_t N, int64_t C, double p);
// ds_out (the gradient reaching s from the residual stream) may be undefined: none.
AddNormBackward add_layer_norm_backward(const at::Tensor& ds_out, const at::Tensor& dy, const AddNormForward& f,
                                        const at::Tensor& gamma, const at::Tensor& beta);
AddNormBackward add_layer_norm_backward_reference(const at::Tensor& ds_out, const at::Tensor& dy,
                                                  const AddNormForward& f, const at::Tensor& gamma,
                                                  const at::Tensor& beta);
AddNormBackward add_layer_norm_backward_cuda(const at::Tensor& ds_out, const at::Tensor& dy, const AddNormForward& f,
                                             const at::Tensor& gamma, const at::Tensor& beta);

// (x + dropout(r + bias, p), LayerNorm(the same)) for x, r (..., C), differentiable in x, r, gamma, beta and bias
// (p = 0: no dropout; bias undefined: none). r is promoted to x's dtype and gamma, beta, bias cast to it (under
// autocast the residual stream is fp32 and LayerNorm runs in fp32).
std::pair<at::Tensor, at::Tensor> add_layer_norm(const at::Tensor& x, const at::Tensor& r, const at::Tensor& gamma,
                                                 const at::Tensor& beta, double eps, double p = 0,
                                                 const at::Tensor& bias = {}, Traversal traversal = {});

}  // namespace gpt2::kernels
