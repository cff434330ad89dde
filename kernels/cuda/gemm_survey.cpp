// lt_algorithms, lt_gemm and heuristic_algos (kernels/gemm_survey.h): cuBLASLt's heuristic list for one of the step's
// matmuls, asked once a process for each shape and kept, and a call by its place in the list (ATen's handle, stream
// and caching allocator: graph-capture safe).
#include <ATen/core/Tensor.h>
#include <c10/util/Exception.h>

#include "kernels/gemm_survey.h"

#if GPT2_HAVE_CUBLASLT
#include <ATen/Context.h>
#include <ATen/core/ivalue.h>
#include <ATen/cuda/CUDAContext.h>
#include <ATen/ops/empty.h>
#include <ATen/record_function.h>
#include <c10/cuda/CUDAGuard.h>

#include <map>
#include <memory>
#include <mutex>
#include <sstream>
#include <tuple>

#include "kernels/cuda/lt.h"

namespace gpt2::kernels {
namespace {

// One matmul's descriptors and the heuristic's algorithms for them.
struct Plan {
  lt::MatmulDesc op;
  lt::Layout a, b, d;
  std::vector<cublasLtMatmulHeuristicResult_t> found;
  std::vector<std::string> configs;
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

void check(const StepGemm& g, const at::Tensor& a, const at::Tensor& b, const at::Tensor& out, const LtEpilogue& e) {
  TORCH_CHECK(a.is_cuda() && a.is_contiguous() && b.is_contiguous() && out.is_contiguous() &&
                  a.scalar_type() == b.scalar_type() && out.scalar_type() == a.scalar_type(),
              "lt_gemm: contiguous CUDA tensors of one dtype expected");
  TORCH_CHECK(a.numel() == g.M * g.K && b.numel() == g.K * g.N && out.numel() == g.M * g.N,
              "lt_gemm: the tensors are not the sizes of ", g.name, " (M=", g.M, " N=", g.N, " K=", g.K, ")");
  auto fits = [&](const at::Tensor& t, int64_t n) {
    return t.defined() && t.is_contiguous() && t.numel() == n && t.scalar_type() == a.scalar_type();
  };
  TORCH_CHECK(e.kind == LtEpilogue::kNone || fits(e.vec, g.N), "lt_gemm: the ", e.name(), " epilogue's vector must be ",
              g.N, " contiguous values of the operands' dtype");
  TORCH_CHECK(e.kind < LtEpilogue::kGeluAuxBias || fits(e.aux, g.M * g.N), "lt_gemm: the ", e.name(),
              " epilogue's pre-activation must be ", g.M, " × ", g.N, " contiguous values of the operands' dtype");
}

cublasLtEpilogue_t epilogue_of(LtEpilogue::Kind k) {
  switch (k) {
    case LtEpilogue::kBias: return CUBLASLT_EPILOGUE_BIAS;
    case LtEpilogue::kGeluAuxBias: return CUBLASLT_EPILOGUE_GELU_AUX_BIAS;
    case LtEpilogue::kDGeluBGrad: return CUBLASLT_EPILOGUE_DGELU_BGRAD;
    default: return CUBLASLT_EPILOGUE_DEFAULT;
  }
}

// The epilogue's vectors into the descriptor: before the heuristic is asked (as ATen's own cuBLASLt calls do), and
// again at every call (cuBLASLt reads them at the call, also under graph capture).
void point_at(const Plan& p, const LtEpilogue& e) {
  if (e.kind != LtEpilogue::kNone) lt::set(p.op.d, CUBLASLT_MATMUL_DESC_BIAS_POINTER, e.vec.const_data_ptr());
  if (e.kind >= LtEpilogue::kGeluAuxBias)
    lt::set(p.op.d, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, e.aux.const_data_ptr());
}

std::unique_ptr<Plan> make_plan(const StepGemm& g, const at::Tensor& a, const at::Tensor& b, const at::Tensor& out,
                                const LtEpilogue& e, bool tf32) {
  const LtEpilogue::Kind epilogue = e.kind;
  const LtLayout l = column_major(g);
  const cudaDataType_t t = lt::cuda_type(a.scalar_type(), "lt_gemm");
  auto p = std::make_unique<Plan>();
  TORCH_CUDABLAS_CHECK(
      cublasLtMatmulDescCreate(&p->op.d, tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F, CUDA_R_32F));
  lt::set(p->op.d, CUBLASLT_MATMUL_DESC_TRANSA, l.a_transposed ? CUBLAS_OP_T : CUBLAS_OP_N);
  lt::set(p->op.d, CUBLASLT_MATMUL_DESC_TRANSB, l.b_transposed ? CUBLAS_OP_T : CUBLAS_OP_N);
  lt::set(p->op.d, CUBLASLT_MATMUL_DESC_EPILOGUE, epilogue_of(epilogue));
  if (epilogue >= LtEpilogue::kGeluAuxBias) lt::set(p->op.d, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, l.ldd);  // as D
  point_at(*p, e);
  TORCH_CUDABLAS_CHECK(cublasLtMatrixLayoutCreate(&p->a.d, t, l.a_rows, l.a_cols, l.lda));
  TORCH_CUDABLAS_CHECK(cublasLtMatrixLayoutCreate(&p->b.d, t, l.b_rows, l.b_cols, l.ldb));
  TORCH_CUDABLAS_CHECK(cublasLtMatrixLayoutCreate(&p->d.d, t, l.m, l.n, l.ldd));
  lt::Preference pref;
  TORCH_CUDABLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref.d));
  lt::set(pref.d, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, lt::kWorkspaceBytes);
  lt::set(pref.d, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, lt::alignment(b.const_data_ptr()));  // A' is b
  lt::set(pref.d, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, lt::alignment(a.const_data_ptr()));
  lt::set(pref.d, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, lt::alignment(out.const_data_ptr()));
  lt::set(pref.d, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, lt::alignment(out.const_data_ptr()));
  p->found.resize(kMaxLtAlgorithms);
  int n = 0;
  TORCH_CUDABLAS_CHECK(cublasLtMatmulAlgoGetHeuristic(at::cuda::getCurrentCUDABlasLtHandle(), p->op.d, p->a.d, p->b.d,
                                                      p->d.d, p->d.d, pref.d, kMaxLtAlgorithms, p->found.data(), &n));
  p->found.resize(n);
  for (const auto& r : p->found) p->configs.push_back(describe(r));
  return p;
}

// The plan for these operands: made once for each shape, dtype, epilogue, alignment and device, then kept (the step
// asks for it at every call; the heuristic takes tens of microseconds).
const Plan& plan_for(const StepGemm& g, const at::Tensor& a, const at::Tensor& b, const at::Tensor& out,
                     const LtEpilogue& e) {
  check(g, a, b, out, e);
  const bool tf32 = a.scalar_type() == at::kFloat && at::globalContext().allowTF32CuBLAS();
  using Key = std::tuple<int64_t, int64_t, int64_t, bool, bool, int, int, bool, uint32_t, uint32_t, uint32_t, int>;
  const Key key{g.M, g.N, g.K, g.a_transposed, g.b_transposed, static_cast<int>(a.scalar_type()), e.kind, tf32,
                lt::alignment(a.const_data_ptr()), lt::alignment(b.const_data_ptr()),
                lt::alignment(out.const_data_ptr()), a.get_device()};
  static std::mutex mutex;
  static std::map<Key, std::unique_ptr<Plan>> plans;
  const std::lock_guard<std::mutex> lock(mutex);
  auto& p = plans[key];
  if (!p) p = make_plan(g, a, b, out, e, tf32);
  return *p;
}

}  // namespace

