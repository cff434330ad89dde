// defines: detect_device, torch_device, StepTimer/make_step_timer, BatchMover, Executor, synchronize,
//          empty_cache, datasheet_peak_flops, best_rate, measure_matmul_peak. The device-specific parts come from
//          the device's Backend (bench/runtime/backend.h: cpu_backend.cpp, cuda/cuda_backend.cpp).
#pragma once
#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>

#include <ATen/core/Tensor.h>

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "bench/runtime/device_info.h"
#include "kernels/side_stream.h"
#include "model/data.h"

namespace gpt2 {

// `want`: "auto" (CUDA if built and present, else CPU), "cpu", "cuda", "cuda:N"; throws saying why when it is not
// there. A CUDA device is made current and its context and allocator set up before this returns.
DeviceInfo detect_device(const std::string& want = "auto");
c10::Device torch_device(const DeviceInfo& d);
// Whether this CPU computes bf16 natively, from /proc/cpuinfo's flags line: "native (AMX-BF16)",
// "native (AVX512-BF16)" or "emulated (...)". On an AVX2-only AMD EPYC a bf16 step was 20x an fp32 one.
std::string cpu_bf16_support(const std::string& cpuinfo_flags);
// Whether ATen has fp16 arithmetic on this CPU (oneDNN needs AVX512-FP16 or AMX-FP16): "native (...)" or
// "none (...)". Without it fp16 matmuls take the reference GEMM (1.3 GFLOP/s against 190 in fp32 on a Xeon).
std::string cpu_fp16_support(const std::string& cpuinfo_flags);
// The first processor's "family F model M stepping S" in /proc/cpuinfo's text (x86), or "" where it says none.
// Hypervisors hide the model name: a Zen 3 and a Zen 5 EPYC were both "AMD EPYC", and a report merging their runs
// took them for one device (their 196% "run-to-run spread" was two CPUs' difference).
std::string cpu_model_id(const std::string& cpuinfo);
bool build_has_cuda();

// Times queued work without waiting for it: mark() at each step boundary queues a CUDA event (on the CPU reads a
// steady clock); intervals() waits once, for the last mark, and returns the seconds between marks.
class StepTimer {
 public:
  virtual ~StepTimer() = default;
  virtual void mark() = 0;
  virtual std::vector<double> intervals() = 0;
};
std::unique_ptr<StepTimer> make_step_timer(const DeviceInfo& d);

// Brings the loader's batches to the device. Plain: .to(device) on the current stream. Pinned
// (CUDA): staged through pinned host buffers and copied non_blocking on a side stream one batch
// ahead, so the copy of batch n+1 overlaps the compute of batch n.
class BatchMover {
 public:
  virtual ~BatchMover() = default;
  virtual std::pair<at::Tensor, at::Tensor> next() = 0;  // (B, T) int64 input and target, on the device
};
std::unique_ptr<BatchMover> make_batch_mover(const DeviceInfo& d, Loader& loader, bool pinned);

std::unique_ptr<SideStream> make_side_stream(const DeviceInfo& d);  // kernels/side_stream.h

// Runs the step's body: eagerly, or (CUDA) captured once as a CUDA graph and then replayed with
// the inputs copied into static buffers. `state` (parameters, optimizer state) is restored after
// the capture's warm-up runs, so a graph takes the same steps as eager execution.
using StepBody = std::function<at::Tensor(const at::Tensor& x, const at::Tensor& y)>;
class Executor {
 public:
  virtual ~Executor() = default;
  virtual at::Tensor run(const at::Tensor& x, const at::Tensor& y) = 0;
};
std::unique_ptr<Executor> make_executor(ExecutorKind k, const DeviceInfo& d, StepBody body,
                                        std::vector<at::Tensor> state);
// `pass` captured once as a device graph (CUDA, after warm-up runs); calling the result replays it. Throws where
// the device has none or the capture fails.
std::function<void()> graphed(const DeviceInfo& d, std::function<void()> pass);

void synchronize(const DeviceInfo& d);
void empty_cache(const DeviceInfo& d);  // return cached device memory between rungs
// "" while the device can be used; else why not (CUDA: a sticky error, such as a kernel's illegal address: the
// process's context is lost, every later call fails, and only a new process can use the device again).
std::string lost_context(const DeviceInfo& d);

// Dense peak FLOP/s from the datasheet (bench/datasheet.h) for known GPUs at the precision the rung
// computes in; nullopt for any other device, the CPU included, and for a precision without tensor cores.
std::optional<double> datasheet_peak_flops(const DeviceInfo& d, MathMode m);
// The best rate (`work` units a second) of `op`: once to warm up, then timed until `min_total_s` have passed, 3 to
// 20 times, once where one run takes `min_total_s` (an emulated-bf16 CPU's 1024^3 GEMM took 2.4 s).
double best_rate(const DeviceInfo& d, double work, double min_total_s, const std::function<void()>& op);
// The best FLOP/s of a large square GEMM in that math mode, measured here and now.
double measure_matmul_peak(const DeviceInfo& d, MathMode m);
// The best bytes/s (read + written) of a device-to-device copy of 256 MiB (past the caches: on 2 cores of a
// Xeon with 480 MiB of L3 the same rate as 1 GiB, 64 MiB 1.4x it), measured here and now: what a
// memory-bound step can hope for on this device with these threads.
double measure_copy_bandwidth(const DeviceInfo& d);
c10::ScalarType compute_dtype(MathMode m);  // the dtype matmuls run in
// Sets ATen's float32 matmul precision for a scope ("high" = TF32 allowed), restoring it after.
class MatmulPrecisionGuard {
 public:
  explicit MatmulPrecisionGuard(bool tf32);
  ~MatmulPrecisionGuard();
  MatmulPrecisionGuard(const MatmulPrecisionGuard&) = delete;
  MatmulPrecisionGuard& operator=(const MatmulPrecisionGuard&) = delete;

 private:
  std::string saved_;
};

}  // namespace gpt2
