// The fused bias-GELU backward: each thread owns kVec adjacent columns (16 bytes: 8 bf16, 4 fp32, where the rows
// allow; else one) of a slab of rows (32 by default), writes d(pre) = grad · GELU'(pre) for them and sums what it wrote in fp32
// (kernels/bias_gelu_columns.h, the body the CPU tests run too); the slabs' column sums are then added over the
// rows / 32 partial rows (kernels/column_sums.h). The unfused backward writes d(pre) and reads it all again for the bias
// gradient. 16-byte loads, as the other kernels here and ATen's vectorized elementwise kernels make: a pass
// bound by memory needs many bytes in flight, and 2-byte loads make eight times the requests for them.
#include <ATen/Dispatch.h>
#include <ATen/core/Tensor.h>
#include <ATen/cuda/CUDAContext.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_like.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>

#include <cstdint>
#include <type_traits>

#include "kernels/bias_gelu.h"
#include "kernels/bias_gelu_columns.h"
#include "kernels/column_sums_cuda.h"

namespace gpt2::kernels {
namespace {

constexpr int kThreads = 128;  // threads a block, kVec columns each

template <typename T, int kVec>
__global__ void __launch_bounds__(kThreads)
    bias_gelu_backward_kernel(const T* __restrict__ grad, const T* __restrict__ pre, T* __restrict__ d_pre,
                              float* __restrict__ partial, int64_t rows, int64_t cols, int64_t slab) {
  const int64_t p = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x;
  if (p >= cols / kVec) return;
  const int64_t r0 = static_cast<int64_t>(blockIdx.y) * slab;
  const int64_t r1 = r0 + slab < rows ? r0 + slab : rows;
  columns::slab<T, kVec>(grad, pre, d_pre, partial + blockIdx.y * cols, cols, r0, r1, p);
}

}  // namespace

std::pair<at::Tensor, at::Tensor> bias_gelu_backward_cuda(const at::Tensor& grad, const at::Tensor& pre,
                                                          int64_t slab) {
  TORCH_CHECK(pre.is_cuda() && grad.is_cuda(), "bias_gelu_backward_cuda: CUDA tensors expected");
  TORCH_CHECK(slab >= 1, "bias_gelu_backward_cuda: rows a block must be >= 1, got ", slab);
  const c10::cuda::CUDAGuard guard(pre.device());
  const int64_t rows = pre.size(0), cols = pre.size(1);
  at::Tensor d_pre = at::empty_like(pre);
  const int64_t slabs = (rows + slab - 1) / slab;
  TORCH_CHECK(slabs <= 65535, "bias_gelu_backward_cuda: ", rows, " rows at ", slab,
              " a block are more slabs than a grid's y holds (65,535)");
  at::Tensor partial = at::empty({slabs, cols}, pre.options().dtype(at::kFloat));
  if (rows == 0 || cols == 0) return {d_pre, column_sums_cuda(partial, 0, cols, pre.scalar_type())};
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kBFloat16, at::kHalf, pre.scalar_type(), "bias_gelu_backward_cuda", [&] {
    const scalar_t *pg = grad.data_ptr<scalar_t>(), *pp = pre.data_ptr<scalar_t>();
    scalar_t* pd = d_pre.data_ptr<scalar_t>();
    auto launch = [&](auto vec) {
      constexpr int kVec = decltype(vec)::value;
      const dim3 grid(static_cast<unsigned>((cols / kVec + kThreads - 1) / kThreads), static_cast<unsigned>(slabs));
      bias_gelu_backward_kernel<scalar_t, kVec><<<grid, kThreads, 0, at::cuda::getCurrentCUDAStream()>>>(
          pg, pp, pd, partial.data_ptr<float>(), rows, cols, slab);
    };
    if (packable<scalar_t>(cols, {pg, pp, pd}))
      launch(std::integral_constant<int, kPack<scalar_t>>{});
    else
      launch(std::integral_constant<int, 1>{});
  });
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return {d_pre, column_sums_cuda(partial, 0, cols, pre.scalar_type())};
}

}  // namespace gpt2::kernels
