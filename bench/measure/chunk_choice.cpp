#include "bench/measure/chunk_choice.h"

#include <ATen/ATen.h>
#include <torch/csrc/autograd/autograd.h>

#include <algorithm>
#include <chrono>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>

#include "bench/measure/stats.h"
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

ChunkChoice pick_classifier_chunk(const std::vector<int64_t>& candidates, int rounds,
                                  const std::function<double(int64_t)>& trial) {
  ChunkChoice c;
  if (candidates.size() == 1) {  // one chunk holds every token: nothing to choose, nothing timed
    c.tries.push_back({candidates[0], std::nullopt, "not timed: the only candidate"});
    c.chosen = candidates[0];
    return c;
  }
  std::vector<std::vector<double>> times(candidates.size());
  std::vector<bool> runs;
  for (int64_t chunk : candidates) {  // the first call warms it up and says whether it runs
    ChunkTry t{chunk, std::nullopt, ""};
    runs.push_back(false);
    try {
      (void)trial(chunk);
      runs.back() = true;
    } catch (const std::exception& e) {
      t.why = first_line(error_text(e));
    }
    c.tries.push_back(t);
  }
  for (int round = 0; round < rounds; ++round)  // in turns, so that drift hits every chunk alike
    for (size_t i = 0; i < c.tries.size(); ++i)
      if (runs[i]) times[i].push_back(trial(c.tries[i].chunk));
  const ChunkTry* best = nullptr;
  for (size_t i = 0; i < c.tries.size(); ++i) {
    if (!runs[i]) continue;
    c.tries[i].ms = 1e3 * median(times[i]);
    if (!best || *c.tries[i].ms < *best->ms) best = &c.tries[i];
  }
  if (!best) {
    std::string why;
    for (const auto& t : c.tries) why += (why.empty() ? "" : "; ") + std::to_string(t.chunk) + ": " + t.why;
    throw std::runtime_error("no classifier chunk runs this head (" + why + ")");
  }
  c.chosen = best->chunk;
  return c;
}

ChunkChoice choose_classifier_chunk(const StepSpec& spec, const DeviceInfo& dev, int rounds, int iters) {
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
  ChunkChoice c = pick_classifier_chunk(classifier_chunk_candidates(spec.settings.classifier_chunk, N), rounds, trial);
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

void to_json(nlohmann::json& j, const ChunkChoice& c) {
  nlohmann::json tries = nlohmann::json::array();
  for (const auto& t : c.tries) {
    nlohmann::json e = {{"chunk", t.chunk}};
    if (t.ms) e["ms"] = *t.ms;
    else e["why"] = t.why;
    tries.push_back(e);
  }
  j = {{"chosen", c.chosen},
       {"rule", "each chunk's median forward + backward of the LM head and loss (kernels::linear_cross_entropy) "
                "on the rung's tokens, timed in turns; the fastest"},
       {"tries", tries}};
  if (!c.timed_for.empty()) j["timed_for"] = c.timed_for;
}

ChunkChoice chunk_choice_from(const nlohmann::json& j) {
  ChunkChoice c;
  c.chosen = j.at("chosen").get<int64_t>();
  c.timed_for = j.value("timed_for", "");
  for (const auto& e : j.at("tries")) {
    ChunkTry t{e.at("chunk").get<int64_t>(), std::nullopt, e.value("why", "")};
    if (e.contains("ms")) t.ms = e["ms"].get<double>();
    c.tries.push_back(t);
  }
  return c;
}

}  // namespace gpt2
