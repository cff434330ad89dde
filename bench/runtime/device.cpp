#include "bench/runtime/device.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <functional>
#include <sstream>
#include <stdexcept>
#include <string_view>

#include "bench/runtime/backend.h"
#include "bench/runtime/datasheet.h"

namespace gpt2 {

bool build_has_cuda() { return cuda_backend() != nullptr; }

namespace {
bool has_flag(const std::string& flags, std::string_view f) {  // flags: " fpu ... avx2 " (space on each side)
  for (size_t at = flags.find(f); at != std::string::npos; at = flags.find(f, at + 1))
    if (at > 0 && flags[at - 1] == ' ' && at + f.size() < flags.size() && flags[at + f.size()] == ' ') return true;
  return false;
}
}  // namespace

std::string cpu_bf16_support(const std::string& flags) {
  if (has_flag(flags, "amx_bf16")) return "native (AMX-BF16)";
  if (has_flag(flags, "avx512_bf16")) return "native (AVX512-BF16)";
  return "emulated (no AMX-BF16 or AVX512-BF16: bf16 math runs through conversions to fp32, slower than fp32 itself)";
}

std::string cpu_fp16_support(const std::string& flags) {
  if (has_flag(flags, "amx_fp16")) return "native (AMX-FP16)";
  if (has_flag(flags, "avx512_fp16")) return "native (AVX512-FP16)";
  return "none (no AVX512-FP16 or AMX-FP16: ATen's reference GEMM, 1.3 GFLOP/s against 190 in fp32 on a Xeon)";
}

std::string cpu_model_id(const std::string& cpuinfo) {
  std::string family, model, stepping;
  std::istringstream in(cpuinfo);
  for (std::string line; std::getline(in, line) && !line.empty();) {  // the first processor's block
    const auto colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::string key = line.substr(0, colon);
    key.erase(key.find_last_not_of(" \t") + 1);
    const std::string value = colon + 2 <= line.size() ? line.substr(colon + 2) : "";
    if (key == "cpu family") family = value;
    else if (key == "model") model = value;
    else if (key == "stepping") stepping = value;
  }
  if (family.empty() || model.empty()) return "";
  return "family " + family + " model " + model + (stepping.empty() ? "" : " stepping " + stepping);
}

const Backend& backend_for(const DeviceInfo& d) {
  if (!d.cuda()) return cpu_backend();
  if (const Backend* b = cuda_backend()) return *b;
  throw std::runtime_error("a CUDA device in a build without CUDA");
}

DeviceInfo detect_device(const std::string& want) {
  if (want == "cpu") return cpu_backend().describe(0);
  const bool asked_cuda = want.rfind("cuda", 0) == 0;
  int index = 0;
  if (asked_cuda && want.size() > 4) {
    const std::string digits(want.begin() + std::min<std::ptrdiff_t>(5, want.size()), want.end());
    if (want[4] != ':' || digits.empty() || digits.size() > 4 || digits.find_first_not_of("0123456789") != std::string::npos)
      throw std::runtime_error("unknown device '" + want + "' (expected auto, cpu, cuda or cuda:N)");
    index = std::stoi(digits);
  }
  if (!asked_cuda && want != "auto")
    throw std::runtime_error("unknown device '" + want + "' (expected auto, cpu, cuda or cuda:N)");
  const Backend* cuda = cuda_backend();
  if (!cuda) {
    if (asked_cuda)
      throw std::runtime_error("device '" + want + "': this build has no CUDA (build it with `make TORCH=cuda`)");
    return cpu_backend().describe(0);
  }
  const int n = cuda->device_count();
  if (n == 0) {
    if (asked_cuda) throw std::runtime_error("device '" + want + "': this CUDA build finds no CUDA device");
    return cpu_backend().describe(0);
  }
  if (index >= n)
    throw std::runtime_error("device '" + want + "': only " + std::to_string(n) + " CUDA device(s)");
  cuda->activate(index);  // current device + CUDA state, before anything touches the allocator
  return cuda->describe(index);
}

c10::Device torch_device(const DeviceInfo& d) {
  return d.cuda() ? c10::Device(c10::kCUDA, static_cast<c10::DeviceIndex>(d.index)) : c10::Device(c10::kCPU);
}

std::unique_ptr<StepTimer> make_step_timer(const DeviceInfo& d) { return backend_for(d).step_timer(d.index); }

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

// The whole step captured once (Backend::graphed) and replayed, its inputs copied into static buffers. Capturing
// runs the step a few times first, and those runs really train: `state` is saved before them and put back after,
// so the first replay takes the step eager would.
class GraphExecutor : public Executor {
 public:
  GraphExecutor(const Backend& b, StepBody body, std::vector<at::Tensor> state)
      : backend_(b), body_(std::move(body)), state_(std::move(state)) {}
  at::Tensor run(const at::Tensor& x, const at::Tensor& y) override {
    if (!replay_) capture(x, y);
    static_x_.copy_(x);
    static_y_.copy_(y);
    replay_();
    return static_loss_.clone();  // the next replay overwrites static_loss_: each step gets its own
  }

