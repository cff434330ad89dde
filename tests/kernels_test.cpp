// Our kernels (kernels/): the ATen reference against what it replaces, the chunked classifier against the
// unfused head + cross-entropy (values, gradients, memory), the training step with it against the baseline;
// and the CUDA kernel against the reference (skipped without a GPU).
#include <gtest/gtest.h>

#include <ATen/ATen.h>
#include <ATen/autocast_mode.h>
#include <torch/autograd.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "bench/measure/profiler.h"
#include "bench/runtime/device.h"
#include "bench/runtime/memory.h"
#include "bench/step/train_step.h"
#include "cuda_test.h"
#include "helpers.h"
#include "kernels/bias_gelu.h"
#include "kernels/classifier.h"
#include "kernels/fp8_linear.h"
#include "kernels/gelu_epilogues.h"
#include "kernels/gemm_survey.h"
#include "kernels/lt_linear.h"
#include "kernels/packs.h"
#include "kernels/philox.h"
#include "kernels/residual_norm.h"
#include "kernels/residual_norm_lanes.h"
#include "kernels/softmax_xent_lanes.h"
#include "kernels/bias_gelu_columns.h"
#include "kernels/column_sums.h"
#include "kernels/column_sums_cuda.h"
#include "model/data.h"

namespace gpt2 {
namespace {

using kernels::linear_cross_entropy;
using kernels::softmax_xent_backward_;
using kernels::softmax_xent_backward_reference_;

at::Tensor targets_for(int64_t n, int64_t V, const at::TensorOptions& o = {}) {
  return at::randint(V, {n}, o.dtype(at::kLong));
}

// The unfused classifier's loss and gradients, by autograd: what the fused one must reproduce.
struct Unfused {
  at::Tensor loss, dh, dw;
};
Unfused unfused(const at::Tensor& h0, const at::Tensor& w0, const at::Tensor& t) {
  at::Tensor h = h0.detach().requires_grad_(), w = w0.detach().requires_grad_();
  at::Tensor loss = at::cross_entropy_loss(at::linear(h, w), t);
  loss.backward();
  return {loss.detach(), h.grad(), w.grad()};
}

TEST(Kernels, ReferenceIsCrossEntropyAndItsGradient) {
  at::manual_seed(0);
  const at::Tensor logits = at::randn({13, 101}) * 4;
  const at::Tensor t = targets_for(13, 101);
  at::Tensor z = logits.clone().requires_grad_();
  at::Tensor want_losses = at::cross_entropy_loss(z, t, {}, at::Reduction::None);
  (want_losses.sum() * 0.25).backward();
  at::Tensor got = logits.clone();
  const at::Tensor losses = softmax_xent_backward_reference_(got, t, 0.25);
  EXPECT_TRUE(at::allclose(losses, want_losses.detach(), 1e-5, 1e-6));
  EXPECT_TRUE(at::allclose(got, z.grad(), 1e-5, 1e-7)) << (got - z.grad()).abs().max().item<float>();
  // off the GPU the dispatching entry point is the reference
  at::Tensor again = logits.clone();
  EXPECT_TRUE(at::equal(softmax_xent_backward_(again, t, 0.25), losses));
  EXPECT_TRUE(at::equal(again, got));
}

TEST(Kernels, BadInputIsRefusedWithTheReason) {
  at::Tensor z = at::randn({4, 10});
  at::Tensor strided = at::randn({10, 4}).t();
  EXPECT_THROW(
      {
        try {
          softmax_xent_backward_(strided, targets_for(4, 10), 1.0);
        } catch (const c10::Error& e) {
          EXPECT_NE(std::string(e.what()).find("logits must be a contiguous floating (n, V) tensor"), std::string::npos);
          throw;
        }
      },
      c10::Error);
  EXPECT_THROW(softmax_xent_backward_(z, at::zeros({4}, at::kInt), 1.0), c10::Error);   // int32 targets
  EXPECT_THROW(softmax_xent_backward_(z, at::zeros({3}, at::kLong), 1.0), c10::Error);  // one per row
  EXPECT_THROW(softmax_xent_backward_(z, at::full({4}, 10, at::kLong), 1.0), c10::Error);  // out of range
  EXPECT_THROW(linear_cross_entropy(at::randn({4, 8}), at::randn({10, 8}), targets_for(4, 10), 0), c10::Error);
  EXPECT_THROW(linear_cross_entropy(at::randn({4, 8}), at::randn({10, 7}), targets_for(4, 10), 2), c10::Error);
  EXPECT_THROW(kernels::softmax_xent_backward_cuda_(z, targets_for(4, 10), 1.0), c10::Error);  // a CPU tensor
}

// The classifier kernel's threads (kernels/softmax_xent_lanes.h), run here one after another and their maxima and
// sums combined where the kernel combines them with shuffles: which thread reads which packs (two at a time, one
// left over or none), the per-pack rescaling and the target's pack, against the ATen reference.
template <typename T, int kVec, int kThreads, bool kExp2, bool kStaged = false>
void expect_classifier_threads_match_the_reference(at::ScalarType dtype, int64_t n, int64_t V) {
  namespace X = kernels::xent;
  ASSERT_EQ(V % kVec, 0);
  const at::Tensor logits = (at::randn({n, V}) * 3).to(dtype), t = targets_for(n, V);
  at::Tensor want = logits.clone(), got = logits.clone();
  const at::Tensor want_losses = softmax_xent_backward_reference_(want, t, 1.0 / 7);
  std::vector<T> staged(V);
  for (int64_t i = 0; i < n; ++i) {
    T* x = got.data_ptr<T>() + i * V;
    X::MaxSum row = X::nothing();
    for (int tid = 0; tid < kThreads; ++tid)
      row = X::combine<kExp2>(row, X::thread_max_sum<kExp2, kStaged, T, kVec, kThreads>(x, V / kVec, tid, staged.data()));
    const int64_t ti = t[i].item<int64_t>();
    const float loss = X::loss<kExp2>(row, static_cast<float>(x[ti]));
    EXPECT_NEAR(loss, want_losses[i].item<float>(), 1e-4 * std::abs(loss) + 1e-5) << "row " << i;
    if (kStaged) std::fill(x, x + V, T(0.0f));  // the gradient pass must read the staged copy
    for (int tid = 0; tid < kThreads; ++tid)
      X::thread_gradient<kExp2, T, kVec, kThreads>(kStaged ? staged.data() : x, x, V / kVec, tid, ti, row, 1.0f / 7);
  }
  const double atol = dtype == at::kFloat ? 1e-7 : 1e-4;  // one bf16 rounding of a value under 1/7
  EXPECT_TRUE(at::allclose(got.to(at::kFloat), want.to(at::kFloat), 1e-2, atol))
      << V << " " << kThreads << (kExp2 ? " exp2" : "") << ": "
      << (got.to(at::kFloat) - want.to(at::kFloat)).abs().max().item<float>();
}

TEST(Kernels, ClassifierKernelsThreadsMatchTheReference) {
  at::manual_seed(3);
  // GPT-2's padded vocabulary in bf16: 6288 packs, 13 for threads 0-143 of 512 (one left over), 12 for the rest
  expect_classifier_threads_match_the_reference<c10::BFloat16, 8, 512, false>(at::kBFloat16, 3, 50304);
  expect_classifier_threads_match_the_reference<c10::BFloat16, 8, 512, true>(at::kBFloat16, 3, 50304);
  expect_classifier_threads_match_the_reference<c10::BFloat16, 8, 1024, true, true>(at::kBFloat16, 2, 50304);
  expect_classifier_threads_match_the_reference<float, 4, 256, false>(at::kFloat, 3, 1000);
  // one element a thread: an odd vocabulary, and a row shorter than the block (threads with nothing to read)
  expect_classifier_threads_match_the_reference<float, 1, 256, true>(at::kFloat, 3, 50257);
  expect_classifier_threads_match_the_reference<c10::Half, 1, 512, false>(at::kHalf, 5, 97);
}

TEST(Kernels, ChunkedClassifierMatchesLinearThenCrossEntropy) {
  at::manual_seed(1);
  const at::Tensor h = at::randn({37, 16}), w = at::randn({50, 16}) * 0.3, t = targets_for(37, 50);
  const Unfused want = unfused(h, w, t);
  for (int64_t chunk : {1, 7, 36, 37, 1000}) {  // uneven last chunks, one chunk, a chunk past the end
    at::Tensor hh = h.clone().requires_grad_(), ww = w.clone().requires_grad_();
    at::Tensor loss = linear_cross_entropy(hh, ww, t, chunk);
    EXPECT_NEAR(loss.item<double>(), want.loss.item<double>(), 1e-5) << "chunk " << chunk;
    (loss * 3.0).backward();  // the incoming gradient scales what the forward kept
    EXPECT_TRUE(at::allclose(hh.grad(), want.dh * 3.0, 1e-4, 1e-6)) << "chunk " << chunk;
    EXPECT_TRUE(at::allclose(ww.grad(), want.dw * 3.0, 1e-4, 1e-6)) << "chunk " << chunk;
  }
  at::NoGradGuard no_grad;  // evaluation: the loss alone
  EXPECT_NEAR(linear_cross_entropy(h, w, t, 5).item<double>(), want.loss.item<double>(), 1e-5);
}

// A side stream that runs its work late, at the next join (as a GPU may): a schedule that used a chunk's softmax
// before joining would read logits where it wants their gradient.
class LateSideStream : public SideStream {
 public:
  void run(const std::function<void()>& f) override { queued.push_back(f), log += "r"; }
  void join() override {
    for (auto& f : queued) f();
    queued.clear(), log += "j";
  }
  std::vector<std::function<void()>> queued;
  std::string log;
};

// Beside a side stream, the classifier computes the same values, bit for bit (the same ops in the same order on
// each stream): each chunk's softmax is queued after a join, and its GEMMs wait for the next join.
TEST(Kernels, ChunkedClassifierBesideASideStreamIsTheSame) {
  at::manual_seed(4);
  const at::Tensor h = at::randn({37, 16}), w = at::randn({50, 16}) * 0.3, t = targets_for(37, 50);
  for (int64_t chunk : {7, 36, 37}) {  // six chunks with a short last one, two, one (nothing to run beside)
    auto run = [&](SideStream* beside) {
      at::Tensor hh = h.clone().requires_grad_(), ww = w.clone().requires_grad_();
      at::Tensor loss = linear_cross_entropy(hh, ww, t, chunk, {}, beside);
      (loss * 3.0).backward();
      return std::vector<at::Tensor>{loss.detach(), hh.grad(), ww.grad()};
    };
    LateSideStream late;
    const auto in_order = run(nullptr), beside = run(&late);
    for (size_t i = 0; i < 3; ++i) EXPECT_TRUE(at::equal(in_order[i], beside[i])) << "chunk " << chunk << " output " << i;
    const int64_t chunks = (37 + chunk - 1) / chunk;
    std::string want;
    for (int64_t c = 0; c < chunks && chunks > 1; ++c) want += "jr";
    EXPECT_EQ(late.log, chunks > 1 ? want + "j" : "") << "chunk " << chunk;
  }
}

TEST(Kernels, ChunkedClassifierInBf16IsWithinBf16OfFp32) {
  at::manual_seed(2);
  const at::Tensor h = at::randn({24, 32}), w = at::randn({64, 32}) * 0.2, t = targets_for(24, 64);
  const Unfused want = unfused(h, w, t);
  for (int64_t chunk : {10, 24}) {  // dw summed in fp32 over three chunks; in one chunk, one bf16 GEMM
    at::Tensor hb = h.to(at::kBFloat16).requires_grad_(), wb = w.to(at::kBFloat16).requires_grad_();
    at::Tensor loss = linear_cross_entropy(hb, wb, t, chunk);
    EXPECT_EQ(loss.scalar_type(), at::kFloat);
    loss.backward();
    EXPECT_EQ(hb.grad().scalar_type(), at::kBFloat16);
    EXPECT_EQ(wb.grad().scalar_type(), at::kBFloat16);
    EXPECT_NEAR(loss.item<double>(), want.loss.item<double>(), 2e-2) << "chunk " << chunk;
    EXPECT_TRUE(at::allclose(hb.grad().to(at::kFloat), want.dh, 3e-2, 2e-3)) << "chunk " << chunk;
    EXPECT_TRUE(at::allclose(wb.grad().to(at::kFloat), want.dw, 3e-2, 2e-3)) << "chunk " << chunk;
  }
}

// The gradients kept from the forward are scaled by the incoming gradient in fp32, then rounded once to their
// dtype: an incoming 1/3 (gradient accumulation over three micro-batches) is not first rounded to bf16, and dw
// summed in fp32 over several chunks is rounded once, as it is scaled, not before.
TEST(Kernels, ChunkedClassifierScalesItsBf16GradientsInFp32) {
  at::manual_seed(3);
  const at::Tensor h = at::randn({24, 32}).to(at::kBFloat16), w = (at::randn({64, 32}) * 0.2).to(at::kBFloat16);
  const at::Tensor t = targets_for(24, 64);
  const at::Tensor third = at::full({}, 1.0f / 3.0f);
  for (int64_t chunk : {24, 10}) {  // one chunk: dw by one bf16 GEMM; three: dw summed in fp32
    auto grads = [&](double g) {
      at::Tensor hh = h.clone().requires_grad_(), ww = w.clone().requires_grad_();
      (linear_cross_entropy(hh, ww, t, chunk) * g).backward();
      return std::make_pair(hh.grad(), ww.grad());
    };
    const auto [dh1, dw1] = grads(1.0);
    const auto [dh3, dw3] = grads(1.0 / 3.0);
    EXPECT_TRUE(at::equal(dh3, (dh1.to(at::kFloat) * third).to(at::kBFloat16))) << chunk;
    if (chunk == 24) {
      EXPECT_TRUE(at::equal(dw3, (dw1.to(at::kFloat) * third).to(at::kBFloat16)));
      EXPECT_FALSE(at::equal(dw3, dw1 * third.to(at::kBFloat16)));  // what rounding 1/3 to bf16 first would give
      continue;
    }
    at::Tensor sum = at::zeros({64, 32});  // the chunks' dw as the forward sums them, in fp32
    for (int64_t i = 0; i < 24; i += chunk) {
      const int64_t n = std::min<int64_t>(chunk, 24 - i);
      at::Tensor z = h.narrow(0, i, n).mm(w.t());
      (void)softmax_xent_backward_reference_(z, t.narrow(0, i, n), 1.0 / 24);
      sum.add_(z.t().mm(h.narrow(0, i, n)));
    }
    EXPECT_TRUE(at::equal(dw1, sum.to(at::kBFloat16)));
    EXPECT_TRUE(at::equal(dw3, (sum * third).to(at::kBFloat16)));
    EXPECT_FALSE(at::equal(dw3, (dw1.to(at::kFloat) * third).to(at::kBFloat16)));  // rounded twice
  }
}

// The CUDA kernel's pack body (kernels/packs.h, scaled), run here: the product in fp32 rounded once, as ATen's
// multiply by a one-element fp32 tensor rounds it, from a gradient of the dtype or from fp32.
template <typename T, int kVec, typename In>
void expect_scaled_packs_are_the_reference(at::ScalarType dtype, at::ScalarType in_dtype) {
  const at::Tensor kept = (at::randn({40 * kVec}) * 100).to(in_dtype), g = at::full({1}, 1.0f / 3.0f);
  at::Tensor got = at::empty({40 * kVec}, at::TensorOptions().dtype(dtype));
  for (int64_t p = 0; p < 40; ++p)
    kernels::store<T, kVec>(got.data_ptr<T>(), p,
                            kernels::scaled<T, kVec, In>(kernels::load<In, kVec>(kept.data_ptr<In>(), p), 1.0f / 3.0f));
  EXPECT_TRUE(at::equal(got, kernels::scaled_gradient_reference(kept, g, dtype))) << dtype << " from " << in_dtype;
}

TEST(Kernels, ScaledGradientPacksRoundOnceAsTheReference) {
  at::manual_seed(17);
  expect_scaled_packs_are_the_reference<c10::BFloat16, 8, c10::BFloat16>(at::kBFloat16, at::kBFloat16);
  expect_scaled_packs_are_the_reference<c10::BFloat16, 8, float>(at::kBFloat16, at::kFloat);
  expect_scaled_packs_are_the_reference<c10::Half, 8, float>(at::kHalf, at::kFloat);
  expect_scaled_packs_are_the_reference<float, 4, float>(at::kFloat, at::kFloat);
  expect_scaled_packs_are_the_reference<c10::BFloat16, 1, float>(at::kBFloat16, at::kFloat);
}

TEST(Kernels, ScaledGradientRefusesWhatItCannotScale) {
  const at::Tensor g = at::ones({1});
  for (auto [kept, gg, says] : {
           std::tuple<at::Tensor, at::Tensor, const char*>{at::ones({4}, at::kHalf), g, "a BFloat16 gradient from Half"},
           {at::ones({4}), at::ones({2}), "g must be one fp32 element (shape [1])"},
           {at::ones({4}), at::ones({}), "g must be one fp32 element (shape [1])"},
           {at::ones({4}), at::ones({1}, at::kDouble), "g must be one fp32 element (shape [1])"}}) {
    try {
      (void)kernels::scaled_gradient(kept, gg, at::kBFloat16);
      ADD_FAILURE() << says << ": accepted";
    } catch (const c10::Error& e) {
      EXPECT_NE(std::string(e.what()).find(says), std::string::npos) << e.what();
    }
  }
}

TEST(Kernels, ChunkedClassifierNeverHoldsTheWholeLogits) {
  auto meter = make_cpu_memory_meter();
  at::manual_seed(3);
  const int64_t N = 2048, V = 3000, C = 32;  // the whole logits: 2048 x 3000 x 4 B = 24.6 MB
  const at::Tensor h = at::randn({N, C}), w = at::randn({V, C}) * 0.1, t = targets_for(N, V);
  auto peak_of = [&](auto&& body) {
    meter->reset_peak();
    const int64_t before = meter->read().allocated;
    body();
    return meter->read().peak_allocated - before;
  };
  const int64_t whole = peak_of([&] { unfused(h, w, t); });
  const int64_t fused = peak_of([&] {
    at::Tensor hh = h.clone().requires_grad_(), ww = w.clone().requires_grad_();
    linear_cross_entropy(hh, ww, t, 128).backward();
  });
  const int64_t logits_bytes = N * V * 4;
  EXPECT_GT(whole, 2 * logits_bytes);  // the logits and their gradient (softmax's output too)
  EXPECT_LT(fused, logits_bytes / 4) << "fused peak " << fused << " B, unfused " << whole << " B";
}

// Training with each of our kernels' model edits has the baseline's losses: fp32 within 1e-5, bf16 autocast
// within bf16's rounding.
void expect_baseline_losses(const std::function<void(ModelOptions&)>& edit) {
  const DeviceInfo cpu = detect_device("cpu");
  const at::Tensor tokens = to_token_tensor(synthetic_corpus(97, 20000, 7));
  for (Precision p : {Precision::kFp32, Precision::kBf16Autocast}) {
    StepSpec base = baseline_spec(test::tiny_model(), 4, cpu);  // 4 x 16 = 64 tokens a step
    base.precision = p;
    StepSpec fused = base;
    edit(fused.model);
    const Trajectory a = loss_trajectory(base, cpu, tokens, 5, 4), b = loss_trajectory(fused, cpu, tokens, 5, 4);
    const double tol = p == Precision::kFp32 ? 1e-5 : 2e-2;
    ASSERT_EQ(a.losses.size(), b.losses.size());
    for (size_t i = 0; i < a.losses.size(); ++i) EXPECT_NEAR(a.losses[i], b.losses[i], tol) << "step " << i;
    EXPECT_NEAR(a.first_batch_after, b.first_batch_after, tol);
  }
}

TEST(Kernels, TrainingWithTheFusedClassifierHasTheBaselinesLosses) {
  expect_baseline_losses([](ModelOptions& m) { m.classifier_chunk = 24; });  // 24 + 24 + 16 tokens
}

// The unfused MLP head of a block: Linear, then GELU(tanh), by autograd.
struct UnfusedGelu {
  at::Tensor y, dx, dw, db;
};
UnfusedGelu unfused_gelu(const at::Tensor& x0, const at::Tensor& w0, const at::Tensor& b0, const at::Tensor& g) {
  at::Tensor x = x0.detach().requires_grad_(), w = w0.detach().requires_grad_(), b = b0.detach().requires_grad_();
  at::Tensor y = at::gelu(at::linear(x, w, b), "tanh");
  y.backward(g);
  return {y.detach(), x.grad(), w.grad(), b.grad()};
}

TEST(Kernels, BiasGeluBackwardReferenceIsGeluBackwardAndTheBiasSum) {
  at::manual_seed(6);
  const at::Tensor pre = at::randn({70, 300}) * 2, grad = at::randn({70, 300});
  at::Tensor p = pre.clone().requires_grad_();
  at::gelu(p, "tanh").backward(grad);
  auto [d_pre, d_bias] = kernels::bias_gelu_backward(grad, pre);  // off the GPU: the reference
  EXPECT_TRUE(at::allclose(d_pre, p.grad(), 1e-6, 1e-7));
  EXPECT_TRUE(at::allclose(d_bias, p.grad().sum(0), 1e-5, 1e-5));
  EXPECT_THROW(kernels::bias_gelu_backward(grad, pre.t()), c10::Error);                         // not (N, F) alike
  EXPECT_THROW(kernels::bias_gelu_backward(grad.to(at::kBFloat16), pre), c10::Error);           // two dtypes
  EXPECT_THROW(kernels::linear_bias_gelu(pre, at::randn({5, 299}), at::randn({5})), c10::Error);  // C mismatch
}

TEST(Kernels, LinearBiasGeluMatchesLinearThenGelu) {
  at::manual_seed(7);
  const at::Tensor x = at::randn({33, 24}), w = at::randn({96, 24}) * 0.2, b = at::randn({96}) * 0.1;
  const at::Tensor g = at::randn({33, 96});
  const UnfusedGelu want = unfused_gelu(x, w, b, g);
  at::Tensor xx = x.clone().requires_grad_(), ww = w.clone().requires_grad_(), bb = b.clone().requires_grad_();
  at::Tensor y = kernels::linear_bias_gelu(xx, ww, bb);
  y.backward(g);
  EXPECT_TRUE(at::allclose(y, want.y, 1e-5, 1e-6));
  EXPECT_TRUE(at::allclose(xx.grad(), want.dx, 1e-4, 1e-6));
  EXPECT_TRUE(at::allclose(ww.grad(), want.dw, 1e-4, 1e-6));
  EXPECT_TRUE(at::allclose(bb.grad(), want.db, 1e-4, 1e-6));
}

TEST(Kernels, TrainingWithTheFusedGeluBackwardHasTheBaselinesLosses) {
  expect_baseline_losses([](ModelOptions& m) { m.fused_gelu_backward = true; });
}

// The MLP as the model builds it unfused: Linear, GELU(tanh), Linear, by autograd; y and the five gradients.
std::vector<at::Tensor> unfused_mlp(const std::vector<at::Tensor>& in, const at::Tensor& g) {
  std::vector<at::Tensor> leaf;
  for (const auto& t : in) leaf.push_back(t.detach().requires_grad_());
  at::Tensor y = at::linear(at::gelu(at::linear(leaf[0], leaf[1], leaf[2]), "tanh"), leaf[3], leaf[4]);
  y.backward(g);
  std::vector<at::Tensor> out{y.detach()};
  for (const auto& t : leaf) out.push_back(t.grad());
  return out;
}
std::vector<at::Tensor> epilogue_mlp(const std::vector<at::Tensor>& in, const at::Tensor& g) {
  std::vector<at::Tensor> leaf;
  for (const auto& t : in) leaf.push_back(t.detach().requires_grad_());
  at::Tensor y = kernels::mlp_gelu_epilogues(leaf[0], leaf[1], leaf[2], leaf[3], leaf[4]);
  y.backward(g);
  std::vector<at::Tensor> out{y.detach()};
  for (const auto& t : leaf) out.push_back(t.grad());
  return out;
}
std::vector<at::Tensor> mlp_inputs(int64_t N, int64_t C, const at::TensorOptions& o = {}) {
  return {at::randn({N, C}, o), at::randn({4 * C, C}, o) * 0.2, at::randn({4 * C}, o) * 0.1,
          at::randn({C, 4 * C}, o) * 0.1, at::randn({C}, o) * 0.1};
}

TEST(Kernels, GeluEpiloguesMlpMatchesLinearGeluLinear) {
  at::manual_seed(11);
  const auto in = mlp_inputs(33, 24);
  const at::Tensor g = at::randn({33, 24});
  const auto want = unfused_mlp(in, g), got = epilogue_mlp(in, g);
  const char* names[] = {"y", "dx", "dw1", "db1", "dw2", "db2"};
  for (size_t i = 0; i < want.size(); ++i) EXPECT_TRUE(at::allclose(got[i], want[i], 1e-5, 1e-6)) << names[i];
  // in bf16: every gradient in bf16, within bf16's rounding of the unfused MLP's in bf16
  std::vector<at::Tensor> bf;
  for (const auto& t : in) bf.push_back(t.to(at::kBFloat16));
  const auto got_bf = epilogue_mlp(bf, g.to(at::kBFloat16)), want_bf = unfused_mlp(bf, g.to(at::kBFloat16));
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(got_bf[i].scalar_type(), at::kBFloat16) << names[i];
    EXPECT_TRUE(at::allclose(got_bf[i].to(at::kFloat), want_bf[i].to(at::kFloat), 1e-2, 1e-2)) << names[i];
  }
}

TEST(Kernels, GeluEpiloguesReferencesAreLinearGeluAndGeluBackwardWithTheBiasSum) {
  at::manual_seed(12);
  const at::Tensor x = at::randn({20, 16}), w = at::randn({64, 16}) * 0.3, b = at::randn({64});
  auto [out, pre] = kernels::linear_gelu_aux(x, w, b);  // off the GPU: the reference
  EXPECT_TRUE(at::allclose(pre, at::linear(x, w, b), 1e-5, 1e-6));
  EXPECT_TRUE(at::allclose(out, at::gelu(pre, "tanh")));
  const at::Tensor g = at::randn({20, 8}), w2 = at::randn({8, 64});
  at::Tensor p = pre.clone().requires_grad_();
  at::gelu(p, "tanh").backward(g.mm(w2));
  auto [d_pre, d_bias] = kernels::matmul_dgelu_bgrad(g, w2, pre);
  EXPECT_TRUE(at::allclose(d_pre, p.grad(), 1e-5, 1e-6));
  EXPECT_TRUE(at::allclose(d_bias, p.grad().sum(0), 1e-5, 1e-5));
  // bad input, by name
  EXPECT_THROW(kernels::linear_gelu_aux(x, w.narrow(1, 0, 15), b), c10::Error);        // C mismatch
  EXPECT_THROW(kernels::linear_gelu_aux(x, w.to(at::kBFloat16), b), c10::Error);       // two dtypes
  EXPECT_THROW(kernels::matmul_dgelu_bgrad(g, w2, pre.t().contiguous().t()), c10::Error);  // pre not contiguous
  EXPECT_THROW(kernels::matmul_dgelu_bgrad(g, w2.t(), pre), c10::Error);                // w (F, C), not (C, F)
  EXPECT_THROW(kernels::mlp_gelu_epilogues(x, w, b, w2, at::randn({9})), c10::Error);    // b2 not (C)
  EXPECT_THROW(kernels::linear_gelu_aux_cuda(x, w, b), c10::Error);                     // CPU tensors
  EXPECT_THROW(kernels::matmul_dgelu_bgrad_cuda(g, w2, pre), c10::Error);
}

TEST(Kernels, TrainingWithTheGeluEpiloguesHasTheBaselinesLosses) {
  expect_baseline_losses([](ModelOptions& m) { m.gelu_epilogues = true; });
}

TEST(Kernels, AddLayerNormMatchesAddThenLayerNorm) {
  at::manual_seed(9);
  const at::Tensor x = at::randn({2, 5, 48}), r = at::randn({2, 5, 48}), gamma = at::randn({48}), beta = at::randn({48});
  const at::Tensor gs = at::randn({2, 5, 48}), gy = at::randn({2, 5, 48});
  auto leaves = [&] {
    return std::vector<at::Tensor>{x.clone().requires_grad_(), r.clone().requires_grad_(),
                                   gamma.clone().requires_grad_(), beta.clone().requires_grad_()};
  };
  auto a = leaves(), b = leaves();
  const at::Tensor s_want = a[0] + a[1];
  const at::Tensor y_want = at::layer_norm(s_want, {48}, a[2], a[3], 1e-5);
  torch::autograd::backward({s_want, y_want}, {gs, gy});
  auto [s, y] = kernels::add_layer_norm(b[0], b[1], b[2], b[3], 1e-5);
  torch::autograd::backward({s, y}, {gs, gy});
  EXPECT_TRUE(at::allclose(s, s_want));
  EXPECT_TRUE(at::allclose(y, y_want, 1e-5, 1e-6));
  for (int i = 0; i < 4; ++i) EXPECT_TRUE(at::allclose(b[i].grad(), a[i].grad(), 1e-4, 1e-6)) << "input " << i;
  // the stream's sum unused downstream (the last block's): its gradient is LayerNorm's alone
  auto c = leaves();
  auto [s2, y2] = kernels::add_layer_norm(c[0], c[1], c[2], c[3], 1e-5);
  y2.backward(gy);
  at::Tensor s3 = x.clone().requires_grad_();
  at::layer_norm(s3 + r, {48}, gamma, beta, 1e-5).backward(gy);
  EXPECT_TRUE(at::allclose(c[0].grad(), s3.grad(), 1e-4, 1e-6));
  EXPECT_THROW(kernels::add_layer_norm(x, r, at::randn({47}), beta, 1e-5), c10::Error);
}

// The CUDA kernels' row sweeps (kernels/residual_norm_lanes.h), run here with the 32 lanes of a warp one after
// another and their sums added where the kernel adds them with shuffles: which lane reads which elements, in
// 16-byte packs or one at a time, and where gamma's and beta's sums sit, against the ATen reference.
// With p > 0 the residual branch's dropout too: the lanes draw the mask (written here for the test to see), which
// must be the host's draw of the same (seed, offset) whatever the packing, and the reference applies it; the
// backward's lanes draw it again for r's gradient. Biased: the branch's bias added in the forward sweep, its
// gradient (r's, summed over the rows) in the backward's third accumulator. kMax > 0: the held traversal, each
// lane's packs in its own registers (simulated: 32 of each), the column sums in the same accumulators.
template <typename T, int kVec, int kMax = 0>
void expect_lane_sweeps_match_the_reference(at::ScalarType dtype, int64_t N, int64_t C, double p = 0,
                                            bool biased = false) {
  namespace L = kernels::lanes;
  ASSERT_EQ(C % kVec, 0);
  auto t = [&](std::vector<int64_t> shape) { return at::randn(shape).to(dtype); };
  const at::Tensor x = t({N, C}), r = t({N, C}), gamma = t({C}), beta = t({C}), dy = t({N, C}), ds_out = t({N, C});
  const at::Tensor bias = biased ? t({C}) : at::Tensor();
  const kernels::DropoutMask drop = p > 0 ? kernels::dropout_mask(p, 5, 8) : kernels::DropoutMask{};
  // the held lanes write no mask: the host's draw, which the sweeps' lanes must match
  at::Tensor keep = kMax > 0 && p > 0 ? kernels::dropout_keep_mask(5, 8, N, C, p) : at::zeros({N, C}, at::kBool);
  at::Tensor s = at::empty_like(x), y = at::empty_like(x), ds = at::empty_like(x), dr = at::empty_like(x),
             mean = at::empty({N}), rstd = at::empty({N});
  std::vector<float> acc(3 * C, 0.0f);  // one warp's accumulators: it visits every row here
  auto row = [](const at::Tensor& a, int64_t i) { return a.data_ptr<T>() + i * a.size(1); };
  auto keep_row = [&](int64_t i) { return keep.data_ptr<bool>() + i * C; };
  const T *pg = gamma.data_ptr<T>(), *pb = beta.data_ptr<T>(), *pbias = biased ? bias.data_ptr<T>() : nullptr;
  float* dbias_acc = biased ? acc.data() + 2 * C : nullptr;
  for (int64_t i = 0; i < N; ++i) {
    float sum = 0, sq = 0;
    if constexpr (kMax > 0) {
      std::vector<L::Held<T, kVec, kMax>> s_held(L::kLanes), dy_held(L::kLanes);
      for (int lane = 0; lane < L::kLanes; ++lane)
        sum += p > 0 ? L::add_and_sum_held<T, kVec, kMax, true>(row(x, i), row(r, i), row(s, i), s_held[lane], C,
                                                                 lane, drop, i, pbias)
                     : L::add_and_sum_held<T, kVec, kMax>(row(x, i), row(r, i), row(s, i), s_held[lane], C, lane, {},
                                                          0, pbias);
      const float m = sum / static_cast<float>(C);
      for (int lane = 0; lane < L::kLanes; ++lane) sq += L::squared_deviation_held<T, kVec, kMax>(s_held[lane], m, C, lane);
      const float rs = 1.0f / std::sqrt(sq / static_cast<float>(C) + 1e-5f);
      for (int lane = 0; lane < L::kLanes; ++lane)
        L::normalize_held<T, kVec, kMax>(s_held[lane], pg, pb, row(y, i), m, rs, C, lane);
      mean[i] = m, rstd[i] = rs;
      L::GradSums g;  // the backward holds dy and s itself (read from memory, as the kernel reads them)
      for (int lane = 0; lane < L::kLanes; ++lane) {
        const L::GradSums l = L::grad_sums_held<T, kVec, kMax>(row(dy, i), row(s, i), pg, m, rs, dy_held[lane],
                                                              s_held[lane], acc.data(), acc.data() + C, C, lane);
        g.dy_gamma += l.dy_gamma, g.dy_gamma_xhat += l.dy_gamma_xhat;
      }
      const float m1 = g.dy_gamma / static_cast<float>(C), m2 = g.dy_gamma_xhat / static_cast<float>(C);
      for (int lane = 0; lane < L::kLanes; ++lane)
        if (p > 0)
          L::grad_input_held<T, kVec, kMax, true>(dy_held[lane], s_held[lane], pg, row(ds_out, i), row(ds, i), m, rs,
                                                  m1, m2, C, lane, drop, i, row(dr, i), dbias_acc);
        else
          L::grad_input_held<T, kVec, kMax>(dy_held[lane], s_held[lane], pg, row(ds_out, i), row(ds, i), m, rs, m1,
                                            m2, C, lane, {}, 0, nullptr, dbias_acc);
      continue;
    }
    for (int lane = 0; lane < L::kLanes; ++lane)
      sum += p > 0 ? L::add_and_sum<T, kVec, true>(row(x, i), row(r, i), row(s, i), C, lane, drop, i, keep_row(i), pbias)
                   : L::add_and_sum<T, kVec>(row(x, i), row(r, i), row(s, i), C, lane, {}, 0, nullptr, pbias);
    const float m = sum / static_cast<float>(C);
    for (int lane = 0; lane < L::kLanes; ++lane) sq += L::squared_deviation<T, kVec>(row(s, i), m, C, lane);
    const float rs = 1.0f / std::sqrt(sq / static_cast<float>(C) + 1e-5f);
    for (int lane = 0; lane < L::kLanes; ++lane) L::normalize<T, kVec>(row(s, i), pg, pb, row(y, i), m, rs, C, lane);
    mean[i] = m, rstd[i] = rs;
    L::GradSums g;
    for (int lane = 0; lane < L::kLanes; ++lane) {
      const L::GradSums l = L::grad_sums<T, kVec>(row(dy, i), row(s, i), pg, m, rs, acc.data(), acc.data() + C, C, lane);
      g.dy_gamma += l.dy_gamma, g.dy_gamma_xhat += l.dy_gamma_xhat;
    }
    for (int lane = 0; lane < L::kLanes; ++lane)
      if (p > 0)  // the mask drawn again
        L::grad_input<T, kVec, true>(row(dy, i), row(s, i), pg, row(ds_out, i), row(ds, i), m, rs,
                                     g.dy_gamma / static_cast<float>(C), g.dy_gamma_xhat / static_cast<float>(C), C,
                                     lane, drop, i, row(dr, i), dbias_acc);
      else
        L::grad_input<T, kVec>(row(dy, i), row(s, i), pg, row(ds_out, i), row(ds, i), m, rs,
                               g.dy_gamma / static_cast<float>(C), g.dy_gamma_xhat / static_cast<float>(C), C, lane,
                               {}, 0, nullptr, dbias_acc);
  }
  const kernels::AddNormForward want =
      kernels::add_layer_norm_forward_reference(x, r, gamma, beta, 1e-5, p, p > 0 ? keep : at::Tensor(), bias);
  const kernels::AddNormBackward wb = kernels::add_layer_norm_backward_reference(ds_out, dy, want, gamma, beta);
  at::Tensor dgamma = at::empty({C}), dbeta = at::empty({C}), dbias = at::empty({C});
  for (int64_t j = 0; j < C; ++j) {
    dgamma[j] = acc[L::acc_index<kVec>(j, C)];
    dbeta[j] = acc[C + L::acc_index<kVec>(j, C)];
    dbias[j] = acc[2 * C + L::acc_index<kVec>(j, C)];
  }
  const double tol = dtype == at::kFloat ? 1e-5 : 2e-2;
  auto close = [&](const at::Tensor& a, const at::Tensor& b, double atol) {
    return at::allclose(a.to(at::kFloat), b.to(at::kFloat), tol, atol);
  };
  const std::string what = std::string(c10::toString(dtype)) + " kVec " + std::to_string(kVec) + " kMax " +
                           std::to_string(kMax) + " C " + std::to_string(C) + " p " + std::to_string(p) +
                           (biased ? " biased" : "");
  if (p > 0) {
    EXPECT_TRUE(at::equal(keep, kernels::dropout_keep_mask(5, 8, N, C, p))) << what;
    EXPECT_TRUE(close(dr, wb.dr, tol)) << what;
  }
  EXPECT_TRUE(at::equal(s, want.s)) << what;  // the same rounding of one sum
  EXPECT_TRUE(close(y, want.y, tol)) << what;
  EXPECT_TRUE(close(mean, want.mean.view(-1), 1e-5) && close(rstd, want.rstd.view(-1), 1e-4)) << what;
  EXPECT_TRUE(close(ds, wb.ds, tol)) << what;
  EXPECT_TRUE(close(dgamma, wb.dgamma, tol * std::sqrt(double(N)))) << what;
  EXPECT_TRUE(close(dbeta, wb.dbeta, tol * std::sqrt(double(N)))) << what;
  ASSERT_EQ(wb.dbias.defined(), biased) << what;
  if (biased) {
    EXPECT_TRUE(close(dbias, wb.dbias, tol * std::sqrt(double(N)))) << what;
    // the bias moved the stream: the unbiased sweep's s is another
    EXPECT_FALSE(at::equal(s, kernels::add_layer_norm_forward_reference(x, r, gamma, beta, 1e-5, p,
                                                                        p > 0 ? keep : at::Tensor()).s)) << what;
  } else {
    EXPECT_TRUE(std::all_of(acc.begin() + 2 * C, acc.end(), [](float v) { return v == 0.0f; })) << what;
  }
}

TEST(Kernels, AddLayerNormLaneSweepsMatchTheReference) {
  at::manual_seed(11);
  // GPT-2's C = 768 (24 packs of 8 bf16 or 48 of 4 floats a row: some lanes take one pack, some two), a C with
  // fewer packs than lanes, and a C that is not a whole number of packs (one element a lane)
  for (int64_t C : {768, 40}) {
    expect_lane_sweeps_match_the_reference<float, 4>(at::kFloat, 6, C);
    expect_lane_sweeps_match_the_reference<c10::BFloat16, 8>(at::kBFloat16, 6, C);
  }
  expect_lane_sweeps_match_the_reference<float, 1>(at::kFloat, 5, 100);
  expect_lane_sweeps_match_the_reference<c10::BFloat16, 1>(at::kBFloat16, 5, 100);
  // GPT-2 XL's 1600 in bf16 (200 packs: 7 or 6 a lane), 300 elements one a lane (9 or 10 a lane), with dropout
  expect_lane_sweeps_match_the_reference<c10::BFloat16, 8>(at::kBFloat16, 4, 1600, 0.1, true);
  expect_lane_sweeps_match_the_reference<float, 1>(at::kFloat, 3, 300, 0.1);
  // with the residual branch's dropout: packed by 4 and 8, one element a lane, a row length not a multiple of 4
  // (a Philox block shared by two rows)
  for (int64_t C : {768, 40}) {
    expect_lane_sweeps_match_the_reference<float, 4>(at::kFloat, 6, C, 0.1);
    expect_lane_sweeps_match_the_reference<c10::BFloat16, 8>(at::kBFloat16, 6, C, 0.5);
  }
  expect_lane_sweeps_match_the_reference<float, 1>(at::kFloat, 5, 102, 0.1);
  expect_lane_sweeps_match_the_reference<c10::BFloat16, 1>(at::kBFloat16, 5, 99, 0.3);
  // with the branch's bias (the linear before left it out): packed, one element a lane, with and without dropout
  for (double p : {0.0, 0.1}) {
    expect_lane_sweeps_match_the_reference<float, 4>(at::kFloat, 6, 768, p, true);
    expect_lane_sweeps_match_the_reference<c10::BFloat16, 8>(at::kBFloat16, 6, 768, p, true);
    expect_lane_sweeps_match_the_reference<c10::BFloat16, 1>(at::kBFloat16, 5, 99, p, true);
  }
}

// The held traversal: GPT-2's 768 in bf16 (3 packs each lane), 400 floats (100 packs: 4 for lanes 0-3, 3 for the
// rest), 40 bf16 (5 packs: lanes 5-31 hold none) also with more registers than packs; with dropout and the bias.
TEST(Kernels, AddLayerNormHeldLanesMatchTheReference) {
  at::manual_seed(12);
  for (double p : {0.0, 0.1})
    for (bool biased : {false, true}) {
      expect_lane_sweeps_match_the_reference<c10::BFloat16, 8, 3>(at::kBFloat16, 6, 768, p, biased);
      expect_lane_sweeps_match_the_reference<float, 4, 4>(at::kFloat, 5, 400, p, biased);
      expect_lane_sweeps_match_the_reference<c10::BFloat16, 8, 1>(at::kBFloat16, 4, 40, p, biased);
      expect_lane_sweeps_match_the_reference<c10::BFloat16, 8, 2>(at::kBFloat16, 4, 40, p, biased);
    }
}

// Random123's known answers for Philox4x32-10 (its kat_vectors): the generator is the published one.
TEST(Kernels, PhiloxIsRandom123sPhilox4x32_10) {
  using kernels::PhiloxBlock;
  auto expect = [](PhiloxBlock ctr, uint32_t k0, uint32_t k1, PhiloxBlock want) {
    const PhiloxBlock got = kernels::philox4x32_10(ctr, k0, k1);
    EXPECT_EQ(got.v0, want.v0);
    EXPECT_EQ(got.v1, want.v1);
    EXPECT_EQ(got.v2, want.v2);
    EXPECT_EQ(got.v3, want.v3);
  };
  expect({0, 0, 0, 0}, 0, 0, {0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8});
  expect({~0u, ~0u, ~0u, ~0u}, ~0u, ~0u, {0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd});
  expect({0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344}, 0xa4093822, 0x299f31d0,
         {0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1});
}

// The packed kernels' draw, whole Philox blocks (half of one for 4 fp32) without a branch, is keeps' bit for bit.
TEST(Kernels, AlignedDropoutDrawsAreTheElementByElementOnes) {
  const kernels::DropoutMask drop = kernels::dropout_mask(0.3, 0x1234567890ull, 4096);
  for (uint64_t e0 : {uint64_t{0}, uint64_t{4}, uint64_t{8} * 767 + 4, (uint64_t{1} << 35) + 12})
    EXPECT_EQ(drop.keeps_aligned<4>(e0), drop.keeps<4>(e0)) << e0;
  for (uint64_t e0 : {uint64_t{0}, uint64_t{8} * 767, (uint64_t{1} << 35) + 8}) {
    EXPECT_EQ(drop.keeps_aligned<8>(e0), drop.keeps<8>(e0)) << e0;
    EXPECT_EQ(drop.keeps_aligned<32>(e0), drop.keeps<32>(e0)) << e0;
  }
  EXPECT_NE(drop.keeps_aligned<32>(0), drop.keeps_aligned<32>(32));  // 0.58^32 that two draws of 32 agree
}

// 16 random bits an element: the keep probability is the threshold over 2^16, 1 - p to within 2^-17; p = 0 keeps
// every element, p = 1 none.
TEST(Kernels, DropoutKeepsWithinTwoToTheMinus17OfOneMinusP) {
  for (double p : {0.0, 1e-7, 0.1, 0.25, 0.5, 0.9, 1.0})
    EXPECT_LE(std::abs(kernels::keep_threshold(p) / 65536.0 - (1 - p)), 1.0 / (1 << 17)) << p;
  EXPECT_EQ(kernels::keep_threshold(0.1), 58982u);
  EXPECT_EQ(kernels::dropout_mask(0.0).keeps<32>(12345), 0xFFFFFFFFu);
  EXPECT_EQ(kernels::dropout_mask(1.0).keeps_aligned<32>(64), 0u);
}

// The dropout mask keeps 1 - p of the elements, is the same for the same (seed, offset) and another for another
// offset (each call's) or seed, and its rows are not copies of one another.
TEST(Kernels, DropoutMaskKeepsOneMinusPAndChangesWithSeedAndOffset) {
  const int64_t N = 256, C = 768;  // 196,608 draws: the kept share's standard deviation is 0.0007 at p = 0.1
  for (double p : {0.1, 0.5}) {
    const at::Tensor keep = kernels::dropout_keep_mask(7, 0, N, C, p);
    EXPECT_NEAR(keep.to(at::kFloat).mean().item<double>(), 1 - p, 0.005) << p;
    EXPECT_TRUE(at::equal(keep, kernels::dropout_keep_mask(7, 0, N, C, p)));
    for (const at::Tensor& other : {kernels::dropout_keep_mask(7, 4, N, C, p), kernels::dropout_keep_mask(8, 0, N, C, p)}) {
      // independent masks agree on p² + (1 - p)² of the elements
      EXPECT_NEAR(keep.eq(other).to(at::kFloat).mean().item<double>(), p * p + (1 - p) * (1 - p), 0.01) << p;
    }
    EXPECT_FALSE(at::equal(keep[0], keep[1]));
  }
  EXPECT_THROW(kernels::dropout_keep_mask(7, 0, N, C, 1.0), c10::Error);
}

// The fused op with the residual branch's dropout (the CPU path: its mask from the CPU generator) is x +
// dropout(r) then LayerNorm, forward and backward, with the mask it drew: r's gradient is the stream's through
// the mask, x's the stream's itself; p = 0 draws nothing.
TEST(Kernels, AddLayerNormWithDropoutIsDropoutThenAddThenLayerNorm) {
  at::manual_seed(13);
  const double p = 0.25;
  const at::Tensor x = at::randn({4, 6, 40}), r = at::randn({4, 6, 40}), gamma = at::randn({40}),
                   beta = at::randn({40}), gs = at::randn({4, 6, 40}), gy = at::randn({4, 6, 40});
  std::vector<at::Tensor> b{x.clone().requires_grad_(), r.clone().requires_grad_(), gamma.clone().requires_grad_(),
                            beta.clone().requires_grad_()};
  auto [s, y] = kernels::add_layer_norm(b[0], b[1], b[2], b[3], 1e-5, p);
  torch::autograd::backward({s, y}, {gs, gy});
  const at::Tensor keep = s.detach().ne(x);  // a kept r (never 0 here) moves s off x
  EXPECT_NEAR(keep.to(at::kFloat).mean().item<double>(), 1 - p, 0.06);
  std::vector<at::Tensor> a{x.clone().requires_grad_(), r.clone().requires_grad_(), gamma.clone().requires_grad_(),
                            beta.clone().requires_grad_()};
  const at::Tensor s_want = a[0] + a[1] * keep.to(at::kFloat) / (1 - p);
  const at::Tensor y_want = at::layer_norm(s_want, {40}, a[2], a[3], 1e-5);
  torch::autograd::backward({s_want, y_want}, {gs, gy});
  EXPECT_TRUE(at::allclose(s, s_want, 1e-6, 1e-6));
  EXPECT_TRUE(at::allclose(y, y_want, 1e-5, 1e-5));
  for (int i = 0; i < 4; ++i) EXPECT_TRUE(at::allclose(b[i].grad(), a[i].grad(), 1e-4, 1e-5)) << "input " << i;
  EXPECT_TRUE(at::equal(b[1].grad().eq(0), keep.logical_not()));  // dropped elements get no gradient
  // no dropout: nothing drawn, s = x + r
  const kernels::AddNormForward f = kernels::add_layer_norm_forward(x.view({-1, 40}), r.view({-1, 40}), gamma, beta, 1e-5);
  EXPECT_FALSE(f.keep.defined());
  EXPECT_TRUE(at::equal(f.s, (x + r).view({-1, 40})));
  EXPECT_THROW(kernels::add_layer_norm(x, r, gamma, beta, 1e-5, 1.0), c10::Error);
  EXPECT_THROW(kernels::add_layer_norm(x, r, gamma, beta, 1e-5, -0.1), c10::Error);
}

// With the branch's bias (the linear before it left its bias out, fused_residual_norm's model), the op is that
// linear's biased output added to the stream, then LayerNorm: forward and every gradient, the bias's included (r's
// summed over the rows), with and without dropout; the bias's shape and dtype are checked.
TEST(Kernels, AddLayerNormWithTheBranchsBiasIsTheBiasedBranchThenAddThenLayerNorm) {
  at::manual_seed(16);
  const at::Tensor x = at::randn({3, 5, 40}), r = at::randn({3, 5, 40}), gamma = at::randn({40}),
                   beta = at::randn({40}), bias = at::randn({40}), gs = at::randn({3, 5, 40}), gy = at::randn({3, 5, 40});
  auto leaves = [&] {
    return std::vector<at::Tensor>{x.clone().requires_grad_(), r.clone().requires_grad_(),
                                   gamma.clone().requires_grad_(), beta.clone().requires_grad_(),
                                   bias.clone().requires_grad_()};
  };
  auto a = leaves(), b = leaves();
  const at::Tensor s_want = a[0] + (a[1] + a[4]);
  torch::autograd::backward({s_want, at::layer_norm(s_want, {40}, a[2], a[3], 1e-5)}, {gs, gy});
  auto [s, y] = kernels::add_layer_norm(b[0], b[1], b[2], b[3], 1e-5, 0.0, b[4]);
  torch::autograd::backward({s, y}, {gs, gy});
  EXPECT_TRUE(at::allclose(s, s_want, 1e-6, 1e-6));
  EXPECT_TRUE(at::allclose(y, at::layer_norm(s_want, {40}, gamma, beta, 1e-5), 1e-5, 1e-5));
  for (int i = 0; i < 5; ++i) EXPECT_TRUE(at::allclose(b[i].grad(), a[i].grad(), 1e-4, 1e-5)) << "input " << i;
  // with dropout the bias is dropped with the branch, and its gradient is r's summed over the rows
  auto c = leaves();
  auto [s2, y2] = kernels::add_layer_norm(c[0], c[1], c[2], c[3], 1e-5, 0.25, c[4]);
  torch::autograd::backward({s2, y2}, {gs, gy});
  const at::Tensor keep = s2.detach().ne(x);
  EXPECT_TRUE(at::allclose(s2, x + (r + bias) * keep.to(at::kFloat) / 0.75, 1e-5, 1e-5));
  EXPECT_TRUE(at::allclose(c[4].grad(), c[1].grad().view({-1, 40}).sum(0), 1e-4, 1e-5));
  EXPECT_THROW(kernels::add_layer_norm(x, r, gamma, beta, 1e-5, 0.0, at::randn({41})), c10::Error);
  EXPECT_THROW(kernels::add_layer_norm_forward(x.view({-1, 40}), r.view({-1, 40}), gamma, beta, 1e-5, 0.0,
                                               bias.to(at::kDouble)),
               c10::Error);
}

// The column sums' second stage (kernels/column_sums.h), run here as the CUDA kernel's threads do: a lane a column,
// the block's warps splitting the partial rows, their sums added. At::sum over the rows, for any first column, a
// last block with fewer columns than lanes, fewer rows than warps, none.
TEST(Kernels, ColumnSumsSecondStageIsTheSumOverTheRows) {
  using kernels::columns::kSumLanes;
  using kernels::columns::kSumWarps;
  at::manual_seed(14);
  for (auto [rows, cols] : {std::pair<int64_t, int64_t>{264, 1536}, {5, 40}, {0, 7}, {1, 1}}) {
    const at::Tensor partial = at::randn({rows, cols});
    const at::Tensor want = at::sum(partial, 0);
    for (int64_t first : {int64_t{0}, cols / 2}) {
      const int64_t n = cols - first;
      at::Tensor got = at::full({n}, NAN);
      for (int64_t block = 0; block * kSumLanes < n; ++block)
        for (int lane = 0; lane < kSumLanes; ++lane) {
          const int64_t c = block * kSumLanes + lane;
          if (c >= n) continue;
          float s = 0.f;
          for (int w = 0; w < kSumWarps; ++w)
            s += kernels::columns::strided_rows_sum(partial.data_ptr<float>() + first + c, rows, cols, w, kSumWarps);
          got[c] = s;
        }
      EXPECT_TRUE(at::allclose(got, want.narrow(0, first, n), 1e-5, 1e-5)) << rows << "x" << cols << " from " << first;
    }
  }
}

// The fused bias-GELU backward's CUDA kernel body (kernels/bias_gelu_columns.h), run here for every (slab, pack)
// of its grid one after another: which thread reads which columns, packed or not, where its slab's sums go, and
// the math, against the ATen reference. Partial sums start as NaN: one never written shows in the bias gradient.
template <typename T, int kVec>
void expect_column_sweeps_match_the_reference(at::ScalarType dtype, int64_t rows, int64_t cols) {
  ASSERT_EQ(cols % kVec, 0);
  const at::Tensor pre = (at::randn({rows, cols}) * 2).to(dtype), grad = at::randn({rows, cols}).to(dtype);
  auto [want_pre, want_bias] = kernels::bias_gelu_backward_reference(grad, pre);
  at::Tensor d_pre = at::empty_like(pre);
  const int64_t slab = 32, slabs = (rows + slab - 1) / slab;
  std::vector<float> partial(slabs * cols, std::nanf(""));
  for (int64_t s = 0; s < slabs; ++s)
    for (int64_t p = 0; p < cols / kVec; ++p)
      kernels::columns::slab<T, kVec>(grad.data_ptr<T>(), pre.data_ptr<T>(), d_pre.data_ptr<T>(),
                                      partial.data() + s * cols, cols, s * slab, std::min(rows, (s + 1) * slab), p);
  at::Tensor d_bias = at::zeros({cols});
  for (int64_t s = 0; s < slabs; ++s) d_bias += at::from_blob(partial.data() + s * cols, {cols});
  const double tol = dtype == at::kFloat ? 1e-5 : 1e-2;
  const std::string what = std::string(c10::toString(dtype)) + " kVec " + std::to_string(kVec) + " " +
                           std::to_string(rows) + "x" + std::to_string(cols);
  EXPECT_TRUE(at::allclose(d_pre.to(at::kFloat), want_pre.to(at::kFloat), tol, tol)) << what;
  EXPECT_TRUE(at::allclose(d_bias, want_bias.to(at::kFloat), tol, tol * std::sqrt(double(rows)))) << what;
}

TEST(Kernels, BiasGeluColumnSweepsMatchTheReference) {
  at::manual_seed(12);
  // GPT-2's 4C = 3072 (384 packs of 8 bf16), 40 floats (10 packs of 4), rows over one 32-row slab and a short last
  // slab; one element a thread where the columns are not a whole number of packs
  expect_column_sweeps_match_the_reference<c10::BFloat16, 8>(at::kBFloat16, 70, 3072);
  expect_column_sweeps_match_the_reference<float, 4>(at::kFloat, 70, 40);
  expect_column_sweeps_match_the_reference<float, 1>(at::kFloat, 5, 7);
  expect_column_sweeps_match_the_reference<c10::BFloat16, 1>(at::kBFloat16, 33, 300);
}

TEST(Kernels, TrainingWithTheFusedResidualNormHasTheBaselinesLosses) {
  expect_baseline_losses([](ModelOptions& m) { m.fused_residual_norm = true; });
  expect_baseline_losses([](ModelOptions& m) { m.fused_residual_norm = true, m.layers = LayerImpl::kNative; });
}

using test::KernelsCuda;

TEST_F(KernelsCuda, KernelMatchesTheReference_CUDA) {
  at::manual_seed(4);
  for (int64_t V : {50304, 50257, 97}) {  // GPT-2's padded and odd vocabularies, a row shorter than a block
    for (auto dtype : {at::kFloat, at::kBFloat16, at::kHalf}) {
      const at::Tensor logits = (at::randn({37, V}, on_gpu()) * 3).to(dtype);
      const at::Tensor t = targets_for(37, V, on_gpu());
      at::Tensor want = logits.clone();
      const at::Tensor want_losses = softmax_xent_backward_reference_(want, t, 1.0 / 37);
      // the step's block; those `gpt2bench kernels` times beside it, 1024 threads also with the row staged; each
      // with its exponentials in base 2 too
      for (auto [threads, staged] : {std::pair{512, false}, {256, false}, {1024, false}, {1024, true}}) {
        for (bool exp2 : {false, true}) {
          at::Tensor got = logits.clone();
          const at::Tensor losses = kernels::softmax_xent_backward_cuda_(got, t, 1.0 / 37, {threads, staged, exp2});
          const std::string what = std::to_string(V) + " " + c10::toString(dtype) + " " + std::to_string(threads) +
                                   (staged ? " staged" : "") + (exp2 ? " exp2" : "");
          EXPECT_TRUE(at::allclose(losses, want_losses, 1e-5, 1e-4)) << what;
          const double atol = dtype == at::kFloat ? 1e-7 : 1e-4;  // one bf16/fp16 rounding of a value under 1/37
          EXPECT_TRUE(at::allclose(got.to(at::kFloat), want.to(at::kFloat), 1e-2, atol))
              << what << ": " << (got.to(at::kFloat) - want.to(at::kFloat)).abs().max().item<float>();
        }
      }
    }
  }
  at::Tensor z = at::randn({2, 64}, on_gpu()), wide = at::randn({1, 1 << 20}, on_gpu());  // 4 MiB: no block's
  for (auto [x, threads, staged, says] : {
           std::tuple<at::Tensor*, int, bool, const char*>{&z, 300, false, "must be 256, 512 or 1024 (1024 staged), got 300"},
           {&z, 512, true, "must be 256, 512 or 1024 (1024 staged), got 512 staged"},
           {&wide, 1024, true, "a row of 1048576 Float does not fit in a block's shared memory"}}) {
    try {
      (void)kernels::softmax_xent_backward_cuda_(*x, targets_for(x->size(0), x->size(1), on_gpu()), 1.0,
                                                 {threads, staged});
      ADD_FAILURE() << threads << (staged ? " staged" : "") << " accepted";
    } catch (const c10::Error& e) {
      EXPECT_NE(std::string(e.what()).find(says), std::string::npos) << e.what();
    }
  }
}

TEST_F(KernelsCuda, ChunkedClassifierOnTheGpuMatchesTheUnfusedOne_CUDA) {
  at::globalContext().setAllowTF32CuBLAS(false);
  at::manual_seed(5);
  const at::Tensor h = at::randn({1000, 64}, on_gpu()), w = at::randn({5003, 64}, on_gpu()) * 0.1;
  const at::Tensor t = targets_for(1000, 5003, on_gpu());
  const Unfused want = unfused(h, w, t);
  at::Tensor hh = h.clone().requires_grad_(), ww = w.clone().requires_grad_();
  at::Tensor loss = linear_cross_entropy(hh, ww, t, 256);
  loss.backward();
  EXPECT_NEAR(loss.item<double>(), want.loss.item<double>(), 1e-4);
  EXPECT_TRUE(at::allclose(hh.grad(), want.dh, 1e-3, 1e-6));
  EXPECT_TRUE(at::allclose(ww.grad(), want.dw, 1e-3, 1e-6));
  for (auto [threads, staged, exp2] : {std::tuple{256, false, false}, {1024, false, false}, {1024, true, false},
                                       {512, false, true}, {1024, true, true}}) {  // settings.classifier_kernel
    at::Tensor hl = h.clone().requires_grad_(), wl = w.clone().requires_grad_();
    at::Tensor ll = linear_cross_entropy(hl, wl, t, 256, {threads, staged, exp2});
    ll.backward();
    const std::string what = std::to_string(threads) + (staged ? " staged" : "") + (exp2 ? " exp2" : "");
    EXPECT_NEAR(ll.item<double>(), want.loss.item<double>(), 1e-4) << what;
    EXPECT_TRUE(at::allclose(hl.grad(), want.dh, 1e-3, 1e-6)) << what;
    EXPECT_TRUE(at::allclose(wl.grad(), want.dw, 1e-3, 1e-6)) << what;
  }
  // under bf16 autocast: the logits in bf16, dw accumulated in fp32 by cuBLAS (addmm's out_dtype)
  at::autocast::set_autocast_dtype(at::kCUDA, at::kBFloat16);
  for (int64_t chunk : {256, 1000}) {  // over four chunks, and in one (dw by one GEMM in bf16)
    at::autocast::set_autocast_enabled(at::kCUDA, true);
    at::Tensor ha = h.clone().requires_grad_(), wa = w.clone().requires_grad_();
    at::Tensor la = linear_cross_entropy(ha, wa, t, chunk);
    la.backward();
    at::autocast::set_autocast_enabled(at::kCUDA, false);
    at::autocast::clear_cache();
    EXPECT_NEAR(la.item<double>(), want.loss.item<double>(), 2e-2) << "chunk " << chunk;
    EXPECT_EQ(wa.grad().scalar_type(), at::kFloat);
    EXPECT_TRUE(at::allclose(wa.grad(), want.dw, 5e-2, 1e-4)) << "chunk " << chunk;
    EXPECT_TRUE(at::allclose(ha.grad(), want.dh, 5e-2, 1e-4)) << "chunk " << chunk;
  }
}

TEST_F(KernelsCuda, BiasGeluBackwardKernelMatchesTheReference_CUDA) {
  at::manual_seed(8);
  for (auto dtype : {at::kFloat, at::kBFloat16, at::kHalf}) {
    // rows not a multiple of the 32-row slab; columns one a thread (300 bf16/fp16: not whole 16-byte packs; 7),
    // packed with a last block of one thread (1032 bf16/fp16: 129 packs of 8, 128 threads a block), and GPT-2's
    // 4C = 3072
    for (auto [rows, cols] : {std::pair<int64_t, int64_t>{1000, 300}, {33, 1032}, {8192, 3072}, {1, 7}}) {
      const at::Tensor pre = (at::randn({rows, cols}, on_gpu()) * 2).to(dtype);
      const at::Tensor grad = at::randn({rows, cols}, on_gpu()).to(dtype);
      auto [want_pre, want_bias] = kernels::bias_gelu_backward_reference(grad, pre);
      for (int64_t slab : {32, 16, 8, 64, 1}) {  // the step's slab, those `gpt2bench kernels` times, one row
        auto [d_pre, d_bias] = kernels::bias_gelu_backward_cuda(grad, pre, slab);
        const double tol = dtype == at::kFloat ? 1e-5 : 1e-2;
        EXPECT_TRUE(at::allclose(d_pre.to(at::kFloat), want_pre.to(at::kFloat), tol, tol))
            << dtype << " " << rows << " " << slab;
        EXPECT_TRUE(at::allclose(d_bias.to(at::kFloat), want_bias.to(at::kFloat), tol, tol * std::sqrt(double(rows))))
            << dtype << " " << rows << " " << slab;
      }
    }
  }
  const at::Tensor x = at::randn({70000, 8}, on_gpu());  // 70,000 slabs of one row: more than a grid's y holds
  for (auto [slab, says] : {std::pair<int64_t, const char*>{0, "rows a block must be >= 1, got 0"},
                            {1, "70000 rows at 1 a block are more slabs than a grid's y holds (65,535)"}}) {
    try {
      (void)kernels::bias_gelu_backward_cuda(x, x, slab);
      ADD_FAILURE() << "slab " << slab << " accepted";
    } catch (const c10::Error& e) {
      EXPECT_NE(std::string(e.what()).find(says), std::string::npos) << e.what();
    }
  }
}

// fused_gelu_backward's Linear + GELU on the GPU: its forward is the GELU_AUX_BIAS epilogue GEMM (where the build
// has cuBLASLt), its backward our kernel; output and gradients are linear then gelu's by autograd, at GPT-2's
// shapes in bf16 and at a small one in fp32.
TEST_F(KernelsCuda, LinearBiasGeluOnTheGpuMatchesLinearThenGelu_CUDA) {
  at::globalContext().setAllowTF32CuBLAS(false);
  at::manual_seed(17);
  for (auto [dtype, N, C] : {std::tuple<at::ScalarType, int64_t, int64_t>{at::kBFloat16, 8192, 768},
                             {at::kFloat, 300, 64}}) {
    auto t = [&](std::vector<int64_t> shape, double scale) { return (at::randn(shape, on_gpu()) * scale).to(dtype); };
    const at::Tensor x = t({N, C}, 1), w = t({4 * C, C}, 0.05), b = t({4 * C}, 0.1), g = t({N, 4 * C}, 1);
    const UnfusedGelu want = unfused_gelu(x, w, b, g);
    for (int64_t slab : {32, 8}) {  // settings.gelu_backward_slab reaches the kernel
      at::Tensor xx = x.clone().requires_grad_(), ww = w.clone().requires_grad_(), bb = b.clone().requires_grad_();
      at::Tensor y = kernels::linear_bias_gelu(xx, ww, bb, slab);
      y.backward(g);
      const double tol = dtype == at::kFloat ? 1e-4 : 2e-2;
      auto close = [&](const at::Tensor& a, const at::Tensor& r, double atol) {
        return at::allclose(a.to(at::kFloat), r.to(at::kFloat), tol, atol);
      };
      EXPECT_TRUE(close(y, want.y, tol)) << dtype << " " << slab;
      EXPECT_TRUE(close(xx.grad(), want.dx, tol)) << dtype << " " << slab;
      EXPECT_TRUE(close(ww.grad(), want.dw, tol * std::sqrt(double(N)))) << dtype << " " << slab;
      EXPECT_TRUE(close(bb.grad(), want.db, tol * std::sqrt(double(N)))) << dtype << " " << slab;
    }
  }
}

// cuBLASLt's GELU_AUX_BIAS and DGELU_BGRAD epilogues against the ATen references, and the MLP built on them
// against the unfused one; at GPT-2's shapes, a tiny model's, one token.
TEST_F(KernelsCuda, GeluEpiloguesMatchTheReference_CUDA) {
  at::globalContext().setAllowTF32CuBLAS(false);
  at::manual_seed(13);
  for (auto dtype : {at::kFloat, at::kBFloat16, at::kHalf}) {
    for (auto [N, C] : {std::pair<int64_t, int64_t>{8192, 768}, {37, 32}, {1, 64}}) {
      const int64_t F = 4 * C;
      auto t = [&](std::vector<int64_t> shape, double scale) { return (at::randn(shape, on_gpu()) * scale).to(dtype); };
      const at::Tensor x = t({N, C}, 1), w = t({F, C}, 0.05), b = t({F}, 0.1), g = t({N, C}, 1), w2 = t({C, F}, 0.05);
      const double tol = dtype == at::kFloat ? 1e-4 : 2e-2;
      auto close = [&](const at::Tensor& a, const at::Tensor& r, double atol) {
        return at::allclose(a.to(at::kFloat), r.to(at::kFloat), tol, atol);
      };
      auto [out, pre] = kernels::linear_gelu_aux_cuda(x, w, b);
      auto [want_out, want_pre] = kernels::linear_gelu_aux_reference(x, w, b);
      EXPECT_TRUE(close(pre, want_pre, tol)) << dtype << " N=" << N;
      EXPECT_TRUE(close(out, want_out, tol)) << dtype << " N=" << N;
      auto [d_pre, d_bias] = kernels::matmul_dgelu_bgrad_cuda(g, w2, want_pre);
      auto [want_d_pre, want_d_bias] = kernels::matmul_dgelu_bgrad_reference(g, w2, want_pre);
      EXPECT_TRUE(close(d_pre, want_d_pre, tol)) << dtype << " N=" << N;
      EXPECT_TRUE(close(d_bias, want_d_bias, tol * std::sqrt(double(N)))) << dtype << " N=" << N;
    }
  }
  // The MLP built on them and the unfused one, both in fp32, against the unfused one in fp64: each output's largest
  // error over its largest magnitude, ours within 4x ATen's own or 1e-5 (~100 fp32 ulps; a wrong epilogue, bias or
  // operand is off by far more). On an H100 a fixed atol of 1e-5 failed dx, dw1, db1 and dw2, sums over 300 rows
  // of magnitude ~10, where the order of a reduction alone moves the last digits.
  const auto in = mlp_inputs(300, 64, on_gpu());
  const at::Tensor g = at::randn({300, 64}, on_gpu());
  std::vector<at::Tensor> in64;
  for (const auto& t : in) in64.push_back(t.to(at::kDouble));
  const auto exact = unfused_mlp(in64, g.to(at::kDouble)), want = unfused_mlp(in, g), got = epilogue_mlp(in, g);
  const char* names[] = {"y", "dx", "dw1", "db1", "dw2", "db2"};
  for (size_t i = 0; i < exact.size(); ++i) {
    auto err = [&](const at::Tensor& t) {
      return (t.to(at::kDouble) - exact[i]).abs().max().item<double>() / exact[i].abs().max().item<double>();
    };
    EXPECT_EQ(got[i].scalar_type(), at::kFloat) << names[i];
    EXPECT_LE(err(got[i]), std::max(4 * err(want[i]), 1e-5)) << names[i] << ": ours " << err(got[i]) << ", ATen's "
                                                             << err(want[i]);
  }
}

// The column sums' second stage on the GPU: at::sum over the rows of a column range, cast to the dtype asked for.
TEST_F(KernelsCuda, ColumnSumsMatchTheSumOverTheRows_CUDA) {
  at::manual_seed(15);
  for (auto dtype : {at::kFloat, at::kBFloat16}) {
    for (auto [rows, cols, first] : {std::tuple<int64_t, int64_t, int64_t>{264, 1536, 768}, {256, 3072, 0}, {3, 40, 7},
                                     {0, 8, 0}}) {
      const at::Tensor partial = at::randn({rows, cols}, on_gpu());
      const at::Tensor got = kernels::column_sums_cuda(partial, first, cols - first, dtype);
      EXPECT_EQ(got.scalar_type(), dtype);
      const at::Tensor want = at::sum(partial, 0).narrow(0, first, cols - first);
      const double tol = dtype == at::kFloat ? 1e-5 : 1e-2;
      EXPECT_TRUE(at::allclose(got.to(at::kFloat), want, tol, tol)) << dtype << " " << rows << "x" << cols;
    }
  }
  EXPECT_THROW(kernels::column_sums_cuda(at::randn({4, 8}, on_gpu()), 4, 5, at::kFloat), c10::Error);  // past the end
  EXPECT_THROW(kernels::column_sums_cuda(at::randn({4, 8}, on_gpu()).to(at::kBFloat16), 0, 8, at::kFloat), c10::Error);
}

TEST_F(KernelsCuda, AddLayerNormKernelsMatchTheReference_CUDA) {
  at::manual_seed(10);
  // the sweeps and the held kernels (held where C allows: 768 bf16 and 100 floats; 1,600 and 768 floats sweep)
  for (auto [dtype, held] :
       {std::pair{at::kFloat, false}, {at::kBFloat16, false}, {at::kFloat, true}, {at::kBFloat16, true}}) {
    // 16-byte packs (768, 1600; 100 floats), one element a lane (100 bf16), and rows that would pack but start off
    // a 16-byte boundary (x and dy one element into their storage: one element a lane)
    // each with and without the branch's bias (its gradient summed beside gamma's and beta's)
    for (auto [N, C, misaligned, biased] :
         {std::tuple<int64_t, int64_t, bool, bool>{8192, 768, false, false}, {8192, 768, false, true},
          {37, 100, false, false}, {37, 100, false, true}, {3, 1600, false, false}, {3, 1600, false, true},
          {5, 768, true, false}, {5, 768, true, true}}) {
      auto t = [&](std::vector<int64_t> shape) { return at::randn(shape, on_gpu()).to(dtype); };
      auto off = [&](const at::Tensor& a) {
        return misaligned ? at::cat({t({1}), a.view(-1)}).narrow(0, 1, a.numel()).view(a.sizes()) : a;
      };
      const at::Tensor x = off(t({N, C})), r = t({N, C}), gamma = t({C}), beta = t({C}), dy = off(t({N, C})),
                       ds_out = t({N, C}), bias = biased ? t({C}) : at::Tensor();
      const kernels::AddNormForward got = kernels::add_layer_norm_forward_cuda(x, r, gamma, beta, 1e-5, 0, bias, held);
      const kernels::AddNormForward want =
          kernels::add_layer_norm_forward_reference(x, r, gamma, beta, 1e-5, 0, {}, bias);
      const std::string what = std::string(c10::toString(dtype)) + " " + std::to_string(C) + (held ? " held" : "");
      ASSERT_EQ(got.held, held) << what;
      const double tol = dtype == at::kFloat ? 1e-5 : 2e-2;
      auto close = [&](const at::Tensor& a, const at::Tensor& b, double atol) {
        return at::allclose(a.to(at::kFloat), b.to(at::kFloat), tol, atol);
      };
      EXPECT_TRUE(close(got.s, want.s, 0)) << what;
      EXPECT_TRUE(close(got.y, want.y, tol)) << what;
      EXPECT_TRUE(close(got.mean.view(-1), want.mean.view(-1), 1e-5) && close(got.rstd.view(-1), want.rstd.view(-1), 1e-4));
      const kernels::AddNormBackward gb = kernels::add_layer_norm_backward_cuda(ds_out, dy, got, gamma, beta);
      const kernels::AddNormBackward wb = kernels::add_layer_norm_backward_reference(ds_out, dy, want, gamma, beta);
      EXPECT_TRUE(close(gb.ds, wb.ds, tol)) << what;
      EXPECT_TRUE(close(gb.dgamma, wb.dgamma, tol * std::sqrt(double(N)))) << what;
      EXPECT_TRUE(close(gb.dbeta, wb.dbeta, tol * std::sqrt(double(N)))) << what;
      ASSERT_EQ(gb.dbias.defined(), biased) << what;
      if (biased) {
        EXPECT_TRUE(close(gb.dbias, wb.dbias, tol * std::sqrt(double(N)))) << what;
      }
      // no gradient from the residual stream (the last block's final norm): LayerNorm's alone
      const at::Tensor none;
      EXPECT_TRUE(close(kernels::add_layer_norm_backward_cuda(none, dy, got, gamma, beta).ds,
                        kernels::add_layer_norm_backward_reference(none, dy, want, gamma, beta).ds, tol))
          << what;
    }
  }
}

// The forward kernel's dropout mask is kernels/philox.h's draw from the CUDA generator's (seed, offset) at the
// call, which it writes (f.rng): s and y are the reference's with the host's draw of that mask, packed or not;
// the backward draws it again (ds and dr the reference's); the next call draws another mask.
TEST_F(KernelsCuda, AddLayerNormDropoutKernelsMatchTheHostDrawAndTheReference_CUDA) {
  at::manual_seed(14);
  at::Generator gen = at::globalContext().defaultGenerator(at::Device(at::kCUDA, 0));
  for (auto [dtype, held] : {std::pair{at::kFloat, false}, {at::kBFloat16, false}, {at::kBFloat16, true}}) {
    for (auto [N, C] : {std::pair<int64_t, int64_t>{8192, 768}, {37, 100}, {5, 99}}) {
      auto t = [&](std::vector<int64_t> shape) { return at::randn(shape, on_gpu()).to(dtype); };
      const at::Tensor x = t({N, C}), r = t({N, C}), gamma = t({C}), beta = t({C}), dy = t({N, C}), ds_out = t({N, C});
      const at::Tensor bias = C == 768 ? t({C}) : at::Tensor();  // GPT-2's rows with the branch's bias
      const double p = 0.1;
      const uint64_t seed = gen.current_seed(), offset = gen.get_offset();
      const kernels::AddNormForward got = kernels::add_layer_norm_forward_cuda(x, r, gamma, beta, 1e-5, p, bias, held);
      const std::string what = std::string(c10::toString(dtype)) + " N " + std::to_string(N) + " C " +
                               std::to_string(C) + (held ? " held" : "");
      ASSERT_TRUE(got.rng.defined() && !got.keep.defined()) << what;
      const at::Tensor rng = got.rng.cpu();
      EXPECT_EQ(static_cast<uint64_t>(rng[0].item<int64_t>()), seed) << what;
      EXPECT_EQ(static_cast<uint64_t>(rng[1].item<int64_t>()), offset) << what;
      const at::Tensor keep = kernels::dropout_keep_mask(seed, offset, N, C, p).to(x.device());
      const kernels::AddNormForward want =
          kernels::add_layer_norm_forward_reference(x, r, gamma, beta, 1e-5, p, keep, bias);
      const double tol = dtype == at::kFloat ? 1e-5 : 2e-2;
      auto close = [&](const at::Tensor& a, const at::Tensor& b, double atol) {
        return at::allclose(a.to(at::kFloat), b.to(at::kFloat), tol, atol);
      };
      EXPECT_TRUE(at::equal(got.s, want.s)) << what;  // the same mask and roundings (mul_rn: no FMA)
      EXPECT_TRUE(close(got.y, want.y, tol)) << what;
      const kernels::AddNormBackward gb = kernels::add_layer_norm_backward_cuda(ds_out, dy, got, gamma, beta);
      const kernels::AddNormBackward wb = kernels::add_layer_norm_backward_reference(ds_out, dy, want, gamma, beta);
      EXPECT_TRUE(close(gb.ds, wb.ds, tol)) << what;
      EXPECT_TRUE(close(gb.dr, wb.dr, tol)) << what;
      EXPECT_TRUE(at::equal(gb.dr.eq(0), keep.logical_not() | gb.ds.eq(0))) << what;  // dropped: no gradient
      EXPECT_TRUE(close(gb.dgamma, wb.dgamma, tol * std::sqrt(double(N)))) << what;
      if (bias.defined()) {
        EXPECT_TRUE(close(gb.dbias, wb.dbias, tol * std::sqrt(double(N)))) << what;
      }
      // the reference's backward on the CUDA forward draws the mask from f.rng as the kernel does
      EXPECT_TRUE(close(kernels::add_layer_norm_backward_reference(ds_out, dy, got, gamma, beta).dr, wb.dr, tol)) << what;
      const kernels::AddNormForward again = kernels::add_layer_norm_forward_cuda(x, r, gamma, beta, 1e-5, p, bias, held);
      EXPECT_FALSE(at::equal(again.s, got.s)) << what;
    }
  }
}

// Under a CUDA graph (the cuda_graph rung's executor), each replay draws a new mask: the kernel reads the
// generator's offset on the device, which ATen advances before every replay.
TEST_F(KernelsCuda, AddLayerNormDropoutDrawsANewMaskEachGraphReplay_CUDA) {
  at::manual_seed(15);
  const at::Tensor r = at::randn({256, 768}, on_gpu()), gamma = at::ones({768}, on_gpu()), beta = at::zeros({768}, on_gpu());
  StepBody body = [&](const at::Tensor& x, const at::Tensor&) {  // s - x: r·2 where kept, 0 where dropped
    return kernels::add_layer_norm_forward_cuda(x, r, gamma, beta, 1e-5, 0.5).s.sub(x).ne(0).to(at::kFloat);
  };
  auto exec = make_executor(ExecutorKind::kCudaGraph, dev_, body, {});
  const at::Tensor x = at::zeros({256, 768}, on_gpu()), y = at::zeros({1}, on_gpu());
  const at::Tensor a = exec->run(x, y).clone(), b = exec->run(x, y).clone();
  EXPECT_NEAR(a.mean().item<double>(), 0.5, 0.01);
  EXPECT_NEAR(a.eq(b).to(at::kFloat).mean().item<double>(), 0.5, 0.01);  // independent draws agree on half
}

// settings.residual_norm's traversals through the autograd wrapper, each way apart: held_forward launches the held
// forward kernel and the sweeps' backward and computes the sweeps' bits (the same sums in the same order a row);
// held and held_backward launch the held backward (its column sums in another order).
TEST_F(KernelsCuda, AddLayerNormTraversalsLaunchTheirKernelsEachWay_CUDA) {
  const int64_t N = 4096, C = 768;
  // each kernel's template arguments as launched: <dtype, pack, packs held a lane (0: the sweeps), dropout>
  auto launched = [](const std::vector<TraceEvent>& events, const std::string& kernel) {
    for (const auto& e : events)
      if (const auto at = e.name.find(kernel + "<"); e.kind == "kernel" && at != std::string::npos) {
        const auto from = at + kernel.size() + 1;
        return e.name.substr(from, e.name.find('>', from) - from);
      }
    return std::string("none");
  };
  auto run = [&](kernels::Traversal traversal, std::vector<std::string>* kernels) {
    at::manual_seed(16);  // the same inputs and the same dropout draw each run
    auto t = [&](std::vector<int64_t> shape) { return at::randn(shape, on_gpu()).to(at::kBFloat16); };
    const at::Tensor x = t({N, C}).requires_grad_(), r = t({N, C}).requires_grad_(), gamma = t({C}).requires_grad_(),
                     beta = t({C}).requires_grad_(), bias = t({C}).requires_grad_(), ds = t({N, C}), dy = t({N, C});
    synchronize(dev_);
    auto collector = make_collector(dev_);
    collector->start();
    auto [s, y] = kernels::add_layer_norm(x, r, gamma, beta, 1e-5, 0.1, bias, traversal);
    std::vector<at::Tensor> out = torch::autograd::grad({s, y}, {x, r, gamma, beta, bias}, {ds, dy});
    synchronize(dev_);
    collector->stop();
    const auto events = collector->events();
    *kernels = {launched(events, "add_ln_forward_kernel"), launched(events, "add_ln_backward_kernel")};
    out.insert(out.begin(), {s, y});
    return out;  // s, y, then the gradients of x, r, gamma, beta and the bias
  };
  std::vector<std::string> sweeps_k, held_k, forward_k, backward_k;
  const auto sweeps = run({}, &sweeps_k), held = run({true, true}, &held_k), forward = run({true, false}, &forward_k),
             backward = run({false, true}, &backward_k);
  const std::string swept = "c10::BFloat16, 8, 0, true", three = "c10::BFloat16, 8, 3, true";  // 96 packs: 3 a lane
  EXPECT_EQ(sweeps_k, (std::vector<std::string>{swept, swept}));
  EXPECT_EQ(held_k, (std::vector<std::string>{three, three}));
  EXPECT_EQ(forward_k, (std::vector<std::string>{three, swept}));
  EXPECT_EQ(backward_k, (std::vector<std::string>{swept, three}));
  const char* names[] = {"s", "y", "dx", "dr", "dgamma", "dbeta", "dbias"};
  for (size_t i = 0; i < sweeps.size(); ++i) {
    EXPECT_TRUE(at::equal(forward[i], sweeps[i])) << names[i];
    for (const auto* other : {&held, &backward})
      if (i < 4) EXPECT_TRUE(at::equal((*other)[i], sweeps[i])) << names[i];  // each row's own arithmetic
      else EXPECT_TRUE(at::allclose((*other)[i].to(at::kFloat), sweeps[i].to(at::kFloat), 2e-2, 2e-2 * 64)) << names[i];
  }
}

// cuBLASLt's heuristic algorithms for each of the step's matmul patterns (a small step, a chunked head): each call
// computes the row-major product ATen's at::mm computes, within bf16's rounding, and the first is there.
TEST_F(KernelsCuda, EveryHeuristicAlgorithmComputesTheStepsMatmul_CUDA) {
  at::manual_seed(16);
  const auto on = at::device(at::kCUDA).dtype(at::kBFloat16);
  for (const auto& g : kernels::step_gemms(256, 64, 512, 1, 128)) {
    const at::Tensor a = g.a_transposed ? at::randn({g.K, g.M}, on) : at::randn({g.M, g.K}, on);
    const at::Tensor b = g.b_transposed ? at::randn({g.N, g.K}, on) : at::randn({g.K, g.N}, on);
    const at::Tensor want = (g.a_transposed ? a.t() : a).mm(g.b_transposed ? b.t() : b).to(at::kFloat);
    const at::Tensor out = at::empty({g.M, g.N}, on);
    const auto algos = kernels::heuristic_algos(g, a, b, out, 4);
    ASSERT_FALSE(algos.empty()) << g.name;
    for (const auto& algo : algos) {
      out.zero_();
      algo.call();
      EXPECT_LE((out.to(at::kFloat) - want).abs().max().item<double>(), 2e-2 * want.abs().max().item<double>())
          << g.name << ": " << algo.config;
    }
  }
}

// gemm_algorithms: a linear layer (a bias in the forward's epilogue, and without) with each of its three GEMMs at each
// place of cuBLASLt's heuristic list computes at::linear's output and gradients within bf16's rounding; a place past
// the list's end is refused, saying how many there are.
TEST_F(KernelsCuda, LtLinearRunsEveryHeuristicAlgorithm_CUDA) {
  at::manual_seed(17);
  const auto on = on_gpu().dtype(at::kBFloat16);
  for (bool biased : {true, false}) {
    const at::Tensor x = at::randn({256, 64}, on).requires_grad_(), w = at::randn({192, 64}, on).requires_grad_();
    const at::Tensor b = biased ? at::randn({192}, on).requires_grad_() : at::Tensor(), g = at::randn({256, 192}, on);
    std::vector<at::Tensor> leaves = {x, w};
    if (biased) leaves.push_back(b);
    const at::Tensor want = at::linear(x, w, b);
    const auto want_grads = torch::autograd::grad({want}, leaves, {g});
    const auto gemms = kernels::linear_gemms("linear", 256, 64, 192);
    for (int which = 0; which < 3; ++which) {
      const bool bias = which == 0 && biased;
      const at::Tensor a = which == 0 ? x : g, bop = which == 0 ? w : which == 1 ? w : x;
      const at::Tensor out = at::empty({gemms[which].M, gemms[which].N}, on);
      const kernels::LtEpilogue e{bias ? kernels::LtEpilogue::kBias : kernels::LtEpilogue::kNone,
                                  bias ? b.detach() : at::Tensor(), {}};
      const int n = static_cast<int>(kernels::lt_algorithms(gemms[which], a.detach(), bop.detach(), out, e).size());
      ASSERT_GT(n, 0) << gemms[which].name;
      for (int i = 0; i <= n; ++i) {
        const kernels::GemmAlgorithms table = {{kernels::gemm_key(gemms[which], e.name(), "BFloat16"), i}};
        try {
          const at::Tensor y = kernels::lt_linear(x, w, b, table);
          const auto grads = torch::autograd::grad({y}, leaves, {g});
          EXPECT_LT(i, n) << gemms[which].name << ": #" << i << " ran past the list";
          auto near = [](const at::Tensor& got, const at::Tensor& ref) {
            return (got - ref).abs().max().item<double>() <= 2e-2 * ref.abs().max().item<double>();
          };
          EXPECT_TRUE(near(y, want)) << gemms[which].name << " #" << i;
          for (size_t k = 0; k < grads.size(); ++k)
            EXPECT_TRUE(near(grads[k], want_grads[k])) << gemms[which].name << " #" << i << " gradient " << k;
        } catch (const c10::Error& e) {
          EXPECT_EQ(i, n) << e.what();
          EXPECT_NE(std::string(e.what_without_backtrace()).find("algorithms for linear"), std::string::npos)
              << e.what();
        }
      }
    }
  }
}

// The breakdown's FLOP count sees a linear whose three GEMMs are ours (each lt_gemm's record) as at::linear's.
TEST_F(KernelsCuda, LtLinearGemmsAreCountedAsAtenLinears_CUDA) {
  const auto on = on_gpu().dtype(at::kBFloat16);
  const at::Tensor x = at::randn({256, 64}, on).requires_grad_(), w = at::randn({192, 64}, on).requires_grad_();
  const at::Tensor b = at::randn({192}, on).requires_grad_();
  auto counted = [&](const kernels::GemmAlgorithms& table) {  // FLOPs by op name
    FlopCounter flops;
    flops.start();
    torch::autograd::grad({kernels::lt_linear(x, w, b, table)}, {x, w, b}, {at::ones({256, 192}, on)});
    flops.stop();
    return flops.by_op();
  };
  kernels::GemmAlgorithms ours;
  const auto gemms = kernels::linear_gemms("linear", 256, 64, 192);
  for (int which = 0; which < 3; ++which)
    ours[kernels::gemm_key(gemms[which], which == 0 ? "bias" : "", "BFloat16")] = 0;
  const double linear = 3 * 2.0 * 256 * 64 * 192;  // forward, dX, dW
  const auto aten = counted({}), lt = counted(ours);
  EXPECT_EQ(aten.count(kernels::kLtGemmRecord), 0u);
  double sum = 0;
  for (const auto& [op, f] : aten) sum += f;
  EXPECT_EQ(sum, linear);
  ASSERT_EQ(lt.size(), 1u);
  EXPECT_EQ(lt.at(kernels::kLtGemmRecord), linear);
}

// fused_gelu_backward's fc1 with its GELU_AUX_BIAS forward at each place of cuBLASLt's list: the reference's output.
TEST_F(KernelsCuda, LinearBiasGeluRunsEveryGeluAuxBiasAlgorithm_CUDA) {
  at::manual_seed(19);
  const auto on = on_gpu().dtype(at::kBFloat16);
  const at::Tensor x = at::randn({256, 64}, on), w = at::randn({256, 64}, on), b = at::randn({256}, on);
  const kernels::StepGemm g = kernels::linear_gemms("fc1", 256, 64, 256)[0];
  const at::Tensor out = at::empty({256, 256}, on), pre = at::empty_like(out);
  const int n = static_cast<int>(kernels::lt_algorithms(g, x, w, out, {kernels::LtEpilogue::kGeluAuxBias, b, pre}).size());
  ASSERT_GT(n, 0);
  const at::Tensor want = kernels::linear_gelu_aux_reference(x.to(at::kFloat), w.to(at::kFloat), b.to(at::kFloat)).first;
  for (int i = 0; i < n; ++i) {
    const at::Tensor y = kernels::linear_bias_gelu(x, w, b, 32, {{kernels::gemm_key(g, "gelu_aux_bias", "BFloat16"), i}});
    EXPECT_LE((y.to(at::kFloat) - want).abs().max().item<double>(), 2e-2 * want.abs().max().item<double>()) << "#" << i;
  }
}

// The classifier backward's scaling kernel: what the reference makes, bit for bit, in 16-byte packs (a bf16
// gradient from itself or from fp32) and one element a thread (an odd length, a gradient not aligned to a pack).
TEST_F(KernelsCuda, ScaledGradientKernelIsTheReference_CUDA) {
  at::manual_seed(18);
  const at::Tensor g = at::full({1}, 1.0f / 3.0f, on_gpu());
  for (auto [dtype, from] : {std::pair{at::kBFloat16, at::kBFloat16}, {at::kBFloat16, at::kFloat},
                             {at::kHalf, at::kHalf}, {at::kHalf, at::kFloat}, {at::kFloat, at::kFloat}}) {
    const at::Tensor big = (at::randn({4097 * 8}, on_gpu()) * 100).to(from);
    for (const at::Tensor& kept : {big.narrow(0, 0, 4096 * 8), big.narrow(0, 0, 1001), big.narrow(0, 1, 4096 * 8)}) {
      const at::Tensor got = kernels::scaled_gradient(kept, g, dtype);
      EXPECT_EQ(got.scalar_type(), dtype);
      EXPECT_TRUE(at::equal(got, kernels::scaled_gradient_reference(kept, g, dtype)))
          << dtype << " from " << from << ", " << kept.numel() << " at offset " << kept.storage_offset();
    }
  }
}

double fp8_rel(const at::Tensor& a, const at::Tensor& b) {
  return ((a.to(at::kFloat) - b.to(at::kFloat)).norm() / b.to(at::kFloat).norm()).item<double>();
}

// The one-pass quantization into both layouts (kernels/cuda/fp8_quantize.cu): the reference's scale, and ATen's
// bits, row-major and transposed, at the MLP's shapes and at tiles cut short; what it does not take goes by ATen's.
TEST_F(KernelsCuda, Fp8BothLayoutsInOnePassAreAtensBits_CUDA) {
  at::manual_seed(6);
  auto bytes = [](const at::Tensor& q) { return q.contiguous().view(at::kByte); };
  for (const auto dtype : {at::kBFloat16, at::kHalf, at::kFloat}) {
    for (const auto format : {at::kFloat8_e4m3fn, at::kFloat8_e5m2}) {
      for (const auto& [N, K] : {std::pair<int64_t, int64_t>{1024, 3072}, {80, 136}, {16, 8}}) {
        if (dtype == at::kFloat && K % 4 != 0) continue;
        const at::Tensor t = (at::randn({N, K}, on_gpu()) * 3).to(dtype);
        ASSERT_TRUE(kernels::fp8_both_packable(t));
        const kernels::Fp8 ours = kernels::quantize_fp8(t, format, true);
        const at::Tensor want_scale = kernels::quantize_fp8_reference(t, format).inverse_scale;
        // the scale within its last bit (ATen may divide by the format's top as a multiply by its reciprocal)
        EXPECT_LE((ours.inverse_scale - want_scale).abs().item<float>(), want_scale.item<float>() * 1.2e-7f);
        at::Tensor want = at::empty_like(t, t.options().dtype(format));  // ATen's divide by our scale: its bits
        at::div_out(want, t, ours.inverse_scale.view({1}));
        EXPECT_TRUE(at::equal(bytes(ours.data), bytes(want))) << dtype << " " << format << " " << N << "x" << K;
        EXPECT_TRUE(at::equal(bytes(ours.transposed), bytes(want.t()))) << dtype << " " << format << " " << N << "x" << K;
      }
    }
  }
  const at::Tensor odd = at::randn({24, 40}, on_gpu()).to(at::kBFloat16);  // N not a multiple of 16
  const kernels::Fp8 q = kernels::quantize_fp8(odd, at::kFloat8_e4m3fn, true);
  EXPECT_TRUE(at::equal(bytes(q.transposed), bytes(q.data.t())));
}

// On an sm89+ GPU, at::_scaled_mm's FP8 tensor-core kernels: the same bounds against the reference, in bf16.
TEST_F(KernelsCuda, Fp8LinearAndItsGradientsOnTheGpu_CUDA) {
  at::manual_seed(4);
  const auto on = at::device(at::kCUDA);
  const at::Tensor x = at::randn({256, 768}, on).to(at::kBFloat16).requires_grad_();
  const at::Tensor w = (at::randn({2304, 768}, on) * 0.02).to(at::kBFloat16).requires_grad_();
  const at::Tensor b = at::randn({2304}, on).to(at::kBFloat16).requires_grad_();
  const at::Tensor g = at::randn({256, 2304}, on).to(at::kBFloat16);
  at::Tensor y;
  try {
    y = kernels::fp8_linear(x, w, b);
  } catch (const c10::Error& e) {
    GTEST_SKIP() << "skipped: no FP8 matmul on this GPU (" << e.what_without_backtrace() << ")";
  }
  EXPECT_LT(fp8_rel(y, kernels::fp8_linear_reference(x, w, b)), 0.01);  // bf16 output's rounding
  const auto ours = torch::autograd::grad({y}, {x, w, b}, {g});
  const auto ref = torch::autograd::grad({kernels::fp8_linear_reference(x, w, b)}, {x, w, b}, {g.to(at::kFloat)});
  EXPECT_LT(fp8_rel(ours[0], ref[0]), 0.1);
  EXPECT_LT(fp8_rel(ours[1], ref[1]), 0.1);
  // the bias's gradient summed in fp32 and rounded once to bf16: within half a bf16 ulp of the exact sum
  const at::Tensor exact = g.to(at::kFloat).sum(0);
  EXPECT_TRUE(((ours[2].to(at::kFloat) - exact).abs() <= exact.abs() / 256 + 1e-6).all().item<bool>());
}

// CUPTI's side of the fp8_scaling kind of work: the backward's quantization (two launches, both layouts), launched
// inside the linear's autograd node, take their own scope's op and category, not the node's (matmul).
TEST_F(KernelsCuda, Fp8ScalingKernelsInTheBackwardAreFp8Scaling_CUDA) {
  const at::Tensor x = at::randn({256, 768}, on_gpu()).to(at::kBFloat16).requires_grad_();
  const at::Tensor w = (at::randn({768, 768}, on_gpu()) * 0.02).to(at::kBFloat16).requires_grad_();
  at::Tensor y;
  try {
    y = kernels::fp8_linear(x, w, std::nullopt);
  } catch (const c10::Error& e) {
    GTEST_SKIP() << "skipped: no FP8 matmul on this GPU (" << e.what_without_backtrace() << ")";
  }
  synchronize(dev_);
  auto collector = make_collector(dev_);
  collector->start();
  y.backward(at::ones_like(y));
  collector->stop();
  const std::vector<TraceEvent> events = collector->events();
  int scaling = 0;
  for (const auto& e : events) {
    if (e.kind == "kernel" && e.op == kernels::kFp8ScalingRecord) {
      ++scaling;
      EXPECT_EQ(category(e.name, e.kind, e.op), "fp8_scaling") << e.name;
    }
  }
  EXPECT_GE(scaling, 2);  // the gradient's quantization: its amax, then the pass into both layouts
  EXPECT_GT(summarize(events, 1, 1.0, "cupti").category_ms.at("fp8_scaling"), 0.0);
}

}  // namespace
}  // namespace gpt2
