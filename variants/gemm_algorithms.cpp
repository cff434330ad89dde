#include "variants/all.h"

const gpt2::Variant gpt2::variants::gemm_algorithms{.name = "gemm_algorithms", .kind = VariantKind::kExtra,
    .why = "The blocks' linear layers through our cuBLASLt calls, each GEMM by the algorithm of cuBLASLt's heuristic "
           "list that ran fastest on its shape in this run (ATen's kept unless beaten by 1%)",
    .source = "PyTorch's TunableOp (cuBLASLt algorithms timed per shape); cuBLASLt's heuristic list",
    .conflicts = {"fp8_linears"},
    .supports = [](const DeviceInfo& d) -> Support {
      if (!d.cuda()) return {false, "cuBLASLt's algorithms are CUDA's; on the CPU the linears are ATen's either way"};
      return {};
    },
    .apply = [](StepSpec& s) { s.model.lt_linears = true; }};
