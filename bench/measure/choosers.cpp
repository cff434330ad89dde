#include "bench/measure/choosers.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>
#include <torch/csrc/autograd/autograd.h>

#include <algorithm>
#include <chrono>
#include <sstream>
#include <stdexcept>

#include "bench/measure/attention_choice.h"
#include "bench/measure/gemm_choice.h"
#include "bench/runtime/device.h"
#include "bench/step/train_step.h"
#include "common/errors.h"
#include "kernels/bias_gelu.h"
#include "kernels/classifier.h"
#include "kernels/residual_norm.h"
#include "model/layers.h"

namespace gpt2 {
namespace {

// ATen says why a kernel cannot run in warnings (TORCH_WARN) before it throws "No available kernel":
// keep them as the reason instead of printing them.
class WarningCollector : public c10::WarningHandler {
 public:
  void process(const c10::Warning& w) override { texts.push_back(first_line(w.msg())); }
  std::vector<std::string> texts;
};

}  // namespace

// What an out-of-memory pass had cached goes back before the next candidate.
double seconds_per_pass(const DeviceInfo& dev, int iters, const std::function<void()>& pass) {
  try {
    synchronize(dev);
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < iters; ++i) pass();
    synchronize(dev);
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / iters;
  } catch (...) {
    empty_cache(dev);
    throw;
  }
}

const std::vector<SdpaBackend>& sdpa_candidates() {
  static const std::vector<SdpaBackend> all = {SdpaBackend::kFlash, SdpaBackend::kEfficient, SdpaBackend::kCudnn,
                                               SdpaBackend::kMath};
  return all;
}

Choice pick_sdpa_backend(const std::string& pytorch_choice, double margin, int rounds,
                         const std::function<double(SdpaBackend)>& trial) {
  Choice c{"sdpa_backend", "", "each kernel's median forward + backward on the rung's attention; PyTorch's own "
           "choice kept unless another is faster by more than the margin", "", pytorch_choice, margin, {}, ""};
  std::vector<std::string> names;
  for (SdpaBackend b : sdpa_candidates()) names.push_back(to_string(b));
  return time_candidates(c, names, rounds, [&](const std::string& name) {
    WarningCollector warnings;
    c10::WarningUtils::WarningHandlerGuard guard(&warnings);
    try {
      return trial(sdpa_backend_from(name));
    } catch (const std::exception& e) {
      std::string why = first_line(error_text(e));
      for (const auto& w : warnings.texts) why += "; " + w;
      throw std::runtime_error(why);
    }
  });
}

Choice choose_sdpa_backend(const StepSpec& spec, const DeviceInfo& dev, int rounds, int iters) {
  const auto& m = spec.model;
  const int64_t B = spec.batch, H = m.n_head, T = m.context, D = m.n_embd / m.n_head;
  const auto opts = at::device(torch_device(dev)).dtype(attention_dtype(spec));
  // (B, T, H, D) as the model's projections make them, seen as (B, H, T, D)
  std::vector<at::Tensor> qkv;
  for (int i = 0; i < 3; ++i) qkv.push_back(at::randn({B, T, H, D}, opts).requires_grad_());
  const at::Tensor grad_out = at::randn({B, H, T, D}, opts);
  auto pass = [&] {
    auto y = at::scaled_dot_product_attention(qkv[0].transpose(1, 2), qkv[1].transpose(1, 2),
                                              qkv[2].transpose(1, 2), {}, m.dropout, /*is_causal=*/true);
    (void)torch::autograd::grad({y}, qkv, {grad_out});
  };
  std::string own;
  {
    SdpaBackendGuard all(SdpaBackend::kAuto);
    own = sdpa_kernel_for(qkv[0].transpose(1, 2), m.dropout);
  }
  Choice c = pick_sdpa_backend(own, 0.01, rounds, [&](SdpaBackend b) {
    SdpaBackendGuard only(b);
    return seconds_per_pass(dev, iters, pass);
  });
  c.key = sdpa_attention_key(spec);
  qkv.clear();
  empty_cache(dev);
  return c;
}

std::string sdpa_attention_key(const StepSpec& spec) {
  const auto& m = spec.model;
  std::ostringstream o;
  o << "B=" << spec.batch << " H=" << m.n_head << " T=" << m.context << " D=" << m.n_embd / m.n_head << " "
    << c10::toString(attention_dtype(spec)) << " dropout=" << m.dropout;
  return o.str();
}

