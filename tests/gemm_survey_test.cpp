// The step's matmuls as `gpt2bench kernels` surveys them (kernels/gemm_survey.h): their shapes add up to the FLOPs
// MFU counts, and their column-major description (kernels/gemm_layout.h: what cuBLASLt is given, here and in
// gelu_epilogues) computes the row-major product, run here through a column-major GEMM of the CPU's (a
// transposition or leading dimension wrong shows here, not only on a GPU). The cuBLASLt calls: KernelsCuda.
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include "kernels/gemm_survey.h"
#include "model/config.h"
#include "tests/helpers.h"

namespace gpt2 {
namespace {

TEST(GemmSurvey, TheStepsMatmulsAreTheFlopsMfuCounts) {
  ModelOptions m;  // GPT-2 124M's widths, the padded vocabulary
  m.vocab_size = 50304;
  const int64_t tokens = 8 * 1024;
  for (int64_t chunk : {int64_t{0}, int64_t{1024}}) {
    const auto gemms = kernels::step_gemms(tokens, m.n_embd, m.padded_vocab(), m.n_layer, chunk);
    ASSERT_EQ(gemms.size(), 15u);  // forward, dX and dW of QKV, projection, fc1, fc2 and the head
    double flops = 0;
    for (const auto& g : gemms) flops += g.flops() * static_cast<double>(g.calls);
    // forward + backward: 6 FLOPs a weight a token (the attention's own matmuls are SDPA's, not these)
    EXPECT_DOUBLE_EQ(flops, 6.0 * static_cast<double>(tokens) * flop_model(m).matmul_weights) << chunk;
    EXPECT_EQ(gemms.back().name, "head dW");
    EXPECT_EQ(gemms.back().calls, chunk ? tokens / chunk : 1);
    EXPECT_EQ(gemms.back().K, chunk ? chunk : tokens);  // summed over the chunk's tokens
    for (size_t i = 0; i < gemms.size(); ++i) {  // each linear's forward, dX, dW; the blocks' FP8 under fp8_linears
      EXPECT_EQ(gemms[i].product, static_cast<kernels::StepGemm::Product>(i % 3)) << gemms[i].name;
      EXPECT_EQ(gemms[i].in_blocks, i < 12) << gemms[i].name;
    }
  }
}

// out (M × N) from the column-major description: D = op(A')·op(B') over the row-major operands' raw storage, as
// column-major matrices with their leading dimensions, written into out's storage the same way.
at::Tensor column_major_product(const kernels::LtLayout& l, const at::Tensor& a, const at::Tensor& b, int64_t M,
                                int64_t N) {
  at::Tensor A = b.view(-1).as_strided({l.a_rows, l.a_cols}, {1, l.lda});  // A' is the row-major B
  at::Tensor B = a.view(-1).as_strided({l.b_rows, l.b_cols}, {1, l.ldb});
  if (l.a_transposed) A = A.t();
  if (l.b_transposed) B = B.t();
  at::Tensor out = at::empty({M, N});
  out.view(-1).as_strided({l.m, l.n}, {1, l.ldd}).copy_(A.mm(B));
  return out;
}

TEST(GemmSurvey, TheColumnMajorDescriptionIsTheRowMajorProduct) {
  at::manual_seed(3);
  for (const auto& g : kernels::step_gemms(12, 8, 20, 1, 5)) {  // every transposition the step has, a chunked head
    const at::Tensor a = g.a_transposed ? at::randn({g.K, g.M}) : at::randn({g.M, g.K});
    const at::Tensor b = g.b_transposed ? at::randn({g.N, g.K}) : at::randn({g.K, g.N});
    const at::Tensor want = (g.a_transposed ? a.t() : a).mm(g.b_transposed ? b.t() : b);
    const kernels::LtLayout l = kernels::column_major(g);
    EXPECT_EQ(l.m * l.n, g.M * g.N);
    EXPECT_TRUE(at::allclose(column_major_product(l, a, b, g.M, g.N), want, 1e-5, 1e-5)) << g.name;
  }
}

// gelu_epilogues' two GEMMs (kernels/cuda/gelu_epilogues.cpp): x·wᵀ and g·w2, and the epilogues' bias and
// pre-activation follow D (F rows, ld F): the bias is added per row of D, i.e. per column of the row-major output.
TEST(GemmSurvey, TheGeluEpiloguesGemmsAreTheRowMajorProducts) {
  at::manual_seed(14);
  for (auto [N, C] : {std::pair<int64_t, int64_t>{37, 32}, {5, 8}}) {
    const int64_t F = 4 * C;
    const at::Tensor x = at::randn({N, C}), w = at::randn({F, C}), g = at::randn({N, C}), w2 = at::randn({C, F});
    const kernels::LtLayout fwd = kernels::column_major(kernels::fc1_forward_gemm(N, C, F));
    const kernels::LtLayout bwd = kernels::column_major(kernels::fc2_dgrad_gemm(N, C, F));
    EXPECT_TRUE(at::allclose(column_major_product(fwd, x, w, N, F), x.mm(w.t()), 1e-5, 1e-5)) << N;
    EXPECT_TRUE(at::allclose(column_major_product(bwd, g, w2, N, F), g.mm(w2), 1e-5, 1e-5)) << N;
    EXPECT_EQ(fwd.m, F);  // D's rows: the bias's length, the bias gradient's, the pre-activation's leading dimension
    EXPECT_EQ(bwd.m, F);
    EXPECT_EQ(fwd.ldd, F);
    EXPECT_EQ(bwd.ldd, F);
  }
}

TEST(GemmSurvey, CpuTensorsAreRefusedWithTheReason) {  // the CPU build: no CUDA; the CUDA build: not CUDA tensors
  const kernels::StepGemm g{"fc1 forward", 4, 4, 4, false, true, 1};
  try {
    kernels::heuristic_algos(g, at::randn({4, 4}), at::randn({4, 4}), at::empty({4, 4}), 8);
    FAIL() << "CPU tensors were taken";
  } catch (const c10::Error& e) {
    EXPECT_NE(std::string(e.what_without_backtrace()).find("heuristic_algos: "), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace gpt2
