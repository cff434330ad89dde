#include <memory>
#include <string>

#include "variants/variant.h"

namespace gpt2 {
namespace {

class FusedAdamw final : public Variant {
 public:
  std::string_view name() const override { return "fused_adamw"; }
  std::string_view why() const override {
    return "One fused AdamW kernel over all parameters (at::_fused_adamw_), step count on the device";
  }
  int published_rung() const override { return 3; }
  std::string_view source() const override { return "seed 000 rung 3; seed 002"; }
  void apply(StepSpec& s) const override {
    s.optimizer.kind = OptimizerKind::kAdamwFused;
  }
};

}  // namespace

std::unique_ptr<Variant> make_fused_adamw() { return std::make_unique<FusedAdamw>(); }

}  // namespace gpt2
