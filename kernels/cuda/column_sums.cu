// The second stage of our kernels' column sums (kernels/column_sums.h has the layout and why).
#include "kernels/column_sums_cuda.h"

#include <ATen/Dispatch.h>
#include <ATen/cuda/CUDAContext.h>
#include <ATen/ops/empty.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>

#include "kernels/column_sums.h"

namespace gpt2::kernels {
namespace {

using columns::kSumLanes;
using columns::kSumWarps;

template <typename T>
__global__ void __launch_bounds__(kSumLanes * kSumWarps)
    column_sums_kernel(const float* __restrict__ partial, T* __restrict__ out, int64_t rows, int64_t cols,
                       int64_t first, int64_t n) {
  __shared__ float part[kSumWarps][kSumLanes];
  const int lane = threadIdx.x % kSumLanes, warp = threadIdx.x / kSumLanes;
  const int64_t c = static_cast<int64_t>(blockIdx.x) * kSumLanes + lane;
  part[warp][lane] = c < n ? columns::strided_rows_sum(partial + first + c, rows, cols, warp, kSumWarps) : 0.f;
  __syncthreads();
  if (warp != 0 || c >= n) return;
  float s = 0.f;
#pragma unroll
  for (int w = 0; w < kSumWarps; ++w) s += part[w][lane];
  out[c] = static_cast<T>(s);
}

}  // namespace

at::Tensor column_sums_cuda(const at::Tensor& partial, int64_t first, int64_t n, at::ScalarType dtype) {
  TORCH_CHECK(partial.is_cuda() && partial.scalar_type() == at::kFloat && partial.dim() == 2 && partial.is_contiguous(),
              "column_sums_cuda: a contiguous (rows × cols) fp32 CUDA tensor expected");
  TORCH_CHECK(first >= 0 && n >= 0 && first + n <= partial.size(1), "column_sums_cuda: columns [", first, ", ",
              first + n, ") outside ", partial.size(1));
  const c10::cuda::CUDAGuard guard(partial.device());
  at::Tensor out = at::empty({n}, partial.options().dtype(dtype));
  if (n == 0) return out;
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kBFloat16, at::kHalf, dtype, "column_sums_cuda", [&] {
    const auto blocks = static_cast<unsigned>((n + kSumLanes - 1) / kSumLanes);
    column_sums_kernel<scalar_t><<<blocks, kSumLanes * kSumWarps, 0, at::cuda::getCurrentCUDAStream()>>>(
        partial.data_ptr<float>(), out.data_ptr<scalar_t>(), partial.size(0), partial.size(1), first, n);
  });
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return out;
}

}  // namespace gpt2::kernels
