#include <memory>
#include <string>

#include "variants/variant.h"

namespace gpt2 {
namespace {

class SyncEveryStep final : public Variant {
 public:
  std::string_view name() const override { return "sync_every_step"; }
  std::string_view why() const override {
    return "Anti-variant: read the loss on the host every step (.item()), measuring what one host sync costs";
  }
  int published_rung() const override { return -1; }
  std::string_view source() const override { return "seed 001"; }
  bool extra() const override { return true; }
  void apply(StepSpec& s) const override {
    s.sync_every_step = true;
  }
};

}  // namespace

std::unique_ptr<Variant> make_sync_every_step() { return std::make_unique<SyncEveryStep>(); }

}  // namespace gpt2
