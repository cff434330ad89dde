#include <memory>
#include <string>

#include "variants/variant.h"

namespace gpt2 {
namespace {

class BatchScaling final : public Variant {
 public:
  std::string_view name() const override { return "batch_scaling"; }
  std::string_view why() const override {
    return "The largest power-of-two batch that fits (GPU memory, or the CPU budget): more tokens per launch";
  }
  int published_rung() const override { return 10; }
  std::string_view source() const override { return "seed 000 rung 10"; }
  ParityClass parity() const override { return ParityClass::kProblem; }
  void apply(StepSpec& s) const override {
    s.search_batch = true;
  }
};

}  // namespace

std::unique_ptr<Variant> make_batch_scaling() { return std::make_unique<BatchScaling>(); }

}  // namespace gpt2
