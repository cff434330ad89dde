// Our one-launch AdamW's CUDA kernel: a grid as large as the device holds at once walks the tiles of every tensor
// (kernels/adamw_tiles.h), the tensors' pointers a kernel argument (__grid_constant__: read in place, not copied).
// ATen's fused AdamW reads its step count per tensor; here one count serves all, read once a block.
#include <ATen/core/Tensor.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>

#include <algorithm>

#include "kernels/adamw.h"

namespace gpt2::kernels {
namespace {

template <typename T>
__global__ void __launch_bounds__(adamw::kThreads)
    adamw_kernel(const __grid_constant__ adamw::Table<T> table, adamw::Hyper h, const float* step,
                 const float* grad_scale, const float* found_inf) {
  if (found_inf && *found_inf == 1.0f) return;
  const adamw::Coeffs c = adamw::coeffs(h, *step);
  for (int64_t tile = blockIdx.x; tile < table.tiles; tile += gridDim.x)
    adamw::tile_lane(table, tile, static_cast<int>(threadIdx.x), c, grad_scale);
}

// The kernel's resident blocks an SM, asked once (not at every eager step).
template <typename T>
int64_t blocks_per_sm() {
  static const int64_t n = [] {
    int per_sm = 0;
    C10_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, adamw_kernel<T>, adamw::kThreads, 0));
    return int64_t{std::max(per_sm, 1)};
  }();
  return n;
}

}  // namespace

void adamw_one_launch_cuda_(at::TensorList params, at::TensorList grads, at::TensorList exp_avgs,
                            at::TensorList exp_avg_sqs, const at::Tensor& step, const AdamWHyper& h,
                            const at::Tensor& grad_scale, const at::Tensor& found_inf) {
  TORCH_CHECK(params[0].is_cuda(), "adamw_one_launch_cuda_: CUDA tensors expected");
  const c10::cuda::CUDAGuard guard(params[0].device());
  const adamw::Hyper hyper = adamw_hyper(h);
  const float* scale = grad_scale.defined() ? grad_scale.data_ptr<float>() : nullptr;
  const float* inf = found_inf.defined() ? found_inf.data_ptr<float>() : nullptr;
  const int64_t sms = at::cuda::getCurrentDeviceProperties()->multiProcessorCount;
  auto run = [&](auto zero) {
    using T = decltype(zero);
    const int64_t resident = blocks_per_sm<T>() * sms;
    for_each_table<T>(params, grads, exp_avgs, exp_avg_sqs, [&](const adamw::Table<T>& table) {
      // one launch for up to kMaxTensors tensors (GPT-2 124M: ~150)
      const auto blocks = static_cast<unsigned>(std::min(table.tiles, resident));
      adamw_kernel<T><<<blocks, adamw::kThreads, 0, at::cuda::getCurrentCUDAStream()>>>(
          table, hyper, step.data_ptr<float>(), scale, inf);
      C10_CUDA_KERNEL_LAUNCH_CHECK();
    });
  };
  switch (params[0].scalar_type()) {
    case at::kFloat: return run(float{});
    case at::kBFloat16: return run(c10::BFloat16{});
    default: return run(c10::Half{});  // the dtypes adamw_one_launch_ takes
  }
}

}  // namespace gpt2::kernels