std::vector<int64_t> classifier_chunk_candidates(int64_t first, int64_t tokens) {
  std::vector<int64_t> out = {std::max<int64_t>(1, std::min(first, tokens))};
  while (out.back() < tokens) out.push_back(std::min(2 * out.back(), tokens));
  return out;
}

Choice pick_classifier_chunk(const std::vector<int64_t>& candidates, int rounds,
                             const std::function<double(int64_t)>& trial) {
  return pick_classifier_chunk(candidates, rounds, [&](int64_t chunk, bool) { return trial(chunk); }, false);
}

Choice pick_classifier_chunk(const std::vector<int64_t>& candidates, int rounds,
                             const std::function<double(int64_t, bool)>& trial, bool beside) {
  Choice c{"classifier_chunk", "", "each chunk's median forward + backward of the LM head and loss "
           "(kernels::linear_cross_entropy) on the rung's tokens, timed in turns; the fastest", "", "", 0, {}, ""};
  std::vector<std::string> names;
  for (size_t i = 0; i < candidates.size(); ++i) {
    names.push_back(std::to_string(candidates[i]));
    if (beside && i + 1 < candidates.size()) names.push_back(names.back() + " beside");
  }
  return time_candidates(c, names, rounds, [&](const std::string& name) {
    return trial(std::stoll(name), name.ends_with(" beside"));
  });
}

Choice choose_classifier_chunk(const StepSpec& spec, const DeviceInfo& dev, int rounds, int iters) {
  const auto& m = spec.model;
  const int64_t N = spec.batch * m.context, C = m.n_embd, V = m.padded_vocab();
  const auto opts = at::device(torch_device(dev)).dtype(attention_dtype(spec));
  at::Tensor h = at::randn({N, C}, opts).requires_grad_(), w = at::randn({V, C}, opts).requires_grad_();
  const at::Tensor t = at::randint(m.vocab_size, {N}, at::device(torch_device(dev)).dtype(at::kLong));
  const std::unique_ptr<SideStream> side = make_side_stream(dev);
  Choice c = pick_classifier_chunk(
      classifier_chunk_candidates(spec.settings.classifier_chunk, N), rounds,
      [&](int64_t chunk, bool beside) {
        return seconds_per_pass(dev, iters, [&] {
          const at::Tensor loss = kernels::linear_cross_entropy(h, w, t, chunk, {}, beside ? side.get() : nullptr);
          (void)torch::autograd::grad({loss}, {h, w}, {});
        });
      },
      dev.cuda());  // on the CPU nothing runs beside: the same ops in the same order
  c.key = classifier_chunk_key(spec);
  h.reset(), w.reset();
  empty_cache(dev);
  return c;
}

std::string classifier_chunk_key(const StepSpec& spec) {
  const auto& m = spec.model;
  std::ostringstream o;
  o << "N=" << spec.batch * m.context << " C=" << m.n_embd << " V=" << m.padded_vocab() << " "
    << c10::toString(attention_dtype(spec)) << " from " << spec.settings.classifier_chunk;
  return o.str();
}

std::vector<std::string> classifier_kernel_candidates(const DeviceInfo& dev) {
  if (!dev.cuda()) return {"512"};
  return {"512", "256", "1024", "staged", "512 exp2", "256 exp2", "1024 exp2", "staged exp2"};
}

Choice pick_classifier_kernel(const std::vector<std::string>& candidates, int rounds,
                              const std::function<double(const std::string&)>& trial) {
  Choice c{"classifier_kernel", "", "each launch's median time of the softmax cross-entropy kernel alone on one "
           "chunk's logits, in place; 512 threads a row kept unless another is faster by more than the margin",
           "", "512", 0.01, {}, ""};
  return time_candidates(c, candidates, rounds, trial);
}

