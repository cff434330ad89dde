#include <memory>
#include <string>

#include "variants/variant.h"

namespace gpt2 {
namespace {

class Sdpa final : public Variant {
 public:
  std::string_view name() const override { return "sdpa"; }
  std::string_view why() const override {
    return "scaled_dot_product_attention(is_causal): FlashAttention-style kernels, no T×T scores in memory";
  }
  int published_rung() const override { return 7; }
  std::string_view source() const override { return "seed 000 rung 7; seeds 001-004"; }
  void apply(StepSpec& s) const override {
    s.model.attention = AttentionImpl::kSdpa;
    s.sdpa_backend = s.settings.sdpa_backend;
  }
};

}  // namespace

std::unique_ptr<Variant> make_sdpa() { return std::make_unique<Sdpa>(); }

}  // namespace gpt2
