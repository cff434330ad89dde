#include "bench/measure/profiler.h"

#include <ATen/record_function.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <mutex>
#include <thread>

#include <stdexcept>

#include "bench/runtime/phase.h"
#include "kernels/fp8_linear.h"   // kFp8ScalingRecord
#include "kernels/gemm_survey.h"  // kLtGemmRecord

#include "bench/measure/cuda/cupti.h"

namespace gpt2 {

// ---- the CPU collector: ATen's RecordFunction callbacks -------------------------------------
namespace {

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

struct OpContext : at::ObserverContext {
  int64_t start;
  int depth;
  const char* phase;
  bool own = false;
};

thread_local int t_depth = 0;
thread_local bool t_in_own = false;      // inside an own scope nested in another op
thread_local int64_t t_nested_own_ns = 0;  // such scopes' time inside the open top-level op
std::mutex g_mu;
std::vector<TraceEvent>* g_sink = nullptr;  // the active collector's events
std::vector<PhaseInterval>* g_phase_sink = nullptr;
int64_t g_phase_start = 0;

std::unique_ptr<at::ObserverContext> on_op_start(const at::RecordFunction& fn) {
  auto c = std::make_unique<OpContext>();
  c->depth = t_depth++;
  if (c->depth == 0) t_nested_own_ns = 0;
  if (c->depth > 0 && !t_in_own && own_scope(fn.name())) c->own = t_in_own = true;
  c->phase = current_phase();
  c->start = now_ns();
  return c;
}

void on_op_end(const at::RecordFunction& fn, at::ObserverContext* ctx) {
  const int64_t end = now_ns();
  auto* c = static_cast<OpContext*>(ctx);
  --t_depth;
  TraceEvent e{fn.name(), "op", c->phase, c->start, end - c->start, c->depth, 0,
               static_cast<int64_t>(std::hash<std::thread::id>{}(std::this_thread::get_id()) % 100000)};
  if (c->own) {
    e.own = true, t_in_own = false;
    t_nested_own_ns += e.dur_ns;
  }
  if (c->depth == 0) e.nested_own_ns = t_nested_own_ns;
  std::lock_guard<std::mutex> lock(g_mu);
  if (g_sink) g_sink->push_back(std::move(e));
}

void on_phase(const char* phase, bool enter) {
  std::lock_guard<std::mutex> lock(g_mu);
  if (!g_phase_sink) return;
  if (enter) g_phase_start = now_ns();
  else g_phase_sink->push_back({phase, g_phase_start, now_ns()});
}

class CpuOpCollector : public Collector {
 public:
  std::string source() const override { return "aten_record_function"; }
  void start() override {
    {
      std::lock_guard<std::mutex> lock(g_mu);
      events_.clear(), phases_.clear();
      g_sink = &events_, g_phase_sink = &phases_;
    }
    set_phase_listener(&on_phase);
    handle_ = at::addGlobalCallback(at::RecordFunctionCallback(&on_op_start, &on_op_end)
                                        .needsInputs(false)
                                        .scopes({at::RecordScope::FUNCTION}));
  }
  void stop() override {
    at::removeCallback(handle_);
    set_phase_listener(nullptr);
    std::lock_guard<std::mutex> lock(g_mu);
    g_sink = nullptr, g_phase_sink = nullptr;
  }
  std::vector<TraceEvent> events() override { return events_; }
  std::vector<PhaseInterval> phases() override { return phases_; }

