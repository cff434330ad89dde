// defines: the CUDA side of bench/device.h and bench/memory.h (compiled only when GPT2BENCH_CUDA=ON).
// No CUDA headers here, so CPU-only code can include it behind GPT2BENCH_WITH_CUDA.
#pragma once
#include <memory>
#include <string>

#include "bench/device.h"
#include "bench/memory.h"

namespace gpt2::cuda {

int device_count();                     // 0 without a driver or a device; never throws
DeviceInfo describe(int index);         // name, capability, SMs, memory, driver/runtime versions
std::unique_ptr<DeviceTimer> make_timer();   // CUDA events on the current stream
std::unique_ptr<MemoryMeter> make_memory_meter(int index);  // caching-allocator stats
std::unique_ptr<BatchMover> make_pinned_mover(Loader& loader, int index);
std::unique_ptr<Executor> make_graph_executor(StepBody body, std::vector<at::Tensor> state);
void synchronize();
void empty_cache();
// Facts for `gpt2bench doctor` that need the CUDA libraries: cuDNN, NCCL, CUPTI availability.
std::string library_report();

}  // namespace gpt2::cuda
