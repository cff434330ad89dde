#include "variants/all.h"

const gpt2::Variant gpt2::variants::adamw_one_launch{.name = "adamw_one_launch", .kind = VariantKind::kExtra,
    .why = "fused_adamw's arithmetic with every parameter's update in one launch of our CUDA kernel, 16-byte "
           "accesses, where ATen's multi_tensor_apply launches one kernel per 320 chunks",
    .source = "llm.c's AdamW kernel over one parameter buffer; ATen's fused AdamW math",
    .requires_ = {"fused_adamw"},
    .supports = [](const DeviceInfo& d) -> Support {
      if (!d.cuda()) return {false, "a CUDA kernel; on the CPU at::_fused_adamw_ is one parallel loop already"};
      return {};
    },
    .apply = [](StepSpec& s) { s.optimizer.kind = OptimizerKind::kAdamwOneLaunch; }};
