#include "bench/ladder/batch_search.h"

#include <chrono>

#include "bench/ladder/budget.h"
#include "bench/runtime/device.h"
#include "bench/step/train_step.h"
#include "common/errors.h"

namespace gpt2 {

int64_t find_batch(const StepSpec& spec, const DeviceInfo& dev, const at::Tensor& tokens, uint64_t seed,
                   MemoryMeter& meter, nlohmann::json& trace, double seconds, int64_t floor_steps) {
  int64_t b = 1, best = 0;
  double step_s = 0;
  const auto search_start = std::chrono::steady_clock::now();
  while (b * 2 <= spec.batch) b *= 2;
  for (; b <= spec.settings.max_batch; b *= 2) {
    StepSpec s = spec;
    s.batch = b;  // per rank: a data-parallel rung searches on rank 0 alone, then all ranks use it
    s.search_batch = false;
    s.dist.backend = "none";
    empty_cache(dev);
    meter.reset_peak();
    try {
      TrainStep ts(s, dev, tokens, seed);
      ts.step();
      synchronize(dev);
      const auto t1 = std::chrono::steady_clock::now();
      ts.step();
      synchronize(dev);
      step_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t1).count();
    } catch (const c10::OutOfMemoryError& e) {  // the same path a rung's OOM takes: caught, cache freed
      empty_cache(dev);
      trace.push_back({{"batch", b}, {"fits", false}, {"stage", "search"}, {"why", first_line(e.what_without_backtrace())}});
      break;
    }
    const MemoryStats mem = meter.read();
    trace.push_back({{"batch", b}, {"fits", true}, {"stage", "search"}, {"peak_alloc_bytes", mem.peak_allocated},
                     {"peak_reserved_bytes", mem.peak_reserved}});
    best = b;
    // The next batch's rung, at about twice this step time, with the search so far spent.
    const double spent = std::chrono::duration<double>(std::chrono::steady_clock::now() - search_start).count();
    const double next = 2 * step_s * static_cast<double>(floor_steps + 2);
    if (b * 2 <= spec.settings.max_batch && spent + next > seconds) {
      trace.push_back({{"batch", b * 2}, {"fits", false}, {"stage", "search"},
                       {"why", "over the time budget: about " + format_duration(next) + " for its probe and the rung at " +
                                   format_duration(2 * step_s) + " a step, " + format_duration(seconds - spent) + " left"}});
      break;
    }
  }
  empty_cache(dev);
  if (best == 0) throw std::runtime_error("batch_scaling: no batch from " + std::to_string(spec.batch) + " up fits");
  return best;
}

}  // namespace gpt2
