#include "bench/ladder/lost_device.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <stdexcept>

#include "bench/ladder/run_dir.h"
#include "bench/runtime/device.h"
#include "bench/runtime/phase.h"
#include "bench/step/step_spec.h"
#include "common/errors.h"
#include "common/format.h"

namespace gpt2 {
namespace {

[[noreturn]] void raise_illegal_address() {
  throw c10::AcceleratorError({__func__, __FILE__, static_cast<uint32_t>(__LINE__)}, 700,
                              "CUDA error: an illegal memory access was encountered\n"
                              "CUDA kernel errors might be asynchronously reported at some other API call, so the "
                              "stacktrace below might be incorrect.\nFor debugging consider passing "
                              "CUDA_LAUNCH_BLOCKING=1\nCompile with `TORCH_USE_CUDA_DSA` to enable device-side "
                              "assertions.\n");
}

// A tensor freed after the fault: its destructor throws, as the caching allocators' insert_events does.
struct FreedAfterTheFault {
  ~FreedAfterTheFault() { raise_illegal_address(); }
};

int64_t steady_now_ns() { return std::chrono::steady_clock::now().time_since_epoch().count(); }

}  // namespace

LostDeviceExit& lost_device_exit() {
  static LostDeviceExit e;
  return e;
}

double hang_limit_s(const DeviceInfo& dev) {
  if (const char* v = std::getenv("GPT2BENCH_HANG_S")) {
    char* end = nullptr;
    const double s = std::strtod(v, &end);
    if (end == v || *end != '\0' || !(s >= 0))
      throw std::runtime_error(std::string("GPT2BENCH_HANG_S='") + v + "': expected seconds, 0 or more (0: no watch)");
    return s;
  }
  return dev.cuda() ? kHangLimitS : 0.0;
}

double hang_after_s(double limit_s, double warmup_step_s, int64_t steps_per_repetition) {
  return limit_s + 2 * std::max(0.0, warmup_step_s) * static_cast<double>(std::max<int64_t>(0, steps_per_repetition));
}

void LostDeviceExit::arm(const DeviceInfo& dev, std::vector<RungRecord>& records, RunWriter& writer) {
  const double limit_s = hang_limit_s(dev);
  dev_ = &dev, records_ = &records, writer_ = &writer, in_flight_ = nullptr;
  previous_ = std::set_terminate(&LostDeviceExit::on_terminate);
  watch_stop_ = false;
  if (limit_s > 0) watcher_ = std::thread([this, limit_s] { watch(limit_s); });
}

void LostDeviceExit::disarm() {
  if (!writer_) return;
  {
    const std::lock_guard<std::mutex> lock(watch_mu_);
    watch_stop_ = true;
  }
  watch_cv_.notify_all();
  if (watcher_.joinable()) watcher_.join();
  std::set_terminate(previous_);
  dev_ = nullptr, records_ = nullptr, writer_ = nullptr, in_flight_ = nullptr;
}

void LostDeviceExit::set_in_flight(RungRecord* r) {
  in_flight_since_ns_ = steady_now_ns();
  in_flight_ = r;
}

void LostDeviceExit::watch(double limit_s) {
  const auto limit_ns = static_cast<int64_t>(limit_s * 1e9);
  const auto tick = std::chrono::milliseconds(std::clamp<int64_t>(static_cast<int64_t>(limit_s * 100), 10, 1000));
  std::unique_lock<std::mutex> lock(watch_mu_);
  while (!watch_cv_.wait_for(lock, tick, [this] { return watch_stop_; })) {
    RungRecord* r = in_flight_;
    if (!r) continue;
    const int64_t since = std::max(last_step_began_ns(), in_flight_since_ns_.load());
    if (steady_now_ns() - since < limit_ns || r != in_flight_) continue;
    // The record read only once the rung has stood still that long (its thread writes it as it goes).
    const double after_s = hang_after_s(limit_s, r->out.timing.warmup_step_s, r->out.timing.steps);
    if (steady_now_ns() - since < static_cast<int64_t>(after_s * 1e9) || ranks(r->plan.rung.spec) > 1) continue;
    const std::string what = strf("hung: no step began a phase for %g s (a kernel that does not end, or a call that "
                                  "does not return; GPT2BENCH_HANG_S sets the limit)", limit_s);
    end_process(what, "hung");  // from this thread: the rung's own waits for good
  }
}

void LostDeviceExit::check(const std::string& error) {
  if (!writer_) return;
  const std::string why = injected_.empty() ? lost_context(*dev_) : injected_;
  if (!why.empty()) end_process(error, why);
}

void LostDeviceExit::end_process(const std::string& error, const std::string& why) {
  // Outside a rung's record: the baseline's parity run before the rungs, or a copy of a rung timed again after a
  // reference (nothing to record in either).
  std::string who = "a step outside the rungs (the parity reference's, or a C++ rung's timed again after a reference)";
  if (RungRecord* r = in_flight_) {
    r->out.status = RungStatus::kError;
    r->out.error = error;
    r->out.ends.device_fault = true;
    who = r->name();
  }
  int code = 3;
  try {
    writer_->flush(*records_, "aborted");
  } catch (const std::exception& e) {
    std::cerr << "gpt2bench: the run could not be written after the device was lost: " << e.what() << "\n";
    code = 1;
  }
  std::cerr << "\ngpt2bench: " << who << " left the device unusable (" << why << "): " << first_line(error)
            << "\n  nothing more can run in this process; its rungs are written (" << writer_->rungs_path()
            << "), and gpt2bench ladder --resume runs the rest in a new one (that rung kept as the error it was)\n";
  std::cout.flush(), std::cerr.flush();
  std::fflush(nullptr);
  std::_Exit(code);  // no destructor: freeing tensors now would throw inside them (std::terminate)
}

void LostDeviceExit::on_terminate() {
  std::string error = "std::terminate";
  if (const auto e = std::current_exception()) {
    try {
      std::rethrow_exception(e);
    } catch (const std::exception& x) {
      error = error_text(x);
    } catch (...) {
    }
  }
  LostDeviceExit& self = lost_device_exit();
  self.check(error);  // exits 3 where the device is lost
  if (self.previous_) self.previous_();
  std::abort();
}

void LostDeviceExit::inject(const RungRecord& r, const DeviceInfo& dev) {
  const char* v = std::getenv("GPT2BENCH_FAULT_DEVICE");
  if (!v) return;
  const std::string s = v;
  const auto colon = s.find(':');
  if (s.substr(0, colon) != r.name()) return;
  const std::string how = colon == std::string::npos ? "" : s.substr(colon + 1);
  if (how != "" && how != "free" && how != "device" && how != "hang")
    throw std::runtime_error("GPT2BENCH_FAULT_DEVICE='" + s +
                             "': expected <rung>, <rung>:free, <rung>:device or <rung>:hang");
  if (how == "hang") {  // as a host waiting on a kernel that never ends; a test's bound, not the watch's
    std::this_thread::sleep_for(std::chrono::seconds(60));
    throw std::runtime_error("GPT2BENCH_FAULT_DEVICE='" + s + "': the hang was not ended by the watch in 60 s");
  }
  if (how == "device") {
    const auto on = at::device(torch_device(dev));
    (void)at::zeros({8}, on).index_select(0, at::full({4}, int64_t{1} << 20, on.dtype(at::kLong)));
    return;
  }
  injected_ = "cudaErrorIllegalAddress: an illegal memory access was encountered";
  if (how == "free") FreedAfterTheFault{};
  raise_illegal_address();
}

}  // namespace gpt2