Choice choose_classifier_kernel(const StepSpec& spec, const DeviceInfo& dev, int rounds, int iters) {
  const auto& m = spec.model;
  const int64_t n = std::min(m.classifier_chunk, spec.batch * m.context), V = m.padded_vocab();
  const auto on = at::device(torch_device(dev));
  at::Tensor logits = at::randn({n, V}, on.dtype(attention_dtype(spec)));  // each pass leaves a gradient: same work
  const at::Tensor t = at::randint(m.vocab_size, {n}, on.dtype(at::kLong));
  ModelOptions launch;
  Choice c = pick_classifier_kernel(classifier_kernel_candidates(dev), rounds, [&](const std::string& name) {
    use_classifier_kernel(launch, name);
    return seconds_per_pass(dev, iters, [&] {
      (void)kernels::softmax_xent_backward_(
          logits, t, 1.0, {launch.classifier_threads, launch.classifier_staged, launch.classifier_exp2});
    });
  });
  c.key = classifier_kernel_key(spec);
  logits.reset();
  empty_cache(dev);
  return c;
}

std::string classifier_kernel_key(const StepSpec& spec) {
  const auto& m = spec.model;
  std::ostringstream o;
  o << "rows=" << std::min(m.classifier_chunk, spec.batch * m.context) << " V=" << m.padded_vocab() << " "
    << c10::toString(attention_dtype(spec));
  return o.str();
}

std::vector<std::string> gelu_backward_slab_candidates(const DeviceInfo& dev) {
  if (!dev.cuda()) return {"32"};
  return {"32", "16", "8", "64"};
}

Choice pick_gelu_backward_slab(const std::vector<std::string>& candidates, int rounds,
                               const std::function<double(const std::string&)>& trial) {
  Choice c{"gelu_backward_slab", "", "each slab's median time of the bias-GELU backward kernel alone on the MLP's "
           "pre-activation; 32 rows a block kept unless another is faster by more than the margin",
           "", "32", 0.01, {}, ""};
  return time_candidates(c, candidates, rounds, trial);
}

Choice choose_gelu_backward_slab(const StepSpec& spec, const DeviceInfo& dev, int rounds, int iters) {
  const auto& m = spec.model;
  const auto opts = at::device(torch_device(dev)).dtype(attention_dtype(spec));
  at::Tensor grad = at::randn({spec.batch * m.context, 4 * m.n_embd}, opts), pre = at::randn_like(grad);
  Choice c = pick_gelu_backward_slab(gelu_backward_slab_candidates(dev), rounds, [&](const std::string& name) {
    const int64_t slab = std::stoll(name);
    return seconds_per_pass(dev, iters, [&] { (void)kernels::bias_gelu_backward(grad, pre, slab); });
  });
  c.key = gelu_backward_slab_key(spec);
  grad.reset(), pre.reset();
  empty_cache(dev);
  return c;
}

std::string gelu_backward_slab_key(const StepSpec& spec) {
  const auto& m = spec.model;
  std::ostringstream o;
  o << "N=" << spec.batch * m.context << " F=" << 4 * m.n_embd << " " << c10::toString(attention_dtype(spec));
  return o.str();
}

std::vector<std::string> residual_norm_candidates(const DeviceInfo& dev) {
  if (!dev.cuda()) return {"sweeps"};  // ATen's reference either way
  return {"sweeps", "held", "held_forward", "held_backward"};
}

Choice pick_residual_norm(const std::vector<std::string>& candidates, int rounds,
                          const std::function<double(const std::string&)>& trial) {
  Choice c{"residual_norm", "", "each traversal's median forward + backward of the fused residual add + LayerNorm "
           "(kernels::add_layer_norm) on the rung's rows: sweeps, rows held both ways, in the forward alone, in the "
           "backward alone; "
           "the sweeps kept unless another is faster by more than the margin", "", "sweeps", 0.01, {}, ""};
  return time_candidates(c, candidates, rounds, trial);
}

Choice choose_residual_norm(const StepSpec& spec, const DeviceInfo& dev, int rounds, int iters) {
  const auto& m = spec.model;
  const int64_t N = spec.batch * m.context, C = m.n_embd;
  const auto dtype = attention_dtype(spec);
  const auto opts = at::device(torch_device(dev)).dtype(dtype);
  std::vector<at::Tensor> in;  // x, r, gamma, beta and the branch's bias, as the fused blocks pass them
  for (auto shape : {std::vector<int64_t>{N, C}, {N, C}, {C}, {C}, {C}})
    in.push_back(at::randn(shape, opts).requires_grad_());
  const double p = m.dropout;
  Choice c = pick_residual_norm(residual_norm_candidates(dev), rounds, [&](const std::string& name) {
    ModelOptions rows;
    use_residual_norm(rows, name);
    if ((rows.residual_norm_held_forward || rows.residual_norm_held_backward) && !kernels::holds_rows(C, dtype))
      throw std::runtime_error("rows of " + std::to_string(C) + " " + c10::toString(dtype) + " are more than the held "
                               "kernels' " + std::to_string(kernels::kMaxHeldPacks) + " packs a lane");
    const kernels::Traversal traversal{rows.residual_norm_held_forward, rows.residual_norm_held_backward};
    return seconds_per_pass(dev, iters, [&] {
      auto [s, y] = kernels::add_layer_norm(in[0], in[1], in[2], in[3], LayerNormImpl::kEps, p, in[4], traversal);
      (void)torch::autograd::grad({s.sum() + y.sum()}, in, {});
    });
  });
  c.key = residual_norm_key(spec);
  in.clear();
  empty_cache(dev);
  return c;
}

