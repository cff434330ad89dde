#include "bench/runtime/phase.h"

namespace gpt2 {

namespace {
std::atomic<const char*> g_phase{""};
std::atomic<PhaseListener> g_listener{nullptr};
}  // namespace

void set_phase_listener(PhaseListener listener) { g_listener = listener; }
const char* current_phase() { return g_phase.load(); }

PhaseRange::PhaseRange(const char* phase) : nvtx_(phase), phase_(phase), outer_(g_phase.exchange(phase)) {
  if (auto l = g_listener.load()) l(phase_, true);
}

PhaseRange::~PhaseRange() {
  if (auto l = g_listener.load()) l(phase_, false);
  g_phase = outer_;
}

}  // namespace gpt2
