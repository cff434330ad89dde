#include "bench/ladder/peaks.h"

#include <cstdlib>
#include <iostream>

#include "bench/runtime/datasheet.h"
#include "bench/runtime/device.h"
#include "bench/step/step_spec.h"
#include "common/errors.h"
#include "common/format.h"

namespace gpt2 {
namespace {

constexpr MathMode kModes[] = {MathMode::kFp32, MathMode::kTf32, MathMode::kBf16, MathMode::kFp16};

// GPT2BENCH_TEST_LOW_PEAKS=N: the first N measurements come back 10^6 times low, as on a machine busy with another
// process, only more so (the tests' stand-in; a slowed process measured 42.5 GFLOP/s where 230 is normal).
Peaks::Measure device_measure(const DeviceInfo& dev) {
  const char* v = std::getenv("GPT2BENCH_TEST_LOW_PEAKS");
  auto low = std::make_shared<int>(v ? std::atoi(v) : 0);
  return [&dev, low](MathMode m) {
    const double rate = measure_matmul_peak(dev, m);
    return (*low)-- > 0 ? rate / 1e6 : rate;
  };
}

std::string gflops(double rate) { return strf("%.1f GFLOP/s", rate / 1e9); }

}  // namespace

Peaks::Peaks(const DeviceInfo& dev, Measure measure)
    : dev_(dev), measure_(measure ? std::move(measure) : device_measure(dev)) {}

void Peaks::measure_for(std::vector<RungRecord>& records, const nlohmann::json& earlier) {
  const nlohmann::json tflops = earlier.is_object() ? earlier.value("matmul_tflops", nlohmann::json::object())
                                                    : nlohmann::json::object();
  for (MathMode m : kModes)
    if (const auto it = tflops.find(to_string(m)); it != tflops.end() && it->is_number()) measured_[m] = it->get<double>() * 1e12;
  if (earlier.is_object()) {
    copy_bandwidth_gbs_ = earlier.value("copy_bandwidth_gbs", 0.0);
    unreliable_ = earlier.value("unreliable", nlohmann::json::object());
  }
  if (!measured_.empty()) std::cerr << "gpt2bench: the peaks measured when the run started, kept\n";
  auto need = [&](MathMode m) {
    if (measured_.count(m)) return;
    std::cerr << "gpt2bench: measuring the " << to_string(m) << " matmul peak...\n";
    measured_[m] = measure_(m);
  };
  if (!dev_.cuda())  // MFU's peak on a CPU: the highest rate in any precision it computes in (fp16: with a fast path)
    for (MathMode m : {MathMode::kFp32, MathMode::kBf16, MathMode::kFp16})
      if (m != MathMode::kFp16 || dev_.fp16) need(m);
  for (auto& r : records)
    if (r.out.status != RungStatus::kSkipped) need(math_mode(r.plan.rung.spec));
  if (copy_bandwidth_gbs_ <= 0) {
    std::cerr << "gpt2bench: measuring the copy bandwidth...\n";
    copy_bandwidth_gbs_ = measure_copy_bandwidth(dev_) / 1e9;
  }
  empty_cache(dev_);
  set_into(records);
}

bool Peaks::hold(const RungRecord& r, double flops_per_s, std::vector<RungRecord>& records) {
  const MathMode m = math_mode(r.plan.rung.spec);
  const auto it = measured_.find(m);
  if (it == measured_.end() || flops_per_s <= it->second) return false;
  const std::string mode = to_string(m);
  std::cerr << "gpt2bench: " << r.name() << " ran at " << gflops(flops_per_s) << " in " << mode
            << ", above the " << mode << " peak measured (" << gflops(it->second) << ")";
  if (remeasured_.insert(m).second) {
    std::cerr << ": measuring it again... ";
    try {  // beside the rung's live step: a measurement that fails (out of memory) must not fail the rung
      const double again = measure_(m);
      std::cerr << gflops(again) << "\n";
      if (again > it->second) it->second = again;
    } catch (const std::exception& e) {
      std::cerr << "could not (" << first_line(e.what()) << ")\n";
    }
  } else {
    std::cerr << "\n";
  }
  if (flops_per_s > it->second) {
    unreliable_[mode] = {{"measured_tflops", it->second / 1e12}, {"achieved_tflops", flops_per_s / 1e12},
                         {"rung", r.name()},
                         {"why", "measured below a rate " + r.name() + " achieved (a busy machine?): the peak is "
                                 "that rate, a lower bound"}};
    it->second = flops_per_s;
    std::cerr << "gpt2bench: UNRELIABLE " << mode << " peak: taken as " << r.name() << "'s " << gflops(flops_per_s)
              << " (a lower bound); its MFU figures are upper bounds\n";
  }
  set_into(records);
  return true;
}

void Peaks::set_into(std::vector<RungRecord>& records) const {
  auto [mfu_peak, mfu_basis] = mfu_peak_for(dev_, measured_);
  // A CPU's MFU is over its best rate: unreliable where that precision's peak was raised, not another's below it.
  const bool unreliable = !dev_.cuda() && unreliable_.contains(to_string(best_measured(measured_)));
  if (unreliable) mfu_basis += "; UNRELIABLE: raised to a rate a rung achieved";
  for (auto& r : records) {
    if (auto m = measured_.find(math_mode(r.plan.rung.spec)); m != measured_.end()) r.plan.measured_peak = m->second;
    r.plan.mfu_peak = mfu_peak;
    r.plan.mfu_basis = mfu_basis;
    r.plan.mfu_unreliable = unreliable;
  }
}

nlohmann::json Peaks::to_json() const {
  nlohmann::json out = {{"copy_bandwidth_gbs", copy_bandwidth_gbs_},
                        {"how", "matmul_tflops: the best of a square GEMM (n = 8192 on a GPU, 1024 on a CPU) in each "
                                "precision, once a run; copy_bandwidth_gbs: the best of a 256 MiB copy, bytes read + "
                                "written"}};
  for (const auto& [m, flops] : measured_) out["matmul_tflops"][to_string(m)] = flops / 1e12;
  if (!unreliable_.empty()) out["unreliable"] = unreliable_;
  return out;
}

}  // namespace gpt2