bool gemm_survey_built() { return true; }

std::vector<std::string> lt_algorithms(const StepGemm& g, const at::Tensor& a, const at::Tensor& b,
                                       const at::Tensor& out, const LtEpilogue& e) {
  TORCH_CHECK(a.is_cuda() && b.is_cuda() && out.is_cuda(), "lt_algorithms: CUDA tensors expected, got ", a.device(),
              ", ", b.device(), ", ", out.device());
  const c10::cuda::CUDAGuard guard(a.device());
  return plan_for(g, a, b, out, e).configs;
}

void lt_gemm(const StepGemm& g, const at::Tensor& a, const at::Tensor& b, const at::Tensor& out, const LtEpilogue& e,
             int index) {
  TORCH_CHECK(a.is_cuda() && b.is_cuda() && out.is_cuda(), "lt_gemm: CUDA tensors expected, got ", a.device(), ", ",
              b.device(), ", ", out.device());  // before the guard below, whose own error names no caller
  RECORD_FUNCTION(kLtGemmRecord, lt_gemm_record_inputs(g));  // declares `guard`
  const c10::cuda::CUDAGuard device(a.device());
  const Plan& p = plan_for(g, a, b, out, e);
  TORCH_CHECK(index >= 0 && index < static_cast<int>(p.found.size()), "lt_gemm: cuBLASLt's heuristic lists ",
              p.found.size(), " algorithms for ", g.name, " (M=", g.M, " N=", g.N, " K=", g.K, "), not #", index);
  point_at(p, e);
  const at::Tensor workspace = at::empty({static_cast<int64_t>(lt::kWorkspaceBytes)}, a.options().dtype(at::kByte));
  const float alpha = 1.0f, beta = 0.0f;
  // A' is b's storage, B' is a's (column-major: outᵀ = op(b)ᵀ·op(a)ᵀ)
  TORCH_CUDABLAS_CHECK(cublasLtMatmul(at::cuda::getCurrentCUDABlasLtHandle(), p.op.d, &alpha, b.const_data_ptr(),
                                      p.a.d, a.const_data_ptr(), p.b.d, &beta, out.mutable_data_ptr(), p.d.d,
                                      out.mutable_data_ptr(), p.d.d, &p.found[index].algo,
                                      workspace.mutable_data_ptr(), lt::kWorkspaceBytes,
                                      at::cuda::getCurrentCUDAStream()));
}

