#include "bench/measure/clocks.h"

#include "bench/measure/stats.h"
#include "common/format.h"

#include <dlfcn.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <iterator>
#include <mutex>
#include <thread>

namespace gpt2 {


ClockSummary summarize_clocks(const std::vector<ClockSample>& samples, double max_sm_mhz) {
  ClockSummary s;
  s.available = true;
  s.samples = static_cast<int>(samples.size());
  s.max_sm_mhz = max_sm_mhz;
  std::vector<double> sm, uncapped, mem, power;
  uint64_t seen = 0;
  for (const auto& x : samples) {
    sm.push_back(x.sm_mhz), mem.push_back(x.mem_mhz), power.push_back(x.power_w);
    if (!(x.reasons & kReasonSwPowerCap)) uncapped.push_back(x.sm_mhz);
    s.temp_c_max = std::max(s.temp_c_max, x.temp_c);
    seen |= x.reasons;
  }
  s.sm_mhz_median = median(sm), s.mem_mhz_median = median(mem), s.power_w_median = median(power);
  if (!samples.empty()) s.power_capped_share = 1.0 - static_cast<double>(uncapped.size()) / samples.size();
  if (!uncapped.empty()) s.uncapped_sm_mhz_median = median(uncapped);
  const std::pair<uint64_t, const char*> names[] = {{kReasonGpuIdle, "gpu_idle"},
                                                    {kReasonAppClocksSetting, "applications_clocks_setting"},
                                                    {kReasonSwPowerCap, "sw_power_cap"},
                                                    {kReasonHwSlowdown, "hw_slowdown"},
                                                    {kReasonSyncBoost, "sync_boost"},
                                                    {kReasonSwThermal, "sw_thermal_slowdown"},
                                                    {kReasonHwThermal, "hw_thermal_slowdown"},
                                                    {kReasonHwPowerBrake, "hw_power_brake_slowdown"}};
  for (const auto& [bit, name] : names)
    if (seen & bit) s.reasons.push_back(name);
  if (const uint64_t bad = seen & (kReasonHwSlowdown | kReasonSwThermal | kReasonHwThermal | kReasonHwPowerBrake)) {
    s.throttled = true;
    for (const auto& [bit, name] : names)
      if (bad & bit) s.throttled_why += (s.throttled_why.empty() ? "" : ", ") + std::string(name);
  }
  if (max_sm_mhz > 0 && !uncapped.empty() && s.uncapped_sm_mhz_median < 0.9 * max_sm_mhz) {
    const std::string why = strf("median SM clock %.0f MHz%s is %.0f%% of the %.0f MHz maximum", s.uncapped_sm_mhz_median,
                                 uncapped.size() < samples.size() ? " (the samples not power-capped)" : "",
                                 100 * s.uncapped_sm_mhz_median / max_sm_mhz, max_sm_mhz);
    s.throttled_why = s.throttled ? why + "; " + s.throttled_why : why;
    s.throttled = true;
  }
  return s;
}

ClockSummary clocks_within(const ClockSamples& s, double t0, double t1) {
  if (!s.unavailable_why.empty()) return unavailable_clocks(s.unavailable_why);
  std::vector<ClockSample> in;
  std::copy_if(s.samples.begin(), s.samples.end(), std::back_inserter(in),
               [&](const ClockSample& x) { return x.t >= t0 && x.t <= t1; });
  if (in.empty())
    return unavailable_clocks(strf("no sample within the timed window (%.0f ms; %zu samples in all)", 1000 * (t1 - t0),
                                   s.samples.size()));
  return summarize_clocks(in, s.max_sm_mhz);
}

ClockSummary ClockSampler::take() {
  const ClockSamples s = take_samples();
  return s.unavailable_why.empty() ? summarize_clocks(s.samples, s.max_sm_mhz) : unavailable_clocks(s.unavailable_why);
}

ClockSummary unavailable_clocks(const std::string& why) {
  ClockSummary s;
  s.unavailable_why = why;
  return s;
}

nlohmann::json to_json(const ClockSummary& s) {
  if (!s.available) return {{"available", false}, {"why", s.unavailable_why}};
  return {{"available", true},
          {"samples", s.samples},
          {"sm_mhz_median", s.sm_mhz_median},
          {"mem_mhz_median", s.mem_mhz_median},
          {"power_w_median", s.power_w_median},
          {"temp_c_max", s.temp_c_max},
          {"max_sm_mhz", s.max_sm_mhz},
          {"reasons", s.reasons},
          {"power_capped_share", s.power_capped_share},
          {"uncapped_sm_mhz_median", s.uncapped_sm_mhz_median},
          {"throttled", s.throttled},
          {"throttled_why", s.throttled_why}};
}

ClockSummary clock_summary_from(const nlohmann::json& j) {
  ClockSummary s;
  s.available = j.value("available", false);
  s.unavailable_why = j.value("why", "");
  s.samples = j.value("samples", 0);
  s.sm_mhz_median = j.value("sm_mhz_median", 0.0), s.mem_mhz_median = j.value("mem_mhz_median", 0.0);
  s.power_w_median = j.value("power_w_median", 0.0), s.temp_c_max = j.value("temp_c_max", 0.0);
  s.max_sm_mhz = j.value("max_sm_mhz", 0.0);
  s.reasons = j.value("reasons", std::vector<std::string>{});
  s.power_capped_share = j.value("power_capped_share", 0.0);
  s.uncapped_sm_mhz_median = j.value("uncapped_sm_mhz_median", 0.0);
  s.throttled = j.value("throttled", false);
  s.throttled_why = j.value("throttled_why", "");
  return s;
}

namespace {

class UnavailableSampler : public ClockSampler {
 public:
  explicit UnavailableSampler(std::string why) : why_(std::move(why)) {}
  void start() override {}
  void stop() override {}
  ClockSamples take_samples() override { return {why_, 0, {}}; }

