// defines: Peaks — the matmul peaks a run measures once (each precision it computes in), the MFU denominator
//          taken from them, kept by --resume; never below a rate a rung achieved in that precision.
#pragma once
#include <nlohmann/json.hpp>

#include <functional>
#include <map>
#include <set>
#include <vector>

#include "bench/ladder/results.h"
#include "bench/runtime/device_info.h"

namespace gpt2 {

class Peaks {
 public:
  using Measure = std::function<double(MathMode)>;  // FLOP/s of a square matmul in that precision
  // `measure`: measure_matmul_peak on `dev` unless a test gives its own.
  explicit Peaks(const DeviceInfo& dev, Measure measure = {});

  // The peaks `records` need (on a CPU every precision: its MFU peak is the best of them) and the copy bandwidth,
  // measured now, or taken from `earlier` (rungs.json's "measured" of the run --resume continues); set into
  // every record's plan.
  void measure_for(std::vector<RungRecord>& records, const nlohmann::json& earlier);

  // A rung achieved `flops_per_s` (model FLOPs) in its precision. A peak below that was mismeasured (a busy
  // machine): measured again once; still below, the peak becomes the achieved rate, flagged unreliable. Every
  // record's plan follows, so no MFU goes over 100%. Returns whether anything changed.
  bool hold(const RungRecord& r, double flops_per_s, std::vector<RungRecord>& records);

  // rungs.json's "measured": matmul_tflops per precision, copy_bandwidth_gbs, how, and `unreliable` per precision
  // whose peak was raised to an achieved rate.
  nlohmann::json to_json() const;

 private:
  void set_into(std::vector<RungRecord>& records) const;

  const DeviceInfo& dev_;
  Measure measure_;
  std::map<MathMode, double> measured_;
  double copy_bandwidth_gbs_ = 0;
  std::set<MathMode> remeasured_;
  nlohmann::json unreliable_ = nlohmann::json::object();
};

}  // namespace gpt2
