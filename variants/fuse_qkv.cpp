#include <memory>
#include <string>

#include "variants/variant.h"

namespace gpt2 {
namespace {

class FuseQkv final : public Variant {
 public:
  std::string_view name() const override { return "fuse_qkv"; }
  std::string_view why() const override {
    return "One (C -> 3C) matmul for query, key and value instead of three (what compile's fusion and GPT-2's c_attn do)";
  }
  int published_rung() const override { return 8; }
  std::string_view source() const override { return "seed 000 rung 8 (torch.compile), by hand"; }
  void apply(StepSpec& s) const override {
    s.model.fused_qkv = true;
  }
};

}  // namespace

std::unique_ptr<Variant> make_fuse_qkv() { return std::make_unique<FuseQkv>(); }

}  // namespace gpt2
