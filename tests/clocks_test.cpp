// NVML's clock samples → the throttle verdict, with fake samples; the CPU's bf16 support from its
// flags (AMX-BF16 Sapphire Rapids, an AVX2-only AMD EPYC).
#include <gtest/gtest.h>

#include <fstream>
#include <iterator>

#include <nlohmann/json.hpp>

#include "bench/measure/clocks.h"
#include "bench/runtime/device.h"

namespace gpt2 {
namespace {

std::vector<ClockSample> steady(double sm, uint64_t reasons = 0, int n = 20) {
  return std::vector<ClockSample>(n, ClockSample{sm, 2619, 650, 61, reasons});
}

TEST(Clocks, AFullClockIsNotThrottled) {
  const ClockSummary s = summarize_clocks(steady(1980), 1980);
  EXPECT_TRUE(s.available);
  EXPECT_EQ(s.samples, 20);
  EXPECT_EQ(s.sm_mhz_median, 1980);
  EXPECT_EQ(s.power_w_median, 650);
  EXPECT_FALSE(s.throttled);
  EXPECT_TRUE(s.reasons.empty());
}

TEST(Clocks, ALowMedianClockIsThrottled) {
  auto samples = steady(1980, 0, 5);
  for (auto& x : steady(1410, 0, 10)) samples.push_back(x);  // most of the rung at 71% of the clock
  const ClockSummary s = summarize_clocks(samples, 1980);
  EXPECT_TRUE(s.throttled);
  EXPECT_NE(s.throttled_why.find("median SM clock 1410 MHz is 71% of the 1980 MHz maximum"), std::string::npos)
      << s.throttled_why;
  EXPECT_TRUE(to_json(s)["throttled"].get<bool>());
}

TEST(Clocks, AThermalOrHardwareSlowdownIsThrottledAPowerCapAloneIsOnlyRecorded) {
  auto samples = steady(1980);
  samples[3].reasons = kReasonHwThermal;
  ClockSummary s = summarize_clocks(samples, 1980);
  EXPECT_TRUE(s.throttled);
  EXPECT_EQ(s.throttled_why, "hw_thermal_slowdown");
  s = summarize_clocks(steady(1975, kReasonSwPowerCap), 1980);
  EXPECT_FALSE(s.throttled);
  EXPECT_EQ(s.reasons, std::vector<std::string>{"sw_power_cap"});
}

// Dense matmuls can hold an H100 at its 700 W limit: NVML sets sw_power_cap and the SM clock settles under the
// boost maximum (here 82% of it). That is the device's sustained speed, recorded, never a THROTTLED rung.
TEST(Clocks, APowerCappedClockIsRecordedNotThrottled) {
  auto samples = steady(1980, 0, 4);                                  // the first samples, under the cap
  for (auto& x : steady(1620, kReasonSwPowerCap, 16)) samples.push_back(x);  // 82% of the maximum
  const ClockSummary s = summarize_clocks(samples, 1980);
  EXPECT_FALSE(s.throttled) << s.throttled_why;
  EXPECT_EQ(s.sm_mhz_median, 1620);
  EXPECT_DOUBLE_EQ(s.power_capped_share, 0.8);
  EXPECT_EQ(s.uncapped_sm_mhz_median, 1980);
  EXPECT_EQ(s.reasons, std::vector<std::string>{"sw_power_cap"});
  const auto j = to_json(s);
  EXPECT_DOUBLE_EQ(j["power_capped_share"].get<double>(), 0.8);
  EXPECT_FALSE(j["throttled"].get<bool>());
  // every sample capped: no clock is left to judge, and none is flagged
  const ClockSummary all = summarize_clocks(steady(1500, kReasonSwPowerCap), 1980);
  EXPECT_FALSE(all.throttled);
  EXPECT_DOUBLE_EQ(all.power_capped_share, 1.0);
  EXPECT_EQ(all.uncapped_sm_mhz_median, 0);
}

// A clock held low where the power cap does not explain it (clocks locked under the maximum, applications
// clocks lowered) is flagged, judged on the samples the cap did not hold.
TEST(Clocks, ALowClockThePowerCapDoesNotExplainIsThrottled) {
  auto samples = steady(1650, kReasonSwPowerCap, 10);
  for (auto& x : steady(1305, kReasonAppClocksSetting, 10)) samples.push_back(x);
  const ClockSummary s = summarize_clocks(samples, 1980);
  EXPECT_TRUE(s.throttled);
  EXPECT_NE(s.throttled_why.find("median SM clock 1305 MHz (the samples not power-capped) is 66% of the 1980 MHz maximum"),
            std::string::npos)
      << s.throttled_why;
  EXPECT_EQ(s.reasons, (std::vector<std::string>{"applications_clocks_setting", "sw_power_cap"}));
}

// A reference rung's clocks: the samples this process took while the Python process ran, only those stamped within
// its timed repetitions' window (its compilation before them leaves the device idle at another clock).
TEST(Clocks, WithinAWindowOnlyItsSamplesAreSummarized) {
  ClockSamples all{"", 1980, {}};
  for (int i = 0; i < 100; ++i) {  // 2 s at one sample every 20 ms: idle first, then power-capped at 1755 MHz
    const bool busy = i >= 50;
    all.samples.push_back({busy ? 1755.0 : 345.0, 2619, busy ? 690.0 : 70.0, 50, busy ? kReasonSwPowerCap : kReasonGpuIdle,
                           100 + 0.02 * i});
  }
  const ClockSummary busy = clocks_within(all, 101.0, 102.0);
  EXPECT_TRUE(busy.available);
  EXPECT_EQ(busy.samples, 50);
  EXPECT_DOUBLE_EQ(busy.sm_mhz_median, 1755);
  EXPECT_DOUBLE_EQ(busy.power_capped_share, 1.0);
  EXPECT_EQ(busy.reasons, std::vector<std::string>{"sw_power_cap"});
  EXPECT_EQ(clocks_within(all, 100.0, 100.5).sm_mhz_median, 345);
  EXPECT_EQ(clocks_within(all, 100.0, 102.0).samples, 100);
  const ClockSummary none = clocks_within(all, 200.0, 200.1);  // after the samples: said, with the window's length
  EXPECT_FALSE(none.available);
  EXPECT_EQ(none.unavailable_why, "no sample within the timed window (100 ms; 100 samples in all)");
  const ClockSummary cpu = clocks_within({"no NVML on a CPU", 0, {}}, 0, 1);
  EXPECT_FALSE(cpu.available);
  EXPECT_EQ(cpu.unavailable_why, "no NVML on a CPU");
}

// A rung's clocks as rungs.json keeps them read back for --resume: the same summary, written the same.
TEST(Clocks, ASummaryReadBackFromItsJsonIsTheSame) {
  std::vector<ClockSample> samples = steady(1500, kReasonSwPowerCap | kReasonHwThermal);
  for (auto& x : steady(1700)) samples.push_back(x);
  for (const ClockSummary& s : {summarize_clocks(samples, 1980), unavailable_clocks("no NVML on a CPU")}) {
    const nlohmann::json j = to_json(s);
    EXPECT_EQ(to_json(clock_summary_from(j)), j);
  }
  const ClockSummary back = clock_summary_from(to_json(summarize_clocks(samples, 1980)));
  EXPECT_TRUE(back.throttled);
  EXPECT_NE(back.throttled_why.find("hw_thermal_slowdown"), std::string::npos) << back.throttled_why;
  EXPECT_EQ(back.reasons.size(), 2u);
}

TEST(Clocks, UnavailableOnTheCpu) {
  const ClockSummary s = make_clock_sampler(detect_device("cpu"))->take();
  EXPECT_FALSE(s.available);
  EXPECT_EQ(to_json(s)["why"], "no NVML on a CPU");
  EXPECT_EQ(make_clock_sampler(detect_device("cpu"))->take_samples().unavailable_why, "no NVML on a CPU");
}

TEST(Clocks, CpuBf16SupportFromItsFlags) {
  EXPECT_EQ(cpu_bf16_support(" fpu avx2 avx512f amx_bf16 amx_tile avx512_bf16 "), "native (AMX-BF16)");
  EXPECT_EQ(cpu_bf16_support(" fpu avx2 avx512f avx512_bf16 "), "native (AVX512-BF16)");
  EXPECT_EQ(cpu_bf16_support(" fpu sse avx avx2 fma ").rfind("emulated", 0), 0u);  // AMD EPYC Zen 3
  EXPECT_FALSE(detect_device("cpu").bf16_support.empty());
}

TEST(Clocks, CpuModelIdFromCpuinfo) {
  // /proc/cpuinfo of the 2-core KVM guests seen here: both AMD EPYCs are named "AMD EPYC" alone.
  const std::string zen3 =
      "processor\t: 0\nvendor_id\t: AuthenticAMD\ncpu family\t: 25\nmodel\t\t: 1\nmodel name\t: AMD EPYC\n"
      "stepping\t: 1\nflags\t\t: fpu avx2\n\nprocessor\t: 1\nvendor_id\t: AuthenticAMD\ncpu family\t: 99\n"
      "model\t\t: 9\n";
  EXPECT_EQ(cpu_model_id(zen3), "family 25 model 1 stepping 1");  // the first processor's, not "model name"
  EXPECT_EQ(cpu_model_id("processor\t: 0\ncpu family\t: 26\nmodel\t\t: 2\nmodel name\t: AMD EPYC\n"), "family 26 model 2");
  EXPECT_EQ(cpu_model_id("processor\t: 0\nBogoMIPS\t: 50.00\nCPU implementer\t: 0x41\n"), "");  // an Arm CPU says none
  EXPECT_EQ(cpu_model_id(""), "");
  std::ifstream f("/proc/cpuinfo");
  const std::string here((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  EXPECT_EQ(detect_device("cpu").cpu_model_id, cpu_model_id(here));
}

TEST(Clocks, CpuFp16SupportFromItsFlags) {
  EXPECT_EQ(cpu_fp16_support(" fpu avx512f amx_bf16 amx_fp16 avx512_fp16 "), "native (AMX-FP16)");  // Granite Rapids
  EXPECT_EQ(cpu_fp16_support(" fpu avx512f amx_bf16 avx512_fp16 "), "native (AVX512-FP16)");        // Sapphire Rapids
  EXPECT_EQ(cpu_fp16_support(" fpu avx2 avx512f avx512_bf16 f16c ").rfind("none", 0), 0u);  // f16c: conversions only
  EXPECT_EQ(cpu_fp16_support(" fpu avx512_fp16x ").rfind("none", 0), 0u);                  // whole flags only
  const DeviceInfo cpu = detect_device("cpu");
  EXPECT_EQ(cpu.fp16, cpu.fp16_support.rfind("native", 0) == 0) << cpu.fp16_support;
}

}  // namespace
}  // namespace gpt2
