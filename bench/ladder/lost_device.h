// defines: LostDeviceExit (lost_device_exit()) — a ladder process's end when its device is lost.
//
// A kernel that writes out of bounds (an illegal address) or trips a device-side assert loses its process's CUDA
// context: every later call in the process fails with that error. Nothing more can be timed there, and the process
// cannot even unwind: freeing a tensor that another stream used (the pinned batches' record_stream, the pinned
// host buffers' copies) records an event in the caching allocators (insert_events), which throws inside the
// tensor's destructor: std::terminate ("terminate called after throwing an instance of 'c10::Error' ... CUDA
// error: an illegal memory access was encountered (insert_events at CUDACachingAllocator.cpp)", as PyTorch's
// issue threads show it). So once armed, a lost device, found after a rung's error (check) or in std::terminate,
// ends the process at once: the rung in flight recorded as an error with "device_fault", the run written as
// "aborted", exit 3, no destructor run. `gpt2bench ladder --resume` runs the rest in a new process and keeps that
// rung (with this build it would lose the new process's device too).
#pragma once
#include <exception>
#include <string>
#include <vector>

#include "bench/ladder/results.h"
#include "bench/runtime/device_info.h"

namespace gpt2 {

class RunWriter;

class LostDeviceExit {
 public:
  // From here until disarm (or the Armed guard's end): a lost device writes `records` through `writer`, exits 3.
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
  void set_in_flight(RungRecord* r) { in_flight_ = r; }
  // Returns where the device can still be used (or nothing is armed); else records `error` as the rung in flight's,
  // writes the run and exits 3.
  void check(const std::string& error);
  // GPT2BENCH_FAULT_DEVICE=<rung>[:free|:device] (tests): that rung, once built, fails as a kernel's fault does.
  // No suffix: the error reaches the rung's handler (torch's AcceleratorError 700 in libc10_cuda's words); ":free":
  // it is thrown from a destructor, as insert_events throws (std::terminate); ":device" (CUDA): a real one, an index
  // past a table (a device-side assert), the rung going on to meet it wherever the device says so.
  void inject(const RungRecord& r, const DeviceInfo& dev);

 private:
  [[noreturn]] void end_process(const std::string& error, const std::string& why);
  static void on_terminate();

  const DeviceInfo* dev_ = nullptr;
  std::vector<RungRecord>* records_ = nullptr;
  RunWriter* writer_ = nullptr;
  RungRecord* in_flight_ = nullptr;
  std::string injected_;  // the injected fault's loss, once thrown: the device counts as lost from then on
  std::terminate_handler previous_ = nullptr;
};

// The process's one instance (std::terminate's handler reaches it).
LostDeviceExit& lost_device_exit();

}  // namespace gpt2
