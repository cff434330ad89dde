#include "variants/all.h"

const gpt2::Variant gpt2::variants::adamw_in_backward{.name = "adamw_in_backward", .kind = VariantKind::kExtra,
    .why = "fused_adamw's update of each block issued from backward once its gradients are made, on a side stream: "
           "the optimizer's memory-bound pass runs beside the earlier blocks' backward instead of after it",
    .source = "PyTorch's optimizer in backward (post-accumulate-grad hooks); torchtitan's optimizer_in_backward",
    .requires_ = {"fused_adamw"},
    .conflicts = {"adamw_one_launch", "fp16_autocast"},
    .supports = [](const DeviceInfo& d) -> Support {
      if (!d.cuda()) return {false, "on the CPU the update would run in backward's turn on the same cores: nothing beside it"};
      if (d.world_size > 1) return {false, "under DDP a gradient is not whole until its bucket's all-reduce is done"};
      return {};
    },
    .apply = [](StepSpec& s) { s.optimizer.in_backward = true; }};
