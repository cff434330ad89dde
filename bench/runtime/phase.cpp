#include "bench/runtime/phase.h"

#include <atomic>
#include <chrono>

namespace gpt2 {

namespace {
std::atomic<const char*> g_phase{""};
std::atomic<PhaseListener> g_listener{nullptr};
std::atomic<int64_t> g_began_ns{0};
}  // namespace

void set_phase_listener(PhaseListener listener) { g_listener = listener; }
const char* current_phase() { return g_phase.load(); }
void mark_step_began() {
  g_began_ns.store(std::chrono::steady_clock::now().time_since_epoch().count(), std::memory_order_relaxed);
}
int64_t last_step_began_ns() { return g_began_ns.load(std::memory_order_relaxed); }

PhaseRange::PhaseRange(const char* phase) : nvtx_(phase), phase_(phase), outer_(g_phase.exchange(phase)) {
  if (auto l = g_listener.load()) l(phase_, true);
}

PhaseRange::~PhaseRange() {
  if (auto l = g_listener.load()) l(phase_, false);
  g_phase = outer_;
}

}  // namespace gpt2
