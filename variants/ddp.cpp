#include "variants/all.h"

const gpt2::Variant gpt2::variants::ddp{.name = "ddp", .published_rung = 11,
    .why = "Data-parallel over the run's processes with c10d (Gloo on the CPU, NCCL on GPUs): c10d's Reducer "
           "all-reduces gradient buckets during backward",
    .source = "seed 000 rung 11; seed 003",
    .supports = [](const DeviceInfo& d) -> Support {
      if (d.world_size < 2)
        return {false, "one process: run with gpt2bench ladder --nproc N, or under torchrun --nproc_per_node=N"};
      return {};
    },
    .apply = [](StepSpec& s) {
      s.dist.backend = "c10d";
      // The Reducer finishes each backward with an autograd-engine callback, which a CUDA graph
      // cannot capture: a data-parallel step runs eagerly.
      s.executor = ExecutorKind::kEager;
    },
    .data_parallel = true};
