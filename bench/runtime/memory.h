// defines: MemoryStats, MemoryMeter/make_memory_meter, CountingCpuAllocator hooks, process_peak_rss
// On CUDA the caching allocator's own stats; on the CPU a counting wrapper around ATen's CPU
// allocator (bytes live in tensors) plus the process's resident-memory high-water mark.
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include "bench/runtime/device_info.h"

namespace gpt2 {

struct MemoryStats {
  int64_t allocated = 0;       // bytes held by tensors now
  int64_t peak_allocated = 0;  // since the last reset
  int64_t peak_reserved = 0;   // CUDA: caching allocator's reserved peak; CPU: process peak RSS
  int64_t reserved = 0;        // CUDA: what the caching allocator holds from the device now; CPU: 0 (not tracked)
};

class MemoryMeter {
 public:
  virtual ~MemoryMeter() = default;
  virtual void reset_peak() = 0;
  virtual MemoryStats read() = 0;
  // CPU: an allocation that would make the bytes held by tensors exceed `bytes` throws
  // c10::OutOfMemoryError, as a full GPU does, wherever it happens (0 = no limit). CUDA: the
  // device's memory is the limit; this does nothing.
  virtual void set_limit(int64_t bytes) {}
};
std::unique_ptr<MemoryMeter> make_memory_meter(const DeviceInfo& d);  // the device's backend's meter
std::unique_ptr<MemoryMeter> make_cpu_memory_meter();  // the counting allocator's (installed by this call)

// Puts the counting wrapper in front of ATen's CPU allocator (idempotent; call before the
// tensors to be counted are made).
void install_counting_cpu_allocator();
int64_t cpu_bytes_allocated();
// VmHWM of this process in bytes; reset_process_peak_rss() restarts it from the current RSS
// (Linux /proc/self/clear_refs) and returns false where the kernel refuses.
int64_t process_peak_rss();
bool reset_process_peak_rss();

// The host allocator keeps freed memory for the next step without hoarding, here and in the Python references:
// tcmalloc where linked, else glibc with set thresholds (docs/development.md: Host allocator). Returns what is in
// effect, for rungs.json. Idempotent (cli_main calls it first).
std::string settle_host_allocator();
// PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True here and in the Python references, unless the user set theirs:
// with fixed segments an H100 run's extras ran out of memory beside 27-49 GB reserved but unallocated
// (docs/development.md). Returns what is in effect, for rungs.json. Idempotent.
std::string settle_device_allocator();
// Hands the heap's free memory back to the kernel (tcmalloc's ReleaseFreeMemory, or malloc_trim): the CPU's
// empty_cache, between rungs, so that each rung's peak RSS is its own.
void release_host_memory();

}  // namespace gpt2
