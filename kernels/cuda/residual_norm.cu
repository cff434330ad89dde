// The fused residual-add + LayerNorm kernels: a warp per row. Forward: s = x + r written and summed, the
// variance from s, then y. Backward: LayerNorm's input gradient plus the residual stream's gradient, with gamma's
// and beta's gradients (and, where the branch's bias was folded into the forward, the bias's: the branch's
// gradient) summed over the rows a warp visits, then per block, and the blocks' sums added after in one launch
// (kernels/column_sums.h). Two traversals (kernels/residual_norm_lanes.h): the sweeps read the row again for each
// step; the held kernels (C up to 4 packs a lane) keep it in registers. Both keep the backward's sums in shared
// memory a warp. Each lane moves 16 bytes at a time where the rows allow (C a multiple of 16
// bytes' elements, as GPT-2's 768 is, and the rows aligned), one element otherwise (then the sweeps). With dropout
// (training), the forward keeps or drops each element of r by kernels/philox.h's counter-based draw from the CUDA
// generator's (seed, offset) — ATen's graph-safe state, read in the kernel, so a captured step draws a new mask
// on each replay — and writes the (seed, offset) it drew with, not the mask; the backward draws the same bits
// again for r's gradient, ds through that mask. The backward runs as many blocks as the GPU holds at once (its
// rows strided over them): a memory-bound pass needs every warp slot busy to keep enough loads in flight.
#include <ATen/Dispatch.h>
#include <ATen/core/Tensor.h>
#include <ATen/cuda/CUDAContext.h>
#include <ATen/cuda/CUDAGeneratorImpl.h>
#include <ATen/cuda/PhiloxUtils.cuh>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_like.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAGuard.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <mutex>
#include <type_traits>
#include <utility>

#include "kernels/column_sums_cuda.h"
#include "kernels/philox.h"
#include "kernels/residual_norm.h"
#include "kernels/residual_norm_lanes.h"

