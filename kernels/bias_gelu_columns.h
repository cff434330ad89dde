// defines: the fused bias-GELU backward's work for one thread — kVec adjacent columns down a slab of rows — as a
//          plain function of the thread's pack and slab: the body of the CUDA kernel (kernels/cuda/bias_gelu.cu)
//          and, on the host, what the CPU tests run for every (slab, pack) against the ATen reference, so the
//          kernel's index arithmetic and math are checked without a GPU.
//
// A thread reads kVec columns at a time (a Pack: 16 bytes for kVec = 16 / sizeof(T), 8 bf16 columns; one element
// for kVec = 1), row after row: a warp's 32 threads read 32 consecutive packs of a row, 512 contiguous bytes. The
// caller guarantees cols % kVec == 0 and that the rows are aligned to the pack. No libtorch here.
#pragma once
#include <math.h>  // tanhf, on the host and in CUDA device code alike

#include <cstdint>

#include "kernels/packs.h"  // Pack, load, store, GPT2_LANE_FN, GPT2_UNROLL

namespace gpt2::kernels::columns {

// d GELU_tanh(x) / dx, in fp32 (ATen's formula for gelu_backward(approximate="tanh")).
GPT2_LANE_FN float gelu_tanh_grad(float x) {
  constexpr float kBeta = 0.7978845608028654f;  // sqrt(2 / pi)
  constexpr float kKappa = 0.044715f;
  const float t = tanhf(kBeta * (x + kKappa * x * x * x));
  return 0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * kBeta * (1.0f + 3.0f * kKappa * x * x);
}

// One row of a thread's pack: d = g · GELU'(x), rounded to T; sum[k] += what was written.
template <typename T, int kVec>
GPT2_LANE_FN Pack<T, kVec> row_grad(const Pack<T, kVec>& g, const Pack<T, kVec>& x, float* sum) {
  Pack<T, kVec> d;
  GPT2_UNROLL
  for (int k = 0; k < kVec; ++k) {
    d.v[k] = static_cast<T>(static_cast<float>(g.v[k]) * gelu_tanh_grad(static_cast<float>(x.v[k])));
    sum[k] += static_cast<float>(d.v[k]);
  }
  return d;
}

// Rows [r0, r1) of pack p of (rows × cols) grad and pre: d_pre = grad · GELU'(pre), rounded to T, written; then
// partial[p·kVec + k] = the fp32 sum of what was written in column p·kVec + k (the unfused bias gradient sums
// the rounded d_pre too). `partial` is the slab's row of the (slabs × cols) partial sums. Rows go kRows at a
// time, all their loads first (64 bytes in flight a thread with 16-byte packs), each row's math behind its own
// check of the slab's end: ptxas schedules within a branch-free block, and there it moved each load down to its
// first use (sm_90 SASS), one round trip to memory at a time.
template <typename T, int kVec>
GPT2_LANE_FN void slab(const T* grad, const T* pre, T* d_pre, float* partial, int64_t cols, int64_t r0, int64_t r1,
                       int64_t p) {
  constexpr int kRows = 2;
  float sum[kVec];
  GPT2_UNROLL
  for (int k = 0; k < kVec; ++k) sum[k] = 0.0f;
  for (int64_t r = r0; r < r1; r += kRows) {
    Pack<T, kVec> g[kRows], x[kRows];
    GPT2_UNROLL
    for (int j = 0; j < kRows; ++j)
      if (r + j < r1) g[j] = load<T, kVec>(grad + (r + j) * cols, p), x[j] = load<T, kVec>(pre + (r + j) * cols, p);
    GPT2_UNROLL
    for (int j = 0; j < kRows; ++j)
      if (r + j < r1) store<T, kVec>(d_pre + (r + j) * cols, p, row_grad<T, kVec>(g[j], x[j], sum));
  }
  GPT2_UNROLL
  for (int k = 0; k < kVec; ++k) partial[p * kVec + k] = sum[k];
}

}  // namespace gpt2::kernels::columns
