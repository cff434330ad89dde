// The CUDA Backend (bench/runtime/backend.h). Compiled only in the CUDA build (GPT2BENCH_CUDA=ON),
// in no_cuda.cpp's place, and made to run on a machine without a GPU or a driver: every entry point
// checks device_count() first or is only reached after detect_device found a device.
#include "bench/runtime/backend.h"

#include <ATen/ATen.h>
#include <ATen/cuda/CUDAContextLight.h>
#include <ATen/cuda/CUDAGraph.h>
#include <ATen/detail/CUDAHooksInterface.h>
#include <c10/core/AllocatorConfig.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAEvent.h>
#include <c10/cuda/CUDAFunctions.h>
#include <cuda_runtime_api.h>
#include <cupti.h>
#include <torch/csrc/cuda/nccl.h>
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>

#include <cstdlib>
#include <sstream>

#include "bench/runtime/graph_capture.h"
#include "bench/runtime/memory.h"

namespace gpt2::cuda {
namespace {  // reached only through CudaBackend, at the end

int device_count() { return static_cast<int>(c10::cuda::device_count()); }

void activate(int index) {
  // The allocator's setting (settle_device_allocator), applied whether or not the caching allocator read its
  // variable before cli_main set it.
  static const bool settled = [] {
    settle_device_allocator();
    if (const char* conf = std::getenv("PYTORCH_CUDA_ALLOC_CONF"); conf && *conf)
      c10::CachingAllocator::setAllocatorSettings(conf);
    return true;
  }();
  (void)settled;
  c10::cuda::set_device(static_cast<c10::DeviceIndex>(index));
  at::globalContext().lazyInitDevice(at::kCUDA);
}

DeviceInfo describe(int index) {
  cudaDeviceProp p{};
  C10_CUDA_CHECK(cudaGetDeviceProperties(&p, index));
  DeviceInfo d;
  d.type = DeviceType::kCuda;
  d.index = index;
  d.name = p.name;
  d.cc_major = p.major;
  d.cc_minor = p.minor;
  d.sm_count = p.multiProcessorCount;
  d.total_memory = static_cast<int64_t>(p.totalGlobalMem);
  int driver = 0, runtime = 0;
  cudaDriverGetVersion(&driver);
  cudaRuntimeGetVersion(&runtime);
  auto ver = [](int v) { return std::to_string(v / 1000) + "." + std::to_string((v % 1000) / 10); };
  d.driver_version = ver(driver);
  char bus[32] = {};
  if (cudaDeviceGetPCIBusId(bus, sizeof(bus), index) == cudaSuccess) d.pci_bus_id = bus;
  d.uuid = gpu_uuid(p.uuid.bytes);
  d.runtime_version = ver(runtime);
  d.bf16 = p.major >= 8;             // bf16 tensor cores from Ampere
  d.tf32 = p.major >= 8;             // TF32 tensor cores from Ampere
  d.flash_attention = p.major >= 8;  // PyTorch's flash SDPA kernels need sm80+
  return d;
}

namespace {

// A CUDA event per mark on the device's current stream; intervals() waits for the last one only.
class CudaStepTimer : public StepTimer {
 public:
  explicit CudaStepTimer(int index) : index_(static_cast<c10::DeviceIndex>(index)) {}
  void mark() override {
    if (used_ == events_.size()) events_.emplace_back(std::make_unique<c10::cuda::CUDAEvent>(cudaEventDefault));
    events_[used_++]->record(c10::cuda::getCurrentCUDAStream(index_));
  }
  std::vector<double> intervals() override {
    std::vector<double> out;
    if (used_ > 0) events_[used_ - 1]->synchronize();
    for (size_t i = 1; i < used_; ++i) out.push_back(events_[i - 1]->elapsed_time(*events_[i]) / 1e3);
    used_ = 0;  // the events are reused by the next repetition
    return out;
  }

 private:
  c10::DeviceIndex index_;
  std::vector<std::unique_ptr<c10::cuda::CUDAEvent>> events_;
  size_t used_ = 0;
};

// Peak allocated/reserved bytes from the CUDA caching allocator, reset per rung.
class CachingAllocatorMeter : public MemoryMeter {
 public:
  explicit CachingAllocatorMeter(int index) : index_(static_cast<c10::DeviceIndex>(index)) { activate(index); }
  void reset_peak() override { c10::cuda::CUDACachingAllocator::resetPeakStats(index_); }
  MemoryStats read() override {
    const auto s = c10::cuda::CUDACachingAllocator::getDeviceStats(index_);
    constexpr auto kAll = static_cast<size_t>(c10::CachingAllocator::StatType::AGGREGATE);
    return {s.allocated_bytes[kAll].current, s.allocated_bytes[kAll].peak, s.reserved_bytes[kAll].peak,
            s.reserved_bytes[kAll].current};
  }

