#include <memory>
#include <string>

#include "variants/variant.h"

namespace gpt2 {
namespace {

class Ddp final : public Variant {
 public:
  std::string_view name() const override { return "ddp"; }
  std::string_view why() const override {
    return "Data-parallel over the run's processes with c10d (Gloo on the CPU, NCCL on GPUs): c10d's Reducer "
           "all-reduces gradient buckets during backward";
  }
  int published_rung() const override { return 11; }
  std::string_view source() const override { return "seed 000 rung 11; seed 003"; }
  Support supports(const DeviceInfo& d) const override {
    if (d.world_size < 2)
      return {false, "one process: run with gpt2bench ladder --nproc N, or under torchrun --nproc_per_node=N"};
    return {};
  }
  void apply(StepSpec& s) const override {
    s.dist.backend = "c10d";
    // The Reducer finishes each backward with an autograd-engine callback, which a CUDA graph
    // cannot capture: a data-parallel step runs eagerly.
    s.executor = ExecutorKind::kEager;
  }
};

}  // namespace

std::unique_ptr<Variant> make_ddp() { return std::make_unique<Ddp>(); }

}  // namespace gpt2