 private:
  at::CallbackHandle handle_ = 0;
  std::vector<TraceEvent> events_;
  std::vector<PhaseInterval> phases_;
};

}  // namespace

std::unique_ptr<Collector> make_collector(const DeviceInfo& d) {
  if (d.cuda()) {
    if (auto c = make_cupti_collector()) return c;
    throw std::runtime_error("a CUDA device in a build without CUPTI");
  }
  return std::make_unique<CpuOpCollector>();
}

void attribute_phases(std::vector<TraceEvent>& device, const std::unordered_map<int64_t, int64_t>& launch_at,
                      const std::vector<PhaseInterval>& phases) {
  for (auto& e : device) {
    auto it = launch_at.find(e.correlation);
    if (it == launch_at.end()) continue;
    for (const auto& p : phases)
      if (it->second >= p.start_ns && it->second <= p.end_ns) {
        e.phase = p.name;
        break;
      }
  }
}

// ---- FLOPs counted from op shapes ------------------------------------------------------------------
double op_flops(const std::string& name, const std::vector<std::vector<int64_t>>& shapes, bool causal) {
  auto dims = [&](size_t i, size_t n) { return i < shapes.size() && shapes[i].size() == n; };
  auto mm = [&](size_t a, size_t b) {  // (M,K) x (K,N)
    if (!dims(a, 2) || !dims(b, 2)) return 0.0;
    return 2.0 * shapes[a][0] * shapes[a][1] * shapes[b][1];
  };
  auto bmm = [&](size_t a, size_t b) {  // (B,M,K) x (B,K,N)
    if (!dims(a, 3) || !dims(b, 3)) return 0.0;
    return 2.0 * shapes[a][0] * shapes[a][1] * shapes[a][2] * shapes[b][2];
  };
  if (name == "aten::mm" || name == "aten::_scaled_mm") return mm(0, 1);
  if (name == "aten::addmm" || name == "aten::_addmm_activation") return mm(1, 2);
  if (name == kernels::kLtGemmRecord) return dims(0, 3) ? 2.0 * shapes[0][0] * shapes[0][1] * shapes[0][2] : 0.0;
  if (name == "aten::bmm") return bmm(0, 1);
  if (name == "aten::baddbmm") return bmm(1, 2);
  // SDPA's fused kernels (flash, efficient, cuDNN, flash-for-CPU); its math fallback is composite:
  // the bmm ops it runs are counted instead (they compute the full T×T matrix, causal or not).
  if (name.rfind("aten::_scaled_dot_product_", 0) == 0 && name.find("attention") != std::string::npos &&
      name.find("_math") == std::string::npos) {
    const bool backward = name.ends_with("_backward");
    const size_t q = backward ? 1 : 0;  // backward kernels take grad_out first
    if (!dims(q, 4) || !dims(q + 1, 4)) return 0.0;
    const auto &Q = shapes[q], &K = shapes[q + 1];  // (B, H, T, D), (B, H, S, D)
    const double forward = 4.0 * Q[0] * Q[1] * Q[2] * K[2] * Q[3] * (causal ? 0.5 : 1.0);
    return backward ? 2 * forward : forward;
  }
  return 0.0;
}

struct FlopCounter::State {
  std::mutex mu;
  double total = 0;
  std::map<std::string, double> by_op;
  at::CallbackHandle handle = 0;
};

namespace {
FlopCounter::State* g_flops = nullptr;
thread_local int t_counted_depth = 0;  // > 0 inside an op already counted

struct FlopContext : at::ObserverContext {
  bool counted = false;
};

std::unique_ptr<at::ObserverContext> on_flop_op_start(const at::RecordFunction& fn) {
  auto ctx = std::make_unique<FlopContext>();
  if (t_counted_depth > 0 || !g_flops) return ctx;
  const std::string name = fn.name();
  std::vector<std::vector<int64_t>> shapes;
  bool causal = false;
  const auto inputs = fn.inputs();
  const auto schema = fn.operator_schema();
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (inputs[i].isTensor()) {
      const auto s = inputs[i].toTensor().sizes();
      shapes.emplace_back(s.begin(), s.end());
    } else if (inputs[i].isIntList() && name == kernels::kLtGemmRecord) {  // {M, N, K}
      shapes.push_back(inputs[i].toIntVector());
    } else if (inputs[i].isBool() && schema && i < schema->arguments().size() &&
               schema->arguments()[i].name() == "is_causal") {
      causal = inputs[i].toBool();
    }
  }
  const double f = op_flops(name, shapes, causal);
  if (f <= 0) return ctx;
  ctx->counted = true;
  ++t_counted_depth;
  std::lock_guard<std::mutex> lock(g_flops->mu);
  g_flops->total += f;
  g_flops->by_op[name] += f;
  return ctx;
}

void on_flop_op_end(const at::RecordFunction&, at::ObserverContext* ctx) {
  if (static_cast<FlopContext*>(ctx)->counted) --t_counted_depth;
}
}  // namespace

