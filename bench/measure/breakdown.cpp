#include "bench/measure/breakdown.h"

#include <chrono>

#include "bench/runtime/device.h"
#include "bench/step/train_step.h"
#include "common/files.h"

namespace gpt2 {

nlohmann::json to_json(const MemoryBreakdown& m) {
  return {{"parameters", m.parameters},           {"gradients", m.gradients},
          {"optimizer_state", m.optimizer_state}, {"buffers", m.buffers},
          {"activations_and_other", m.activations_and_other},
          {"peak_allocated", m.peak_allocated},   {"peak_reserved", m.peak_reserved}};
}

namespace {

// Where the step's peak memory went: parameters, gradients, buffers, optimizer state, and the rest (activations).
MemoryBreakdown memory_breakdown(TrainStep& ts, const MemoryStats& mem) {
  MemoryBreakdown m;
  for (const auto& t : ts.model().parameters()) {
    m.parameters += t.nbytes();
    if (t.requires_grad()) m.gradients += t.nbytes();  // each gradient has its parameter's shape and dtype
  }
  for (const auto& t : ts.model().buffers()) m.buffers += t.nbytes();
  m.optimizer_state = ts.optimizer().state_bytes();
  m.peak_allocated = mem.peak_allocated;
  m.peak_reserved = mem.peak_reserved;
  m.activations_and_other =
      std::max<int64_t>(0, mem.peak_allocated - m.parameters - m.gradients - m.optimizer_state - m.buffers);
  return m;
}

}  // namespace

Breakdown breakdown_rung(const StepSpec& timed, const DeviceInfo& dev, const at::Tensor& tokens, uint64_t seed,
                         int warmup, int steps, MemoryMeter& meter) {
  // A CUDA graph replays as one launch outside the step's phases: its kernels could carry no phase.
  // The breakdown of a graph rung is that of the same step run eagerly (its step time is the
  // timed rung's, not this pass's).
  StepSpec spec = timed;
  const bool graph = spec.executor == ExecutorKind::kCudaGraph;
  spec.executor = ExecutorKind::kEager;
  empty_cache(dev);
  meter.reset_peak();
  TrainStep ts(spec, dev, tokens, seed);
  for (int i = 0; i < warmup; ++i) ts.step();
  synchronize(dev);
  auto wall = [&](auto&& body) {
    const auto t0 = std::chrono::steady_clock::now();
    body();
    synchronize(dev);
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  };
  double host_s = 0;  // inside the step's calls: issuing the work, not waiting for it
  const double plain = wall([&] {
    for (int i = 0; i < steps; ++i) {
      const auto t0 = std::chrono::steady_clock::now();
      ts.step();
      host_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    }
  });
  auto collector = make_collector(dev);
  collector->start();
  const double profiled = wall([&] {
    for (int i = 0; i < steps; ++i) ts.step();
  });
  collector->stop();
  // One more step with op inputs recorded (slower: never a timed or profiled one): its FLOPs.
  FlopCounter flops;
  flops.start();
  ts.step();
  synchronize(dev);
  flops.stop();

  Breakdown p;
  p.batch = spec.batch;
  const auto events = collector->events();
  p.summary = summarize(events, steps, profiled, collector->source());
  p.summary.overhead = plain > 0 ? profiled / plain - 1.0 : 0.0;
  p.summary.host_ms = steps > 0 ? 1e3 * host_s / steps : 0.0;
  p.summary.counted_flops_per_step = flops.flops();
  p.summary.counted_flops_by_op = flops.by_op();
  p.summary.attribution =
      std::string(dev.cuda() ? "each kernel's and copy's device time to the phase open at its launch (CUPTI "
                               "correlation of runtime and driver API calls); ATen's generic kernels to the category "
                               "of the top-level op that launched them (CUPTI external correlation; op_coverage)"
                             : "each top-level ATen op's time to the phase open when it ran") +
      (graph ? "; an eager pass of the same step, since a CUDA graph replays as one launch outside the phases" : "");
  p.trace = chrome_trace(events, collector->phases());

  p.memory = memory_breakdown(ts, meter.read());
  return p;
}

void write_breakdown(const std::string& dir, const std::string& rung, const Breakdown& p) {
  const std::string base = files::join(dir, "breakdown");
  files::create_dirs(base);
  nlohmann::json summary = to_json(p.summary);
  summary["rung"] = rung;
  summary["batch"] = p.batch;
  summary["memory"] = to_json(p.memory);
  files::write_file_atomic(files::join(base, rung + ".json"), summary.dump(2) + "\n");
  files::write_file_atomic(files::join(base, rung + ".trace.json"), p.trace.dump() + "\n");
}

}  // namespace gpt2
