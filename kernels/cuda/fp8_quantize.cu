// FP8 quantization into both layouts in one pass (kernels/fp8_tiles.h: the tile's body, tested on the CPU too):
// a block a 64 × 64 tile. Each thread makes the inverse scale from the amax on the device (nothing waits for it on
// the host, and no scalar launches make it); the first block's first thread writes it for _scaled_mm.
#include <ATen/core/Tensor.h>
#include <ATen/cuda/CUDAContext.h>
#include <ATen/ops/empty.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/util/Float8_e4m3fn.h>
#include <c10/util/Float8_e5m2.h>

#include <cstdint>

#include "kernels/fp8_linear.h"
#include "kernels/fp8_tiles.h"

namespace gpt2::kernels {
namespace {

// blockIdx.x the tile's row (N / 64 of them, up to 2^31), blockIdx.y its column (K / 64)
template <typename T, typename F>
__global__ void __launch_bounds__(fp8::kThreads)
    quantize_both_kernel(const T* __restrict__ t, int64_t N, int64_t K, const float* __restrict__ amax, float top,
                         float* __restrict__ inverse_scale, F* __restrict__ out, F* __restrict__ out_t) {
  __shared__ fp8::Staged staged;
  const float inv = fp8::inverse_scale_of(*amax, top);
  if (blockIdx.x == 0 && blockIdx.y == 0 && threadIdx.x == 0) *inverse_scale = inv;
  fp8::quantize_rows<T, F>(t, N, K, inv, out, staged, blockIdx.x, blockIdx.y, threadIdx.x);
  __syncthreads();
  fp8::write_transposed<F>(staged, N, K, out_t, blockIdx.x, blockIdx.y, threadIdx.x);
}

}  // namespace

Fp8 quantize_fp8_both_cuda(const at::Tensor& t, const at::Tensor& amax, at::ScalarType format) {
  TORCH_CHECK(t.is_cuda() && t.numel() > 0 && fp8_both_packable(t),
              "quantize_fp8_both_cuda: a non-empty contiguous CUDA (N, K) tensor with N a multiple of 16, K of "
              "16 bytes' elements, 16-byte aligned, expected; got ", t.sizes());
  TORCH_CHECK(amax.is_cuda() && amax.scalar_type() == at::kFloat && amax.numel() == 1,
              "quantize_fp8_both_cuda: a one-element fp32 CUDA amax expected");
  const auto top = static_cast<float>(fp8_largest(format));  // checks the format
  const c10::cuda::CUDAGuard guard(t.device());
  const int64_t N = t.size(0), K = t.size(1);
  at::Tensor out = at::empty({N, K}, t.options().dtype(format)), out_t = at::empty({K, N}, t.options().dtype(format));
  const at::Tensor inverse_scale = at::empty({}, amax.options());
  const dim3 grid(static_cast<unsigned>((N + fp8::kTile - 1) / fp8::kTile),
                  static_cast<unsigned>((K + fp8::kTile - 1) / fp8::kTile));
  auto go = [&](auto t_type, auto f_type) {
    using T = decltype(t_type);
    using F = decltype(f_type);
    quantize_both_kernel<T, F><<<grid, fp8::kThreads, 0, at::cuda::getCurrentCUDAStream()>>>(
        static_cast<const T*>(t.data_ptr()), N, K, amax.data_ptr<float>(), top, inverse_scale.data_ptr<float>(),
        static_cast<F*>(out.data_ptr()), static_cast<F*>(out_t.data_ptr()));
  };
  auto with_format = [&](auto t_type) {
    if (format == at::kFloat8_e4m3fn) go(t_type, c10::Float8_e4m3fn{});
    else go(t_type, c10::Float8_e5m2{});
  };
  switch (t.scalar_type()) {  // fp8_both_packable: these three alone
    case at::kBFloat16: with_format(c10::BFloat16{}); break;
    case at::kHalf: with_format(c10::Half{}); break;
    default: with_format(float{}); break;
  }
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return {out, inverse_scale, out_t};
}

}  // namespace gpt2::kernels
