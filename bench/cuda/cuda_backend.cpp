// The CUDA side of bench/device.h and bench/memory.h. Compiled only in the CUDA build
// (GPT2BENCH_CUDA=ON), and made to run on a machine without a GPU or a driver: every entry point
// checks device_count() first or is only reached after detect_device found a device.
#include "bench/cuda/cuda_backend.h"

#include <ATen/detail/CUDAHooksInterface.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAEvent.h>
#include <c10/cuda/CUDAFunctions.h>
#include <cuda_runtime_api.h>
#include <cupti.h>
#include <torch/csrc/cuda/nccl.h>

#include <sstream>

namespace gpt2::cuda {

int device_count() { return static_cast<int>(c10::cuda::device_count()); }

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
  d.runtime_version = ver(runtime);
  d.bf16 = p.major >= 8;             // bf16 tensor cores from Ampere
  d.tf32 = p.major >= 8;             // TF32 tensor cores from Ampere
  d.flash_attention = p.major >= 8;  // PyTorch's flash SDPA kernels need sm80+
  return d;
}

namespace {

// CUDA events on the current stream; seconds() waits for the stop event only.
class CudaEventTimer : public DeviceTimer {
 public:
  void start() override { start_.record(); }
  void stop() override { stop_.record(); }
  double seconds() override {
    stop_.synchronize();
    return start_.elapsed_time(stop_) / 1e3;
  }

 private:
  c10::cuda::CUDAEvent start_{cudaEventDefault}, stop_{cudaEventDefault};
};

// Peak allocated/reserved bytes from the CUDA caching allocator, reset per rung.
class CachingAllocatorMeter : public MemoryMeter {
 public:
  explicit CachingAllocatorMeter(int index) : index_(static_cast<c10::DeviceIndex>(index)) {}
  void reset_peak() override { c10::cuda::CUDACachingAllocator::resetPeakStats(index_); }
  MemoryStats read() override {
    const auto s = c10::cuda::CUDACachingAllocator::getDeviceStats(index_);
    constexpr auto kAll = static_cast<size_t>(c10::CachingAllocator::StatType::AGGREGATE);
    return {s.allocated_bytes[kAll].current, s.allocated_bytes[kAll].peak, s.reserved_bytes[kAll].peak};
  }

 private:
  c10::DeviceIndex index_;
};

}  // namespace

std::unique_ptr<DeviceTimer> make_timer() { return std::make_unique<CudaEventTimer>(); }
std::unique_ptr<MemoryMeter> make_memory_meter(int index) { return std::make_unique<CachingAllocatorMeter>(index); }
void synchronize() { c10::cuda::device_synchronize(); }
void empty_cache() { c10::cuda::CUDACachingAllocator::emptyCache(); }

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

}  // namespace gpt2::cuda
