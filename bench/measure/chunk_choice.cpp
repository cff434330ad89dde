#include "bench/measure/chunk_choice.h"

#include <ATen/ATen.h>
#include <torch/csrc/autograd/autograd.h>

#include <algorithm>
#include <chrono>
#include <sstream>
#include <stdexcept>

#include "bench/runtime/device.h"
#include "bench/step/train_step.h"
#include "common/errors.h"
#include "kernels/classifier.h"

namespace gpt2 {

std::vector<int64_t> classifier_chunk_candidates(int64_t first, int64_t tokens) {
  std::vector<int64_t> out = {std::max<int64_t>(1, std::min(first, tokens))};
  while (out.back() < tokens) out.push_back(std::min(2 * out.back(), tokens));
  return out;
}

Choice pick_classifier_chunk(const std::vector<int64_t>& candidates, int rounds,
                             const std::function<double(int64_t)>& trial) {
  Choice c{"classifier_chunk", "", "each chunk's median forward + backward of the LM head and loss "
           "(kernels::linear_cross_entropy) on the rung's tokens, timed in turns; the fastest", "", "", 0, {}, ""};
  std::vector<std::string> names;
  for (int64_t chunk : candidates) names.push_back(std::to_string(chunk));
  return time_candidates(c, names, rounds, [&](const std::string& name) { return trial(std::stoll(name)); });
}

Choice choose_classifier_chunk(const StepSpec& spec, const DeviceInfo& dev, int rounds, int iters) {
  const auto& m = spec.model;
  const int64_t N = spec.batch * m.context, C = m.n_embd, V = m.padded_vocab();
  const auto opts = at::device(torch_device(dev)).dtype(attention_dtype(spec));
  at::Tensor h = at::randn({N, C}, opts).requires_grad_(), w = at::randn({V, C}, opts).requires_grad_();
  const at::Tensor t = at::randint(m.vocab_size, {N}, at::device(torch_device(dev)).dtype(at::kLong));
  auto trial = [&](int64_t chunk) {
    try {
      synchronize(dev);
      const auto t0 = std::chrono::steady_clock::now();
      for (int i = 0; i < iters; ++i)
        (void)torch::autograd::grad({kernels::linear_cross_entropy(h, w, t, chunk)}, {h, w}, {});
      synchronize(dev);
      return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / iters;
    } catch (...) {
      empty_cache(dev);  // what an out-of-memory chunk had cached goes back before the next one
      throw;
    }
  };
  Choice c = pick_classifier_chunk(classifier_chunk_candidates(spec.settings.classifier_chunk, N), rounds, trial);
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

Chooser classifier_chunk_chooser() {
  return {"classifier_chunk", true,
          [](const StepSpec& s) { return s.model.classifier_chunk > 0 && s.settings.classifier_chunk_fastest; },
          classifier_chunk_key, [](const StepSpec& s, const DeviceInfo& d) { return choose_classifier_chunk(s, d); },
          [](StepSpec& s, const std::string& chosen) {
            if (s.model.classifier_chunk > 0) s.model.classifier_chunk = std::stoll(chosen);
          }};
}

}  // namespace gpt2
