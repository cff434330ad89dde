#include "bench/commands/kernel_bench.h"

#include <ATen/ATen.h>
#include <torch/version.h>
#include <torch/csrc/autograd/autograd.h>

#include <algorithm>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>
#include <tuple>

#include "bench/commands/gemm_bench.h"
#include "bench/ladder/run_dir.h"
#include "bench/measure/choosers.h"
#include "bench/runtime/device.h"
#include "bench/step/optim.h"
#include "bench/step/train_step.h"
#include "common/errors.h"
#include "common/files.h"
#include "common/format.h"
#include "common/posix_regex.h"
#include "config/profile.h"
#include "kernels/attention.h"
#include "kernels/bias_gelu.h"
#include "kernels/classifier.h"
#include "kernels/fp8_linear.h"
#include "kernels/residual_norm.h"
#include "model/gpt2.h"
#include "model/layers.h"
#include "variants/registry.h"

namespace gpt2 {

KernelCase time_in_turns(std::string variant, std::string shape, const std::vector<Pass>& passes, int rounds,
                         double round_ms, const Timing& timing) {
  KernelCase c{std::move(variant), std::move(shape), 1, {}, {}, {}};
  std::vector<std::function<void()>> runs;
  double slowest = 0;
  for (const auto& [name, pass] : passes) {
    TimedSide side{name, "eager", {}, 0};
    runs.push_back(pass);
    if (timing.replay) {
      try {
        runs.back() = timing.replay(pass);
        side.timed = "graph";
      } catch (const std::exception& e) {  // e.g. an op that waits for the device: timed as it is, saying why
        side.timed = "eager: " + first_line(error_text(e));
      }
    }
    (void)timing.round(runs.back(), 1);
    slowest = std::max(slowest, timing.round(runs.back(), 1));
    c.sides.push_back(std::move(side));
  }
  c.iters = static_cast<int>(std::clamp(std::round(round_ms / std::max(slowest, 1e-6)), 1.0, 1000.0));
  for (int r = 0; r < rounds; ++r)
    for (size_t i = 0; i < runs.size(); ++i) c.sides[i].ms.push_back(timing.round(runs[i], c.iters));
  for (auto& s : c.sides) s.median_ms = median(s.ms);
  for (size_t i = 1; i < c.sides.size(); ++i) c.speedup.push_back(ratio_interval(c.sides[i].ms, c.sides[0].ms));
  return c;
}

namespace {

// The top rung's context for these ops (its dtype, native layers, padded vocabulary) plus `extra`.
StepSpec spec_with(const StepSpec& base, const DeviceInfo& dev, std::vector<std::string> extra) {
  std::vector<std::string> v = {"bf16_cast", "native_layers", "vocab_padding"};
  v.insert(v.end(), extra.begin(), extra.end());
  return resolve("kernels", v, base, dev).spec;
}

at::Tensor input(at::IntArrayRef shape, const at::TensorOptions& opts) {
  return at::randn(shape, opts).requires_grad_();
}

// The residual add and the LayerNorm after it, with the profile's dropout on the branch and the branch's bias,
// which ours adds and reduces in its own passes and ATen's side in the linear's epilogue and backward (timed here);
// on a GPU with dropout, ours without it too (what its Philox draws cost).
KernelCase residual_norm_case(const StepSpec& base, const DeviceInfo& dev, int rounds, const Timing& timing) {
  const StepSpec s = spec_with(base, dev, {});
  const int64_t N = s.batch * s.model.context, C = s.model.n_embd;
  const double p = s.model.dropout;
  const auto opts = at::device(torch_device(dev)).dtype(compute_dtype(math_mode(s)));
  const at::Tensor x = input({N, C}, opts), r = input({N, C}, opts), g = input({C}, opts), b = input({C}, opts),
                   bias = input({C}, opts);
  const at::Tensor gs = at::randn({N, C}, opts), gh = at::randn({N, C}, opts);
  const double eps = LayerNormImpl::kEps;
  auto ours = [&](kernels::Traversal traversal, double dropout) {
    return [&, traversal, dropout] {
      auto [sum, h] = kernels::add_layer_norm(x, r, g, b, eps, dropout, bias, traversal);
      (void)torch::autograd::grad({sum, h}, {x, r, g, b, bias}, {gs, gh});
    };
  };
  auto aten = [&] {
    const at::Tensor sum = p > 0 ? x + at::dropout(r, p, /*train=*/true) : x + r;
    const auto grads = torch::autograd::grad({sum, at::layer_norm(sum, {C}, g, b, eps)}, {x, r, g, b}, {gs, gh});
    (void)grads[1].sum(0);  // the bias's gradient, as the linear's backward takes it
  };
  std::ostringstream shape;
  shape << "N=" << N << " C=" << C << " " << c10::toString(opts.dtype().toScalarType()) << " dropout=" << p;
  std::vector<Pass> sides = {{"ours: add_layer_norm with the branch's bias (kernels/residual_norm)", ours({}, p)}};
  if (dev.cuda() && kernels::holds_rows(C, opts.dtype().toScalarType())) {  // settings.residual_norm's others
    sides.emplace_back("ours, each row held in registers (settings.residual_norm: held)", ours({true, true}, p));
    sides.emplace_back("ours, rows held in the forward alone (settings.residual_norm: held_forward)",
                       ours({true, false}, p));
    sides.emplace_back("ours, rows held in the backward alone (settings.residual_norm: held_backward)",
                       ours({false, true}, p));
  }
  if (dev.cuda() && p > 0) sides.emplace_back("ours without dropout (another step: what its draws cost)", ours({}, 0));
  sides.emplace_back(p > 0 ? "ATen: x + dropout(r), then layer_norm; r's gradient summed (the bias's)"
                           : "ATen: x + r, then layer_norm; r's gradient summed (the bias's)",
                     aten);
  return time_in_turns("fused_residual_norm", shape.str(), sides, rounds, 5.0, timing);
}

// The MLP as the model builds it (Linear + GELU(tanh), then the second Linear), one FeedForward a side, each with
// its variant's edit: the first side ours, the others what it replaces.
KernelCase mlp_case(const char* variant, const std::vector<std::pair<std::string, std::string>>& sides,
                    const StepSpec& base, const DeviceInfo& dev, int rounds, const Timing& timing) {
  const StepSpec s = spec_with(base, dev, {});
  const int64_t B = s.batch, T = s.model.context, C = s.model.n_embd;
  const auto dtype = compute_dtype(math_mode(s));
  const auto opts = at::device(torch_device(dev)).dtype(dtype);
  const at::Tensor x = input({B, T, C}, opts), gy = at::randn({B, T, C}, opts);
  std::vector<FeedForward> mlps;
  std::vector<Pass> passes;
  mlps.reserve(sides.size());
  for (const auto& [name, edit] : sides) {
    mlps.emplace_back(spec_with(base, dev, edit.empty() ? std::vector<std::string>{} : std::vector{edit}).model);
    mlps.back()->to(torch_device(dev), dtype);
    FeedForward mlp = mlps.back();
    passes.emplace_back(name, [mlp, &x, &gy]() mutable {
      std::vector<at::Tensor> ins = mlp->parameters();
      ins.push_back(x);
      (void)torch::autograd::grad({mlp->forward(x)}, ins, {gy});
    });
  }
  std::ostringstream shape;
  shape << "B=" << B << " T=" << T << " C=" << C << " F=" << 4 * C << " " << c10::toString(dtype);
  return time_in_turns(variant, shape.str(), passes, rounds, 5.0, timing);
}

const std::pair<std::string, std::string> kEpilogueGemm = {
    "the top rung's: fuse_bias_gelu's GEMM epilogue, the pre-activation recomputed", "fuse_bias_gelu"};
const std::pair<std::string, std::string> kAtenMlp = {"ATen: linear, then gelu(tanh)", ""};

KernelCase gelu_backward_case(const StepSpec& base, const DeviceInfo& dev, int rounds, const Timing& timing) {
  return mlp_case("fused_gelu_backward",
                  {{"ours: GELU and the pre-activation from fc1's epilogue, GELU' and the bias gradient in one pass",
                    "fused_gelu_backward"},
                   kEpilogueGemm, kAtenMlp},
                  base, dev, rounds, timing);
}

KernelCase gelu_epilogues_case(const StepSpec& base, const DeviceInfo& dev, int rounds, const Timing& timing) {
  return mlp_case("gelu_epilogues",
                  {{"ours: GELU in fc1's epilogue (pre-activation kept), GELU' + bias gradient in fc2's", "gelu_epilogues"},
                   {"fused_gelu_backward: our one-pass kernel", "fused_gelu_backward"}, kEpilogueGemm, kAtenMlp},
                  base, dev, rounds, timing);
}

// The MLP's two linears in FP8 (per-tensor scales, the casts included) against the bf16 MLPs the top runs.
KernelCase fp8_case(const StepSpec& base, const DeviceInfo& dev, int rounds, const Timing& timing) {
  return mlp_case("fp8_linears", {{"ours: fc1 and fc2 in FP8 (kernels/fp8_linear), GELU apart", "fp8_linears"},
                                  kEpilogueGemm, kAtenMlp},
                  base, dev, rounds, timing);
}

// The LM head and the loss, ours at the profile's chunk and at 2x, 4x ... up to all tokens in one chunk (fewer
// chunks pass over the head's fp32 gradient fewer times, and hold more logits): the note names the fastest.
KernelCase classifier_case(const StepSpec& base, const DeviceInfo& dev, int rounds, const Timing& timing) {
  const StepSpec s = spec_with(base, dev, {}), fused = spec_with(base, dev, {"fused_classifier"});
  const int64_t N = s.batch * s.model.context, C = s.model.n_embd, V = s.model.padded_vocab();
  const int64_t chunk = fused.model.classifier_chunk;
  const std::string setting = fused.settings.classifier_chunk_fastest ? "fastest, from " + std::to_string(chunk)
                                                                      : std::to_string(chunk);
  const auto opts = at::device(torch_device(dev)).dtype(compute_dtype(math_mode(s)));
  const at::Tensor h = input({N, C}, opts), w = input({V, C}, opts);
  const at::Tensor t = at::randint(s.model.vocab_size, {N}, at::device(torch_device(dev)).dtype(at::kLong));
  const std::vector<int64_t> chunks = classifier_chunk_candidates(chunk, N);  // what classifier_chunk: fastest times
  std::vector<Pass> passes;
  for (const int64_t c : chunks) {
    std::string name = "ours: linear_cross_entropy (kernels/classifier), chunk=" + std::to_string(c);
    if (c == chunks.front()) name += " (settings.classifier_chunk: " + setting + ")";
    if (c == N && chunks.size() > 1) name += ", all tokens";
    passes.emplace_back(name, [&h, &w, &t, c] {
      (void)torch::autograd::grad({kernels::linear_cross_entropy(h, w, t, c)}, {h, w}, {});
    });
  }
  passes.emplace_back("ATen: linear, then cross_entropy", [&] {
    (void)torch::autograd::grad({at::cross_entropy_loss(at::linear(h, w), t)}, {h, w}, {});
  });
  std::ostringstream shape;
  shape << "N=" << N << " C=" << C << " V=" << V << " chunk=" << chunk << " "
        << c10::toString(opts.dtype().toScalarType());
  KernelCase k = time_in_turns("fused_classifier", shape.str(), passes, rounds, 5.0, timing);
  size_t best = 0;
  for (size_t i = 1; i < chunks.size(); ++i)
    if (k.sides[i].median_ms < k.sides[best].median_ms) best = i;
  if (chunks.size() > 1)
    k.note = "fastest chunk: " + std::to_string(chunks[best]) + " tokens (settings.classifier_chunk: " + setting + ")";
  return k;
}

// One optimizer step over the top rung's parameters (their shapes and dtype; random gradients), ours in one
// launch against ATen's fused AdamW, each on its own copy.
KernelCase adamw_case(const StepSpec& base, const DeviceInfo& dev, int rounds, const Timing& timing) {
  const StepSpec s = spec_with(base, dev, {"fused_adamw"});
  const auto opts = at::device(torch_device(dev)).dtype(compute_dtype(math_mode(s)));
  std::vector<std::vector<int64_t>> shapes;
  int64_t numel = 0;
  for (const auto& p : GPT2(s.model)->parameters()) shapes.push_back(p.sizes().vec()), numel += p.numel();
  auto optimizer = [&](OptimizerKind kind) {
    std::vector<at::Tensor> params;
    for (const auto& shape : shapes) {
      params.push_back(at::randn(shape, opts));
      params.back().mutable_grad() = at::randn(shape, opts).mul_(0.01);
    }
    OptimizerOptions o = s.optimizer;
    o.kind = kind;
    return std::make_shared<AdamW>(params, o);
  };
  const auto ours = optimizer(OptimizerKind::kAdamwOneLaunch), aten = optimizer(OptimizerKind::kAdamwFused);
  std::ostringstream shape;
  shape << shapes.size() << " tensors, " << numel << " elements " << c10::toString(opts.dtype().toScalarType())
        << "; one AdamW step";
  return time_in_turns("adamw_one_launch", shape.str(),
                       {{"ours: every parameter's update in one launch (kernels/adamw)", [ours] { ours->step(); }},
                        {"ATen: _fused_adamw_ (multi_tensor_apply: a launch per 320 chunks)", [aten] { aten->step(); }}},
                       rounds, 5.0, timing);
}

// fuse_qkv's attention from the projection's (B, T, 3C) output to its gradient, with the profile's dropout: ours
// through our cuDNN graphs (one dQKV) against ATen's SDPA by its cuDNN and its flash kernels (split, the three
// gradients concatenated), and with dropout, ATen's cuDNN kernel without it (what the dropout costs); a
// kernel that does not run here is named in the note. TFLOP/s over the causal FLOPs.
KernelCase attention_case(const StepSpec& base, const DeviceInfo& dev, int rounds, const Timing& timing) {
  const StepSpec s = spec_with(base, dev, {});
  const int64_t B = s.batch, T = s.model.context, C = s.model.n_embd, H = s.model.n_head;
  const double p = s.model.dropout;
  const auto opts = at::device(torch_device(dev)).dtype(compute_dtype(math_mode(s)));
  const at::Tensor qkv = input({B, T, 3 * C}, opts), gy = at::randn({B, T, C}, opts);
  auto pass = [&qkv, &gy, H](bool cudnn, SdpaBackend backend, double p) {
    return [&qkv, &gy, H, p, cudnn, backend] {
      const SdpaBackendGuard only(backend);
      (void)torch::autograd::grad({kernels::causal_attention(qkv, H, p, cudnn)}, {qkv}, {gy});
    };
  };
  std::vector<Pass> sides = {{"ours: cuDNN's flash attention through our graphs (kernels/attention), one dQKV",
                              pass(true, SdpaBackend::kAuto, p)}};
  std::string missing;
  for (const auto& [name, backend, without] :
       {std::tuple{"ATen: SDPA's cuDNN kernel; the three gradients concatenated", SdpaBackend::kCudnn, false},
        std::tuple{"ATen: SDPA's flash kernel; the three gradients concatenated", SdpaBackend::kFlash, false},
        std::tuple{"ATen: SDPA's cuDNN kernel without dropout (another step: what the dropout costs)",
                   SdpaBackend::kCudnn, true}}) {
    if (without && p == 0) continue;  // the first ATen side already
    const double dropout = without ? 0.0 : p;
    try {
      pass(false, backend, dropout)();
      sides.emplace_back(name, pass(false, backend, dropout));
    } catch (const std::exception& e) {
      missing += strf(" %s does not run here (%s).", to_string(backend).c_str(), first_line(error_text(e)).c_str());
    }
  }
  const std::string shape = strf("B=%lld T=%lld C=%lld H=%lld %s dropout=%g", static_cast<long long>(B),
                                 static_cast<long long>(T), static_cast<long long>(C), static_cast<long long>(H),
                                 c10::toString(opts.dtype().toScalarType()), p);
  KernelCase k = time_in_turns("cudnn_attention", shape, sides, rounds, 5.0, timing);
  const double flops = 6.0 * B * T * T * C;  // causal: forward 2·B·T²·C, backward twice that
  k.note = "TFLOP/s over the causal FLOPs:";
  for (const auto& side : k.sides) k.note += strf(" %.0f,", flops / (side.median_ms * 1e9));
  k.note.back() = ' ';
  k.note += "(the sides in order)." + missing;
  return k;
}

// One of our memory-bound CUDA kernels alone at each of its launch shapes, then ATen's ops for the same result
// and a device copy of the bytes the pass must move (each operand read once, each output written once): the
// note gives each side's GB/s over those bytes, how near the copy's a setting comes.
KernelCase bandwidth_case(const char* variant, const std::string& shape, std::vector<Pass> sides, double bytes,
                          const at::TensorOptions& opts, int rounds, const Timing& timing) {
  const int64_t n = static_cast<int64_t>(bytes / 2 / opts.dtype().itemsize());
  const at::Tensor src = at::randn({n}, opts), dst = at::empty({n}, opts);
  sides.emplace_back("a copy of as many bytes (at::Tensor::copy_)", [src, dst]() mutable { dst.copy_(src); });
  KernelCase k = time_in_turns(variant, shape, sides, rounds, 5.0, timing);
  k.note = strf("GB/s over the %.0f MB a pass must move:", bytes / 1e6);
  for (const auto& side : k.sides) k.note += strf(" %.0f,", bytes / (side.median_ms * 1e6));
  k.note.back() = ' ';
  k.note += "(the sides in order, the copy last)";
  return k;
}

// fused_gelu_backward's kernel alone on the MLP's (N × 4C) pre-activation, a block walking 32 rows (the default;
// settings.gelu_backward_slab) or 16, 8, 64.
KernelCase bias_gelu_kernel_case(const StepSpec& base, const DeviceInfo& dev, int rounds, const Timing& timing) {
  const StepSpec s = spec_with(base, dev, {});
  const int64_t N = s.batch * s.model.context, F = 4 * s.model.n_embd;
  const auto opts = at::device(torch_device(dev)).dtype(compute_dtype(math_mode(s)));
  const at::Tensor grad = at::randn({N, F}, opts), pre = at::randn({N, F}, opts);
  std::vector<Pass> sides;
  for (const int64_t slab : {32, 16, 8, 64})
    sides.emplace_back("ours: bias_gelu_backward alone, " + std::to_string(slab) + " rows a block" +
                           (slab == 32 ? " (the default)" : ""),
                       [&grad, &pre, slab] { (void)kernels::bias_gelu_backward_cuda(grad, pre, slab); });
  sides.emplace_back("ATen: gelu_backward, then its sum over the rows",
                     [&] { (void)kernels::bias_gelu_backward_reference(grad, pre); });
  const std::string shape = strf("N=%lld F=%lld %s, the kernel alone", static_cast<long long>(N),
                                 static_cast<long long>(F), c10::toString(opts.dtype().toScalarType()));
  return bandwidth_case("fused_gelu_backward", shape, sides, 3.0 * N * F * opts.dtype().itemsize(), opts, rounds,
                        timing);
}

// fused_classifier's softmax cross-entropy kernel alone on one chunk's logits, in place, a block of 512 threads
// a row (the default; settings.classifier_kernel) or 256 or 1024 (fewer rows in flight leave more of its second
// read of a row to L2), or 1024 with the row staged in shared memory (one read from global memory); the default
// and the staged form also with their exponentials in base 2 (kernels::SoftmaxLaunch::exp2).
KernelCase xent_kernel_case(const StepSpec& base, const DeviceInfo& dev, int rounds, const Timing& timing) {
  const StepSpec s = spec_with(base, dev, {"fused_classifier"});
  // the profile's chunk; all the step's tokens where it is `fastest` (the H100 run's choice at B=8)
  const int64_t N = s.batch * s.model.context, V = s.model.padded_vocab();
  const int64_t n = s.settings.classifier_chunk_fastest ? N : std::min(s.model.classifier_chunk, N);
  const auto opts = at::device(torch_device(dev)).dtype(compute_dtype(math_mode(s)));
  at::Tensor logits = at::randn({n, V}, opts);  // each pass overwrites it with its gradient: the same work
  const at::Tensor t = at::randint(s.model.vocab_size, {n}, at::device(torch_device(dev)).dtype(at::kLong));
  std::vector<Pass> sides;
  for (const auto& [how, launch] : std::vector<std::pair<std::string, kernels::SoftmaxLaunch>>{
           {"512 threads a row (the default)", {512}}, {"256 threads a row", {256}}, {"1024 threads a row", {1024}},
           {"1024 threads a row, the row staged in shared memory", {1024, true}},
           {"512 threads a row, exponentials in base 2", {512, false, true}},
           {"1024 threads a row staged, exponentials in base 2", {1024, true, true}}})
    sides.emplace_back("ours: softmax_xent_backward_ alone, " + how,
                       [&logits, &t, launch] { (void)kernels::softmax_xent_backward_cuda_(logits, t, 1.0, launch); });
  sides.emplace_back("ATen: log_softmax, its loss and gradient",
                     [&logits, &t] { (void)kernels::softmax_xent_backward_reference_(logits, t, 1.0); });
  const std::string shape = strf("rows=%lld V=%lld %s, the kernel alone, in place", static_cast<long long>(n),
                                 static_cast<long long>(V), c10::toString(opts.dtype().toScalarType()));
  return bandwidth_case("fused_classifier", shape, sides, 2.0 * n * V * opts.dtype().itemsize(), opts, rounds, timing);
}

// fused_classifier's backward alone: dh and dw, kept from the forward, times the incoming gradient (dw from fp32
// where the step's tokens are more than one chunk), by our kernel or by ATen's multiply.
KernelCase scale_kernel_case(const StepSpec& base, const DeviceInfo& dev, int rounds, const Timing& timing) {
  const StepSpec s = spec_with(base, dev, {"fused_classifier"});
  const int64_t N = s.batch * s.model.context, C = s.model.n_embd, V = s.model.padded_vocab();
  const bool chunks = !s.settings.classifier_chunk_fastest && s.model.classifier_chunk < N;
  const auto opts = at::device(torch_device(dev)).dtype(compute_dtype(math_mode(s)));
  const auto dtype = opts.dtype().toScalarType();
  const at::Tensor dh = at::randn({N, C}, opts), dw = at::randn({V, C}, chunks ? opts.dtype(at::kFloat) : opts);
  const at::Tensor g = at::ones({1}, opts.dtype(at::kFloat));
  const std::vector<Pass> sides = {
      {"ours: scaled_gradient (16-byte packs, g read on the device)", [&, dtype] {
         (void)kernels::scaled_gradient_cuda(dh, g, dtype), (void)kernels::scaled_gradient_cuda(dw, g, dtype);
       }},
      {"ATen: a multiply by the one-element fp32 gradient", [&, dtype] {
         (void)kernels::scaled_gradient_reference(dh, g, dtype), (void)kernels::scaled_gradient_reference(dw, g, dtype);
       }}};
  const double bytes = 2.0 * dh.nbytes() + dw.nbytes() + static_cast<double>(V * C) * opts.dtype().itemsize();
  const std::string shape = strf("dh %lldx%lld, dw %lldx%lld from %s, the backward alone", static_cast<long long>(N),
                                 static_cast<long long>(C), static_cast<long long>(V), static_cast<long long>(C),
                                 c10::toString(dw.scalar_type()));
  return bandwidth_case("fused_classifier", shape, sides, bytes, opts, rounds, timing);
}

// FP8's quantization of the MLP's (N × 4C) activation into both layouts _scaled_mm takes (x row-major for the
// forward, transposed for the backward's weight gradient): our one pass against ATen's divide and transposed copy.
// Both read t twice (the amax, then the scaling): the bytes, two reads of t and two FP8 writes.
KernelCase fp8_quantize_kernel_case(const StepSpec& base, const DeviceInfo& dev, int rounds, const Timing& timing) {
  const StepSpec s = spec_with(base, dev, {});
  const int64_t N = s.batch * s.model.context, F = 4 * s.model.n_embd;
  const auto opts = at::device(torch_device(dev)).dtype(compute_dtype(math_mode(s)));
  const at::Tensor h = at::randn({N, F}, opts);
  const std::vector<Pass> sides = {
      {"ours: quantize_fp8 into both layouts in one pass (kernels/cuda/fp8_quantize.cu), after the amax",
       [&h] { (void)kernels::quantize_fp8(h, at::kFloat8_e4m3fn, true); }},
      {"ATen: the amax, a divide into FP8, then the transposed copy",
       [&h] { (void)kernels::quantize_fp8_reference(h, at::kFloat8_e4m3fn, true); }}};
  const std::string shape = strf("N=%lld F=%lld %s into e4m3, the quantization alone", static_cast<long long>(N),
                                 static_cast<long long>(F), c10::toString(opts.dtype().toScalarType()));
  return bandwidth_case("fp8_linears", shape, sides, static_cast<double>(N * F) * (2.0 * opts.dtype().itemsize() + 2),
                        opts, rounds, timing);
}

using MakeCase = KernelCase (*)(const StepSpec&, const DeviceInfo&, int, const Timing&);
struct Case {
  const char* variant;
  MakeCase make;
  const char* alone = nullptr;  // a CUDA kernel alone (nothing to time on a CPU): which, for the console
};
const Case kCases[] = {{"fused_residual_norm", &residual_norm_case},
                       {"fused_gelu_backward", &gelu_backward_case},
                       {"gelu_epilogues", &gelu_epilogues_case},
                       {"fused_classifier", &classifier_case},
                       {"fp8_linears", &fp8_case},
                       {"adamw_one_launch", &adamw_case},
                       {"cudnn_attention", &attention_case},
                       {"fused_gelu_backward", &bias_gelu_kernel_case, "bias_gelu_backward"},
                       {"fused_classifier", &xent_kernel_case, "softmax_xent_backward_"},
                       {"fused_classifier", &scale_kernel_case, "scaled_gradient"},
                       {"fp8_linears", &fp8_quantize_kernel_case, "quantize_fp8"}};

void print_case(const KernelCase& c) {
  const bool graphs = !c.sides.empty() && c.sides[0].timed == "graph";
  std::printf("%s  (%s; forward + backward, %zu rounds of %d passes, %s)\n", c.variant.c_str(), c.shape.c_str(),
              c.sides.empty() ? size_t{0} : c.sides[0].ms.size(), c.iters,
              graphs ? "as CUDA graph replays" : "launched eagerly");
  for (size_t i = 0; i < c.sides.size(); ++i) {
    std::printf("  %-80s %9.3f ms", c.sides[i].name.c_str(), c.sides[i].median_ms);
    if (i > 0) {
      const auto& r = c.speedup[i - 1];
      std::printf("   ours %.2fx (%.2f-%.2fx, %.0f%%)", c.ratio(i), r.low, r.high, 100 * r.level);
    }
    if (c.sides[i].timed != (graphs ? "graph" : "eager")) std::printf("   [%s]", c.sides[i].timed.c_str());
    std::printf("\n");
  }
  if (!c.note.empty()) std::printf("  %s\n", c.note.c_str());
}

// One case: its JSON entry (its sides, or why it was skipped, or its error: the other cases go on).
nlohmann::json run_case(const Case& k, const StepSpec& base, const DeviceInfo& dev, int rounds, const Timing& timing,
                        int& failed) {
  auto untimed = [&k](const char* key, const std::string& text) {  // skipped or failed: which case, and why
    nlohmann::json out = {{"variant", k.variant}, {key, text}};
    if (k.alone) out["alone"] = k.alone;  // one of the variant's cases: its kernel alone
    return out;
  };
  Support s = find_variant(k.variant)->supports(dev);  // every case is a registered variant's
  if (s.ok && k.alone && !dev.cuda()) s = {false, "the CUDA kernel alone: needs a CUDA GPU"};
  const std::string which = k.alone ? strf(" (%s alone)", k.alone) : "";  // the console line names the case
  if (!s.ok) {  // FP8 below sm89: nothing of ours to time
    std::printf("%s%s  skipped here: %s\n", k.variant, which.c_str(), s.why_not.c_str());
    return untimed("skipped", s.why_not);
  }
  // tests: GPT2BENCH_FAULT_KERNEL=<variant> fails that case as a kernel would; <variant>:term stops the command
  // there with SIGTERM, as a deadline does
  const char* env = std::getenv("GPT2BENCH_FAULT_KERNEL");
  const std::string fault = env ? env : "";
  try {
    if (fault == k.variant + std::string(":term")) std::raise(SIGTERM);
    if (fault == k.variant) throw std::runtime_error("injected fault (GPT2BENCH_FAULT_KERNEL)");
    const KernelCase c = k.make(base, dev, rounds, timing);
    print_case(c);
    return case_json(c);
  } catch (const std::exception& e) {  // out of memory, a kernel's error
    const std::string what = first_line(error_text(e));
    std::printf("%s%s  error: %s\n", k.variant, which.c_str(), what.c_str());
    ++failed;
    return untimed("error", what);
  }
}

// Whether --only (`only`, "" = all) takes the case or survey of these names.
bool taken(const std::string& only, std::initializer_list<const char*> names) {
  if (only.empty()) return true;
  const PosixRegex re(only, "--only");
  return std::any_of(names.begin(), names.end(), [&](const char* n) { return n && re.found_in(n); });
}

nlohmann::json kernels_doc(const Profile& prof, const DeviceInfo& dev, int rounds, const std::string& only,
                           const nlohmann::json& cases, const nlohmann::json& gemms, const nlohmann::json& fp8_gemms) {
  nlohmann::json dev_json;
  to_json(dev_json, dev);
  nlohmann::json doc = {{"profile", {{"name", prof.name}, {"path", prof.path}, {"batch", prof.batch}}},
                       {"device", dev_json},
                       {"build", {{"torch", torch_version()}, {"cuda", build_has_cuda()}, {"git_sha", git_sha()}}},
                       {"rounds", rounds},
                       {"rule", "each side one forward + backward on the same inputs (gemms, fp8_gemms: one "
                                "matmul); rounds in turns; speedup: ratio = a side's median round time over the first "
                                "side's (ours; in gemms and fp8_gemms ATen's); estimate, low, high: the Hodges-Lehmann "
                                "ratio and interval over every pair of rounds"},
                       {"cases", cases},
                       {"gemms", gemms},
                       {"fp8_gemms", fp8_gemms}};
  if (!only.empty()) doc["only"] = only;  // the cases --only left out are not in the file
  return doc;
}

// Refused before anything runs, naming every name: a pattern that is no POSIX extended regular expression, or
// finds none of the names --only is matched against (each case's variant, a kernel timed alone, the surveys).
void check_only(const std::string& only) {
  const PosixRegex re(only, "--only");
  std::vector<std::string> names;  // each case's variant, the kernels timed alone, the surveys: once each
  for (const Case& k : kCases)
    for (const char* n : {k.variant, k.alone})
      if (n && std::find(names.begin(), names.end(), n) == names.end()) names.push_back(n);
  names.insert(names.end(), {"gemms", "fp8_gemms"});
  std::string all;
  for (const std::string& n : names) {
    if (re.found_in(n)) return;
    all += (all.empty() ? "" : ", ") + n;
  }
  throw std::invalid_argument("--only '" + only + "' finds none of: " + all);
}

}  // namespace

nlohmann::json case_json(const KernelCase& c) {
  nlohmann::json sides = nlohmann::json::array(), speedups = nlohmann::json::array();
  for (const auto& s : c.sides)
    sides.push_back({{"name", s.name}, {"timed", s.timed}, {"median_ms", s.median_ms}, {"ms", s.ms}});
  for (size_t i = 0; i < c.speedup.size(); ++i) {
    const auto& r = c.speedup[i];
    speedups.push_back({{"over", c.sides[i + 1].name}, {"ratio", c.ratio(i + 1)},
                        {"estimate", r.estimate}, {"low", r.low}, {"high", r.high}, {"level", r.level}});
  }
  nlohmann::json j = {{"variant", c.variant}, {"shape", c.shape}, {"iters", c.iters}, {"sides", sides}, {"speedup", speedups}};
  if (!c.note.empty()) j["note"] = c.note;
  return j;
}

int run_kernel_bench(const KernelBenchOptions& o) {
  if (!o.only.empty()) check_only(o.only);
  const Profile prof = load_profile(o.profile_path);
  const DeviceInfo dev = detect_device(o.device.empty() ? prof.device : o.device);
  StepSpec base = baseline_spec(prof.model, prof.batch, dev);
  base.settings = prof.settings;
  at::manual_seed(prof.seed);
  auto timer = make_step_timer(dev);
  const RoundTimer round = [&](const std::function<void()>& pass, int iters) {
    timer->mark();
    for (int i = 0; i < iters; ++i) pass();
    timer->mark();
    return 1e3 * timer->intervals().at(0) / iters;
  };
  Timing timing{round, nullptr};
  if (dev.cuda()) timing.replay = [&dev](const std::function<void()>& pass) { return graphed(dev, pass); };
  std::cerr << "gpt2bench kernels: our kernels against what they replace, profile '" << prof.name << "' on "
            << dev.name << (dev.cuda() ? " (cuda)" : " (cpu: our kernels' ATen references, not the CUDA kernels)")
            << "\n";
  nlohmann::json cases = nlohmann::json::array(), gemms, fp8_gemms;
  // Written again after each case and matmul, "complete" at the end: a command stopped at a deadline (a lent
  // GPU's call) leaves what it timed.
  const auto save = [&](bool complete) {
    if (o.out.empty()) return;
    nlohmann::json doc = kernels_doc(prof, dev, o.rounds, o.only, cases, gemms, fp8_gemms);
    doc["complete"] = complete;
    files::write_file_atomic(o.out, doc.dump(2) + "\n");
  };
  int failed = 0;
  for (const Case& k : kCases) {
    if (!taken(o.only, {k.variant, k.alone})) continue;
    cases.push_back(run_case(k, base, dev, o.rounds, timing, failed));
    std::fflush(stdout);  // each case as it ends, in order with the progress on stderr
    save(false);
    empty_cache(dev);
  }
  if (!cases.empty())
    std::printf("(ours Nx: the median time of what it replaces over ours, > 1: ours is faster; in brackets the\n"
                " Hodges-Lehmann interval of that ratio from every pair of rounds)\n");
  // the top rung's matmuls; FP8's first (issue 50's "why"), a deadline stopping the command later
  const StepSpec top = spec_with(base, dev, {"fuse_qkv", "fused_classifier"});
  if (taken(o.only, {"fp8_gemms"}))
    fp8_gemms = fp8_gemm_survey(top, dev, o.rounds, timing, failed, [&](const nlohmann::json& so_far) {
      fp8_gemms = so_far;
      save(false);
    });
  if (taken(o.only, {"gemms"}))
    gemms = gemm_survey(top, dev, o.rounds, timing, failed, [&](const nlohmann::json& so_far) {
      gemms = so_far;
      save(false);
    });
  save(true);
  if (!o.out.empty()) std::cout << "results: " << o.out << "\n";
  return failed ? 1 : 0;
}

}  // namespace gpt2