FlopCounter::FlopCounter() : state_(std::make_unique<State>()) {}
FlopCounter::~FlopCounter() { stop(); }

void FlopCounter::start() {
  g_flops = state_.get();
  state_->handle = at::addGlobalCallback(at::RecordFunctionCallback(&on_flop_op_start, &on_flop_op_end)
                                             .needsInputs(true)
                                             .scopes({at::RecordScope::FUNCTION}));
}

void FlopCounter::stop() {
  if (!state_->handle) return;
  at::removeCallback(state_->handle);
  state_->handle = 0;
  g_flops = nullptr;
}

double FlopCounter::flops() const { return state_->total; }
std::map<std::string, double> FlopCounter::by_op() const { return state_->by_op; }

void attribute_ops(std::vector<TraceEvent>& device, const std::unordered_map<int64_t, uint64_t>& op_of,
                   const std::vector<std::string>& op_names) {
  for (auto& e : device) {
    auto it = op_of.find(e.correlation);
    if (it != op_of.end() && it->second < op_names.size()) e.op = op_names[it->second];
  }
}

// ---- summaries ---------------------------------------------------------------------------------
namespace {
// "autograd::engine::evaluate_function: NllLossBackward0" -> "aten::nll_loss": the op an autograd node is the
// derivative of, as ATen spells it. Any other name comes back as it is (AccumulateGrad, our Functions' CppNode<>).
std::string forward_op(const std::string& name) {
  static const std::string kPrefix = "autograd::engine::evaluate_function: ", kSuffix = "Backward";
  if (name.rfind(kPrefix, 0) != 0) return name;
  std::string node = name.substr(kPrefix.size());
  while (!node.empty() && std::isdigit(static_cast<unsigned char>(node.back()))) node.pop_back();
  if (!node.ends_with(kSuffix) || node.size() == kSuffix.size() || node.find_first_of(":<") != std::string::npos)
    return name;
  node.resize(node.size() - kSuffix.size());
  std::string op = "aten::";
  for (size_t i = 0; i < node.size(); ++i) {
    const auto c = static_cast<unsigned char>(node[i]);
    if (i > 0 && std::isupper(c)) op += '_';
    op += static_cast<char>(std::tolower(c));
  }
  return op;
}
}  // namespace

bool own_scope(const std::string& name) { return name.rfind("gpt2bench::", 0) == 0; }

