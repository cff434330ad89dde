#include <memory>
#include <string>

#include "variants/variant.h"

namespace gpt2 {
namespace {

class PinnedMemory final : public Variant {
 public:
  std::string_view name() const override { return "pinned_memory"; }
  std::string_view why() const override {
    return "Stage batches in pinned host memory and copy them non_blocking on a side stream, one batch ahead";
  }
  int published_rung() const override { return 4; }
  std::string_view source() const override { return "seed 000 rung 4; seed 001"; }
  Support supports(const DeviceInfo& d) const override {
    if (!d.cuda()) return {false, "pinned memory only speeds host-to-GPU copies; on the CPU there is no copy"};
    return {};
  }
  void apply(StepSpec& s) const override {
    s.loader.pinned = true;
  }
};

}  // namespace

std::unique_ptr<Variant> make_pinned_memory() { return std::make_unique<PinnedMemory>(); }

}  // namespace gpt2
