// defines: detect_device, torch_device, DeviceTimer/make_timer, synchronize, empty_cache,
//          datasheet_peak_flops, measure_matmul_peak — everything that differs between CPU and CUDA
//          besides memory (bench/memory.h). CUDA code lives in bench/cuda/, compiled in the CUDA build.
#pragma once
#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>

#include <memory>
#include <optional>
#include <string>

#include "bench/step_spec.h"

namespace gpt2 {

// `want`: "auto" (CUDA if this build has it and a device is present, else CPU), "cpu", "cuda", "cuda:N".
// Throws std::runtime_error when the device asked for is not there, saying why.
DeviceInfo detect_device(const std::string& want = "auto");
c10::Device torch_device(const DeviceInfo& d);
bool build_has_cuda();

// Times work queued on the device: CUDA events on a GPU, a steady clock on the CPU (where ATen
// ops run synchronously). stop() queues the end mark; seconds() waits for it.
class DeviceTimer {
 public:
  virtual ~DeviceTimer() = default;
  virtual void start() = 0;
  virtual void stop() = 0;
  virtual double seconds() = 0;
};
std::unique_ptr<DeviceTimer> make_timer(const DeviceInfo& d);

void synchronize(const DeviceInfo& d);
void empty_cache(const DeviceInfo& d);  // return cached device memory between rungs

// Dense peak FLOP/s from the datasheet for known GPUs (A100, H100 SXM/PCIe, H200) at the precision
// the rung computes in; nullopt for any other device, the CPU included.
std::optional<double> datasheet_peak_flops(const DeviceInfo& d, Precision p);
// The best FLOP/s of a large square GEMM in the precision's matmul dtype, measured here and now.
double measure_matmul_peak(const DeviceInfo& d, Precision p);
c10::ScalarType compute_dtype(Precision p);  // the dtype matmuls run in under that precision

}  // namespace gpt2