std::string category(const std::string& raw, const std::string& kind, const std::string& op) {
  if (kind == "memcpy" || kind == "memset") return "memcpy";
  if (kind == "kernel" && own_scope(op)) return category(op, "op");
  if (raw == kernels::kFp8ScalingRecord) return "fp8_scaling";
  std::string n = kind == "op" ? forward_op(raw) : raw;
  std::transform(n.begin(), n.end(), n.begin(), [](unsigned char c) { return std::tolower(c); });
  auto has = [&](std::initializer_list<const char*> keys) {
    for (const char* k : keys)
      if (n.find(k) != std::string::npos) return true;
    return false;
  };
  // ATen's CUDA log-softmax is cunn_SoftMax*<..., LogSoftMax*Epilogue>: the loss's, not the attention's softmax;
  // softmax_xent_* and scaled_gradient_* are our fused classifier's (kernels/cuda/classifier.cu).
  if (has({"cross_entropy", "nll_loss", "log_softmax", "logsoftmax", "softmax_xent", "scaled_gradient"})) return "loss";
  // cuDNN's SDPA backward also runs compute_dot_do_o and convert_dq_to_16bits (cudnn::fusion), named for neither.
  if (has({"scaled_dot_product", "flash", "attention", "fmha", "softmax", "masked_fill", "triu", "dot_do_o",
           "convert_dq"}))
    return "attention";
  // Batched matmuls (scores, weighted values) only occur in attention in this model; on the GPU
  // they are GEMM kernels like any other and count as matmul.
  if (kind == "op" && has({"bmm", "aten::matmul"})) return "attention";
  // multi_tensor_apply_kernel<..., BinaryOpScalarFunctor<...>, std::multiplies<float>>: a for-each op's kernel on
  // CUDA (its name says the arithmetic, not the op); only the optimizer and zero_grad use them in this step.
  if (has({"adam", "_foreach", "multi_tensor_apply", "lerp", "addcdiv", "addcmul", "_amp_"})) return "optimizer";
  // ATen's CUDA LayerNorm also runs RowwiseMomentsCUDAKernel and GammaBetaBackwardCUDAKernelTemplate (whose
  // "gaMMa" the matmul keys below would take). Means and variances (reduce_kernel<..., MeanOps/WelfordOps>) are
  // only the manual LayerNorm's in this model.
  if (has({"layer_norm", "layernorm", "rowwisemoments", "gammabeta", "add_ln_", "aten::mean", "aten::var", "meanops",
           "welfordops"}))
    return "normalization";
  // cuBLAS's split-K GEMMs end with a splitKreduce_kernel; our MlpGeluEpilogues node (kernels/gelu_epilogues) is
  // the MLP's two GEMMs with GELU in their epilogues.
  if (has({"mm", "matmul", "linear", "gemm", "cutlass", "xmma", "nvjet", "cublas", "ampere_sgemm", "_addmm",
           "splitkreduce", "mlpgelu"}))
    return "matmul";
  if (has({"copy_", "aten::to", "_to_copy", "memcpy"})) return "memcpy";
  // The embeddings' kernels on CUDA: index_select's gather forward; backward, the indices sorted (nothing else in
  // this step sorts) and each row's gradient summed by segment (ATen's EmbeddingBackwardKernel.cu).
  if (has({"embedding", "vectorized_gather", "indexselect", "compute_grad_weight", "sum_and_scatter", "krn_partial",
           "partial_segment", "radixsort"}))
    return "embedding";
  if (kind == "op" && n.rfind("aten::", 0) == 0) return "elementwise";
  if (kind == "kernel" && has({"gelu", "dropout", "tanh", "pow"})) return "elementwise";
  // A generic kernel (elementwise_kernel<..., MulFunctor>, reduce_kernel<..., sum_functor>): what launched it.
  if (kind == "kernel" && !op.empty()) return category(op, "op");
  if (kind == "kernel" && has({"elementwise", "vectorized", "unrolled"})) return "elementwise";
  return "other";
}

ProfileSummary summarize(const std::vector<TraceEvent>& events, int steps, double wall_s, const std::string& source) {
  if (source == "cupti" && steps > 0 &&
      std::none_of(events.begin(), events.end(), [](const TraceEvent& e) { return e.kind == "kernel"; }))
    throw std::runtime_error("CUPTI recorded no kernel over " + std::to_string(steps) + " profiled steps (" +
                             std::to_string(events.size()) + " other records): its activity collection is off in "
                             "this process; no breakdown rather than one of zeros");
  ProfileSummary s;
  s.source = source;
  s.steps = steps;
  const double per = steps > 0 ? 1.0 / steps : 0.0;
  s.step_ms = 1e3 * wall_s * per;
  std::map<std::string, NameStat> by_name;
  double busy_ns = 0, device_ns = 0, device_with_op_ns = 0;
  std::vector<std::pair<int64_t, int64_t>> device_spans;
  for (const auto& e : events) {
    const std::string cat = category(e.name, e.kind, e.op);
    const bool counted_time = e.kind != "op" || e.depth == 0 || e.own;  // nested: in their caller's time
    const double ms = counted_time ? (e.dur_ns - e.nested_own_ns) / 1e6 : 0.0;
    if (e.kind != "memcpy" && e.kind != "memset") s.events_per_step += per;
    s.phase_events[e.phase.empty() ? "other" : e.phase] += per;
    s.category_events[cat] += per;
    if (counted_time) {
      s.phase_ms[e.phase.empty() ? "other" : e.phase] += ms * per;
      s.category_ms[cat] += ms * per;
      auto& n = by_name[e.name];
      n.name = e.name;
      n.total_ms += ms * per;
    }
    by_name[e.name].count += per;
    by_name[e.name].name = e.name;
    if (e.kind == "memcpy") s.bytes_copied_per_step += e.bytes * per;
    if (e.kind == "op" && counted_time) busy_ns += e.dur_ns - e.nested_own_ns;
    if (e.kind != "op") {
      device_spans.emplace_back(e.start_ns, e.start_ns + e.dur_ns);
      device_ns += e.dur_ns;
      if (!e.op.empty()) device_with_op_ns += e.dur_ns;
    }
  }
  if (device_ns > 0) s.op_coverage = device_with_op_ns / device_ns;
  // GPU: the union of kernel/copy intervals (concurrent streams overlap); CPU: time in ops.
  std::sort(device_spans.begin(), device_spans.end());
  int64_t covered = 0, until = INT64_MIN;
  for (const auto& [a, b] : device_spans) {
    if (b <= until) continue;
    covered += b - std::max(a, until);
    until = b;
  }
  busy_ns += covered;
  s.busy_fraction = wall_s > 0 ? std::min(1.0, busy_ns / (wall_s * 1e9)) : 0.0;
  double counted = 0;
  for (const auto& [_, ms] : s.phase_ms) counted += ms;
  const double other = s.phase_ms.count("other") ? s.phase_ms.at("other") : 0.0;
  s.phase_coverage = counted > 0 ? 1.0 - other / counted : 0.0;
  for (auto& [_, n] : by_name) s.by_name.push_back(n);
  std::stable_sort(s.by_name.begin(), s.by_name.end(), [](const NameStat& a, const NameStat& b) {
    return a.total_ms != b.total_ms ? a.total_ms > b.total_ms : a.count > b.count;
  });
  s.top.assign(s.by_name.begin(), s.by_name.begin() + std::min<size_t>(10, s.by_name.size()));
  return s;
}

