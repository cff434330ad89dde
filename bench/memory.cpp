#include "bench/memory.h"

#include <c10/core/CPUAllocator.h>

#include <atomic>
#include <fstream>
#include <mutex>
#include <string>

#ifdef GPT2BENCH_WITH_CUDA
#include "bench/cuda/cuda_backend.h"
#endif

namespace gpt2 {
namespace {

std::atomic<int64_t> g_live{0}, g_peak{0};

// Forwards to ATen's default CPU allocator and counts the bytes of every live allocation.
class CountingCpuAllocator final : public c10::Allocator {
 public:
  explicit CountingCpuAllocator(c10::Allocator* base) : base_(base) {}
  c10::DataPtr allocate(size_t n) override {
    c10::DataPtr inner = base_->allocate(n);
    void* data = inner.get();
    auto* ctx = new Counted{std::move(inner), static_cast<int64_t>(n)};
    const int64_t now = g_live.fetch_add(ctx->n) + ctx->n;
    for (int64_t p = g_peak.load(); now > p && !g_peak.compare_exchange_weak(p, now);) {
    }
    return {data, ctx, &release, c10::Device(c10::kCPU)};
  }
  c10::DeleterFnPtr raw_deleter() const override { return nullptr; }
  void copy_data(void* dest, const void* src, std::size_t count) const override {
    default_copy_data(dest, src, count);
  }

 private:
  struct Counted {
    c10::DataPtr inner;  // frees the memory when destroyed
    int64_t n;
  };
  static void release(void* ctx) {
    auto* c = static_cast<Counted*>(ctx);
    g_live.fetch_sub(c->n);
    delete c;
  }
  c10::Allocator* base_;
};

class CpuMemoryMeter : public MemoryMeter {
 public:
  void reset_peak() override {
    g_peak.store(g_live.load());
    reset_process_peak_rss();
  }
  MemoryStats read() override { return {g_live.load(), g_peak.load(), process_peak_rss()}; }
};

}  // namespace

void install_counting_cpu_allocator() {
  static std::once_flag once;
  std::call_once(once, [] {
    static CountingCpuAllocator counting(c10::GetDefaultCPUAllocator());
    c10::SetCPUAllocator(&counting, /*priority=*/100);
  });
}

int64_t cpu_bytes_allocated() { return g_live.load(); }

int64_t process_peak_rss() {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("VmHWM:", 0) == 0) return std::stoll(line.substr(6)) * 1024;
  return 0;
}

bool reset_process_peak_rss() {
  std::ofstream f("/proc/self/clear_refs");
  if (!f) return false;
  f << "5";
  return static_cast<bool>(f.flush());
}

std::unique_ptr<MemoryMeter> make_memory_meter(const DeviceInfo& d) {
#ifdef GPT2BENCH_WITH_CUDA
  if (d.cuda()) return cuda::make_memory_meter(d.index);
#endif
  install_counting_cpu_allocator();
  return std::make_unique<CpuMemoryMeter>();
}

}  // namespace gpt2
