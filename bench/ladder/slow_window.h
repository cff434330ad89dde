// defines: SlowWindow, slow_window — a fault for tests (GPT2BENCH_FAULT_SLOW): the machine slowed for a window of
//          time, not for one rung, so that paired and unpaired ratios can be set against the same disturbance.
#pragma once
#include <ATen/ATen.h>

#include <string>

#include "bench/step/train_step.h"

namespace gpt2 {

// GPT2BENCH_FAULT_SLOW=<rung>:<seconds>[:<factor>]: from that rung's first timed repetition, for that many seconds,
// every step of any rung (warm-up, timed, beside) sleeps (factor - 1) times its own length after it (factor 2 by
// default: the machine at half speed). Steps are timed by the host clock, so this is for the CPU.
class SlowWindow {
 public:
  SlowWindow();  // reads the variable; throws std::runtime_error naming it where it is malformed
  void open(const std::string& rung);  // a rung's first timed repetition: opens the window where it is the named rung
  at::Tensor step(TrainStep& s);       // one step, slowed while the window is open

 private:
  std::string rung_;
  double seconds_ = 0, factor_ = 2, opened_ = -1;  // opened_: the steady clock's seconds when it opened
};
SlowWindow& slow_window();

}  // namespace gpt2
