#include <memory>
#include <string>

#include "variants/variant.h"

namespace gpt2 {
namespace {

class Bf16Cast final : public Variant {
 public:
  std::string_view name() const override { return "bf16_cast"; }
  std::string_view why() const override {
    return "Cast the whole model to bf16: weights, gradients and optimizer state (half the memory, bf16 math)";
  }
  int published_rung() const override { return 5; }
  std::string_view source() const override { return "seed 000 rung 5"; }
  ParityClass parity() const override { return ParityClass::kPrecision; }
  Support supports(const DeviceInfo& d) const override {
    if (!d.bf16) return {false, "bf16 needs a device with bf16 arithmetic (CUDA sm80+)"};
    return {};
  }
  std::vector<std::string_view> conflicts() const override { return {"bf16_autocast", "fp16_autocast"}; }
  void apply(StepSpec& s) const override {
    s.precision = Precision::kBf16Cast;
  }
};

}  // namespace

std::unique_ptr<Variant> make_bf16_cast() { return std::make_unique<Bf16Cast>(); }

}  // namespace gpt2
