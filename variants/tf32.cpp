#include <memory>
#include <string>

#include "variants/variant.h"

namespace gpt2 {
namespace {

class Tf32 final : public Variant {
 public:
  std::string_view name() const override { return "tf32"; }
  std::string_view why() const override {
    return "float32 matmuls on TF32 tensor cores (matmul precision high): tensor-core speed, 10-bit mantissa in the products";
  }
  int published_rung() const override { return 2; }
  std::string_view source() const override { return "seed 000 rung 2; build-nanogpt"; }
  ParityClass parity() const override { return ParityClass::kPrecision; }
  Support supports(const DeviceInfo& d) const override {
    if (!d.cuda()) return {false, "TF32 tensor cores need a CUDA device of sm80+; this is a CPU"};
    if (!d.tf32) return {false, "TF32 tensor cores need sm80+ (Ampere or newer); this is sm" + std::to_string(d.cc_major) + std::to_string(d.cc_minor)};
    return {};
  }
  void apply(StepSpec& s) const override {
    s.tf32 = true;
  }
};

}  // namespace

std::unique_ptr<Variant> make_tf32() { return std::make_unique<Tf32>(); }

}  // namespace gpt2