namespace gpt2::kernels {
namespace {

constexpr int kWarpsPerBlock = 4;

__device__ __forceinline__ float warp_sum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// The row sweeps are kernels/residual_norm_lanes.h's (tested on the CPU with the lanes simulated); the kernels
// add the lanes' sums between them.
template <typename T, int kVec, int kMax, bool kDropout>
__global__ void add_ln_forward_kernel(const T* __restrict__ x, const T* __restrict__ r, const T* __restrict__ gamma,
                                      const T* __restrict__ beta, T* __restrict__ s, T* __restrict__ y,
                                      float* __restrict__ mean, float* __restrict__ rstd, int64_t N, int64_t C,
                                      float eps, at::PhiloxCudaState rng, DropoutMask drop,
                                      int64_t* __restrict__ rng_out, const T* __restrict__ bias) {
  const int64_t row = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (row >= N) return;
  const int64_t base = row * C;
  if constexpr (kDropout) {
    const auto seeds = at::cuda::philox::unpack(rng);
    drop.seed = std::get<0>(seeds), drop.offset = std::get<1>(seeds);
    if (row == 0 && lane == 0)  // for the backward, which draws the mask again
      rng_out[0] = static_cast<int64_t>(drop.seed), rng_out[1] = static_cast<int64_t>(drop.offset);
  }
  const float n = static_cast<float>(C);
  if constexpr (kMax == 0) {  // the sweeps: s read back for the variance and for y
    const float m = warp_sum(lanes::add_and_sum<T, kVec, kDropout>(x + base, r + base, s + base, C, lane, drop, row,
                                                                   nullptr, bias)) / n;
    const float rs = rsqrtf(warp_sum(lanes::squared_deviation<T, kVec>(s + base, m, C, lane)) / n + eps);
    lanes::normalize<T, kVec>(s + base, gamma, beta, y + base, m, rs, C, lane);
    if (lane == 0) mean[row] = m, rstd[row] = rs;
  } else {  // s held in registers
    lanes::Held<T, kVec, kMax> held;
    const float m = warp_sum(lanes::add_and_sum_held<T, kVec, kMax, kDropout>(x + base, r + base, s + base, held, C,
                                                                              lane, drop, row, bias)) / n;
    const float rs = rsqrtf(warp_sum(lanes::squared_deviation_held<T, kVec, kMax>(held, m, C, lane)) / n + eps);
    lanes::normalize_held<T, kVec, kMax>(held, gamma, beta, y + base, m, rs, C, lane);
    if (lane == 0) mean[row] = m, rstd[row] = rs;
  }
}

// Each warp's column sums in shared memory, (kWarpsPerBlock, sums, C) a block, added over the block's warps at the
// end. kMax = 0, the sweeps: dy and s read again in the second sweep; else held in registers between the two.
template <typename T, int kVec, int kMax, bool kDropout>
__global__ void add_ln_backward_kernel(const T* __restrict__ ds_out, const T* __restrict__ dy,
                                       const T* __restrict__ s, const float* __restrict__ mean,
                                       const float* __restrict__ rstd, const T* __restrict__ gamma,
                                       T* __restrict__ ds, float* __restrict__ partial, int64_t N, int64_t C,
                                       const int64_t* __restrict__ rng, DropoutMask drop, T* __restrict__ dr,
                                       int sums) {
  // sums: gamma's gradient, beta's, then (sums = 3) the bias's
  extern __shared__ float acc[];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if constexpr (kDropout) drop.seed = static_cast<uint64_t>(rng[0]), drop.offset = static_cast<uint64_t>(rng[1]);
  const int64_t warps = static_cast<int64_t>(gridDim.x) * kWarpsPerBlock;
  const int64_t w = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + warp;
  const float n = static_cast<float>(C);
  float* out = partial + static_cast<int64_t>(blockIdx.x) * sums * C;  // the block's (sums, C) row of the partials
  float* dg = acc + static_cast<int64_t>(warp) * sums * C;  // laid out by lanes::acc_index
  float* db = dg + C;
  float* dbias = sums == 3 ? db + C : nullptr;
  for (int64_t j = lane; j < sums * C; j += 32) dg[j] = 0.0f;
  __syncwarp();
  for (int64_t row = w; row < N; row += warps) {
    const int64_t base = row * C;
    const float m = mean[row], rs = rstd[row];
    const T* o = ds_out ? ds_out + base : nullptr;
    if constexpr (kMax == 0) {
      const lanes::GradSums g = lanes::grad_sums<T, kVec>(dy + base, s + base, gamma, m, rs, dg, db, C, lane);
      lanes::grad_input<T, kVec, kDropout>(dy + base, s + base, gamma, o, ds + base, m, rs, warp_sum(g.dy_gamma) / n,
                                           warp_sum(g.dy_gamma_xhat) / n, C, lane, drop, row, dr + base, dbias);
    } else {
      lanes::Held<T, kVec, kMax> dy_held, s_held;
      const lanes::GradSums g =
          lanes::grad_sums_held<T, kVec, kMax>(dy + base, s + base, gamma, m, rs, dy_held, s_held, dg, db, C, lane);
      lanes::grad_input_held<T, kVec, kMax, kDropout>(dy_held, s_held, gamma, o, ds + base, m, rs,
                                                      warp_sum(g.dy_gamma) / n, warp_sum(g.dy_gamma_xhat) / n, C, lane,
                                                      drop, row, dr + base, dbias);
    }
  }
  __syncthreads();  // the block's warps' sums added
  for (int64_t j = threadIdx.x; j < sums * C; j += blockDim.x) {
    const int64_t at = (j / C) * C + lanes::acc_index<kVec>(j % C, C);
    float v = 0.0f;
    for (int k = 0; k < kWarpsPerBlock; ++k) v += acc[k * sums * C + at];
    out[j] = v;
  }
}

// f(std::true_type) or f(std::false_type) as `on` says: a run-time flag made a kernel's template argument.
template <class F>
void on_flag(bool on, F&& f) {
  if (on)
    f(std::true_type{});
  else
    f(std::false_type{});
}

// The packs a lane holds with the row in registers (its C / kVec packs over 32 lanes), where asked for and
// holds_rows; 0, the sweeps, otherwise.
template <typename T>
int held_packs(bool held, int64_t C) {
  if (!held || !holds_rows(C, c10::CppTypeToScalarType<T>::value)) return 0;
  return static_cast<int>((C / kPack<T> + lanes::kLanes - 1) / lanes::kLanes);
}

// f(kVec, kMax, kDropout) as template constants: kVec the pack or, where the rows do not pack, one element (and
// then the sweeps).
template <typename T, class F>
void dispatch(bool packed, int held, bool dropout, F&& f) {
  using std::integral_constant;
  constexpr int kVec = kPack<T>;
  auto with = [&](auto max) { on_flag(dropout, [&](auto d) { f(integral_constant<int, kVec>{}, max, d); }); };
  if (!packed) return on_flag(dropout, [&](auto d) { f(integral_constant<int, 1>{}, integral_constant<int, 0>{}, d); });
  static_assert(kMaxHeldPacks == 4, "dispatch: one case a number of packs held");
  switch (held) {
    case 1: return with(integral_constant<int, 1>{});
    case 2: return with(integral_constant<int, 2>{});
    case 3: return with(integral_constant<int, 3>{});
    case 4: return with(integral_constant<int, 4>{});
    default: return with(integral_constant<int, 0>{});
  }
}

// Blocks of the backward kernel the whole GPU holds at once (CUDA's occupancy: its threads, registers and this
// shared memory), asked once per device and size and kept: the first ask comes in eager warm-up steps, so a
// CUDA-graph capture later makes no CUDA call here. Past 48 KiB a block (C > 1,536: GPT-2 XL's 1,600) the
// kernel is first allowed the larger dynamic shared memory, up to the GPU's opt-in limit (227 KiB on an H100).
template <typename T, int kVec, int kMax, bool kDropout>
int64_t resident_backward_blocks(size_t smem, int64_t C) {
  static std::mutex mutex;  // one per instantiation: each kernel its own registers, so its own answer
  static std::map<std::pair<int, size_t>, int64_t> known;
  const std::pair<int, size_t> key{c10::cuda::current_device(), smem};
  std::lock_guard<std::mutex> lock(mutex);
  if (const auto it = known.find(key); it != known.end()) return it->second;
  const cudaDeviceProp* prop = at::cuda::getCurrentDeviceProperties();
  TORCH_CHECK(smem <= prop->sharedMemPerBlockOptin, "add_layer_norm_backward_cuda: C = ", C, " needs ", smem,
              " bytes of shared memory a block, over this GPU's ", prop->sharedMemPerBlockOptin);
  auto* kernel = add_ln_backward_kernel<T, kVec, kMax, kDropout>;
  if (smem > 48 * 1024)
    C10_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)));
  int per_sm = 0;  // kept only once CUDA has answered: a failed ask throws and is asked again next time
  C10_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, kWarpsPerBlock * 32, smem));
  return known[key] = std::max(1, per_sm) * int64_t{prop->multiProcessorCount};
}

}  // namespace

