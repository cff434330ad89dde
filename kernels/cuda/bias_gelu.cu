// The fused bias-GELU backward: each thread owns one column of a slab of rows, writes d(pre) = grad · GELU'(pre)
// for it and sums what it wrote in fp32; the slabs' column sums are then added (one small reduction over
// rows / 64 partial rows). The unfused backward writes d(pre) and reads it all again for the bias gradient.
#include <ATen/Dispatch.h>
#include <ATen/core/Tensor.h>
#include <ATen/cuda/CUDAContext.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_like.h>
#include <ATen/ops/sum.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>

#include <cmath>

#include "kernels/bias_gelu.h"

namespace gpt2::kernels {
namespace {

constexpr int kColumns = 256;     // threads a block, one column each
constexpr int64_t kRowSlab = 64;  // rows a block walks down

__device__ __forceinline__ float gelu_tanh_grad(float x) {
  constexpr float kBeta = 0.7978845608028654f;  // sqrt(2 / pi)
  constexpr float kKappa = 0.044715f;
  const float t = tanhf(kBeta * (x + kKappa * x * x * x));
  return 0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * kBeta * (1.0f + 3.0f * kKappa * x * x);
}

template <typename T>
__global__ void __launch_bounds__(kColumns)
    bias_gelu_backward_kernel(const T* __restrict__ grad, const T* __restrict__ pre, T* __restrict__ d_pre,
                              float* __restrict__ partial, int64_t rows, int64_t cols) {
  const int64_t j = static_cast<int64_t>(blockIdx.x) * kColumns + threadIdx.x;
  if (j >= cols) return;
  const int64_t r0 = static_cast<int64_t>(blockIdx.y) * kRowSlab;
  const int64_t r1 = r0 + kRowSlab < rows ? r0 + kRowSlab : rows;
  float sum = 0.0f;
  for (int64_t r = r0; r < r1; ++r) {
    const int64_t i = r * cols + j;
    const T d = static_cast<T>(static_cast<float>(grad[i]) * gelu_tanh_grad(static_cast<float>(pre[i])));
    d_pre[i] = d;
    sum += static_cast<float>(d);  // the bias gradient sums what was written, as the unfused one does
  }
  partial[blockIdx.y * cols + j] = sum;
}

}  // namespace

std::pair<at::Tensor, at::Tensor> bias_gelu_backward_cuda(const at::Tensor& grad, const at::Tensor& pre) {
  TORCH_CHECK(pre.is_cuda() && grad.is_cuda(), "bias_gelu_backward_cuda: CUDA tensors expected");
  const c10::cuda::CUDAGuard guard(pre.device());
  const int64_t rows = pre.size(0), cols = pre.size(1);
  at::Tensor d_pre = at::empty_like(pre);
  const int64_t slabs = (rows + kRowSlab - 1) / kRowSlab;
  at::Tensor partial = at::empty({slabs, cols}, pre.options().dtype(at::kFloat));
  if (rows == 0 || cols == 0) return {d_pre, at::sum(partial, 0).to(pre.scalar_type())};
  const dim3 grid(static_cast<unsigned>((cols + kColumns - 1) / kColumns), static_cast<unsigned>(slabs));
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kBFloat16, at::kHalf, pre.scalar_type(), "bias_gelu_backward_cuda", [&] {
    bias_gelu_backward_kernel<scalar_t><<<grid, kColumns, 0, at::cuda::getCurrentCUDAStream()>>>(
        grad.data_ptr<scalar_t>(), pre.data_ptr<scalar_t>(), d_pre.data_ptr<scalar_t>(), partial.data_ptr<float>(),
        rows, cols);
  });
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return {d_pre, at::sum(partial, 0).to(pre.scalar_type())};
}

}  // namespace gpt2::kernels
