// The CPU Backend (bench/runtime/backend.h): the host's cores through ATen, a steady clock for step
// times (ATen's CPU ops run synchronously), the counting allocator for memory; no pinned buffers,
// graphs or collectives of its own (DDP on the CPU uses gloo, which Dist always sets).
#include <ATen/Parallel.h>
#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <iterator>
#include <sstream>
#include <stdexcept>

#include "bench/runtime/backend.h"
#include "bench/runtime/memory.h"

namespace gpt2 {
namespace {

// ATen's CPU ops run as they are called: work "beside" the step is simply done in its turn.
class InOrder : public SideStream {
 public:
  void run(const std::function<void()>& f) override { f(); }
  void join() override {}
};

class SteadyStepTimer : public StepTimer {
 public:
  void mark() override { marks_.push_back(std::chrono::steady_clock::now()); }
  std::vector<double> intervals() override {
    std::vector<double> out;
    for (size_t i = 1; i < marks_.size(); ++i) out.push_back(std::chrono::duration<double>(marks_[i] - marks_[i - 1]).count());
    marks_.clear();
    return out;
  }

 private:
  std::vector<std::chrono::steady_clock::time_point> marks_;
};

class CpuBackend final : public Backend {
 public:
  int device_count() const override { return 1; }
  void activate(int) const override {}
  DeviceInfo describe(int) const override {
    DeviceInfo d;
    d.type = DeviceType::kCpu;
    std::ifstream f("/proc/cpuinfo");
    const std::string cpuinfo((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    std::istringstream lines(cpuinfo);
    std::string line, flags, model;
    while (std::getline(lines, line)) {
      if (model.empty() && line.rfind("model name", 0) == 0) model = line.substr(line.find(':') + 2);
      if (flags.empty() && line.rfind("flags", 0) == 0) flags = line.substr(line.find(':') + 1) + " ";
    }
    d.cpu_model_id = cpu_model_id(cpuinfo);
    d.bf16_support = cpu_bf16_support(flags);
    d.fp16_support = cpu_fp16_support(flags);
    d.fp16 = d.fp16_support.rfind("native", 0) == 0;
    d.name = model.empty() ? "cpu" : model;
    d.sm_count = at::get_num_threads();
    d.total_memory = static_cast<int64_t>(sysconf(_SC_PHYS_PAGES)) * sysconf(_SC_PAGESIZE);
    d.bf16 = true;  // ATen computes bf16 on any CPU (emulated where the ISA lacks it)
    return d;
  }
  std::unique_ptr<StepTimer> step_timer(int) const override { return std::make_unique<SteadyStepTimer>(); }
  std::unique_ptr<MemoryMeter> memory_meter(int) const override { return make_cpu_memory_meter(); }
  std::unique_ptr<BatchMover> pinned_mover(Loader&, int) const override {
    throw std::runtime_error("pinned-memory batches need a CUDA device");
  }
  std::unique_ptr<SideStream> side_stream(int) const override { return std::make_unique<InOrder>(); }
  std::function<void()> graphed(std::function<void()>) const override {
    throw std::runtime_error("device graphs need a CUDA device");
  }
  c10::intrusive_ptr<c10d::Backend> collectives(const c10::intrusive_ptr<c10d::Store>&, int, int,
                                                std::chrono::milliseconds) const override {
    return {};
  }
  void synchronize() const override {}
  void empty_cache() const override { release_host_memory(); }
  std::string lost_context() const override { return ""; }
  std::string library_report() const override { return ""; }
};

}  // namespace

const Backend& cpu_backend() {
  static const CpuBackend backend;
  return backend;
}

}  // namespace gpt2
