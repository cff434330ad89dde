#include "variants/all.h"

namespace {
// FP8 tensor cores: Ada (sm89) and Hopper (sm90) on; not the A100 (sm80) nor a CPU.
gpt2::Support needs_fp8(const gpt2::DeviceInfo& d) {
  if (!d.cuda()) return {false, "FP8 matmuls need a CUDA GPU of sm89+ (FP8 tensor cores)"};
  if (d.cc_major * 10 + d.cc_minor < 89)
    return {false, "FP8 tensor cores need sm89+; this GPU is sm" + std::to_string(d.cc_major * 10 + d.cc_minor)};
  return {};
}
}  // namespace

const gpt2::Variant gpt2::variants::fp8_linears{.name = "fp8_linears", .parity = ParityClass::kFp8,
    .kind = VariantKind::kExtra,
    .why = "The blocks' linear layers (QKV, projection, MLP) in FP8 through at::_scaled_mm: e4m3 forward, e5m2 "
           "gradients, each tensor scaled by its own amax",
    .source = "Transformer Engine's hybrid FP8 recipe, per-tensor dynamic scaling",
    .conflicts = {"fuse_bias_gelu", "fused_gelu_backward", "gelu_epilogues"},
    .supports = needs_fp8,
    .apply = [](StepSpec& s) { s.model.fp8_linears = true; }};