 private:
  void capture(const at::Tensor& x, const at::Tensor& y) {
    static_x_ = x.clone();
    static_y_ = y.clone();
    std::vector<at::Tensor> saved;
    {
      at::NoGradGuard no_grad;
      for (const auto& t : state_) saved.push_back(t.clone());
    }
    replay_ = backend_.graphed([this] { static_loss_ = body_(static_x_, static_y_); });
    at::NoGradGuard no_grad;
    for (size_t i = 0; i < state_.size(); ++i) state_[i].copy_(saved[i]);
  }
  const Backend& backend_;
  StepBody body_;
  std::vector<at::Tensor> state_;
  std::function<void()> replay_;  // empty until captured, and again after a failed capture
  at::Tensor static_x_, static_y_, static_loss_;
};
}  // namespace

std::unique_ptr<BatchMover> make_batch_mover(const DeviceInfo& d, Loader& loader, bool pinned) {
  if (pinned) return backend_for(d).pinned_mover(loader, d.index);
  return std::make_unique<PlainMover>(loader, torch_device(d));
}

std::unique_ptr<SideStream> make_side_stream(const DeviceInfo& d) { return backend_for(d).side_stream(d.index); }

std::unique_ptr<Executor> make_executor(ExecutorKind k, const DeviceInfo& d, StepBody body,
                                        std::vector<at::Tensor> state) {
  if (k == ExecutorKind::kEager) return std::make_unique<EagerExecutor>(std::move(body));
  return std::make_unique<GraphExecutor>(backend_for(d), std::move(body), std::move(state));
}

std::function<void()> graphed(const DeviceInfo& d, std::function<void()> pass) {
  return backend_for(d).graphed(std::move(pass));
}

void synchronize(const DeviceInfo& d) { backend_for(d).synchronize(); }
void empty_cache(const DeviceInfo& d) { backend_for(d).empty_cache(); }
std::string lost_context(const DeviceInfo& d) { return backend_for(d).lost_context(); }

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

double best_rate(const DeviceInfo& d, double work, double min_total_s, const std::function<void()>& op) {
  auto timer = make_step_timer(d);
  double best = 0, total = 0;
  for (int i = -1; i < 20; ++i) {
    timer->mark();
    op();
    timer->mark();
    const double s = timer->intervals().at(0);
    // The first call warms up, unless it alone fills the window (bf16 emulated on a CPU: seconds a call).
    if (i < 0 && s < min_total_s) continue;
    total += s;
    best = std::max(best, work / s);
    if (s >= min_total_s || (i >= 2 && total >= min_total_s)) break;
  }
  return best;
}

double measure_matmul_peak(const DeviceInfo& d, MathMode m) {
  at::NoGradGuard no_grad;
  MatmulPrecisionGuard precision(m == MathMode::kTf32);
  const int64_t n = d.cuda() ? 8192 : 1024;
  auto opts = at::TensorOptions().device(torch_device(d)).dtype(compute_dtype(m));
  auto a = at::randn({n, n}, opts), b = at::randn({n, n}, opts);
  return best_rate(d, 2.0 * n * n * n, 0.5, [&] { at::matmul(a, b); });
}

double measure_copy_bandwidth(const DeviceInfo& d) {
  at::NoGradGuard no_grad;
  constexpr int64_t kBytes = int64_t{256} << 20;
  auto src = at::ones({kBytes / 4}, at::TensorOptions().device(torch_device(d)).dtype(at::kFloat));
  // Touched before timing: the first copy into fresh pages took 0.43 s on a KVM Xeon (page faults), and a call
  // past the 0.1 s window is timed alone: a run recorded 1.2 GB/s for a 26.7 GB/s copy.
  auto dst = at::zeros_like(src);
  return best_rate(d, 2.0 * kBytes, 0.1, [&] { dst.copy_(src); });  // bytes read + written
}

}  // namespace gpt2
