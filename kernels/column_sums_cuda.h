// defines: column_sums_cuda, the CUDA launch of kernels/column_sums.h (kernels/cuda/column_sums.cu; the CPU build's
//          kernels/no_cuda.cpp says there is no CUDA): the second stage of our kernels' column sums.
#pragma once
#include <ATen/core/Tensor.h>

#include <cstdint>

namespace gpt2::kernels {

// Columns [first, first + n) of `partial` (rows × cols, fp32, contiguous, on the GPU) summed over its rows, in fp32,
// into a new (n) tensor of `dtype`: at::sum(partial, 0).narrow(0, first, n).to(dtype) in one kernel, on the current
// stream.
at::Tensor column_sums_cuda(const at::Tensor& partial, int64_t first, int64_t n, at::ScalarType dtype);

}  // namespace gpt2::kernels
