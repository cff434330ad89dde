#include <memory>
#include <string>

#include "variants/variant.h"

namespace gpt2 {
namespace {

class Ddp final : public Variant {
 public:
  std::string_view name() const override { return "ddp"; }
  std::string_view why() const override {
    return "Data-parallel over N processes with c10d (Gloo on the CPU, NCCL on GPUs), gradients all-reduced";
  }
  int published_rung() const override { return 11; }
  std::string_view source() const override { return "seed 000 rung 11; seed 003"; }
  Support supports(const DeviceInfo& d) const override {
    return {false, "the DDP engine (c10d process groups, the launcher) is not built yet"};
  }
  void apply(StepSpec& s) const override {
    s.dist.backend = "auto";  // gloo on the CPU, nccl on CUDA, picked by the DDP engine
  }
};

}  // namespace

std::unique_ptr<Variant> make_ddp() { return std::make_unique<Ddp>(); }

}  // namespace gpt2
