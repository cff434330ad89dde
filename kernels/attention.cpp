// causal_attention (kernels/attention.h): ATen's side, and the checks before cuDNN's (kernels/cuda/cudnn_attention.cpp).
#include "kernels/attention.h"

#include <ATen/ATen.h>

namespace gpt2::kernels {

at::Tensor causal_attention(const at::Tensor& qkv, int64_t n_head, double p, bool cudnn, const CudnnPlans& plans) {
  TORCH_CHECK(qkv.dim() == 3 && qkv.size(2) % 3 == 0, "causal_attention: qkv must be (B, T, 3C), got ", qkv.sizes());
  const int64_t B = qkv.size(0), T = qkv.size(1), C = qkv.size(2) / 3;
  TORCH_CHECK(n_head > 0 && C % n_head == 0, "causal_attention: ", C, " channels do not split into ", n_head, " heads");
  if (cudnn) {
    TORCH_CHECK(qkv.is_cuda(), "causal_attention: cuDNN's attention needs a CUDA tensor, got one on ", qkv.device());
    return cudnn_causal_attention(qkv, n_head, p, plans);
  }
  // (B, T, C) -> (B, nh, T, hd), as the model's own path
  auto heads = [&](const at::Tensor& t) { return t.view({B, T, n_head, C / n_head}).transpose(1, 2); };
  const auto parts = qkv.split(C, /*dim=*/2);
  const at::Tensor y = at::scaled_dot_product_attention(heads(parts[0]), heads(parts[1]), heads(parts[2]), {}, p,
                                                        /*is_causal=*/true);
  return y.transpose(1, 2).contiguous().view({B, T, C});
}

}  // namespace gpt2::kernels
