// heuristic_algos (kernels/gemm_survey.h): cuBLASLt's heuristic list for one of the step's matmuls, each
// algorithm a call on the given tensors (ATen's handle, stream and caching allocator: graph-capture safe).
#include <ATen/core/Tensor.h>
#include <c10/util/Exception.h>

#include "kernels/gemm_survey.h"

#if GPT2_HAVE_CUBLASLT
#include <ATen/cuda/CUDAContext.h>
#include <ATen/ops/empty.h>

#include <memory>
#include <sstream>

#include "kernels/cuda/lt.h"

namespace gpt2::kernels {
namespace {

// Everything one matmul's calls use, kept alive by the calls.
struct LtMatmul {
  lt::MatmulDesc op;
  lt::Layout a, b, d;
  lt::Preference pref;
  at::Tensor workspace;
};

template <typename V>
V config_of(const cublasLtMatmulAlgo_t& algo, cublasLtMatmulAlgoConfigAttributes_t attr) {
  V v{};
  size_t written = 0;
  TORCH_CUDABLAS_CHECK(cublasLtMatmulAlgoConfigGetAttribute(&algo, attr, &v, sizeof(v), &written));
  return v;
}

std::string describe(const cublasLtMatmulHeuristicResult_t& r) {
  std::ostringstream o;
  o << "algo " << config_of<int32_t>(r.algo, CUBLASLT_ALGO_CONFIG_ID) << " tile "
    << config_of<uint32_t>(r.algo, CUBLASLT_ALGO_CONFIG_TILE_ID) << " split-K "
    << config_of<uint32_t>(r.algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM) << " stages "
    << config_of<uint32_t>(r.algo, CUBLASLT_ALGO_CONFIG_STAGES_ID) << " waves " << r.wavesCount << " workspace "
    << r.workspaceSize;
  return o.str();
}

}  // namespace

bool gemm_survey_built() { return true; }

std::vector<LtAlgo> heuristic_algos(const StepGemm& g, const at::Tensor& a, const at::Tensor& b, const at::Tensor& out,
                                    int max_algos) {
  TORCH_CHECK(a.is_cuda() && a.is_contiguous() && b.is_contiguous() && out.is_contiguous() &&
                  a.scalar_type() == b.scalar_type() && out.scalar_type() == a.scalar_type(),
              "heuristic_algos: contiguous CUDA tensors of one dtype expected");
  TORCH_CHECK(a.numel() == g.M * g.K && b.numel() == g.K * g.N && out.numel() == g.M * g.N,
              "heuristic_algos: the tensors are not the sizes of ", g.name, " (M=", g.M, " N=", g.N, " K=", g.K, ")");
  const LtLayout l = column_major(g);
  const cudaDataType_t t = lt::cuda_type(a.scalar_type(), "heuristic_algos");
  auto m = std::make_shared<LtMatmul>();
  TORCH_CUDABLAS_CHECK(cublasLtMatmulDescCreate(&m->op.d, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  lt::set(m->op.d, CUBLASLT_MATMUL_DESC_TRANSA, l.a_transposed ? CUBLAS_OP_T : CUBLAS_OP_N);
  lt::set(m->op.d, CUBLASLT_MATMUL_DESC_TRANSB, l.b_transposed ? CUBLAS_OP_T : CUBLAS_OP_N);
  TORCH_CUDABLAS_CHECK(cublasLtMatrixLayoutCreate(&m->a.d, t, l.a_rows, l.a_cols, l.lda));
  TORCH_CUDABLAS_CHECK(cublasLtMatrixLayoutCreate(&m->b.d, t, l.b_rows, l.b_cols, l.ldb));
  TORCH_CUDABLAS_CHECK(cublasLtMatrixLayoutCreate(&m->d.d, t, l.m, l.n, l.ldd));
  TORCH_CUDABLAS_CHECK(cublasLtMatmulPreferenceCreate(&m->pref.d));
  lt::set(m->pref.d, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, lt::kWorkspaceBytes);
  m->workspace = at::empty({static_cast<int64_t>(lt::kWorkspaceBytes)}, a.options().dtype(at::kByte));
  std::vector<cublasLtMatmulHeuristicResult_t> found(max_algos);
  int n = 0;
  const cublasLtHandle_t handle = at::cuda::getCurrentCUDABlasLtHandle();
  TORCH_CUDABLAS_CHECK(cublasLtMatmulAlgoGetHeuristic(handle, m->op.d, m->a.d, m->b.d, m->d.d, m->d.d, m->pref.d,
                                                      max_algos, found.data(), &n));
  std::vector<LtAlgo> out_algos;
  for (int i = 0; i < n; ++i) {
    const cublasLtMatmulAlgo_t algo = found[i].algo;
    // A' is B's storage, B' is A's (column-major: outᵀ = op(B)ᵀ·op(A)ᵀ)
    const void *pa = b.data_ptr(), *pb = a.data_ptr();
    void* pd = out.data_ptr();
    out_algos.push_back({describe(found[i]), [m, algo, pa, pb, pd] {
                           const float alpha = 1.0f, beta = 0.0f;
                           TORCH_CUDABLAS_CHECK(cublasLtMatmul(at::cuda::getCurrentCUDABlasLtHandle(), m->op.d, &alpha,
                                                               pa, m->a.d, pb, m->b.d, &beta, pd, m->d.d, pd, m->d.d,
                                                               &algo, m->workspace.mutable_data_ptr(),
                                                               lt::kWorkspaceBytes, at::cuda::getCurrentCUDAStream()));
                         }});
  }
  return out_algos;
}

}  // namespace gpt2::kernels

#else  // no cuBLASLt library found at configure time

namespace gpt2::kernels {

bool gemm_survey_built() { return false; }

std::vector<LtAlgo> heuristic_algos(const StepGemm&, const at::Tensor&, const at::Tensor&, const at::Tensor&, int) {
  TORCH_CHECK(false, "heuristic_algos: this build found no cuBLASLt library (CMake: CUBLASLT_LIBRARY)");
}

}  // namespace gpt2::kernels
#endif
