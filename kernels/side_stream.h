// defines: SideStream — work queued beside the calling thread's stream: the seam between a schedule that runs two
//          things at once (the fused classifier's softmax passes, the update in backward) and the device that does
//          it (bench/runtime's backends: a CUDA stream from the pool; on the CPU, in order).
#pragma once
#include <functional>

namespace gpt2 {

// run(f): f's device work waits for what the caller's stream has queued so far and is queued on a side stream; f
// itself may run then or later, by join() at the latest (it holds what it uses). join(): the caller's stream waits
// for all of it. On the CPU f runs at once and join does nothing.
class SideStream {
 public:
  virtual ~SideStream() = default;
  virtual void run(const std::function<void()>& f) = 0;
  virtual void join() = 0;
};

}  // namespace gpt2
