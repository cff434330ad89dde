// The fused classifier's CUDA kernel: one block per row of logits reads the row once for its max and sum of
// exponentials (online softmax, fp32) and once more to overwrite it with the cross-entropy gradient
// scale·(softmax − onehot); the row's loss comes out beside it. What the unfused step does in a softmax
// kernel, a loss kernel and a backward kernel, with the (tokens × V) probabilities and gradient in memory.
// Each thread moves 16 bytes at a time where the rows allow it (V a multiple of 16 bytes' elements, as GPT-2's
// padded 50304 is; llm.c's Packed128), else one element: a memory-bound pass needs many bytes in flight.
#include <ATen/Dispatch.h>
#include <ATen/core/Tensor.h>
#include <ATen/cuda/CUDAContext.h>
#include <ATen/ops/empty.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>

#include <cstdint>
#include <type_traits>

#include "kernels/classifier.h"
#include "kernels/packs.h"               // Pack, load, store, scaled
#include "kernels/softmax_xent_lanes.h"  // xent::

namespace gpt2::kernels {
namespace {

template <bool kExp2>
__device__ __forceinline__ xent::MaxSum warp_reduce(xent::MaxSum v) {
  for (int o = 16; o > 0; o >>= 1)
    v = xent::combine<kExp2>(v, {__shfl_xor_sync(0xffffffffu, v.m, o), __shfl_xor_sync(0xffffffffu, v.s, o)});
  return v;
}

// kThreads a block, one block a row (kernels/softmax_xent_lanes.h: each thread's part): `gpt2bench kernels`
// times 256, 512 (the step's) and 1024, fewer rows in flight keeping more of the second read in L2. kStaged: the
// first read also keeps the row in shared memory (dynamic, V elements of T) and the second pass reads it there:
// one read of the logits from global memory. kExp2: the exponentials in base 2 (xent::exp_of).
template <typename T, int kVec, int kThreads, bool kStaged, bool kExp2>
__global__ void __launch_bounds__(kThreads)
    softmax_xent_backward_kernel(T* __restrict__ logits, const int64_t* __restrict__ targets,
                                 float* __restrict__ losses, int64_t V, float scale) {
  constexpr int kWarps = kThreads / 32;
  extern __shared__ __align__(16) unsigned char staged_row[];
  T* staged = reinterpret_cast<T*>(staged_row);
  __shared__ xent::MaxSum warps[kWarps];
  __shared__ xent::MaxSum row_total;
  const int64_t row = blockIdx.x;
  T* x = logits + row * V;  // V is a multiple of kVec: the row is whole packs
  const int64_t packs = V / kVec;
  const int64_t t = targets[row];
  CUDA_KERNEL_ASSERT(t >= 0 && t < V);
  xent::MaxSum v =
      warp_reduce<kExp2>(xent::thread_max_sum<kExp2, kStaged, T, kVec, kThreads>(x, packs, threadIdx.x, staged));
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  if (lane == 0) warps[warp] = v;
  __syncthreads();
  if (warp == 0) {
    v = warp_reduce<kExp2>(lane < kWarps ? warps[lane] : xent::nothing());
    if (lane == 0) {
      row_total = v;
      losses[row] = xent::loss<kExp2>(v, static_cast<float>(x[t]));  // read before the row is overwritten below
    }
  }
  __syncthreads();  // the staged packs too: each thread reads back its own
  xent::thread_gradient<kExp2, T, kVec, kThreads>(kStaged ? staged : x, x, packs, threadIdx.x, t, row_total, scale);
}

template <typename T, int kThreads, bool kStaged, bool kExp2>
void launch(T* logits, const int64_t* targets, float* losses, int64_t n, int64_t V, float scale) {
  const auto stream = at::cuda::getCurrentCUDAStream();
  const size_t smem = kStaged ? static_cast<size_t>(V) * sizeof(T) : 0;
  auto go = [&](auto kernel) {
    if constexpr (kStaged) C10_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    kernel<<<static_cast<unsigned>(n), kThreads, smem, stream>>>(logits, targets, losses, V, scale);
  };
  if (packable<T>(V, {logits}))
    go(softmax_xent_backward_kernel<T, kPack<T>, kThreads, kStaged, kExp2>);
  else
    go(softmax_xent_backward_kernel<T, 1, kThreads, kStaged, kExp2>);
}

// The backward's scaling: a pack of kVec elements a thread (16 bytes of T; In is T or fp32), g read here, so
// the step neither synchronizes for it nor needs it on the host.
template <typename T, int kVec, typename In>
__global__ void scaled_gradient_kernel(const In* __restrict__ in, T* __restrict__ out, const float* __restrict__ g,
                                       int64_t packs) {
  const int64_t p = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (p < packs) store<T, kVec>(out, p, scaled<T, kVec, In>(load<In, kVec>(in, p), *g));
}

template <typename T, typename In>
void launch_scaled(const In* in, T* out, const float* g, int64_t n) {
  constexpr int kThreads = 256;
  auto go = [&](auto kernel, int64_t packs) {
    if (packs == 0) return;
    kernel<<<static_cast<unsigned>((packs + kThreads - 1) / kThreads), kThreads, 0,
             at::cuda::getCurrentCUDAStream()>>>(in, out, g, packs);
  };
  // a pack of In must be aligned to its own size (32 bytes for 8 fp32) as well as T's to 16
  const bool wide = packable<T>(n, {out}) && reinterpret_cast<uintptr_t>(in) % (sizeof(In) * kPack<T>) == 0;
  if (wide) go(scaled_gradient_kernel<T, kPack<T>, In>, n / kPack<T>);
  else go(scaled_gradient_kernel<T, 1, In>, n);
}

}  // namespace

at::Tensor scaled_gradient_cuda(const at::Tensor& kept, const at::Tensor& g, at::ScalarType dtype) {
  TORCH_CHECK(kept.is_cuda() && kept.is_contiguous() && g.is_cuda() && g.scalar_type() == at::kFloat &&
                  (kept.scalar_type() == dtype || kept.scalar_type() == at::kFloat),
              "scaled_gradient_cuda: a contiguous CUDA gradient of ", dtype, " or Float and an fp32 g expected, got ",
              kept.scalar_type(), " and ", g.scalar_type());
  const c10::cuda::CUDAGuard guard(kept.device());
  at::Tensor out = at::empty(kept.sizes(), kept.options().dtype(dtype));
  const float* pg = g.data_ptr<float>();
  const int64_t n = kept.numel();
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kBFloat16, at::kHalf, dtype, "scaled_gradient_cuda", [&] {
    if constexpr (std::is_same_v<scalar_t, double>) {
      TORCH_CHECK(false, "scaled_gradient_cuda: float, bfloat16 or half gradients (double: the reference)");
    } else if (kept.scalar_type() == dtype) {
      launch_scaled<scalar_t, scalar_t>(kept.data_ptr<scalar_t>(), out.data_ptr<scalar_t>(), pg, n);
    } else {
      launch_scaled<scalar_t, float>(kept.data_ptr<float>(), out.data_ptr<scalar_t>(), pg, n);
    }
  });
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return out;
}

