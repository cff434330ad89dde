#include <memory>
#include <string>

#include "variants/variant.h"

namespace gpt2 {
namespace {

class VocabPadding final : public Variant {
 public:
  std::string_view name() const override { return "vocab_padding"; }
  std::string_view why() const override {
    return "Round the vocabulary up to a multiple of 64 (50257 -> 50304) so the head's matmul tiles evenly";
  }
  int published_rung() const override { return 9; }
  std::string_view source() const override { return "seed 000 rung 9; build-nanogpt"; }
  ParityClass parity() const override { return ParityClass::kPrecision; }
  void apply(StepSpec& s) const override {
    s.model.vocab_pad_to = s.settings.vocab_multiple;
  }
};

}  // namespace

std::unique_ptr<Variant> make_vocab_padding() { return std::make_unique<VocabPadding>(); }

}  // namespace gpt2
