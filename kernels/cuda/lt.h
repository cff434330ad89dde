// defines: what our one cuBLASLt caller (kernels/cuda/gemm_survey.cpp's lt_gemm, which the survey, gelu_epilogues
//          and gemm_algorithms call) builds on: owned descriptors, attribute setters, the dtype's cuBLASLt type, an
//          address's alignment, the workspace. Included only where GPT2_HAVE_CUBLASLT.
#pragma once
#include <ATen/cuda/Exceptions.h>
#include <c10/core/ScalarType.h>
#include <c10/util/Exception.h>
#include <cublasLt.h>

#include <cstdint>

namespace gpt2::kernels::lt {

constexpr uint64_t kWorkspaceBytes = 32u << 20;  // what cuBLAS's own heuristics may use on Hopper

inline cudaDataType_t cuda_type(at::ScalarType t, const char* what) {
  switch (t) {
    case at::kFloat: return CUDA_R_32F;
    case at::kBFloat16: return CUDA_R_16BF;
    case at::kHalf: return CUDA_R_16F;
    default: TORCH_CHECK(false, what, ": float, bfloat16 or half tensors expected, got ", t);
  }
}

// A cuBLASLt descriptor, destroyed with its owner.
template <typename T, cublasStatus_t (*kDestroy)(T)>
struct Owned {
  T d = nullptr;
  Owned() = default;
  Owned(const Owned&) = delete;
  Owned& operator=(const Owned&) = delete;
  ~Owned() {
    if (d) kDestroy(d);
  }
};
using MatmulDesc = Owned<cublasLtMatmulDesc_t, &cublasLtMatmulDescDestroy>;
using Layout = Owned<cublasLtMatrixLayout_t, &cublasLtMatrixLayoutDestroy>;
using Preference = Owned<cublasLtMatmulPreference_t, &cublasLtMatmulPreferenceDestroy>;

template <typename V>
void set(cublasLtMatmulDesc_t d, cublasLtMatmulDescAttributes_t a, const V& v) {
  TORCH_CUDABLAS_CHECK(cublasLtMatmulDescSetAttribute(d, a, &v, sizeof(v)));
}
template <typename V>
void set(cublasLtMatmulPreference_t p, cublasLtMatmulPreferenceAttributes_t a, const V& v) {
  TORCH_CUDABLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(p, a, &v, sizeof(v)));
}

inline uint32_t alignment(const void* p) {  // the largest power of two up to 256 that divides the address
  uint32_t a = 256;
  while (reinterpret_cast<uintptr_t>(p) % a != 0) a /= 2;
  return a;
}

}  // namespace gpt2::kernels::lt
