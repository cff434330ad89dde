#include <memory>
#include <string>

#include "variants/variant.h"

namespace gpt2 {
namespace {

class Bf16Autocast final : public Variant {
 public:
  std::string_view name() const override { return "bf16_autocast"; }
  std::string_view why() const override {
    return "Autocast forward and loss to bf16 over fp32 master weights (the usual mixed precision)";
  }
  int published_rung() const override { return -1; }
  std::string_view source() const override { return "seed 002"; }
  ParityClass parity() const override { return ParityClass::kPrecision; }
  bool extra() const override { return true; }
  Support supports(const DeviceInfo& d) const override {
    if (!d.bf16) return {false, "bf16 needs a device with bf16 arithmetic (CUDA sm80+)"};
    return {};
  }
  std::vector<std::string_view> conflicts() const override { return {"bf16_cast", "fp16_autocast"}; }
  void apply(StepSpec& s) const override {
    s.precision = Precision::kBf16Autocast;
  }
};

}  // namespace

std::unique_ptr<Variant> make_bf16_autocast() { return std::make_unique<Bf16Autocast>(); }

}  // namespace gpt2
