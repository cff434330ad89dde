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

// glibc malloc hands large freed blocks back to the kernel (munmap above its mmap threshold, heap trimming
// above its trim threshold), and the next step faults their pages in again: on cpu-mini some 40% of a step,
// and how much of it a process pays depends on what it happened to allocate and free before (the heap's
// layout), not on its step. This makes glibc keep what is freed for reuse, as the caching allocator does on a
// GPU: no block mapped apart from the heap (M_MMAP_MAX 0), the heap never trimmed during a rung, in this
// process (mallopt) and, through MALLOC_MMAP_MAX_ and MALLOC_TRIM_THRESHOLD_, in the processes it starts (the
// Python reference rungs), so the two sides of a comparison run alike. Returns what it set, for rungs.json;
// "" where the C library is not glibc. Idempotent (cli_main calls it first).
std::string settle_host_allocator();
// The CUDA caching allocator's setting, here and in the processes this one starts (the Python reference rungs, so
// that both sides of a comparison allocate alike): PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True, unless the user
// set PYTORCH_CUDA_ALLOC_CONF or PYTORCH_ALLOC_CONF (theirs is kept). With fixed-size segments, the blocks a rung
// leaves split in a cached segment stay reserved past emptyCache while anything lives in them, and the next rung
// cannot use them for its larger blocks: on an H100 (reports/reference/gpu-nvidia-h100-80gb-hbm3) every extra but
// one ran out of memory at batch_scaling's batch (64, which 12_batch_scaling had run at) with 27-49 GB reserved but
// unallocated, and backed off to 32, and ref_torch_compile at 64 ran out of memory beside the 52.92 GiB this process
// still held (how much was left from earlier rungs and how much the rung's own fragmentation was not measured; with
// this setting the next run found 0 bytes held at each rung's start and no back-off). An expandable segment grows and shrinks page by page, so what is
// freed goes back to the device. torchtitan runs with the same setting. Returns what is in effect, for rungs.json.
// Idempotent (cli_main calls it first; the CUDA backend applies it when it activates a device).
std::string settle_device_allocator();
// Hands the heap's free memory back to the kernel (malloc_trim): the CPU's empty_cache, between rungs, so that
// each rung's peak RSS is its own.
void release_host_memory();

}  // namespace gpt2
