// defines: TraceEvent, PhaseInterval, Collector/make_collector (ATen RecordFunction on the CPU,
//          CUPTI activities on CUDA), ProfileSummary/summarize, category, chrome_trace
// What a rung's profiled steps did, and where the time went, in one shape for CPU and GPU.
#pragma once
#include <nlohmann/json.hpp>

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "bench/runtime/device_info.h"

namespace gpt2 {

struct TraceEvent {
  std::string name;
  std::string kind;   // "op" (ATen op, CPU) | "kernel" | "memcpy" | "memset" (CUDA)
  std::string phase;  // data | forward | loss | backward | optimizer | "" (outside the step's phases)
  int64_t start_ns = 0, dur_ns = 0;
  int depth = 0;      // ATen ops: 0 = called by our code, >0 = called by another op
  int64_t bytes = 0;  // memcpy/memset
  int64_t tid = 0;    // CPU thread, or CUDA stream
  int64_t correlation = 0;  // CUDA: the id CUPTI gives the launch and the work it queued
  std::string op{};   // CUDA: the top-level ATen op (autograd node, own scope) that launched it, "" if none
  bool own = false;   // CPU: an own_scope inside another op, its time counted as its own
  int64_t nested_own_ns = 0;  // CPU, depth 0: the time own scopes took inside it, counted there, not here
};

// Our own RecordFunction scopes ("gpt2bench::..." names: kernels::kFp8ScalingRecord, kLtGemmRecord) keep their
// time and kernels even inside another op, e.g. FP8's scaling inside its linear's backward node, which would
// otherwise count it all as matmul. Ops inside one are its own.
bool own_scope(const std::string& name);

struct PhaseInterval {
  std::string name;
  int64_t start_ns = 0, end_ns = 0;
};

class Collector {
 public:
  virtual ~Collector() = default;
  virtual std::string source() const = 0;  // "aten_record_function" | "cupti"
  virtual void start() = 0;
  virtual void stop() = 0;
  virtual std::vector<TraceEvent> events() = 0;  // after stop()
  virtual std::vector<PhaseInterval> phases() = 0;
};
std::unique_ptr<Collector> make_collector(const DeviceInfo& d);

// The CUPTI activity kinds enabled: cuBLAS and cuDNN launch through the driver API, so without "driver" their
// kernels have no launch and no phase (on the H100 25.6 of 39.0 ms of 07_sdpa's step was "other");
// "external_correlation" ties each launch to its top-level ATen op (attribute_ops).
inline constexpr const char* kCuptiActivityKinds[] = {"concurrent_kernel", "memcpy",  "memset",
                                                      "runtime",           "driver", "external_correlation"};

// GPU work runs later than the launch that queued it: each device event's phase is the phase open
// when the runtime call with the same correlation id started (`launch_at`: correlation -> start,
// on the clock of `phases`). Events whose launch is unknown keep an empty phase.
void attribute_phases(std::vector<TraceEvent>& device, const std::unordered_map<int64_t, int64_t>& launch_at,
                      const std::vector<PhaseInterval>& phases);

// Each device event's `op`: the top-level ATen op open on the launching thread, as CUPTI's external correlation
// records have it (`op_of`: correlation id -> an index into `op_names`, the id the collector pushed as that op
// started). Events with no record keep an empty op.
void attribute_ops(std::vector<TraceEvent>& device, const std::unordered_map<int64_t, uint64_t>& op_of,
                   const std::vector<std::string>& op_names);

// FLOPs of one matmul-like ATen op from its tensor inputs' shapes: mm/addmm/_scaled_mm 2·M·N·K (our cuBLASLt GEMMs
// too, kernels::kLtGemmRecord: {M, N, K}), bmm/baddbmm 2·B·M·N·K, SDPA 4·B·H·T·S·D forward (halved when `causal`),
// twice that backward (model FLOPs: no recomputation); else 0.
double op_flops(const std::string& name, const std::vector<std::vector<int64_t>>& shapes, bool causal);

// Counts op_flops over every ATen op run between start() and stop(), on any device (RecordFunction
// sees CUDA ops as they are issued). An op inside a counted one is not counted again. It records
// inputs, so it is run over a step of its own, never over timed ones.
class FlopCounter {
 public:
  FlopCounter();
  ~FlopCounter();
  void start();
  void stop();
  double flops() const;
  std::map<std::string, double> by_op() const;

 public:
  struct State;  // the callbacks' sink (profiler.cpp)

 private:
  std::unique_ptr<State> state_;
};

// matmul | attention | normalization | elementwise | embedding | loss | optimizer | memcpy | fp8_scaling | other,
// from an op's or kernel's name (an autograd node's is its forward op's); a generic CUDA kernel (elementwise,
// reduce), named by its arithmetic alone, and any kernel an own_scope launched take the category of `op`.
std::string category(const std::string& name, const std::string& kind = "op", const std::string& op = "");

struct NameStat {
  std::string name;
  double count = 0, total_ms = 0;  // per step
};

struct ProfileSummary {
  std::string source;
  int steps = 0;
  double step_ms = 0;                          // wall time per profiled step
  // Per unprofiled step, the host's time inside the step's calls, before the one wait at the end (set by the
  // caller): on a GPU the time to issue it (near step_ms: the host is what bounds the step), on a CPU ~step_ms.
  double host_ms = 0;
  double events_per_step = 0;                  // ATen ops (all depths) or kernel launches
  std::map<std::string, double> phase_ms;      // per step: top-level ops (CPU) or device time (GPU)
  std::map<std::string, double> phase_events;  // per step
  std::map<std::string, double> category_ms, category_events;  // per step
  std::vector<NameStat> top;                   // by time, the 10 largest
  std::vector<NameStat> by_name;               // every name, by time then count (breakdown/<rung>.json only)
  double bytes_copied_per_step = 0;            // memcpy (GPU)
  double busy_fraction = 0;                    // device busy (GPU) or in ops (CPU) over wall time
  double overhead = 0;                         // (profiled step time / unprofiled) - 1, set by the caller
  // The share of the counted time (kernels and copies on a GPU, top-level ops on the CPU) that a
  // phase holds; the rest is phase_ms["other"]. A trustworthy breakdown has it >= 0.95.
  double phase_coverage = 0;
  // GPU: the share of the device time (kernels, copies) whose launching op the collector knows (CUPTI's external
  // correlation); generic kernels without one fall back to their names' category. None on the CPU.
  std::optional<double> op_coverage;
  std::string attribution;                     // how time was given to phases, in words (set by the caller)
  // FLOPs of one step counted from the matmul/SDPA ops' shapes (FlopCounter, set by the caller).
  double counted_flops_per_step = 0;
  std::map<std::string, double> counted_flops_by_op;
};

// `wall_s`: the wall time of the `steps` profiled steps; CPU times count top-level ops only. From CUPTI, steps with
// no kernel recorded throw: its collection was off in this process (CUDA 13.0 can leave it so), and a table of
// zeros would read as a step that did no work.
ProfileSummary summarize(const std::vector<TraceEvent>& events, int steps, double wall_s, const std::string& source);
nlohmann::json to_json(const ProfileSummary& s);
// Chrome trace format (opens in Perfetto): one complete ("X") event per op or kernel, and the phases.
nlohmann::json chrome_trace(const std::vector<TraceEvent>& events, const std::vector<PhaseInterval>& phases);

}  // namespace gpt2
