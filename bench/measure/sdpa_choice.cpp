#include "bench/measure/sdpa_choice.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>
#include <torch/csrc/autograd/autograd.h>

#include <algorithm>
#include <chrono>
#include <sstream>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "bench/measure/stats.h"
#include "bench/runtime/device.h"
#include "bench/step/train_step.h"
#include "common/errors.h"

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

const std::vector<SdpaBackend>& sdpa_candidates() {
  static const std::vector<SdpaBackend> all = {SdpaBackend::kFlash, SdpaBackend::kEfficient, SdpaBackend::kCudnn,
                                               SdpaBackend::kMath};
  return all;
}

SdpaChoice pick_sdpa_backend(const std::string& pytorch_choice, double margin, int rounds,
                             const std::function<double(SdpaBackend)>& trial) {
  SdpaChoice c;
  c.pytorch_choice = pytorch_choice;
  c.margin = margin;
  std::vector<std::vector<double>> times(sdpa_candidates().size());
  std::vector<bool> runs;
  for (SdpaBackend b : sdpa_candidates()) {  // the first call warms the kernel up and says whether it runs
    SdpaTry t{b, std::nullopt, ""};
    WarningCollector warnings;
    c10::WarningUtils::WarningHandlerGuard guard(&warnings);
    runs.push_back(false);
    try {
      (void)trial(b);
      runs.back() = true;
    } catch (const std::exception& e) {
      t.why = first_line(error_text(e));
      for (const auto& w : warnings.texts) t.why += "; " + w;
    }
    c.tries.push_back(t);
  }
  for (int round = 0; round < rounds; ++round)  // in turns, so that drift hits every kernel alike
    for (size_t i = 0; i < c.tries.size(); ++i)
      if (runs[i]) times[i].push_back(trial(c.tries[i].backend));
  const SdpaTry* best = nullptr;
  const SdpaTry* own = nullptr;
  for (size_t i = 0; i < c.tries.size(); ++i) {
    if (!runs[i]) continue;
    c.tries[i].ms = 1e3 * median(times[i]);
    if (!best || *c.tries[i].ms < *best->ms) best = &c.tries[i];
    if (to_string(c.tries[i].backend) == pytorch_choice) own = &c.tries[i];
  }
  if (!best) {
    std::string why;
    for (const auto& t : c.tries) why += (why.empty() ? "" : "; ") + to_string(t.backend) + ": " + t.why;
    throw std::runtime_error("no SDPA kernel runs this attention (" + why + ")");
  }
  c.chosen = own && *best->ms >= *own->ms * (1 - margin) ? own->backend : best->backend;
  return c;
}

SdpaChoice choose_sdpa_backend(const StepSpec& spec, const DeviceInfo& dev, int rounds, int iters) {
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
  auto trial = [&](SdpaBackend b) {
    SdpaBackendGuard only(b);
    synchronize(dev);
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < iters; ++i) pass();
    synchronize(dev);
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / iters;
  };
  std::string own;
  {
    SdpaBackendGuard all(SdpaBackend::kAuto);
    own = sdpa_kernel_for(qkv[0].transpose(1, 2), m.dropout);
  }
  SdpaChoice c = pick_sdpa_backend(own, 0.01, rounds, trial);
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

void to_json(nlohmann::json& j, const SdpaChoice& c) {
  nlohmann::json tries = nlohmann::json::array();
  for (const auto& t : c.tries) {
    nlohmann::json e = {{"backend", to_string(t.backend)}};
    if (t.ms) e["ms"] = *t.ms;
    else e["why"] = t.why;
    tries.push_back(e);
  }
  j = {{"chosen", to_string(c.chosen)},
       {"pytorch_choice", c.pytorch_choice},
       {"margin", c.margin},
       {"rule", "each kernel's median forward + backward on the rung's attention; PyTorch's own choice kept unless "
                "another is faster by more than the margin"},
       {"tries", tries}};
  if (!c.timed_for.empty()) j["timed_for"] = c.timed_for;
}

SdpaChoice sdpa_choice_from(const nlohmann::json& j) {
  SdpaChoice c;
  c.chosen = sdpa_backend_from(j.at("chosen").get<std::string>());
  c.pytorch_choice = j.value("pytorch_choice", "");
  c.margin = j.value("margin", 0.0);
  c.timed_for = j.value("timed_for", "");
  for (const auto& e : j.at("tries")) {
    SdpaTry t{sdpa_backend_from(e.at("backend").get<std::string>()), std::nullopt, e.value("why", "")};
    if (e.contains("ms")) t.ms = e["ms"].get<double>();
    c.tries.push_back(t);
  }
  return c;
}

}  // namespace gpt2
