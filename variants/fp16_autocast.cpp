#include <memory>
#include <string>

#include "variants/variant.h"

namespace gpt2 {
namespace {

class Fp16Autocast final : public Variant {
 public:
  std::string_view name() const override { return "fp16_autocast"; }
  std::string_view why() const override {
    return "Autocast to fp16 over fp32 master weights with a dynamic gradient scaler (GradScaler)";
  }
  int published_rung() const override { return -1; }
  std::string_view source() const override { return "seed 001; seed 002"; }
  ParityClass parity() const override { return ParityClass::kPrecision; }
  bool extra() const override { return true; }
  std::vector<std::string_view> conflicts() const override { return {"bf16_cast", "bf16_autocast"}; }
  void apply(StepSpec& s) const override {
    s.precision = Precision::kFp16Autocast;
  }
};

}  // namespace

std::unique_ptr<Variant> make_fp16_autocast() { return std::make_unique<Fp16Autocast>(); }

}  // namespace gpt2