AddNormForward add_layer_norm_forward_cuda(const at::Tensor& x, const at::Tensor& r, const at::Tensor& gamma,
                                           const at::Tensor& beta, double eps, double p, const at::Tensor& bias,
                                           bool held) {
  TORCH_CHECK(x.is_cuda(), "add_layer_norm_forward_cuda: CUDA tensors expected");
  TORCH_CHECK(p >= 0 && p < 1, "add_layer_norm_forward_cuda: the dropout probability must be in [0, 1), got ", p);
  const c10::cuda::CUDAGuard guard(x.device());
  const int64_t N = x.size(0), C = x.size(1);
  AddNormForward f{at::empty_like(x), at::empty_like(x), at::empty({N}, x.options().dtype(at::kFloat)),
                   at::empty({N}, x.options().dtype(at::kFloat)), {}, {}, p, bias.defined(), held};
  const bool dropout = p > 0;
  if (dropout) f.rng = at::empty({2}, x.options().dtype(at::kLong));
  if (N == 0) return f;
  at::PhiloxCudaState rng;
  if (dropout) {  // one offset step a call: each element's bits are keyed by its index within the call
    auto* gen = at::get_generator_or_default<at::CUDAGeneratorImpl>(std::nullopt,
                                                                   at::cuda::detail::getDefaultCUDAGenerator());
    const std::lock_guard<std::mutex> lock(gen->mutex_);
    rng = gen->philox_cuda_state(4);
  }
  const DropoutMask drop = dropout ? dropout_mask(p) : DropoutMask{};
  int64_t* rng_out = dropout ? f.rng.data_ptr<int64_t>() : nullptr;
  const auto blocks = static_cast<unsigned>((N + kWarpsPerBlock - 1) / kWarpsPerBlock);
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kBFloat16, at::kHalf, x.scalar_type(), "add_layer_norm_forward_cuda", [&] {
    const scalar_t *px = x.data_ptr<scalar_t>(), *pr = r.data_ptr<scalar_t>(), *pg = gamma.data_ptr<scalar_t>(),
                   *pb = beta.data_ptr<scalar_t>(), *pbias = f.biased ? bias.data_ptr<scalar_t>() : nullptr;
    scalar_t *ps = f.s.data_ptr<scalar_t>(), *py = f.y.data_ptr<scalar_t>();
    const bool packed = packable<scalar_t>(C, {px, pr, pg, pb, ps, py, pbias ? pbias : pb});
    dispatch<scalar_t>(packed, held_packs<scalar_t>(held, C), dropout, [&](auto vec, auto max, auto with_dropout) {
      add_ln_forward_kernel<scalar_t, decltype(vec)::value, decltype(max)::value, decltype(with_dropout)::value>
          <<<blocks, kWarpsPerBlock * 32, 0, at::cuda::getCurrentCUDAStream()>>>(
              px, pr, pg, pb, ps, py, f.mean.data_ptr<float>(), f.rstd.data_ptr<float>(), N, C, static_cast<float>(eps),
              rng, drop, rng_out, pbias);
    });
  });
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return f;
}