 private:
  std::string why_;
};

// The few NVML entry points used, by their C ABI (nvml.h is not needed to build).
struct Nvml {
  using Device = void*;
  void* lib = nullptr;
  int (*init)() = nullptr;
  int (*by_pci)(const char*, Device*) = nullptr;
  int (*by_index)(unsigned, Device*) = nullptr;
  int (*clock)(Device, int, unsigned*) = nullptr;
  int (*max_clock)(Device, int, unsigned*) = nullptr;
  int (*power)(Device, unsigned*) = nullptr;
  int (*temperature)(Device, int, unsigned*) = nullptr;
  int (*reasons)(Device, unsigned long long*) = nullptr;

  std::string load() {
    lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib) return "libnvidia-ml.so.1 not found (NVML ships with the NVIDIA driver)";
    auto sym = [&](auto& fn, const char* name) { fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(lib, name)); };
    sym(init, "nvmlInit_v2");
    sym(by_pci, "nvmlDeviceGetHandleByPciBusId_v2");
    sym(by_index, "nvmlDeviceGetHandleByIndex_v2");
    sym(clock, "nvmlDeviceGetClockInfo");
    sym(max_clock, "nvmlDeviceGetMaxClockInfo");
    sym(power, "nvmlDeviceGetPowerUsage");
    sym(temperature, "nvmlDeviceGetTemperature");
    sym(reasons, "nvmlDeviceGetCurrentClocksEventReasons");
    if (!reasons) sym(reasons, "nvmlDeviceGetCurrentClocksThrottleReasons");
    if (!init || !clock || !(by_pci || by_index)) return "libnvidia-ml.so.1 lacks the NVML entry points used";
    if (init() != 0) return "nvmlInit failed";
    return "";
  }
};

constexpr int kClockSm = 1, kClockMem = 2, kTemperatureGpu = 0;

class NvmlSampler : public ClockSampler {
 public:
  NvmlSampler(Nvml nvml, Nvml::Device dev) : nvml_(nvml), dev_(dev) {
    unsigned mhz = 0;
    // The boost clock's top, not the applications clock: GPU Boost runs above that (NVIDIA/DCGM#152 shows an
    // A100's nvidia-smi -q at SM 1,410 MHz with applications clocks of 1,155), so it is no ceiling to judge by.
    if (nvml_.max_clock && nvml_.max_clock(dev_, kClockSm, &mhz) == 0) max_sm_ = mhz;
  }
  ~NvmlSampler() override { stop(); }
  void start() override {
    stop();
    running_ = true;
    thread_ = std::thread([this] {
      while (running_) {
        sample();
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
    });
  }
  void stop() override {
    running_ = false;
    if (thread_.joinable()) thread_.join();
  }
  ClockSamples take_samples() override {
    std::lock_guard<std::mutex> lock(mu_);
    ClockSamples s{"", max_sm_, std::move(samples_)};
    samples_.clear();
    return s;
  }

 private:
  void sample() {
    ClockSample x;
    x.t = std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
    unsigned v = 0;
    if (nvml_.clock(dev_, kClockSm, &v) == 0) x.sm_mhz = v;
    if (nvml_.clock(dev_, kClockMem, &v) == 0) x.mem_mhz = v;
    if (nvml_.power && nvml_.power(dev_, &v) == 0) x.power_w = v / 1000.0;
    if (nvml_.temperature && nvml_.temperature(dev_, kTemperatureGpu, &v) == 0) x.temp_c = v;
    unsigned long long r = 0;
    if (nvml_.reasons && nvml_.reasons(dev_, &r) == 0) x.reasons = r;
    std::lock_guard<std::mutex> lock(mu_);
    samples_.push_back(x);
  }
  Nvml nvml_;
  Nvml::Device dev_;
  double max_sm_ = 0;
  std::atomic<bool> running_{false};
  std::thread thread_;
  std::mutex mu_;
  std::vector<ClockSample> samples_;
};

}  // namespace

std::unique_ptr<ClockSampler> make_clock_sampler(const DeviceInfo& d) {
  if (!d.cuda()) return std::make_unique<UnavailableSampler>("no NVML on a CPU");
  Nvml nvml;
  const std::string why = nvml.load();
  if (!why.empty()) return std::make_unique<UnavailableSampler>(why);
  Nvml::Device dev = nullptr;
  const bool found = (!d.pci_bus_id.empty() && nvml.by_pci && nvml.by_pci(d.pci_bus_id.c_str(), &dev) == 0) ||
                     (nvml.by_index && nvml.by_index(static_cast<unsigned>(d.index), &dev) == 0);
  if (!found) return std::make_unique<UnavailableSampler>("NVML does not know " + d.name + " (" + d.pci_bus_id + ")");
  return std::make_unique<NvmlSampler>(nvml, dev);
}

}  // namespace gpt2
