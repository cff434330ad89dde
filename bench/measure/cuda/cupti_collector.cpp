// The CUDA profiler: CUPTI's Activity API. A kernel's phase is the one open when its launch (by correlation id)
// started; its op is the top-level ATen op open on the launching thread (or an own scope inside it), pushed as
// CUPTI's external correlation id while it runs (as Kineto does).
#include <ATen/record_function.h>
#include <cupti.h>

#include <cxxabi.h>

#include <cstdlib>
#include <iostream>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>
#include <unordered_map>

#include "bench/measure/cuda/cupti.h"
#include "bench/runtime/backend.h"
#include "bench/runtime/phase.h"
#include "bench/measure/profiler.h"

namespace gpt2 {
namespace {

constexpr size_t kBufferBytes = 8u << 20;

struct Store {
  std::mutex mu;
  std::vector<TraceEvent> device;                   // kernels, copies, sets (phase filled at the end)
  std::unordered_map<int64_t, int64_t> launch_at;   // correlation id -> runtime call start
  std::vector<PhaseInterval> phases;
  uint64_t phase_start = 0;
  std::unordered_map<int64_t, uint64_t> op_of;      // correlation id -> index into op_names
  std::mutex op_mu;                                 // the RecordFunction callbacks' (any thread)
  std::unordered_map<std::string, uint64_t> op_ids;
  std::vector<std::string> op_names{""};            // id 0: no op (never pushed)
};
Store* g_store = nullptr;
constexpr auto kOpCorrelation = CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0;
thread_local int t_op_depth = 0;
thread_local bool t_in_own = false;  // inside an own scope nested in another op

struct OpMark : at::ObserverContext {
  bool pushed = false, own = false;
};

std::unique_ptr<at::ObserverContext> on_op_start(const at::RecordFunction& fn) {
  auto mark = std::make_unique<OpMark>();
  // A nested op's kernels are its top-level caller's, but for an own scope's (profiler.h: own_scope).
  if (t_op_depth++ > 0 && (t_in_own || !own_scope(fn.name()))) return mark;
  if (t_op_depth > 1) mark->own = t_in_own = true;
  uint64_t id = 0;
  {
    std::lock_guard<std::mutex> lock(g_store->op_mu);
    auto [it, fresh] = g_store->op_ids.try_emplace(fn.name(), g_store->op_names.size());
    if (fresh) g_store->op_names.push_back(it->first);
    id = it->second;
  }
  mark->pushed = cuptiActivityPushExternalCorrelationId(kOpCorrelation, id) == CUPTI_SUCCESS;
  return mark;
}

void on_op_end(const at::RecordFunction&, at::ObserverContext* ctx) {
  --t_op_depth;
  if (ctx && static_cast<OpMark*>(ctx)->own) t_in_own = false;
  if (ctx && static_cast<OpMark*>(ctx)->pushed) cuptiActivityPopExternalCorrelationId(kOpCorrelation, nullptr);
}

std::string demangle(const char* name) {
  int status = 0;
  char* d = abi::__cxa_demangle(name, nullptr, nullptr, &status);
  std::string out = status == 0 && d ? d : name;
  std::free(d);
  return out;
}

void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(8, kBufferBytes));
  *size = kBufferBytes;
  *max_records = 0;
}

