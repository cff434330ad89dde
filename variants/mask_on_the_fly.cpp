#include <memory>
#include <string>

#include "variants/variant.h"

namespace gpt2 {
namespace {

class MaskOnTheFly final : public Variant {
 public:
  std::string_view name() const override { return "mask_on_the_fly"; }
  std::string_view why() const override {
    return "Build the causal mask inside forward instead of keeping a T×T buffer: the buffer's memory goes away";
  }
  int published_rung() const override { return 1; }
  std::string_view source() const override { return "seed 000 rung 1"; }
  void apply(StepSpec& s) const override {
    if (s.model.attention == AttentionImpl::kManualBuffer) s.model.attention = AttentionImpl::kManualOnTheFly;
  }
};

}  // namespace

std::unique_ptr<Variant> make_mask_on_the_fly() { return std::make_unique<MaskOnTheFly>(); }

}  // namespace gpt2
