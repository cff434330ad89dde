// defines: the second stage of our kernels' column sums — the bias gradient of the fused bias-GELU backward, the
//          LayerNorm weight and bias gradients of the fused residual norm — each of which leaves one fp32 row of
//          partial sums per block (or slab of rows): a thread's share of one column of those partial rows, as a
//          plain function, the body of the CUDA kernel (kernels/cuda/column_sums.cu) and what the CPU tests run.
//
// A block takes kSumLanes adjacent columns, one a lane, and its kSumWarps warps split the partial rows: warp w sums
// rows w, w + kSumWarps, ..., so each of a warp's loads reads kSumLanes contiguous floats; then one warp adds the
// kSumWarps sums of its column. It replaces at::sum(partial, 0) and the cast after it: on an H100 at GPT-2's B=8
// those were 36 reduce launches a step, 0.53 ms of the step's 20 (reports/reference/gpu-nvidia-h100-80gb-hbm3,
// 24_planned_batch+kept's breakdown), plus a copy kernel each for the cast. No libtorch here.
#pragma once
#include <cstdint>

#include "kernels/packs.h"  // GPT2_LANE_FN

namespace gpt2::kernels::columns {

constexpr int kSumLanes = 32;   // columns a block takes, one a lane
constexpr int kSumWarps = 16;   // warps a block: they split the partial rows (the residual norm's: one per resident
                                // block of its backward, some hundreds on an H100)
constexpr int kSumInFlight = 4;  // a thread's loads in flight: as many sums, added at the end

// The fp32 sum of column[r · stride] over rows r = first, first + step, ... below rows.
GPT2_LANE_FN float strided_rows_sum(const float* column, int64_t rows, int64_t stride, int64_t first, int64_t step) {
  float s[kSumInFlight] = {};
  int64_t r = first;
  for (; r + (kSumInFlight - 1) * step < rows; r += kSumInFlight * step) {
    GPT2_UNROLL
    for (int k = 0; k < kSumInFlight; ++k) s[k] += column[(r + k * step) * stride];
  }
  for (; r < rows; r += step) s[0] += column[r * stride];
  float total = 0.f;
  GPT2_UNROLL
  for (int k = 0; k < kSumInFlight; ++k) total += s[k];
  return total;
}

}  // namespace gpt2::kernels::columns
