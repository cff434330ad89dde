#include <memory>
#include <string>

#include "variants/variant.h"

namespace gpt2 {
namespace {

class NativeLayers final : public Variant {
 public:
  std::string_view name() const override { return "native_layers"; }
  std::string_view why() const override {
    return "libtorch's fused LayerNorm and GELU(tanh) kernels instead of the from-scratch compositions";
  }
  int published_rung() const override { return 6; }
  std::string_view source() const override { return "seed 000 rung 6"; }
  void apply(StepSpec& s) const override {
    s.model.layers = LayerImpl::kNative;
  }
};

}  // namespace

std::unique_ptr<Variant> make_native_layers() { return std::make_unique<NativeLayers>(); }

}  // namespace gpt2