std::string residual_norm_key(const StepSpec& spec) {
  const auto& m = spec.model;
  std::ostringstream o;
  o << "N=" << spec.batch * m.context << " C=" << m.n_embd << " " << c10::toString(attention_dtype(spec))
    << " dropout=" << m.dropout;
  return o.str();
}

// In the order a rung runs them: the SDPA kernel at the planned batch (a batch search then runs with it), the
// chunk at the batch the rung runs, then the classifier kernel's launch on that chunk, the GELU backward's slab,
// the row traversal, the linears' GEMM algorithms, cuDNN's attention plans.
std::vector<Chooser>& choosers() {
  static std::vector<Chooser> all = {
      {"sdpa_backend", false,
       [](const StepSpec& s) { return s.model.attention == AttentionImpl::kSdpa && s.sdpa_backend == SdpaBackend::kFastest; },
       sdpa_attention_key, [](const StepSpec& s, const DeviceInfo& d) { return choose_sdpa_backend(s, d); },
       [](StepSpec& s, const std::string& chosen) { s.sdpa_backend = sdpa_backend_from(chosen); }},
      {"classifier_chunk", true,
       [](const StepSpec& s) { return s.model.classifier_chunk > 0 && s.settings.classifier_chunk_fastest; },
       classifier_chunk_key, [](const StepSpec& s, const DeviceInfo& d) { return choose_classifier_chunk(s, d); },
       [](StepSpec& s, const std::string& chosen) {
         if (s.model.classifier_chunk > 0) s.model.classifier_chunk = std::stoll(chosen);
         s.model.classifier_beside = s.model.classifier_chunk > 0 && chosen.ends_with(" beside");
       }},
      {"classifier_kernel", true,
       [](const StepSpec& s) { return s.model.classifier_chunk > 0 && s.settings.classifier_kernel == "fastest"; },
       classifier_kernel_key, [](const StepSpec& s, const DeviceInfo& d) { return choose_classifier_kernel(s, d); },
       [](StepSpec& s, const std::string& chosen) { use_classifier_kernel(s.model, chosen); }},
      {"gelu_backward_slab", true,
       [](const StepSpec& s) { return s.model.fused_gelu_backward && s.settings.gelu_backward_slab == "fastest"; },
       gelu_backward_slab_key, [](const StepSpec& s, const DeviceInfo& d) { return choose_gelu_backward_slab(s, d); },
       [](StepSpec& s, const std::string& chosen) { use_gelu_backward_slab(s.model, chosen); }},
      {"residual_norm", true,
       [](const StepSpec& s) { return s.model.fused_residual_norm && s.settings.residual_norm == "fastest"; },
       residual_norm_key, [](const StepSpec& s, const DeviceInfo& d) { return choose_residual_norm(s, d); },
       [](StepSpec& s, const std::string& chosen) { use_residual_norm(s.model, chosen); }},
      {"gemm_algorithms", true, [](const StepSpec& s) { return s.model.lt_linears; }, gemm_algorithms_key,
       [](const StepSpec& s, const DeviceInfo& d) { return choose_gemm_algorithms(s, d); }, use_gemm_algorithms},
      {"cudnn_attention_plans", true,
       [](const StepSpec& s) { return s.model.cudnn_attention && s.model.attention == AttentionImpl::kSdpa; },
       sdpa_attention_key, [](const StepSpec& s, const DeviceInfo& d) { return choose_cudnn_plans(s, d); },
       use_cudnn_plans}};
  return all;
}

}  // namespace gpt2