 private:
  c10::DeviceIndex index_;
};

// `waiter` runs nothing queued after this call until `waitee`'s work queued so far is done.
void wait_stream(const c10::cuda::CUDAStream& waiter, const c10::cuda::CUDAStream& waitee) {
  c10::cuda::CUDAEvent ev;
  ev.record(waitee);
  ev.block(waiter);
}

// Pinned staging, copies on a side stream one batch ahead (double-buffered pinned buffers).
class PinnedPrefetchMover : public BatchMover {
 public:
  PinnedPrefetchMover(Loader& l, int index)
      : loader_(l), device_(c10::kCUDA, static_cast<c10::DeviceIndex>(index)),
        side_(c10::cuda::getStreamFromPool(false, device_.index())) {
    const auto pinned = at::TensorOptions().dtype(at::kLong).pinned_memory(true);
    for (int i = 0; i < 2; ++i) {
      host_x_[i] = at::empty({l.batch(), l.context()}, pinned);
      host_y_[i] = at::empty({l.batch(), l.context()}, pinned);
    }
  }
  std::pair<at::Tensor, at::Tensor> next() override {
    if (!next_x_.defined()) prefetch();
    const auto current = c10::cuda::getCurrentCUDAStream(device_.index());
    copied_[slot_].block(current);  // compute waits for this batch's copy, not the host
    // Made on the side stream, used on the compute stream: keep the allocator from reusing
    // their memory before the compute stream is done with them.
    next_x_.record_stream(current);
    next_y_.record_stream(current);
    std::pair<at::Tensor, at::Tensor> out{next_x_, next_y_};
    prefetch();  // the following batch's copy overlaps this step's compute
    return out;
  }

 private:
  void prefetch() {
    auto [x, y] = loader_.next();
    slot_ ^= 1;
    copied_[slot_].synchronize();  // the copy that last read this pinned buffer is done
    host_x_[slot_].copy_(x);
    host_y_[slot_].copy_(y);
    c10::cuda::CUDAStreamGuard guard(side_);
    next_x_ = host_x_[slot_].to(device_, /*non_blocking=*/true);
    next_y_ = host_y_[slot_].to(device_, /*non_blocking=*/true);
    copied_[slot_].record(side_);
  }
  Loader& loader_;
  c10::Device device_;
  c10::cuda::CUDAStream side_;
  at::Tensor host_x_[2], host_y_[2], next_x_, next_y_;
  c10::cuda::CUDAEvent copied_[2];
  int slot_ = 0;
};

// Under a CUDA graph's capture the fork (an event recorded on the capturing stream, waited on by the side stream)
// brings the side stream into the capture and the join takes it out again, as the capture requires.
class CudaSideStream : public SideStream {
 public:
  explicit CudaSideStream(int index) : side_(c10::cuda::getStreamFromPool(false, static_cast<c10::DeviceIndex>(index))) {}
  void run(const std::function<void()>& f) override {
    const auto caller = c10::cuda::getCurrentCUDAStream(side_.device_index());
    wait_stream(side_, caller);
    c10::cuda::CUDAStreamGuard guard(side_);
    f();
    used_ = true;
  }
  void join() override {
    if (used_) wait_stream(c10::cuda::getCurrentCUDAStream(side_.device_index()), side_);
    used_ = false;
  }

 private:
  c10::cuda::CUDAStream side_;
  bool used_ = false;
};

// capture_with's steps on a real device (bench/graph_capture.h has the protocol and its reasons).
class DeviceCapture : public CaptureSteps {
 public:
  DeviceCapture(std::unique_ptr<at::cuda::CUDAGraph>& graph, c10::cuda::CUDAStream stream)
      : graph_(graph), stream_(stream) {}
  void quiesce() override {
    c10::cuda::device_synchronize();
    c10::cuda::CUDACachingAllocator::emptyCache();
  }
  void begin() override { graph_->capture_begin(); }
  void end() override { graph_->capture_end(); }
  void abandon() noexcept override {
    cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
    if (cudaStreamIsCapturing(stream_.stream(), &status) == cudaSuccess && status != cudaStreamCaptureStatusNone) {
      cudaGraph_t partial = nullptr;
      if (cudaStreamEndCapture(stream_.stream(), &partial) == cudaSuccess && partial) cudaGraphDestroy(partial);
    }
    try {  // stop routing this stream's allocations to the graph's pool, then give the pool back
      const auto pool = graph_->pool();
      c10::cuda::CUDACachingAllocator::endAllocateToPool(stream_.device_index(), pool);
      c10::cuda::CUDACachingAllocator::releasePool(stream_.device_index(), pool);
    } catch (...) {
    }
    graph_.reset();
    (void)cudaGetLastError();  // clear the sticky error of the failed capture
    try {
      c10::cuda::device_synchronize();
      c10::cuda::CUDACachingAllocator::emptyCache();
    } catch (...) {
    }
  }

