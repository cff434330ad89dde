#include "variants/all.h"

const gpt2::Variant gpt2::variants::cuda_graph{.name = "cuda_graph", .published_rung = 8,
    .why = "Capture the whole step once as a CUDA graph and replay it: no per-kernel launch cost on the host",
    .source = "seed 000 rung 8 (torch.compile mode=reduce-overhead), by hand",
    .requires_ = {"fused_adamw"},
    .conflicts = {"sync_every_step"},
    .supports = [](const DeviceInfo& d) -> Support {
      if (!d.cuda()) return {false, "CUDA graphs need a CUDA device; the CPU has no launch overhead to remove"};
      return {};
    },
    .apply = [](StepSpec& s) { s.executor = ExecutorKind::kCudaGraph; }};