at::Tensor softmax_xent_backward_cuda_(at::Tensor& logits, const at::Tensor& targets, double scale,
                                       SoftmaxLaunch launch_as) {
  const int threads = launch_as.threads;
  const bool staged = launch_as.staged;
  TORCH_CHECK(logits.is_cuda() && logits.is_contiguous() && logits.dim() == 2,
              "softmax_xent_backward_cuda_: logits must be a contiguous CUDA (n, V) tensor");
  TORCH_CHECK(staged ? threads == 1024 : threads == 256 || threads == 512 || threads == 1024,
              "softmax_xent_backward_cuda_: threads a block must be 256, 512 or 1024 (1024 staged), got ", threads,
              staged ? " staged" : "");
  const c10::cuda::CUDAGuard guard(logits.device());
  const int64_t n = logits.size(0), V = logits.size(1);
  if (staged) {  // the device asked only for the staged form: the step's launch stays as it was
    const size_t fits = at::cuda::getCurrentDeviceProperties()->sharedMemPerBlockOptin - 1024;  // beside the static
    TORCH_CHECK(static_cast<size_t>(V) * logits.element_size() <= fits, "softmax_xent_backward_cuda_: a row of ", V,
                " ", logits.scalar_type(), " does not fit in a block's shared memory (", fits, " bytes) to be staged");
  }
  at::Tensor losses = at::empty({n}, logits.options().dtype(at::kFloat));
  if (n == 0) return losses;
  const at::Tensor t = targets.contiguous();
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kBFloat16, at::kHalf, logits.scalar_type(), "softmax_xent_backward_cuda_", [&] {
    auto go = [&](auto k, auto st) {
      auto as = [&](auto e) {
        launch<scalar_t, decltype(k)::value, decltype(st)::value, decltype(e)::value>(
            logits.data_ptr<scalar_t>(), t.data_ptr<int64_t>(), losses.data_ptr<float>(), n, V, static_cast<float>(scale));
      };
      if (launch_as.exp2) as(std::true_type{});
      else as(std::false_type{});
    };
    using std::integral_constant;
    if (staged) go(integral_constant<int, 1024>{}, std::true_type{});
    else if (threads == 256) go(integral_constant<int, 256>{}, std::false_type{});
    else if (threads == 1024) go(integral_constant<int, 1024>{}, std::false_type{});
    else go(integral_constant<int, 512>{}, std::false_type{});
  });
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return losses;
}

}  // namespace gpt2::kernels