 private:
  std::unique_ptr<at::cuda::CUDAGraph>& graph_;
  c10::cuda::CUDAStream stream_;
};

// `body` captured once as a CUDA graph and replayed. Capture needs a side stream and a few warm-up runs of the
// body there (lazy cuBLAS/allocator state, gradient buffers) before it.
class CapturedGraph {
 public:
  explicit CapturedGraph(const std::function<void()>& body) {
    auto side = c10::cuda::getStreamFromPool();
    wait_stream(side, c10::cuda::getCurrentCUDAStream());
    {
      c10::cuda::CUDAStreamGuard guard(side);
      for (int i = 0; i < 3; ++i) body();
      graph_ = std::make_unique<at::cuda::CUDAGraph>();
      DeviceCapture steps(graph_, side);
      capture_with(steps, [&] { return (body(), 0); });
    }
    wait_stream(c10::cuda::getCurrentCUDAStream(), side);
  }
  void replay() { graph_->replay(); }

 private:
  std::unique_ptr<at::cuda::CUDAGraph> graph_;
};

}  // namespace

std::unique_ptr<BatchMover> make_pinned_mover(Loader& loader, int index) {
  return std::make_unique<PinnedPrefetchMover>(loader, index);
}
std::unique_ptr<SideStream> make_side_stream(int index) { return std::make_unique<CudaSideStream>(index); }
std::function<void()> graphed(std::function<void()> pass) {
  auto graph = std::make_shared<CapturedGraph>(pass);
  return [graph] { graph->replay(); };
}

std::unique_ptr<StepTimer> make_step_timer(int index) { return std::make_unique<CudaStepTimer>(index); }
std::unique_ptr<MemoryMeter> make_memory_meter(int index) { return std::make_unique<CachingAllocatorMeter>(index); }
c10::intrusive_ptr<c10d::Backend> make_nccl_backend(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                                                    std::chrono::milliseconds timeout) {
  auto opts = c10d::ProcessGroupNCCL::Options::create();
  opts->timeout = timeout;
  return c10::make_intrusive<c10d::ProcessGroupNCCL>(store, rank, size, opts);
}

void synchronize() { c10::cuda::device_synchronize(); }
// cuBLAS's workspaces too: ATen keeps one per handle and stream, allocated in the caching allocator, for the life
// of the process; one made while a rung ran would hold its block, and the segment around it, past the rung.
void empty_cache() {
  at::cuda::clearCublasWorkspaces();
  c10::cuda::CUDACachingAllocator::emptyCache();
}

// A sticky error (cudaErrorIllegalAddress, cudaErrorLaunchFailure, a device assert ...) is returned by every
// later call, cudaGetLastError's reset notwithstanding; any other error is cleared by it.
std::string lost_context() {
  if (cudaDeviceSynchronize() == cudaSuccess) return "";
  (void)cudaGetLastError();
  const cudaError_t e = cudaDeviceSynchronize();
  if (e == cudaSuccess) return "";
  return std::string(cudaGetErrorName(e)) + ": " + cudaGetErrorString(e);
}

std::string library_report() {
  std::ostringstream s;
  const auto& hooks = at::detail::getCUDAHooks();
  int runtime = 0;
  cudaRuntimeGetVersion(&runtime);
  s << "CUDA runtime " << runtime / 1000 << "." << (runtime % 1000) / 10 << ", devices: " << device_count() << "\n";
  s << "cuDNN: " << (hooks.hasCuDNN() ? "yes, version " + std::to_string(hooks.versionCuDNN()) : std::string("no"))
    << "\n";
  const auto nccl = torch::cuda::nccl::version();
  s << "NCCL: version " << (nccl >> 32) << "." << ((nccl >> 16) & 0xffff) << "." << (nccl & 0xffff) << "\n";
  uint32_t cupti = 0;
  s << "CUPTI: " << (cuptiGetVersion(&cupti) == CUPTI_SUCCESS ? "API version " + std::to_string(cupti) : std::string("unavailable"))
    << "\n";
  return s.str();
}

}  // namespace
}  // namespace gpt2::cuda

namespace gpt2 {
namespace {
class CudaBackend final : public Backend {
 public:
  int device_count() const override { return cuda::device_count(); }
  void activate(int index) const override { cuda::activate(index); }
  DeviceInfo describe(int index) const override { return cuda::describe(index); }
  std::unique_ptr<StepTimer> step_timer(int index) const override { return cuda::make_step_timer(index); }
  std::unique_ptr<MemoryMeter> memory_meter(int index) const override { return cuda::make_memory_meter(index); }
  std::unique_ptr<BatchMover> pinned_mover(Loader& loader, int index) const override {
    return cuda::make_pinned_mover(loader, index);
  }
  std::unique_ptr<SideStream> side_stream(int index) const override { return cuda::make_side_stream(index); }
  std::function<void()> graphed(std::function<void()> pass) const override { return cuda::graphed(std::move(pass)); }
  c10::intrusive_ptr<c10d::Backend> collectives(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                                                std::chrono::milliseconds timeout) const override {
    return cuda::make_nccl_backend(store, rank, size, timeout);
  }
  void synchronize() const override { cuda::synchronize(); }
  void empty_cache() const override { cuda::empty_cache(); }
  std::string lost_context() const override { return cuda::lost_context(); }
  std::string library_report() const override { return cuda::library_report(); }
};
}  // namespace

const Backend* cuda_backend() {
  static const CudaBackend backend;
  return &backend;
}

}  // namespace gpt2