std::vector<LtAlgo> heuristic_algos(const StepGemm& g, const at::Tensor& a, const at::Tensor& b, const at::Tensor& out,
                                    int max_algos) {
  TORCH_CHECK(a.is_cuda() && b.is_cuda() && out.is_cuda(), "heuristic_algos: CUDA tensors expected, got ",
              a.device(), ", ", b.device(), ", ", out.device());
  std::vector<LtAlgo> algos;
  const std::vector<std::string> configs = lt_algorithms(g, a, b, out);
  for (int i = 0; i < static_cast<int>(configs.size()) && i < max_algos; ++i)
    algos.push_back({configs[i], [=] { lt_gemm(g, a, b, out, {}, i); }});
  return algos;
}

}  // namespace gpt2::kernels

#else  // no cuBLASLt library found at configure time

namespace gpt2::kernels {

bool gemm_survey_built() { return false; }

std::vector<std::string> lt_algorithms(const StepGemm&, const at::Tensor&, const at::Tensor&, const at::Tensor&,
                                       const LtEpilogue&) {
  TORCH_CHECK(false, "lt_algorithms: this build found no cuBLASLt library (CMake: CUBLASLT_LIBRARY)");
}

void lt_gemm(const StepGemm&, const at::Tensor&, const at::Tensor&, const at::Tensor&, const LtEpilogue&, int) {
  TORCH_CHECK(false, "lt_gemm: this build found no cuBLASLt library (CMake: CUBLASLT_LIBRARY)");
}

std::vector<LtAlgo> heuristic_algos(const StepGemm&, const at::Tensor&, const at::Tensor&, const at::Tensor&, int) {
  TORCH_CHECK(false, "heuristic_algos: this build found no cuBLASLt library (CMake: CUBLASLT_LIBRARY)");
}

}  // namespace gpt2::kernels
#endif
