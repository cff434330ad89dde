#include <memory>
#include <string>

#include "variants/variant.h"

namespace gpt2 {
namespace {

class CudaGraph final : public Variant {
 public:
  std::string_view name() const override { return "cuda_graph"; }
  std::string_view why() const override {
    return "Capture the whole step once as a CUDA graph and replay it: no per-kernel launch cost on the host";
  }
  int published_rung() const override { return 8; }
  std::string_view source() const override { return "seed 000 rung 8 (torch.compile mode=reduce-overhead), by hand"; }
  Support supports(const DeviceInfo& d) const override {
    if (!d.cuda()) return {false, "CUDA graphs need a CUDA device; the CPU has no launch overhead to remove"};
    return {};
  }
  std::vector<std::string_view> requires_() const override { return {"fused_adamw"}; }
  std::vector<std::string_view> conflicts() const override { return {"sync_every_step"}; }
  void apply(StepSpec& s) const override {
    s.executor = ExecutorKind::kCudaGraph;
  }
};

}  // namespace

std::unique_ptr<Variant> make_cuda_graph() { return std::make_unique<CudaGraph>(); }

}  // namespace gpt2
