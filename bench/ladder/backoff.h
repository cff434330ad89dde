// defines: backoff_on_oom — batch_scaling's answer checked by the rung itself: out of memory in its build or
//          warm-up halves the batch and tries again, every try recorded (a probe is not the rung: on the H100 the
//          search fitted 64 and the rung ran out of memory there).
#pragma once
#include <c10/util/Exception.h>
#include <nlohmann/json.hpp>

#include <cstdint>

#include "bench/runtime/graph_capture.h"

namespace gpt2 {

// Calls attempt(batch); on c10::OutOfMemoryError calls cleanup(), records the try in `tries`,
// halves the batch and calls attempt again, down to batch 1 (whose failure goes up). Returns the
// batch that worked, recorded too.
template <class Attempt, class Cleanup>
int64_t backoff_on_oom(int64_t batch, nlohmann::json& tries, Attempt&& attempt, Cleanup&& cleanup) {
  for (;;) {
    try {
      attempt(batch);
      tries.push_back({{"batch", batch}, {"fits", true}, {"stage", "rung"}});
      return batch;
    } catch (const c10::OutOfMemoryError& e) {
      cleanup();
      tries.push_back({{"batch", batch}, {"fits", false}, {"stage", "rung"},
                       {"why", first_line(e.what_without_backtrace())}});
      if (batch <= 1) throw;
      batch /= 2;
    }
  }
}

}  // namespace gpt2