nlohmann::json to_json(const ProfileSummary& s) {
  auto names = [](const std::vector<NameStat>& v) {
    nlohmann::json a = nlohmann::json::array();
    for (const auto& n : v) a.push_back({{"name", n.name}, {"count_per_step", n.count}, {"ms_per_step", n.total_ms}});
    return a;
  };
  nlohmann::json j = {{"source", s.source},
          {"steps", s.steps},
          {"step_ms", s.step_ms},
          {"host_ms_per_step", s.host_ms},
          {"events_per_step", s.events_per_step},
          {"phase_ms", s.phase_ms},
          {"phase_events", s.phase_events},
          {"category_ms", s.category_ms},
          {"category_events", s.category_events},
          {"top", names(s.top)},
          {"by_name", names(s.by_name)},
          {"bytes_copied_per_step", s.bytes_copied_per_step},
          {"busy_fraction", s.busy_fraction},
          {"overhead", s.overhead},
          {"phase_coverage", s.phase_coverage},
          {"attribution", s.attribution},
          {"counted_flops_per_step", s.counted_flops_per_step},
          {"counted_flops_by_op", s.counted_flops_by_op}};
  if (s.op_coverage) j["op_coverage"] = *s.op_coverage;
  return j;
}

nlohmann::json chrome_trace(const std::vector<TraceEvent>& events, const std::vector<PhaseInterval>& phases) {
  int64_t t0 = INT64_MAX;
  for (const auto& e : events) t0 = std::min(t0, e.start_ns);
  for (const auto& p : phases) t0 = std::min(t0, p.start_ns);
  if (t0 == INT64_MAX) t0 = 0;
  nlohmann::json list = nlohmann::json::array();
  for (const auto& p : phases)
    list.push_back({{"name", p.name}, {"cat", "phase"}, {"ph", "X"}, {"pid", 0}, {"tid", 0},
                    {"ts", (p.start_ns - t0) / 1e3}, {"dur", (p.end_ns - p.start_ns) / 1e3}});
  for (const auto& e : events) {
    nlohmann::json args = {{"phase", e.phase}, {"category", category(e.name, e.kind, e.op)}, {"depth", e.depth}};
    if (e.bytes) args["bytes"] = e.bytes;
    if (!e.op.empty()) args["op"] = e.op;
    list.push_back({{"name", e.name}, {"cat", e.kind}, {"ph", "X"}, {"pid", e.kind == "op" ? 1 : 2}, {"tid", e.tid},
                    {"ts", (e.start_ns - t0) / 1e3}, {"dur", e.dur_ns / 1e3}, {"args", args}});
  }
  return {{"traceEvents", list}, {"displayTimeUnit", "ms"}};
}

}  // namespace gpt2
