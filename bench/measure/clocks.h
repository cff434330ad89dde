// defines: ClockSample, ClockSummary, summarize_clocks, ClockSampler/make_clock_sampler — the SM and
//          memory clocks, power and temperature during a rung's timed repetitions (NVML on CUDA), so
//          that a throttled run is not read as a slow variant. No libtorch.
#pragma once
#include <nlohmann/json_fwd.hpp>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "bench/runtime/device_info.h"

namespace gpt2 {

// NVML's clock-event ("throttle") reason bits (nvml.h's nvmlClocksEventReason*).
inline constexpr uint64_t kReasonGpuIdle = 0x1, kReasonAppClocksSetting = 0x2, kReasonSwPowerCap = 0x4,
                          kReasonHwSlowdown = 0x8, kReasonSyncBoost = 0x10, kReasonSwThermal = 0x20,
                          kReasonHwThermal = 0x40, kReasonHwPowerBrake = 0x80;

struct ClockSample {
  double sm_mhz = 0, mem_mhz = 0, power_w = 0, temp_c = 0;
  uint64_t reasons = 0;  // NVML clock-event reasons
  double t = 0;          // when: std::chrono::steady_clock seconds (Linux: CLOCK_MONOTONIC, Python's time.monotonic())
};

// What a sampler has gathered: its samples and the device's maximum SM clock, or why it has none.
struct ClockSamples {
  std::string unavailable_why;  // empty: available
  double max_sm_mhz = 0;
  std::vector<ClockSample> samples;
};

struct ClockSummary {
  bool available = false;
  std::string unavailable_why;
  int samples = 0;
  double sm_mhz_median = 0, mem_mhz_median = 0, power_w_median = 0, temp_c_max = 0;
  double max_sm_mhz = 0;             // NVML's maximum SM clock (the boost clock's top)
  std::vector<std::string> reasons;  // every reason seen in any sample, by name
  double power_capped_share = 0;     // samples with the software power cap holding the clock down
  double uncapped_sm_mhz_median = 0; // the median SM clock of the other samples (0: none)
  bool throttled = false;
  std::string throttled_why;
};
// Throttled: a thermal or hardware-slowdown reason in any sample, or a median SM clock under 90% of `max_sm_mhz`
// in the samples the power cap did not hold. The power cap is recorded, not flagged: it is a device's sustained
// speed under dense matmuls (docs/development.md: Choices made deliberately).
ClockSummary summarize_clocks(const std::vector<ClockSample>& samples, double max_sm_mhz);
ClockSummary unavailable_clocks(const std::string& why);
// The summary of the samples stamped within [t0, t1], steady-clock seconds: another process's window (a reference
// rung's timed repetitions, which it stamps with time.monotonic()) out of what this one sampled while it ran.
// Unavailable where `s` is, or where no sample falls in the window (said with its length).
ClockSummary clocks_within(const ClockSamples& s, double t0, double t1);
nlohmann::json to_json(const ClockSummary& s);
ClockSummary clock_summary_from(const nlohmann::json& j);  // what to_json wrote (--resume)

// Samples every ~20 ms on a thread of its own between start() and stop(); the samples accumulate
// over start/stop pairs until take_samples() (or take()) hands them over (with the max clock) and clears them.
class ClockSampler {
 public:
  virtual ~ClockSampler() = default;
  virtual void start() = 0;
  virtual void stop() = 0;
  virtual ClockSamples take_samples() = 0;  // handed over and cleared
  ClockSummary take();                      // take_samples(), summarized
};
// NVML (libnvidia-ml.so.1, loaded at run time: it ships with the driver) for a CUDA device; one
// that reports "unavailable" with the reason on the CPU or without NVML.
std::unique_ptr<ClockSampler> make_clock_sampler(const DeviceInfo& d);

}  // namespace gpt2
