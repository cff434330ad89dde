// defines: the CUDA side of bench/device.h and bench/memory.h (compiled only when GPT2BENCH_CUDA=ON).
// No CUDA headers here, so CPU-only code can include it behind GPT2BENCH_WITH_CUDA.
#pragma once
#include <c10/util/intrusive_ptr.h>

#include <chrono>
#include <memory>
#include <string>

#include "bench/runtime/device.h"
#include "bench/runtime/memory.h"

namespace c10d {
class Store;
class Backend;
}  // namespace c10d

namespace gpt2::cuda {

int device_count();                     // 0 without a driver or a device; never throws
// Makes `index` the current device and initialises ATen's CUDA state (context, caching allocator):
// allocator calls before that fail with "Invalid device argument".
void activate(int index);
DeviceInfo describe(int index);         // name, capability, SMs, memory, driver/runtime versions
std::unique_ptr<StepTimer> make_step_timer(int index);  // CUDA events on the device's current stream
std::unique_ptr<MemoryMeter> make_memory_meter(int index);  // caching-allocator stats
std::unique_ptr<BatchMover> make_pinned_mover(Loader& loader, int index);
std::unique_ptr<Executor> make_graph_executor(StepBody body, std::vector<at::Tensor> state);
// c10d's NCCL backend for CUDA tensors, for Dist (bench/dist.cpp).
c10::intrusive_ptr<c10d::Backend> make_nccl_backend(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                                                    std::chrono::milliseconds timeout);
void synchronize();
void empty_cache();
// Facts for `gpt2bench doctor` that need the CUDA libraries: cuDNN, NCCL, CUPTI availability.
std::string library_report();

}  // namespace gpt2::cuda
