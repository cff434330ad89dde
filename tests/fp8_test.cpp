// kernels/fp8_linear.h (issue 50): per-tensor FP8 quantization and the FP8 linear layer, against fp32 and against
// its reference. Bounds from FP8's rounding: e4m3 keeps 3 mantissa bits (half an ulp: 2^-4 of a value), e5m2 2
// (2^-3). Measured on the CPU: the forward 3.7% from fp32, the gradients 5.4% from the reference's.
#include <gtest/gtest.h>

#include <ATen/ATen.h>
#include <torch/autograd.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "kernels/fp8_linear.h"
#include "kernels/fp8_tiles.h"
#include "kernels/gemm_survey.h"

namespace gpt2 {
namespace {

double rel(const at::Tensor& a, const at::Tensor& b) {
  return ((a.to(at::kFloat) - b.to(at::kFloat)).norm() / b.to(at::kFloat).norm()).item<double>();
}

TEST(Fp8, AQuantizedTensorComesBackWithinHalfAnUlpOfItsFormat) {
  at::manual_seed(1);
  const at::Tensor t = at::randn({4096}) * 3;
  const double amax = t.abs().max().item<double>();
  for (const auto& [format, half_ulp, top, tiny] : {std::tuple{at::kFloat8_e4m3fn, 1.0 / 16, 448.0, 1.0 / 1024},
                                                    std::tuple{at::kFloat8_e5m2, 1.0 / 8, 57344.0, 1.0 / 131072}}) {
    const kernels::Fp8 q = kernels::quantize_fp8(t, format);
    EXPECT_EQ(q.data.scalar_type(), format);
    EXPECT_NEAR(q.inverse_scale.item<double>(), amax / top, 1e-6 * amax / top);
    const at::Tensor err = (kernels::dequantize_fp8(q) - t).abs();
    // half an ulp of each value; below the smallest normal, half the subnormal step (scaled back)
    EXPECT_TRUE((err <= t.abs() * half_ulp + tiny * amax / top + 1e-7).all().item<bool>()) << format;
    EXPECT_NEAR(kernels::dequantize_fp8(q).abs().max().item<double>(), amax, 1e-5 * amax);  // amax is exact
  }
  // bf16 and fp16 at a gradient's size (448/amax is past fp16's 65504; amax/448 below its smallest subnormal):
  // scaled in fp32, so within half an e4m3 ulp alone
  for (const auto dtype : {at::kBFloat16, at::kHalf}) {
    const at::Tensor small = (t * 1e-7).to(dtype), exact = small.to(at::kFloat);
    const double a = exact.abs().max().item<double>();
    const at::Tensor err = (kernels::dequantize_fp8(kernels::quantize_fp8(small, at::kFloat8_e4m3fn)) - exact).abs();
    EXPECT_TRUE((err <= exact.abs() * (1.0 / 16) * (1 + 1e-6) + a / 448 / 1024).all().item<bool>()) << dtype;
  }
  const kernels::Fp8 zero = kernels::quantize_fp8(at::zeros({16}), at::kFloat8_e4m3fn);
  EXPECT_TRUE(kernels::dequantize_fp8(zero).eq(0).all().item<bool>());
  EXPECT_THROW(kernels::quantize_fp8(t, at::kBFloat16), c10::Error);
}

// kernels/fp8_tiles.h, the one-pass kernel's body, run on the host for every tile and thread (the barrier between
// the phases as the block's): ATen's bits in both layouts, for tiles cut short on both sides (N, K not multiples of
// 64) and for each input type and format.
template <typename T, typename F>
void both_layouts_tile_by_tile(at::ScalarType dtype, at::ScalarType format, int64_t N, int64_t K) {
  const at::Tensor t = (at::randn({N, K}) * 3).to(dtype);
  const kernels::Fp8 want = kernels::quantize_fp8_reference(t, format, true);
  ASSERT_TRUE(kernels::fp8_both_packable(t));
  std::vector<F> out(N * K), out_t(K * N);
  const float inverse_scale = want.inverse_scale.item<float>();
  const int64_t tiles_n = (N + kernels::fp8::kTile - 1) / kernels::fp8::kTile;
  const int64_t tiles_k = (K + kernels::fp8::kTile - 1) / kernels::fp8::kTile;
  for (int64_t tr = 0; tr < tiles_n; ++tr) {
    for (int64_t tc = 0; tc < tiles_k; ++tc) {
      kernels::fp8::Staged staged{};
      for (int tid = 0; tid < kernels::fp8::kThreads; ++tid)
        kernels::fp8::quantize_rows<T, F>(t.data_ptr<T>(), N, K, inverse_scale, out.data(), staged, tr, tc, tid);
      for (int tid = 0; tid < kernels::fp8::kThreads; ++tid)
        kernels::fp8::write_transposed<F>(staged, N, K, out_t.data(), tr, tc, tid);
    }
  }
  auto bytes = [](const at::Tensor& q) { return q.contiguous().view(at::kByte); };
  const at::Tensor got = at::from_blob(out.data(), {N, K}, at::kByte).clone();
  const at::Tensor got_t = at::from_blob(out_t.data(), {K, N}, at::kByte).clone();
  EXPECT_TRUE(at::equal(got, bytes(want.data))) << dtype << " into " << format << ", " << N << " x " << K;
  EXPECT_TRUE(at::equal(got_t, bytes(want.transposed))) << dtype << " into " << format << ", " << N << " x " << K;
  EXPECT_TRUE(at::equal(bytes(want.transposed), bytes(want.data.t())));
}

TEST(Fp8, BothLayoutsTileByTileAreAtensBits) {
  at::manual_seed(5);
  both_layouts_tile_by_tile<c10::BFloat16, c10::Float8_e4m3fn>(at::kBFloat16, at::kFloat8_e4m3fn, 80, 136);
  both_layouts_tile_by_tile<c10::BFloat16, c10::Float8_e5m2>(at::kBFloat16, at::kFloat8_e5m2, 128, 64);
  both_layouts_tile_by_tile<c10::Half, c10::Float8_e5m2>(at::kHalf, at::kFloat8_e5m2, 16, 8);
  both_layouts_tile_by_tile<float, c10::Float8_e4m3fn>(at::kFloat, at::kFloat8_e4m3fn, 144, 68);
  // the inverse scale each thread makes from the amax: the reference's clamp and divide
  for (const at::Tensor& t : {at::randn({64}) * 5, at::zeros({16}), at::full({16}, 1e-13)}) {
    for (const auto& [format, top] : {std::pair{at::kFloat8_e4m3fn, 448.0f}, std::pair{at::kFloat8_e5m2, 57344.0f}}) {
      const float amax = t.abs().max().item<float>();
      EXPECT_EQ(kernels::fp8::inverse_scale_of(amax, top), kernels::quantize_fp8_reference(t, format).inverse_scale.item<float>());
    }
  }
  EXPECT_TRUE(std::isnan(kernels::fp8::inverse_scale_of(NAN, 448.0f)));
  // what the kernel does not take goes by ATen's ops (quantize_fp8's choice), the transpose still made
  EXPECT_FALSE(kernels::fp8_both_packable(at::zeros({24, 64})));   // N not a multiple of 16
  EXPECT_FALSE(kernels::fp8_both_packable(at::zeros({16, 66})));   // K not of 16 bytes' elements
  EXPECT_FALSE(kernels::fp8_both_packable(at::zeros({64, 16}).t()));
  EXPECT_FALSE(kernels::fp8_both_packable(at::zeros({16, 64}, at::kDouble)));
  const at::Tensor odd = at::randn({24, 40});
  const kernels::Fp8 q = kernels::quantize_fp8(odd, at::kFloat8_e4m3fn, true);
  EXPECT_TRUE(at::equal(q.transposed.view(at::kByte), q.data.t().contiguous().view(at::kByte)));
  EXPECT_FALSE(kernels::quantize_fp8(odd, at::kFloat8_e4m3fn).transposed.defined());
  EXPECT_THROW(kernels::quantize_fp8(at::zeros({2, 8, 16}), at::kFloat8_e4m3fn, true), c10::Error);
}

TEST(Fp8, TheLinearIsItsReferenceAndWithinFp8OfFp32) {
  at::manual_seed(2);
  const at::Tensor x = at::randn({64, 128}), w = at::randn({96, 128}) * 0.02, b = at::randn({96});
  const at::Tensor y = kernels::fp8_linear(x, w, b);
  EXPECT_LT(rel(y, kernels::fp8_linear_reference(x, w, b)), 1e-5);  // the same products, summed in fp32
  // e4m3's rounding of x and w, each element's within 2^-4 (RMS 2^-4/√3), their product's about √2 times that: 5%
  EXPECT_LT(rel(kernels::fp8_linear(x, w, std::nullopt), at::mm(x, w.t())), 0.08);
  EXPECT_LT(rel(y, at::addmm(b, x, w.t())), 0.08);
  // In bf16 the bias goes into _scaled_mm's epilogue: the reference's output within bf16's rounding.
  const at::Tensor xb = x.to(at::kBFloat16), wb = w.to(at::kBFloat16), bb = b.to(at::kBFloat16);
  const at::Tensor yb = kernels::fp8_linear(xb, wb, bb);
  EXPECT_EQ(yb.scalar_type(), at::kBFloat16);
  EXPECT_LT(rel(yb, kernels::fp8_linear_reference(xb, wb, bb)), 0.01);
  EXPECT_THROW(kernels::fp8_linear(x, w.t(), b), c10::Error);
}

// The backward's two matmuls take the forward's e4m3 x and w and the gradient in e5m2: autograd's through the
// reference (the unquantized gradient) within e5m2's rounding; the bias's gradient exact (in bf16: one rounding).
TEST(Fp8, GradientsAreAutogradsThroughTheReferenceWithinE5m2) {
  at::manual_seed(3);
  auto leaf = [](at::Tensor t) { return t.requires_grad_(); };
  const at::Tensor x = leaf(at::randn({64, 128})), w = leaf(at::randn({96, 128}) * 0.02), b = leaf(at::randn({96}));
  const at::Tensor g = at::randn({64, 96});
  const auto ours = torch::autograd::grad({kernels::fp8_linear(x, w, b)}, {x, w, b}, {g});
  const auto ref = torch::autograd::grad({kernels::fp8_linear_reference(x, w, b)}, {x, w, b}, {g});
  EXPECT_LT(rel(ours[0], ref[0]), 0.1);
  EXPECT_LT(rel(ours[1], ref[1]), 0.1);
  EXPECT_LT(rel(ours[2], ref[2]), 1e-6);
  // bf16: the bias's gradient summed in fp32 and rounded once, each element within half a bf16 ulp
  const at::Tensor xb = leaf(x.detach().to(at::kBFloat16)), wb = leaf(w.detach().to(at::kBFloat16));
  const at::Tensor bb = leaf(b.detach().to(at::kBFloat16)), gb = g.to(at::kBFloat16);
  const at::Tensor db = torch::autograd::grad({kernels::fp8_linear(xb, wb, bb)}, {bb}, {gb})[0];
  const at::Tensor exact = gb.to(at::kFloat).sum(0);
  EXPECT_EQ(db.scalar_type(), at::kBFloat16);
  EXPECT_TRUE(((db.to(at::kFloat) - exact).abs() <= exact.abs() / 256 + 1e-6).all().item<bool>());
  const at::Tensor xs = leaf(at::randn({32, 64})), ws = leaf(at::randn({48, 64}));
  const auto no_bias = torch::autograd::grad({kernels::fp8_linear(xs, ws, std::nullopt)}, {xs, ws}, {at::ones({32, 48})});
  EXPECT_EQ(no_bias[0].sizes(), xs.sizes());
}

// `gpt2bench kernels` times each of the layer's three products with its operands quantized beforehand
// (quantize_fp8_operands, fp8_product): the very bits the layer computes, forward and backward.
TEST(Fp8, TheProductsTheSurveyTimesAreTheLayersOwn) {
  at::manual_seed(4);
  auto leaf = [](at::Tensor t) { return t.requires_grad_(); };
  const at::Tensor x = leaf(at::randn({32, 48})), w = leaf(at::randn({40, 48}) * 0.02), g = at::randn({32, 40});
  const at::Tensor y = kernels::fp8_linear(x, w, std::nullopt);
  const auto grads = torch::autograd::grad({y}, {x, w}, {g});
  using kernels::fp8_product, kernels::quantize_fp8_operands;
  const at::Tensor xd = x.detach(), wd = w.detach();
  EXPECT_TRUE(at::equal(fp8_product(quantize_fp8_operands(xd, wd.t(), kernels::kFp8Forward), at::kFloat, true), y));
  EXPECT_TRUE(at::equal(fp8_product(quantize_fp8_operands(g, wd, kernels::kFp8InputGrad), at::kFloat, false),
                        grads[0]));
  EXPECT_TRUE(at::equal(fp8_product(quantize_fp8_operands(g.t(), xd, kernels::kFp8WeightGrad), at::kFloat, false),
                        grads[1]));
  // every transposition of the step's matmuls, as the survey makes its operands: their product within FP8's error
  for (const auto& s : kernels::step_gemms(32, 16, 48, 1, 0)) {
    const at::Tensor a = s.a_transposed ? at::randn({s.K, s.M}).t() : at::randn({s.M, s.K});
    const at::Tensor b = s.b_transposed ? at::randn({s.N, s.K}).t() : at::randn({s.K, s.N});
    EXPECT_LT(rel(fp8_product(quantize_fp8_operands(a, b, kernels::kFp8InputGrad), at::kFloat, false), a.mm(b)), 0.12)
        << s.name;
  }
  EXPECT_THROW(quantize_fp8_operands(xd, wd, kernels::kFp8Forward), c10::Error);  // (32, 48) · (40, 48)
}

}  // namespace
}  // namespace gpt2