void CUPTIAPI buffer_completed(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid) {
  CUpti_Activity* rec = nullptr;
  std::lock_guard<std::mutex> lock(g_store->mu);
  while (cuptiActivityGetNextRecord(buffer, valid, &rec) == CUPTI_SUCCESS) {
    switch (rec->kind) {
      case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL:
      case CUPTI_ACTIVITY_KIND_KERNEL: {
        auto* k = reinterpret_cast<CUpti_ActivityKernel10*>(rec);
        g_store->device.push_back({demangle(k->name), "kernel", "", static_cast<int64_t>(k->start),
                                   static_cast<int64_t>(k->end - k->start), 0, 0, static_cast<int64_t>(k->streamId),
                                   static_cast<int64_t>(k->correlationId)});
        break;
      }
      case CUPTI_ACTIVITY_KIND_MEMCPY: {
        auto* m = reinterpret_cast<CUpti_ActivityMemcpy6*>(rec);
        g_store->device.push_back({"memcpy", "memcpy", "", static_cast<int64_t>(m->start),
                                   static_cast<int64_t>(m->end - m->start), 0, static_cast<int64_t>(m->bytes),
                                   static_cast<int64_t>(m->streamId), static_cast<int64_t>(m->correlationId)});
        break;
      }
      case CUPTI_ACTIVITY_KIND_MEMSET: {
        auto* m = reinterpret_cast<CUpti_ActivityMemset4*>(rec);
        g_store->device.push_back({"memset", "memset", "", static_cast<int64_t>(m->start),
                                   static_cast<int64_t>(m->end - m->start), 0, static_cast<int64_t>(m->bytes),
                                   static_cast<int64_t>(m->streamId), static_cast<int64_t>(m->correlationId)});
        break;
      }
      case CUPTI_ACTIVITY_KIND_RUNTIME:
      case CUPTI_ACTIVITY_KIND_DRIVER: {
        auto* a = reinterpret_cast<CUpti_ActivityAPI*>(rec);
        g_store->launch_at[a->correlationId] = static_cast<int64_t>(a->start);
        break;
      }
      case CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION: {
        auto* x = reinterpret_cast<CUpti_ActivityExternalCorrelation*>(rec);
        if (x->externalKind == kOpCorrelation) g_store->op_of[x->correlationId] = x->externalId;
        break;
      }
      default:
        break;
    }
  }
  std::free(buffer);
}

void on_phase(const char* phase, bool enter) {
  uint64_t t = 0;
  cuptiGetTimestamp(&t);
  std::lock_guard<std::mutex> lock(g_store->mu);
  if (enter) g_store->phase_start = t;
  else g_store->phases.push_back({phase, static_cast<int64_t>(g_store->phase_start), static_cast<int64_t>(t)});
}

void check(CUptiResult r, const char* what) {
  if (r == CUPTI_SUCCESS) return;
  const char* msg = nullptr;
  cuptiGetResultString(r, &msg);
  throw std::runtime_error(std::string("CUPTI ") + what + ": " + (msg ? msg : "error"));
}

CUpti_ActivityKind activity_kind(const std::string& name) {
  if (name == "concurrent_kernel") return CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
  if (name == "memcpy") return CUPTI_ACTIVITY_KIND_MEMCPY;
  if (name == "memset") return CUPTI_ACTIVITY_KIND_MEMSET;
  if (name == "runtime") return CUPTI_ACTIVITY_KIND_RUNTIME;
  if (name == "driver") return CUPTI_ACTIVITY_KIND_DRIVER;
  if (name == "external_correlation") return CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION;
  throw std::logic_error("CUPTI activity kind '" + name + "' has no mapping");
}

std::vector<CUpti_ActivityKind> enabled_kinds() {
  std::vector<CUpti_ActivityKind> out;
  for (const char* k : kCuptiActivityKinds) out.push_back(activity_kind(k));
  return out;
}

class CuptiCollector : public Collector {
 public:
  std::string source() const override { return "cupti"; }
  void start() override {
    store_ = std::make_unique<Store>();
    g_store = store_.get();
    check(cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed), "register callbacks");
    for (auto k : enabled_kinds()) {
      const CUptiResult r = cuptiActivityEnable(k);
      if (r != CUPTI_SUCCESS && k == CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION) {  // kernels' ops unknown: op_coverage 0
        std::cerr << "warning: CUPTI's external correlation is off here: kernels are categorized by name alone\n";
        continue;
      }
      check(r, "enable activity");
    }
    set_phase_listener(&on_phase);
    ops_ = at::addGlobalCallback(
        at::RecordFunctionCallback(&on_op_start, &on_op_end).needsInputs(false).scopes({at::RecordScope::FUNCTION}));
  }
  void stop() override {
    at::removeCallback(ops_);
    set_phase_listener(nullptr);
    cuda_backend()->synchronize();
    check(cuptiActivityFlushAll(1), "flush");
    for (auto k : enabled_kinds()) cuptiActivityDisable(k);
    attribute_phases(store_->device, store_->launch_at, store_->phases);
    attribute_ops(store_->device, store_->op_of, store_->op_names);
  }
  std::vector<TraceEvent> events() override { return store_->device; }
  std::vector<PhaseInterval> phases() override { return store_->phases; }

 private:
  std::unique_ptr<Store> store_;
  at::CallbackHandle ops_ = 0;
};

}  // namespace

std::unique_ptr<Collector> make_cupti_collector() { return std::make_unique<CuptiCollector>(); }

}  // namespace gpt2
