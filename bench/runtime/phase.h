// defines: PhaseRange — a phase of the step (data, forward, loss, backward, optimizer): an NVTX range, and the
//          process-wide current phase the profilers attribute work to (not thread-local: autograd runs backward
//          on its own threads).
#pragma once
#include <cstdint>

#include "bench/runtime/nvtx.h"

namespace gpt2 {

// Called on every phase enter/exit while set (the CUDA profiler timestamps them); nullptr = none.
using PhaseListener = void (*)(const char* phase, bool enter);
void set_phase_listener(PhaseListener listener);
const char* current_phase();  // "" outside any phase
// A step's heartbeat: TrainStep::step marks each step as it begins (eager or replaying a CUDA graph), so a host stuck
// in a call that does not return (a hung kernel it waits for) stops beating (bench/ladder/lost_device.h's watch).
// When the last one began: steady clock, ns since its epoch; 0 none yet.
void mark_step_began();
int64_t last_step_began_ns();

class PhaseRange {
 public:
  explicit PhaseRange(const char* phase);
  ~PhaseRange();
  PhaseRange(const PhaseRange&) = delete;
  PhaseRange& operator=(const PhaseRange&) = delete;

 private:
  NvtxRange nvtx_;
  const char* phase_;
  const char* outer_;
};

}  // namespace gpt2
