// defines: CaptureSteps, capture_with — the protocol of one CUDA-graph capture, apart
//          from CUDA so that it is tested on the CPU with a fake (tests/graph_capture_test.cpp).
//
// What the H100 showed: a capture that starts with cached allocator blocks can fail with "CUDA
// error: operation not permitted when stream is capturing" (the allocator frees cached blocks, a
// cudaFree, mid-capture), and a capture that fails and is left open poisons every later rung.
// torch.cuda.graph synchronizes and empties the cache before capture_begin; so do we, and a failed
// capture is ended and dropped, with its private pool, before the error goes up.
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
