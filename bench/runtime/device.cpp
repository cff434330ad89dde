#include "bench/runtime/device.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <stdexcept>

#include "bench/runtime/datasheet.h"

#ifdef GPT2BENCH_WITH_CUDA
#include "bench/runtime/cuda/cuda_backend.h"
#endif

namespace gpt2 {

bool build_has_cuda() {
#ifdef GPT2BENCH_WITH_CUDA
  return true;
#else
  return false;
#endif
}

std::string cpu_bf16_support(const std::string& flags) {
  auto has = [&](const char* f) { return flags.find(" " + std::string(f) + " ") != std::string::npos; };
  if (has("amx_bf16")) return "native (AMX-BF16)";
  if (has("avx512_bf16")) return "native (AVX512-BF16)";
  return "emulated (no AMX-BF16 or AVX512-BF16: bf16 math runs through conversions to fp32, slower than fp32 itself)";
}

namespace {
DeviceInfo describe_cpu() {
  DeviceInfo d;
  d.type = DeviceType::kCpu;
  std::ifstream f("/proc/cpuinfo");
  std::string line, flags, model;
  while (std::getline(f, line)) {
    if (model.empty() && line.rfind("model name", 0) == 0) model = line.substr(line.find(':') + 2);
    if (flags.empty() && line.rfind("flags", 0) == 0) flags = line.substr(line.find(':') + 1) + " ";
  }
  d.bf16_support = cpu_bf16_support(flags);
  d.name = model.empty() ? "cpu" : model;
  d.sm_count = at::get_num_threads();
  d.total_memory = static_cast<int64_t>(sysconf(_SC_PHYS_PAGES)) * sysconf(_SC_PAGESIZE);
  d.bf16 = true;  // ATen computes bf16 on any CPU (emulated where the ISA lacks it)
  return d;
}

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
}  // namespace

DeviceInfo detect_device(const std::string& want) {
  if (want == "cpu") return describe_cpu();
  const bool asked_cuda = want.rfind("cuda", 0) == 0;
  if (!asked_cuda && want != "auto")
    throw std::runtime_error("unknown device '" + want + "' (expected auto, cpu, cuda or cuda:N)");
#ifdef GPT2BENCH_WITH_CUDA
  const int n = cuda::device_count();
  if (n > 0) {
    int index = 0;
    if (want.size() > 5) index = std::stoi(want.substr(5));
    if (index < 0 || index >= n)
      throw std::runtime_error("device '" + want + "': only " + std::to_string(n) + " CUDA device(s)");
    cuda::activate(index);  // current device + CUDA state, before anything touches the allocator
    return cuda::describe(index);
  }
  if (asked_cuda) throw std::runtime_error("device '" + want + "': this CUDA build finds no CUDA device");
#else
  if (asked_cuda)
    throw std::runtime_error("device '" + want + "': this build has no CUDA (build it with `make TORCH=cuda`)");
#endif
  return describe_cpu();
}

c10::Device torch_device(const DeviceInfo& d) {
  return d.cuda() ? c10::Device(c10::kCUDA, static_cast<c10::DeviceIndex>(d.index)) : c10::Device(c10::kCPU);
}

std::unique_ptr<StepTimer> make_step_timer(const DeviceInfo& d) {
#ifdef GPT2BENCH_WITH_CUDA
  if (d.cuda()) return cuda::make_step_timer(d.index);
#endif
  return std::make_unique<SteadyStepTimer>();
}

namespace {
class PlainMover : public BatchMover {
 public:
  PlainMover(Loader& l, c10::Device d) : loader_(l), device_(d) {}
  std::pair<at::Tensor, at::Tensor> next() override {
    auto [x, y] = loader_.next();
    return {x.to(device_), y.to(device_)};
  }

 private:
  Loader& loader_;
  c10::Device device_;
};

class EagerExecutor : public Executor {
 public:
  explicit EagerExecutor(StepBody b) : body_(std::move(b)) {}
  at::Tensor run(const at::Tensor& x, const at::Tensor& y) override { return body_(x, y); }

