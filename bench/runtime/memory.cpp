#include "bench/runtime/memory.h"

#include <c10/core/CPUAllocator.h>

#include <atomic>
#include <fstream>
#include <mutex>
#include <string>
#include <unordered_map>

#include "bench/runtime/backend.h"

namespace gpt2 {
namespace {

std::atomic<int64_t> g_live{0}, g_peak{0}, g_limit{0};

// Forwards to ATen's default CPU allocator and counts the bytes of every live allocation. The
// DataPtrs it returns keep data == context (some ATen paths, oneDNN's among them, require it), so
// sizes are kept in a side table keyed by address.
class CountingCpuAllocator final : public c10::Allocator {
 public:
  explicit CountingCpuAllocator(c10::Allocator* base) : base_(base), base_deleter_(base->raw_deleter()) {
    TORCH_CHECK(base_deleter_, "the default CPU allocator has no raw deleter to wrap");
  }
  c10::DataPtr allocate(size_t n) override {
    c10::DataPtr inner = base_->allocate(n);
    TORCH_CHECK(inner.get() == inner.get_context(), "the default CPU allocator returned a non-simple DataPtr");
    const int64_t limit = g_limit.load();
    if (limit > 0 && g_live.load() + static_cast<int64_t>(n) > limit) {
      const int64_t held = g_live.load();
      inner.clear();
      TORCH_CHECK_WITH(OutOfMemoryError, false, "CPU out of memory: tried to allocate ", n, " bytes with ", held,
                       " held, over the memory budget of ", limit, " bytes (settings.cpu_memory_budget_gb)");
    }
    void* p = inner.release_context();
    {
      std::lock_guard<std::mutex> lock(mu_);
      sizes_[p] = static_cast<int64_t>(n);
    }
    const int64_t now = g_live.fetch_add(static_cast<int64_t>(n)) + static_cast<int64_t>(n);
    for (int64_t peak = g_peak.load(); now > peak && !g_peak.compare_exchange_weak(peak, now);) {
    }
    return {p, p, &release, c10::Device(c10::kCPU)};
  }
  c10::DeleterFnPtr raw_deleter() const override { return &release; }
  void copy_data(void* dest, const void* src, std::size_t count) const override {
    default_copy_data(dest, src, count);
  }
  static CountingCpuAllocator* instance;

 private:
  static void release(void* p) {
    if (!p) return;
    int64_t n = 0;
    {
      std::lock_guard<std::mutex> lock(instance->mu_);
      auto it = instance->sizes_.find(p);
      if (it != instance->sizes_.end()) n = it->second, instance->sizes_.erase(it);
    }
    g_live.fetch_sub(n);
    instance->base_deleter_(p);
  }
  c10::Allocator* base_;
  c10::DeleterFnPtr base_deleter_;
  std::mutex mu_;
  std::unordered_map<void*, int64_t> sizes_;
};
CountingCpuAllocator* CountingCpuAllocator::instance = nullptr;

class CpuMemoryMeter : public MemoryMeter {
 public:
  void reset_peak() override {
    g_peak.store(g_live.load());
    reset_process_peak_rss();
  }
  MemoryStats read() override { return {g_live.load(), g_peak.load(), process_peak_rss()}; }
  void set_limit(int64_t bytes) override { g_limit.store(bytes); }
};

}  // namespace

void install_counting_cpu_allocator() {
  static std::once_flag once;
  std::call_once(once, [] {
    static CountingCpuAllocator counting(c10::GetDefaultCPUAllocator());
    CountingCpuAllocator::instance = &counting;
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

std::unique_ptr<MemoryMeter> make_cpu_memory_meter() {
  install_counting_cpu_allocator();
  return std::make_unique<CpuMemoryMeter>();
}

std::unique_ptr<MemoryMeter> make_memory_meter(const DeviceInfo& d) { return backend_for(d).memory_meter(d.index); }

}  // namespace gpt2