AddNormBackward add_layer_norm_backward_cuda(const at::Tensor& ds_out, const at::Tensor& dy, const AddNormForward& f,
                                             const at::Tensor& gamma, const at::Tensor& beta) {
  TORCH_CHECK(dy.is_cuda() && f.s.is_cuda(), "add_layer_norm_backward_cuda: CUDA tensors expected");
  const c10::cuda::CUDAGuard guard(dy.device());
  const int64_t N = f.s.size(0), C = f.s.size(1);
  const int sums = f.biased ? 3 : 2;  // gamma's and beta's gradients, and the bias's
  at::Tensor ds = at::empty_like(f.s);
  TORCH_CHECK(!f.keep.defined(), "add_layer_norm_backward_cuda: the forward must be the CUDA kernel's (its mask is "
              "drawn again from f.rng, not read)");
  const bool dropout = f.rng.defined();
  at::Tensor dr = dropout ? at::empty_like(f.s) : ds;
  const int64_t* rng = dropout ? f.rng.data_ptr<int64_t>() : nullptr;
  const DropoutMask drop = dropout ? dropout_mask(f.p) : DropoutMask{};
  at::Tensor d_gamma, d_beta, d_bias;
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kBFloat16, at::kHalf, f.s.scalar_type(), "add_layer_norm_backward_cuda", [&] {
    const scalar_t *po = ds_out.defined() ? ds_out.data_ptr<scalar_t>() : nullptr, *pdy = dy.data_ptr<scalar_t>(),
                   *ps = f.s.data_ptr<scalar_t>(), *pg = gamma.data_ptr<scalar_t>();
    scalar_t *pds = ds.data_ptr<scalar_t>(), *pdr = dr.data_ptr<scalar_t>();
    const bool packed = packable<scalar_t>(C, {po ? po : pdy, pdy, ps, pg, pds, pdr});
    dispatch<scalar_t>(packed, held_packs<scalar_t>(f.held, C), dropout, [&](auto vec, auto max, auto with_dropout) {
      constexpr int kVec = decltype(vec)::value, kMax = decltype(max)::value;
      constexpr bool kDropout = decltype(with_dropout)::value;
      const size_t smem = sizeof(float) * sums * C * kWarpsPerBlock;
      // a warp per row, up to as many blocks as the GPU holds at once
      const int64_t blocks = std::clamp<int64_t>((N + kWarpsPerBlock - 1) / kWarpsPerBlock, 1,
                                                 resident_backward_blocks<scalar_t, kVec, kMax, kDropout>(smem, C));
      at::Tensor partial = at::empty({blocks, sums, C}, f.s.options().dtype(at::kFloat));
      add_ln_backward_kernel<scalar_t, kVec, kMax, kDropout><<<static_cast<unsigned>(blocks), kWarpsPerBlock * 32, smem,
                                                               at::cuda::getCurrentCUDAStream()>>>(
          po, pdy, ps, f.mean.data_ptr<float>(), f.rstd.data_ptr<float>(), pg, pds, partial.data_ptr<float>(), N, C,
          rng, drop, pdr, sums);
      C10_CUDA_KERNEL_LAUNCH_CHECK();
      // each block's γ sums, then its β sums (then its bias's): all summed over the blocks in one launch
      const at::Tensor all = column_sums_cuda(partial.view({blocks, sums * C}), 0, sums * C, gamma.scalar_type());
      d_gamma = all.narrow(0, 0, C), d_beta = all.narrow(0, C, C);
      if (f.biased) d_bias = all.narrow(0, 2 * C, C);
    });
  });
  return {ds, d_gamma, d_beta, dr, d_bias};
}

}  // namespace gpt2::kernels
