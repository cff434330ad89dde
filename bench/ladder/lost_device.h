// defines: LostDeviceExit (lost_device_exit()) — a ladder process's end when its device is lost or hangs: the rung
//          in flight recorded as an error with "device_fault", the run "aborted", exit 3, no destructor run (a lost
//          CUDA context throws from tensors' destructors); --resume goes on past it (docs/reliability.md).
#pragma once
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "bench/ladder/results.h"
#include "bench/runtime/device_info.h"

namespace gpt2 {

class RunWriter;

// A CUDA device's hang limit: no step phase begun for this long in a rung is a hang. Steps take milliseconds to a few
// seconds there; a rung's longest stretch without one (its build: SDPA and chunk timings, a graph capture's warm-up)
// takes seconds.
constexpr double kHangLimitS = 120;
// The limit for `dev`: GPT2BENCH_HANG_S where set (seconds; 0 none), else kHangLimitS on CUDA and none on a CPU.
double hang_limit_s(const DeviceInfo& dev);
// How long a rung may begin no step before it counts as hung: the limit, plus twice a repetition's device time at
// its warm-up step's time (`warmup_step_s`, 0 before its warm-up ends), since a host that issued a repetition's steps
// ahead of the device (a CUDA graph's launches queue) then waits for all of them.
double hang_after_s(double limit_s, double warmup_step_s, int64_t steps_per_repetition);

class LostDeviceExit {
 public:
  // From here until disarm (or the Armed guard's end): a lost device writes `records` through `writer`, exits 3;
  // with hang_limit_s(dev) > 0, a rung that hangs as well (the watch thread).
  void arm(const DeviceInfo& dev, std::vector<RungRecord>& records, RunWriter& writer);
  void disarm();
  struct Armed {
    Armed(LostDeviceExit& e, const DeviceInfo& dev, std::vector<RungRecord>& records, RunWriter& writer) : e_(e) {
      e_.arm(dev, records, writer);
    }
    ~Armed() { e_.disarm(); }
    Armed(const Armed&) = delete;
    Armed& operator=(const Armed&) = delete;
    LostDeviceExit& e_;
  };
  // The rung whose work is on the device now (nullptr between rungs, and while a reference's rung is timed again:
  // a copy, not recorded).
  void set_in_flight(RungRecord* r);
  // Returns where the device can still be used (or nothing is armed); else records `error` as the rung in flight's,
  // writes the run and exits 3.
  void check(const std::string& error);
  // GPT2BENCH_FAULT_DEVICE=<rung>[:free|:device|:hang] (tests): that rung, once built, fails as a kernel's fault:
  // its handler sees torch's AcceleratorError; ":free" from a destructor (std::terminate); ":device" a real
  // device-side assert (CUDA); ":hang" a kernel that never ends (docs/reliability.md).
  void inject(const RungRecord& r, const DeviceInfo& dev);

 private:
  [[noreturn]] void end_process(const std::string& error, const std::string& why);
  static void on_terminate();
  void watch(double limit_s);  // the watch thread's loop, until disarm

  const DeviceInfo* dev_ = nullptr;
  std::vector<RungRecord>* records_ = nullptr;
  RunWriter* writer_ = nullptr;
  std::atomic<RungRecord*> in_flight_{nullptr};
  std::atomic<int64_t> in_flight_since_ns_{0};
  std::mutex watch_mu_;
  std::condition_variable watch_cv_;
  bool watch_stop_ = false;
  std::thread watcher_;
  std::string injected_;  // the injected fault's loss, once thrown: the device counts as lost from then on
  std::terminate_handler previous_ = nullptr;
};

// The process's one instance (std::terminate's handler reaches it).
LostDeviceExit& lost_device_exit();

}  // namespace gpt2
