#include "bench/runtime/memory.h"

#include <c10/core/CPUAllocator.h>
#include <c10/core/alignment.h>
#include <dlfcn.h>

#include <atomic>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <string>
#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include "bench/runtime/backend.h"

namespace gpt2 {
namespace {

std::atomic<int64_t> g_live{0}, g_peak{0}, g_limit{0};

// Forwards to ATen's CPU allocator, each allocation's size in a 64-byte header before its data, so that the data
// is as aligned as ATen's and data == context (oneDNN needs it); cheaper than a table of sizes
// (docs/development.md: Choices made deliberately).
class CountingCpuAllocator final : public c10::Allocator {
 public:
  static constexpr size_t kHeader = c10::gAlignment;
  static_assert(kHeader >= sizeof(int64_t));

  explicit CountingCpuAllocator(c10::Allocator* base) : base_(base), base_deleter_(base->raw_deleter()) {
    TORCH_CHECK(base_deleter_, "the default CPU allocator has no raw deleter to wrap");
  }
  c10::DataPtr allocate(size_t n) override {
    if (n == 0) return {nullptr, nullptr, &release, c10::Device(c10::kCPU)};  // as ATen's: no memory for none
    const auto bytes = static_cast<int64_t>(n);
    const int64_t limit = g_limit.load(std::memory_order_relaxed);
    if (limit > 0 && g_live.load(std::memory_order_relaxed) + bytes > limit)
      TORCH_CHECK_WITH(OutOfMemoryError, false, "CPU out of memory: tried to allocate ", n, " bytes with ",
                       g_live.load(), " held, over the memory budget of ", limit,
                       " bytes (settings.cpu_memory_budget_gb)");
    char* raw = static_cast<char*>(base_->raw_allocate(n + kHeader));  // checks data == context
    *reinterpret_cast<int64_t*>(raw) = bytes;
    const int64_t now = g_live.fetch_add(bytes, std::memory_order_relaxed) + bytes;
    for (int64_t peak = g_peak.load(std::memory_order_relaxed);
         now > peak && !g_peak.compare_exchange_weak(peak, now, std::memory_order_relaxed);) {
    }
    void* p = raw + kHeader;
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
    char* raw = static_cast<char*>(p) - kHeader;
    g_live.fetch_sub(*reinterpret_cast<const int64_t*>(raw), std::memory_order_relaxed);
    instance->base_deleter_(raw);
  }
  c10::Allocator* base_;
  c10::DeleterFnPtr base_deleter_;
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
    // Never destroyed, as ATen's own allocators: a static tensor freed at exit after it would call a dead object.
    static auto* counting = new CountingCpuAllocator(c10::GetDefaultCPUAllocator());
    CountingCpuAllocator::instance = counting;
    c10::SetCPUAllocator(counting, /*priority=*/100);
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

namespace {

// The library that gives this process its malloc, when it is gperftools' tcmalloc (linked in the CPU build, where
// found: CMakeLists.txt); "" for glibc's.
std::string tcmalloc_library() {
  void* tc = ::dlsym(RTLD_DEFAULT, "tc_malloc");
  Dl_info info{};
  if (!tc || ::dladdr(tc, &info) == 0 || !info.dli_fname) return "";
  return info.dli_fname;
}

}  // namespace

std::string settle_host_allocator() {
  static const std::string said = [] {
    if (const std::string tc = tcmalloc_library(); !tc.empty()) {
      const char* theirs = std::getenv("LD_PRELOAD");
      setenv("LD_PRELOAD", (theirs && *theirs ? tc + ":" + theirs : tc).c_str(), 1);
      return "tcmalloc (" + tc + ": freed memory taken again without faulting its pages in, RSS flat), here and in "
             "the Python reference rungs (LD_PRELOAD), handed back between rungs";
    }
#if defined(__GLIBC__)
    constexpr int kMapApart = 32 << 20, kTrim = std::numeric_limits<int>::max();
    const bool ok = mallopt(M_MMAP_THRESHOLD, kMapApart) == 1 && mallopt(M_TRIM_THRESHOLD, kTrim) == 1;
    setenv("MALLOC_MMAP_THRESHOLD_", std::to_string(kMapApart).c_str(), 1);
    setenv("MALLOC_TRIM_THRESHOLD_", std::to_string(kTrim).c_str(), 1);
    const std::string what = "glibc malloc, blocks under 32 MiB kept for reuse and larger ones mapped apart "
                             "(M_MMAP_THRESHOLD 32 MiB, M_TRIM_THRESHOLD 2 GiB), handed back between rungs";
    if (!ok)  // mallopt refused: another malloc in front of glibc's (a sanitizer's)
      return what + " in the Python reference rungs (MALLOC_MMAP_THRESHOLD_, MALLOC_TRIM_THRESHOLD_); here "
                    "mallopt refused them (another allocator in front of glibc's)";
    return what + ", here and in the Python reference rungs (MALLOC_MMAP_THRESHOLD_, MALLOC_TRIM_THRESHOLD_)";
#else
    return std::string();
#endif
  }();
  return said;
}

std::string settle_device_allocator() {
  static const std::string said = [] {
    for (const char* name : {"PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_ALLOC_CONF"})
      if (const char* own = std::getenv(name); own && *own) return std::string(name) + "=" + own + " (the user's)";
    constexpr const char* kExpandable = "expandable_segments:True";
    setenv("PYTORCH_CUDA_ALLOC_CONF", kExpandable, 0);
    return std::string("PYTORCH_CUDA_ALLOC_CONF=") + kExpandable +
           " (gpt2bench's default, here and in the Python reference rungs: what a rung frees goes back to the device)";
  }();
  return said;
}

void release_host_memory() {
  using Release = void (*)();
  if (auto* release = reinterpret_cast<Release>(::dlsym(RTLD_DEFAULT, "MallocExtension_ReleaseFreeMemory"))) {
    release();  // tcmalloc's
    return;
  }
#if defined(__GLIBC__)
  malloc_trim(0);
#endif
}

std::unique_ptr<MemoryMeter> make_cpu_memory_meter() {
  install_counting_cpu_allocator();
  return std::make_unique<CpuMemoryMeter>();
}

std::unique_ptr<MemoryMeter> make_memory_meter(const DeviceInfo& d) { return backend_for(d).memory_meter(d.index); }

}  // namespace gpt2
