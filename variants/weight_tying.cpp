#include <memory>
#include <string>

#include "variants/variant.h"

namespace gpt2 {
namespace {

class WeightTying final : public Variant {
 public:
  std::string_view name() const override { return "weight_tying"; }
  std::string_view why() const override {
    return "Share the token embedding with the output head (GPT-2's own choice): 38.6M fewer parameters at 124M";
  }
  int published_rung() const override { return -1; }
  std::string_view source() const override { return "seeds 001, 003"; }
  ParityClass parity() const override { return ParityClass::kProblem; }
  bool extra() const override { return true; }
  void apply(StepSpec& s) const override {
    s.model.tie_weights = true;
  }
};

}  // namespace

std::unique_ptr<Variant> make_weight_tying() { return std::make_unique<WeightTying>(); }

}  // namespace gpt2