 private:
  StepBody body_;
};
}  // namespace

std::unique_ptr<BatchMover> make_batch_mover(const DeviceInfo& d, Loader& loader, bool pinned) {
#ifdef GPT2BENCH_WITH_CUDA
  if (d.cuda() && pinned) return cuda::make_pinned_mover(loader, d.index);
#endif
  if (pinned) throw std::runtime_error("pinned-memory batches need a CUDA device");
  return std::make_unique<PlainMover>(loader, torch_device(d));
}

std::unique_ptr<Executor> make_executor(ExecutorKind k, const DeviceInfo& d, StepBody body,
                                        std::vector<at::Tensor> state) {
  if (k == ExecutorKind::kEager) return std::make_unique<EagerExecutor>(std::move(body));
#ifdef GPT2BENCH_WITH_CUDA
  if (d.cuda()) return cuda::make_graph_executor(std::move(body), std::move(state));
#endif
  throw std::runtime_error("the CUDA-graph executor needs a CUDA device");
}

void synchronize(const DeviceInfo& d) {
#ifdef GPT2BENCH_WITH_CUDA
  if (d.cuda()) cuda::synchronize();
#endif
}

void empty_cache(const DeviceInfo& d) {
#ifdef GPT2BENCH_WITH_CUDA
  if (d.cuda()) cuda::empty_cache();
#endif
}

c10::ScalarType compute_dtype(MathMode m) {
  return m == MathMode::kBf16 ? at::kBFloat16 : m == MathMode::kFp16 ? at::kHalf : at::kFloat;
}

MatmulPrecisionGuard::MatmulPrecisionGuard(bool tf32) {
  switch (at::globalContext().float32MatmulPrecision()) {
    case at::Float32MatmulPrecision::HIGHEST: saved_ = "highest"; break;
    case at::Float32MatmulPrecision::HIGH: saved_ = "high"; break;
    default: saved_ = "medium";
  }
  at::globalContext().setFloat32MatmulPrecision(tf32 ? "high" : "highest");
}

MatmulPrecisionGuard::~MatmulPrecisionGuard() { at::globalContext().setFloat32MatmulPrecision(saved_); }

std::optional<double> datasheet_peak_flops(const DeviceInfo& d, MathMode m) {
  if (!d.cuda()) return std::nullopt;
  const auto row = find_datasheet(d.name);
  if (!row) return std::nullopt;
  double tf = 0;
  switch (m) {
    case MathMode::kFp32: tf = row->fp32_tflops; break;
    case MathMode::kTf32: tf = row->tf32_tflops > 0 ? row->tf32_tflops : row->fp32_tflops; break;
    case MathMode::kBf16: tf = row->bf16_tflops; break;
    case MathMode::kFp16: tf = row->fp16_tflops; break;
  }
  if (tf <= 0) return std::nullopt;  // no such tensor cores: no datasheet figure to compare with
  return tf * 1e12;
}

double measure_matmul_peak(const DeviceInfo& d, MathMode m) {
  at::NoGradGuard no_grad;
  MatmulPrecisionGuard precision(m == MathMode::kTf32);
  const int64_t n = d.cuda() ? 8192 : 1024;
  auto opts = at::TensorOptions().device(torch_device(d)).dtype(compute_dtype(m));
  auto a = at::randn({n, n}, opts), b = at::randn({n, n}, opts);
  auto timer = make_step_timer(d);
  at::matmul(a, b);  // warm-up (library init, kernel selection)
  synchronize(d);
  double best = 0, total = 0;
  for (int i = 0; i < 20 && (i < 3 || total < 0.5); ++i) {
    timer->mark();
    auto c = at::matmul(a, b);
    timer->mark();
    const double s = timer->intervals().at(0);
    total += s;
    best = std::max(best, 2.0 * n * n * n / s);
  }
  return best;
}

}  // namespace gpt2
