// Our one-launch AdamW (kernels/adamw.h): its tiles run on the host against at::_fused_adamw_, tensor for tensor
// (packed, element-wise, misaligned, more tensors than one launch takes), with a GradScaler's scale and skip, and
// its errors; on a GPU the CUDA kernel against ATen's fused kernel, eagerly and under a CUDA graph.
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include <functional>
#include <string>
#include <vector>

#include "bench/runtime/device.h"
#include "bench/step/train_step.h"
#include "cuda_test.h"
#include "helpers.h"
#include "kernels/adamw.h"
#include "kernels/adamw_tiles.h"
#include "model/data.h"

namespace gpt2 {
namespace {

const kernels::AdamWHyper kHyper{5e-4, 0.9, 0.999, 0.1, 1e-8};

// One AdamW state, ours or ATen's, over tensors of the given sizes; `offset` > 0 makes each tensor a view that
// starts that many elements into its buffer (contiguous, but not 16-byte aligned).
struct State {
  std::vector<at::Tensor> p, g, m, v, steps;
  at::Tensor step;
  State(const std::vector<int64_t>& sizes, const at::TensorOptions& o, int64_t offset = 0) {
    for (int64_t n : sizes) {
      auto make = [&](double scale) { return (at::randn({n + offset}, o.dtype(at::kFloat)) * scale).to(o).narrow(0, offset, n); };
      p.push_back(make(1)), g.push_back(make(0.1)), m.push_back(make(0.01)), v.push_back(make(0.001).abs());
      steps.push_back(at::zeros({}, o.dtype(at::kFloat)));
    }
    step = at::zeros({}, o.dtype(at::kFloat));
  }
  State copy() const {
    State s = *this;
    for (auto* list : {&s.p, &s.g, &s.m, &s.v, &s.steps})
      for (auto& t : *list) t = t.clone();
    s.step = step.clone();
    return s;
  }
  void ours(const at::Tensor& scale = {}, const at::Tensor& inf = {}) {
    kernels::adamw_one_launch_(p, g, m, v, step, kHyper, scale, inf);
  }
  void aten(const at::Tensor& scale = {}, const at::Tensor& inf = {}) {
    at::_foreach_add_(steps, 1.0);
    at::_fused_adamw_(p, g, m, v, {}, steps, kHyper.lr, kHyper.beta1, kHyper.beta2, kHyper.weight_decay, kHyper.eps,
                      false, false, scale.defined() ? std::optional(scale) : std::nullopt,
                      inf.defined() ? std::optional(inf) : std::nullopt);
    if (inf.defined()) at::_foreach_sub_(steps, std::vector<at::Tensor>(steps.size(), inf));
  }
  void new_grads(int seed) {
    at::manual_seed(seed);
    for (auto& t : g) t.copy_(at::randn(t.sizes(), t.options().dtype(at::kFloat)) * 0.1);
  }
};

// Each tensor of the two states within `tol` of its largest magnitude: a missed or doubled update (lr = 5e-4 of
// a parameter's size, the whole of a moment's) shows; rounding does not.
void expect_close(const State& a, const State& b, double tol, const std::string& what) {
  for (size_t i = 0; i < a.p.size(); ++i)
    for (auto [x, y, name] : {std::tuple{a.p[i], b.p[i], "param"}, {a.m[i], b.m[i], "exp_avg"},
                              {a.v[i], b.v[i], "exp_avg_sq"}, {a.g[i], b.g[i], "grad"}}) {
      const at::Tensor xf = x.to(at::kFloat).cpu(), yf = y.to(at::kFloat).cpu();
      const double diff = (xf - yf).abs().max().item<double>() / yf.abs().max().item<double>();
      EXPECT_LE(diff, tol) << what << ": tensor " << i << " (" << x.numel() << " elements) " << name;
    }
}

// ATen's CPU kernel takes 1 - beta1 and 1 - beta2 in double; the CUDA kernel, and ours, round beta1 and beta2 to
// float first (1 - 0.999f is 1.3e-5 off 0.001): within 2e-5 in fp32. bf16: one rounding of the stored value.
double cpu_tol(at::ScalarType t) { return t == at::kFloat ? 2e-5 : 1.0 / 128; }

// GPT-2's shapes in small: whole tiles, a partial tile, packs with a tail that is not a pack, tensors under a pack.
const std::vector<int64_t> kSizes = {3 * 768, 768, 4096, 4096 * 2 + 8, 4097, 7, 1, 50304};

TEST(AdamWOneLaunch, HostTilesMatchTorchsFusedAdamW) {
  for (auto dtype : {at::kFloat, at::kBFloat16}) {
    for (int64_t offset : {0, 1}) {  // aligned (16-byte packs where the size allows) and not (one element a thread)
      at::manual_seed(1);
      State ours(kSizes, at::dtype(dtype), offset);
      State aten = ours.copy();
      for (int step = 0; step < 3; ++step) {
        ours.new_grads(step), aten.new_grads(step);
        ours.ours(), aten.aten();
      }
      const std::string what = std::string(c10::toString(dtype)) + (offset ? " misaligned" : " aligned");
      expect_close(ours, aten, cpu_tol(dtype), what);
      EXPECT_EQ(ours.step.item<float>(), 3.0f) << what;
    }
  }
}

// More tensors than one launch's table takes: the second table's tensors are updated too, once.
TEST(AdamWOneLaunch, MoreTensorsThanOneLaunchTakes) {
  std::vector<int64_t> sizes;
  for (int i = 0; i < kernels::adamw::kMaxTensors + 44; ++i) sizes.push_back(1 + (i * 37) % 300);
  at::manual_seed(2);
  State ours(sizes, at::dtype(at::kFloat));
  State aten = ours.copy();
  ours.ours(), aten.aten();
  expect_close(ours, aten, cpu_tol(at::kFloat), "300 tensors");
}

// Tiles and tensors: every tile belongs to the tensor whose range holds it, and a tensor of n elements has
// ceil(n / tile) of them.
TEST(AdamWOneLaunch, TilesMapToTheirTensors) {
  namespace A = kernels::adamw;
  std::vector<float> buf(100000);
  const std::vector<int64_t> sizes = {A::kTileElems<float>, 1, A::kTileElems<float> + 1, 3 * A::kTileElems<float>};
  std::vector<A::Operands<float>> ops;
  for (int64_t n : sizes) ops.push_back({buf.data(), buf.data(), buf.data(), buf.data(), n});
  auto table = std::make_unique<A::Table<float>>();
  ASSERT_EQ(A::fill(*table, ops.data(), ops.size()), ops.size());
  EXPECT_EQ(table->tiles, 1 + 1 + 2 + 3);
  const std::vector<int> owner = {0, 1, 2, 2, 3, 3, 3};
  for (int64_t tile = 0; tile < table->tiles; ++tile) EXPECT_EQ(A::tensor_of(*table, tile), owner[tile]) << tile;
  EXPECT_TRUE(table->packed[0]);
  EXPECT_FALSE(table->packed[1]);  // one element: not a whole pack
}

// Under a GradScaler: the gradients divided by the scale (and stored so), as ATen's; an inf/nan step changes
// nothing and is not counted.
TEST(AdamWOneLaunch, UnscalesAndSkipsAsTheFusedKernel) {
  at::manual_seed(3);
  State ours(kSizes, at::dtype(at::kFloat));
  State aten = ours.copy();
  const at::Tensor scale = at::full({}, 1024.0f), clean = at::zeros({}), inf = at::ones({});
  ours.ours(scale, clean), aten.aten(scale, clean);
  expect_close(ours, aten, cpu_tol(at::kFloat), "scaled");
  const State before = ours.copy();
  ours.ours(scale, inf);
  expect_close(ours, before, 0, "skipped");
  EXPECT_EQ(ours.step.item<float>(), 1.0f);
}

TEST(AdamWOneLaunch, SaysWhatIsWrongWithItsArguments) {
  State s({8, 8}, at::dtype(at::kFloat));
  auto fails_with = [](const std::function<void()>& f, const std::string& want) {
    try {
      f();
      ADD_FAILURE() << "no error; wanted: " << want;
    } catch (const c10::Error& e) {
      EXPECT_NE(std::string(e.what_without_backtrace()).find(want), std::string::npos) << e.what_without_backtrace();
    }
  };
  fails_with([&] { kernels::adamw_one_launch_(s.p, {s.g[0]}, s.m, s.v, s.step, kHyper); }, "must be as many");
  const std::vector<at::Tensor> mixed = {s.g[0], s.g[1].to(at::kDouble)};
  fails_with([&] { kernels::adamw_one_launch_(s.p, mixed, s.m, s.v, s.step, kHyper); },
             "tensor 1's param, grad, exp_avg and exp_avg_sq must be contiguous, of one shape");
  const std::vector<at::Tensor> strided = {s.p[0], at::zeros({16}).slice(0, 0, 16, 2)};
  fails_with([&] { kernels::adamw_one_launch_(strided, s.g, s.m, s.v, s.step, kHyper); }, "must be contiguous");
  fails_with([&] { kernels::adamw_one_launch_(s.p, s.g, s.m, s.v, at::zeros({}, at::kLong), kHyper); },
             "the step count must be one float32 element");
  fails_with([&] { kernels::adamw_one_launch_(s.p, s.g, s.m, s.v, s.step, kHyper, at::ones({2})); },
             "grad_scale must be one float32 element");
}

using test::KernelsCuda;

// The CUDA kernel against ATen's fused one on the GPU, over GPT-2 124M's parameter shapes and the odd ones above.
TEST_F(KernelsCuda, AdamWOneLaunchMatchesTorchsFusedAdamW_CUDA) {
  std::vector<int64_t> sizes = kSizes;
  for (int64_t n : {50304 * 768, 1024 * 768, 768 * 2304, 2304, 768 * 768, 768 * 3072, 3072}) sizes.push_back(n);
  for (auto dtype : {at::kFloat, at::kBFloat16}) {
    for (int64_t offset : {0, 1}) {
      at::manual_seed(4);
      State ours(sizes, on_gpu().dtype(dtype), offset);
      State aten = ours.copy();
      for (int step = 0; step < 3; ++step) {
        ours.new_grads(step), aten.new_grads(step);
        ours.ours(), aten.aten();
      }
      const std::string what = std::string(c10::toString(dtype)) + (offset ? " misaligned" : " aligned");
      expect_close(ours, aten, dtype == at::kFloat ? 1e-6 : 1.0 / 128, what);
      EXPECT_EQ(ours.step.item<float>(), 3.0f) << what;
    }
  }
}

// The tiny model's step with `change(s, true)` against `change(s, false)`, eagerly and under a CUDA graph: the same
// losses over four steps.
void expect_the_same_losses(const DeviceInfo& dev, const std::function<void(StepSpec&, bool)>& change, double tol) {
  const auto tokens = to_token_tensor(synthetic_corpus(97, 20000, 1));
  StepSpec s = baseline_spec(test::tiny_model(), 4, dev);
  s.optimizer.kind = OptimizerKind::kAdamwFused;
  for (ExecutorKind e : {ExecutorKind::kEager, ExecutorKind::kCudaGraph}) {
    s.executor = e;
    change(s, false);
    const Trajectory without = loss_trajectory(s, dev, tokens, 3, 4);
    change(s, true);
    const Trajectory with = loss_trajectory(s, dev, tokens, 3, 4);
    for (size_t i = 0; i < without.losses.size(); ++i)
      EXPECT_NEAR(with.losses[i], without.losses[i], tol) << to_string(e) << " step " << i;
  }
}

// Ours under a CUDA graph (each replay reads the count the last one left) and eagerly, against torch's fused AdamW.
TEST_F(KernelsCuda, AdamWOneLaunchTrainsAsTheFusedOneEagerAndGraphed_CUDA) {
  expect_the_same_losses(dev_, [](StepSpec& s, bool ours) {
    s.optimizer.kind = ours ? OptimizerKind::kAdamwOneLaunch : OptimizerKind::kAdamwFused;
  }, 1e-5);
}

// The fused classifier's softmax passes on a side stream against the same chunks in order.
TEST_F(KernelsCuda, ClassifierBesideASideStreamTrainsAsInOrderEagerAndGraphed_CUDA) {
  expect_the_same_losses(dev_, [](StepSpec& s, bool beside) {
    s.model.classifier_chunk = 24;  // 64 tokens: three chunks
    s.model.classifier_beside = beside;
  }, 1e-6);
}

// The update in backward on its side stream (the fork and join inside the capture) against the fused update after
// backward.
TEST_F(KernelsCuda, AdamWInBackwardTrainsAsAfterBackwardEagerAndGraphed_CUDA) {
  expect_the_same_losses(dev_, [](StepSpec& s, bool inside) { s.optimizer.in_backward = inside; }, 1e-5);
}

}  // namespace
}  // namespace gpt2
