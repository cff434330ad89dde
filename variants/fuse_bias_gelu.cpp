#include <memory>
#include <string>

#include "variants/variant.h"

namespace gpt2 {
namespace {

class FuseBiasGelu final : public Variant {
 public:
  std::string_view name() const override { return "fuse_bias_gelu"; }
  std::string_view why() const override {
    return "FeedForward's bias + GELU(tanh) in the matmul's epilogue (at::_addmm_activation, cuBLASLt on CUDA)";
  }
  int published_rung() const override { return 8; }
  std::string_view source() const override { return "seed 000 rung 8 (torch.compile), by hand"; }
  void apply(StepSpec& s) const override {
    s.model.fused_bias_gelu = true;
  }
};

}  // namespace

std::unique_ptr<Variant> make_fuse_bias_gelu() { return std::make_unique<FuseBiasGelu>(); }

}  // namespace gpt2
