// defines: our one-launch AdamW's work — every parameter's update in one CUDA kernel — as plain functions of a
//          tile and a thread: the body of the kernel (kernels/cuda/adamw.cu) and, on the host, what the CPU
//          tests run for every (tile, thread) against at::_fused_adamw_.
//
// The parameters are cut into tiles of kThreads packs (16 bytes of each of param, grad, exp_avg and exp_avg_sq;
// one element at a time for a tensor whose numel or pointers do not allow packs). A launch's Table lists up to
// kMaxTensors tensors by value (a kernel argument: CUDA 12.1+ takes 32 KiB of them) with the tile each ends at; a
// block walks tiles blockIdx.x, + gridDim.x, ... over all tensors at once. ATen's multi_tensor_apply launches a
// kernel per 320 chunks of 64 Ki elements, so GPT-2 124M's update is ~10 launches, each with its own tail.
// The arithmetic is ATen's fused AdamW's (ATen/native/cuda/fused_adam_utils.cuh), in fp32. No libtorch here.
#pragma once
#include <cmath>
#include <cstddef>
#include <cstdint>

#include "kernels/packs.h"  // Pack, kPack, packable, load, store, GPT2_LANE_FN, GPT2_UNROLL, GPT2_NO_UNROLL

namespace gpt2::kernels::adamw {

// A tile: a pack (16 bytes) of each operand a thread, 64 bytes in flight. One pack takes 40 registers on sm_90
// in bf16 (2,048 threads an SM: 128 KiB in flight); two, unrolled, took 110 (512 threads).
constexpr int kThreads = 256;
constexpr int kMaxTensors = 256;  // a Table's: 12.5 KiB for 256 tensors

template <typename T>
constexpr int64_t kTileElems = int64_t{kThreads} * kPack<T>;

// The hyper-parameters in fp32, as ATen's kernel converts its double arguments.
struct Hyper {
  float lr, beta1, beta2, weight_decay, eps;
};
struct Coeffs {
  Hyper h;
  float bias_correction1, bias_correction2_sqrt;
};

// The bias corrections at `step` (the count after this step's increment), as ATen computes them.
GPT2_LANE_FN Coeffs coeffs(const Hyper& h, float step) {
  const float bias_correction2 = 1 - std::pow(h.beta2, step);
  return {h, 1 - std::pow(h.beta1, step), std::sqrt(bias_correction2)};
}

// One element's update in fp32: ATen's adam_math for ADAMW, term for term. With grad_scale the gradient is
// unscaled first (and stored back unscaled, as ATen's kernel does).
GPT2_LANE_FN void update(float& param, float& grad, float& exp_avg, float& exp_avg_sq, const Coeffs& c,
                         const float* grad_scale) {
  if (grad_scale) grad /= *grad_scale;
  const Hyper& h = c.h;
  if (h.weight_decay != 0) param -= h.lr * h.weight_decay * param;
  exp_avg = std::fma(h.beta1, exp_avg, std::fma(-h.beta1, grad, grad));
  exp_avg_sq = std::fma(h.beta2, exp_avg_sq, std::fma(-h.beta2, grad * grad, grad * grad));
  const float step_size = h.lr / c.bias_correction1;
  const float denom = (std::sqrt(exp_avg_sq) / c.bias_correction2_sqrt) + h.eps;
  param -= step_size * exp_avg / denom;
}

template <typename T>
struct Operands {
  T *param, *grad, *exp_avg, *exp_avg_sq;
  int64_t numel;
};

template <typename T>
struct Table {
  int n = 0;
  int64_t tiles = 0;
  int64_t tile_end[kMaxTensors];  // tiles of tensors 0..i
  Operands<T> t[kMaxTensors];
  bool packed[kMaxTensors];
};

// Fills `table` with the first of `count` tensors (at most kMaxTensors); returns how many it took.
template <typename T>
size_t fill(Table<T>& table, const Operands<T>* ops, size_t count) {
  table.n = 0;
  table.tiles = 0;
  for (; table.n < kMaxTensors && static_cast<size_t>(table.n) < count; ++table.n) {
    const Operands<T>& o = ops[table.n];
    table.t[table.n] = o;
    table.packed[table.n] = packable<T>(o.numel, {o.param, o.grad, o.exp_avg, o.exp_avg_sq});
    table.tiles += (o.numel + kTileElems<T> - 1) / kTileElems<T>;
    table.tile_end[table.n] = table.tiles;
  }
  return static_cast<size_t>(table.n);
}

// The tensor holding `tile`: the first whose tile_end passes it (the same for all a block's threads).
template <typename T>
GPT2_LANE_FN int tensor_of(const Table<T>& table, int64_t tile) {
  int lo = 0, hi = table.n - 1;
  while (lo < hi) {
    const int mid = (lo + hi) / 2;
    if (table.tile_end[mid] > tile) hi = mid;
    else lo = mid + 1;
  }
  return lo;
}

// Unit i (a pack of kVec elements) of one tensor: its four operands loaded, updated, stored.
template <typename T, int kVec>
GPT2_LANE_FN void unit(const Operands<T>& o, int64_t i, const Coeffs& c, const float* grad_scale) {
  Pack<T, kVec> p = load<T, kVec>(o.param, i), g = load<T, kVec>(o.grad, i);
  Pack<T, kVec> m = load<T, kVec>(o.exp_avg, i), v = load<T, kVec>(o.exp_avg_sq, i);
  GPT2_UNROLL
  for (int k = 0; k < kVec; ++k) {
    float param = p.v[k], grad = g.v[k], exp_avg = m.v[k], exp_avg_sq = v.v[k];
    update(param, grad, exp_avg, exp_avg_sq, c, grad_scale);
    p.v[k] = static_cast<T>(param), g.v[k] = static_cast<T>(grad);
    m.v[k] = static_cast<T>(exp_avg), v.v[k] = static_cast<T>(exp_avg_sq);
  }
  store<T, kVec>(o.param, i, p), store<T, kVec>(o.exp_avg, i, m), store<T, kVec>(o.exp_avg_sq, i, v);
  if (grad_scale) store<T, kVec>(o.grad, i, g);
}

// Thread `lane`'s part of `tile`: pack lane of it, or where the tensor takes no packs its elements lane,
// lane + kThreads, ... one at a time (a loop not unrolled: unrolled, it set the kernel's registers).
template <typename T>
GPT2_LANE_FN void tile_lane(const Table<T>& table, int64_t tile, int lane, const Coeffs& c, const float* grad_scale) {
  const int i = tensor_of(table, tile);
  const Operands<T>& o = table.t[i];
  const int64_t start = (tile - (i > 0 ? table.tile_end[i - 1] : 0)) * kTileElems<T>;  // its first element
  if (table.packed[i]) {
    const int64_t pack = start / kPack<T> + lane;
    if (pack < o.numel / kPack<T>) unit<T, kPack<T>>(o, pack, c, grad_scale);
    return;
  }
  GPT2_NO_UNROLL
  for (int64_t e = start + lane; e < start + kTileElems<T> && e < o.numel; e += kThreads) unit<T, 1>(o, e, c, grad_scale);
}

}  // namespace gpt2::kernels::adamw
