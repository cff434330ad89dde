// defines: the fused classifier — the LM head's matmul, softmax cross-entropy and its gradient, chunk by chunk
//          over the tokens, so the (tokens × vocab) logits and their gradient are never whole in memory.
//
// For a chunk of rows of h (n × C) the head's logits z = h·Wᵀ (n × V) are computed; one pass over z (a CUDA
// kernel on GPUs, ATen ops elsewhere) turns them, in place, into d(loss)/dz = scale·(softmax(z) − onehot(t))
// and yields each row's loss; then dh = dz·W and dW += dzᵀ·h. The gradients are made in the forward (as
// llm.c's fused classifier and Liger's fused linear cross-entropy do) and kept for the backward, which only
// scales them by the incoming gradient (in fp32): the full logits gradient, 2 × tokens × V × bytes in the unfused
// step, is never materialised.
#pragma once
#include <ATen/core/Tensor.h>

#include <cstdint>

#include "kernels/side_stream.h"

namespace gpt2::kernels {

// How the CUDA kernel runs over a row: `threads` a block (256, 512 or 1024), reading the row twice from global
// memory, or once where `staged` (1024 threads; the row kept in shared memory); `exp2`: each exponential the
// SFU's approximate ex2 of the logit times log2(e), the max and sum kept in base 2 (two instructions, not nine).
struct SoftmaxLaunch {
  int threads = 512;
  bool staged = false, exp2 = false;
};

// In place: logits (n × V, fp32/bf16/fp16, contiguous) become scale·(softmax(logits) − onehot(targets));
// returns each row's cross-entropy (n, fp32). Targets: int64 in [0, V). Runs the CUDA kernel for CUDA
// tensors (as `launch` says), softmax_xent_backward_reference_ otherwise.
at::Tensor softmax_xent_backward_(at::Tensor& logits, const at::Tensor& targets, double scale,
                                  SoftmaxLaunch launch = {});

// The same with ATen ops, on any device, the softmax in fp32: the reference the kernel is tested against.
at::Tensor softmax_xent_backward_reference_(at::Tensor& logits, const at::Tensor& targets, double scale);

// The CUDA kernel (kernels/cuda/classifier.cu), a block a row. A build without CUDA throws (kernels/no_cuda.cpp).
at::Tensor softmax_xent_backward_cuda_(at::Tensor& logits, const at::Tensor& targets, double scale,
                                       SoftmaxLaunch launch = {});

// kept·g (g: one fp32 element, on kept's device) computed in fp32 and rounded once into `dtype`; kept is of that
// dtype or fp32. The classifier's backward: its gradients kept from the forward times the incoming gradient. The
// CUDA kernel (16-byte packs, g read on the device) for float, bf16 and fp16 on CUDA, the reference elsewhere.
at::Tensor scaled_gradient(const at::Tensor& kept, const at::Tensor& g, at::ScalarType dtype);
at::Tensor scaled_gradient_reference(const at::Tensor& kept, const at::Tensor& g, at::ScalarType dtype);
at::Tensor scaled_gradient_cuda(const at::Tensor& kept, const at::Tensor& g, at::ScalarType dtype);

// mean over rows of cross_entropy(h·wᵀ, targets) for h (N × C), w (V × C), targets (N), differentiable in h
// and w, computed chunk_tokens rows at a time (the last chunk shorter). The same value as
// at::cross_entropy_loss(at::linear(h, w), targets) up to summation order. On CUDA its kernel runs as `launch`
// says. With `beside` and more than one chunk, each chunk's softmax pass runs on that side stream beside the
// GEMMs of the chunk before (the same values).
at::Tensor linear_cross_entropy(const at::Tensor& h, const at::Tensor& w, const at::Tensor& targets,
                                int64_t chunk_tokens, SoftmaxLaunch launch = {}, SideStream* beside = nullptr);

}  // namespace gpt2::kernels
