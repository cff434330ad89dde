// defines: CaptureSteps, capture_with — one CUDA-graph capture, apart from CUDA so that a fake tests it on the CPU.
//          As torch.cuda.graph: synchronize and empty the cache first (a cached block freed mid-capture fails it),
//          and a failed capture ended and dropped before the error goes up (docs/development.md: Choices made deliberately).
#pragma once
#include <c10/util/Exception.h>

#include <stdexcept>
#include <string>
#include <utility>

#include "common/errors.h"  // first_line

namespace gpt2 {

struct CaptureSteps {
  virtual ~CaptureSteps() = default;
  virtual void quiesce() = 0;  // device synchronize + return the allocator's cached blocks
  virtual void begin() = 0;    // start capturing (the graph's private memory pool)
  virtual void end() = 0;      // end the capture and instantiate the graph
  // A capture that failed: end it if it is still open, drop the graph and its pool, clear the
  // device's sticky error. Never throws.
  virtual void abandon() noexcept = 0;
};

// Captures `body` (returns what it returns). On failure: abandon(), then an out-of-memory error
// goes up as it is (the rung is "oom", batch_scaling backs off), any other as a runtime_error
// "CUDA graph capture failed: <what the device said>".
template <class Body>
auto capture_with(CaptureSteps& steps, Body&& body) {
  steps.quiesce();
  try {
    steps.begin();
    auto out = std::forward<Body>(body)();
    steps.end();
    return out;
  } catch (const c10::OutOfMemoryError&) {
    steps.abandon();
    throw;
  } catch (const c10::Error& e) {
    steps.abandon();
    throw std::runtime_error(std::string("CUDA graph capture failed: ") + e.what_without_backtrace());
  } catch (const std::exception& e) {
    steps.abandon();
    throw std::runtime_error(std::string("CUDA graph capture failed: ") + e.what());
  }
}

}  // namespace gpt2
