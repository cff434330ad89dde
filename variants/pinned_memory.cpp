#include "variants/all.h"

const gpt2::Variant gpt2::variants::pinned_memory{.name = "pinned_memory", .published_rung = 4,
    .why = "Stage batches in pinned host memory and copy them non_blocking on a side stream, one batch ahead",
    .source = "seed 000 rung 4; seed 001",
    .supports = [](const DeviceInfo& d) -> Support {
      if (!d.cuda()) return {false, "pinned memory only speeds host-to-GPU copies; on the CPU there is no copy"};
      return {};
    },
    .apply = [](StepSpec& s) { s.loader.pinned = true; }};
