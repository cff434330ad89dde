#include "bench/step/step_spec.h"

#include <nlohmann/json.hpp>

#include <stdexcept>

#include "common/enum_names.h"

namespace gpt2 {

NLOHMANN_JSON_SERIALIZE_ENUM(Precision, {{Precision::kFp32, "fp32"},
                                         {Precision::kBf16Cast, "bf16_cast"},
                                         {Precision::kBf16Autocast, "bf16_autocast"},
                                         {Precision::kFp16Autocast, "fp16_autocast"}})
NLOHMANN_JSON_SERIALIZE_ENUM(OptimizerKind, {{OptimizerKind::kAdamwLoop, "adamw_loop"},
                                             {OptimizerKind::kAdamwForeach, "adamw_foreach"},
                                             {OptimizerKind::kAdamwFused, "adamw_fused"},
                                             {OptimizerKind::kAdamwOneLaunch, "adamw_one_launch"}})
NLOHMANN_JSON_SERIALIZE_ENUM(SdpaBackend, {{SdpaBackend::kAuto, "auto"}, {SdpaBackend::kFlash, "flash"},
                                           {SdpaBackend::kEfficient, "efficient"}, {SdpaBackend::kCudnn, "cudnn"},
                                           {SdpaBackend::kMath, "math"}, {SdpaBackend::kFastest, "fastest"}})

StepSpec baseline_spec(const ModelOptions& model, int64_t batch, const DeviceInfo& dev) {
  StepSpec s;
  s.model = model;
  s.batch = batch;
  s.optimizer.kind = dev.cuda() ? OptimizerKind::kAdamwForeach : OptimizerKind::kAdamwLoop;
  s.dist.world_size = dev.world_size;
  return s;
}

int ranks(const StepSpec& s) { return s.dist.backend == "none" ? 1 : s.dist.world_size; }
int64_t tokens_per_step(const StepSpec& s) { return s.batch * s.model.context * ranks(s); }

std::string to_string(Precision v) { return enum_name(v); }
MathMode math_mode(const StepSpec& s) {
  switch (s.precision) {
    case Precision::kBf16Cast:
    case Precision::kBf16Autocast: return MathMode::kBf16;
    case Precision::kFp16Autocast: return MathMode::kFp16;
    default: return s.tf32 ? MathMode::kTf32 : MathMode::kFp32;
  }
}

std::string matmul_format(const StepSpec& s) { return s.model.fp8_linears ? "fp8" : to_string(math_mode(s)); }

Precision precision_from(const std::string& name) {
  for (Precision p : {Precision::kFp32, Precision::kBf16Cast, Precision::kBf16Autocast, Precision::kFp16Autocast})
    if (to_string(p) == name) return p;
  throw std::invalid_argument("unknown precision '" + name + "'");
}

std::string to_string(OptimizerKind v) { return enum_name(v); }
std::string to_string(SdpaBackend v) { return enum_name(v); }
SdpaBackend sdpa_backend_from(const std::string& name) {
  for (SdpaBackend b : {SdpaBackend::kAuto, SdpaBackend::kFlash, SdpaBackend::kEfficient, SdpaBackend::kCudnn,
                        SdpaBackend::kMath, SdpaBackend::kFastest})
    if (to_string(b) == name) return b;
  throw std::invalid_argument("unknown SDPA backend '" + name + "'");
}

void use_classifier_kernel(ModelOptions& m, const std::string& name) {
  m.classifier_exp2 = name.ends_with(" exp2");
  const std::string base = m.classifier_exp2 ? name.substr(0, name.size() - 5) : name;
  m.classifier_staged = base == "staged";
  m.classifier_threads = base == "256" ? 256 : base == "1024" || base == "staged" ? 1024 : 512;
}

void use_gelu_backward_slab(ModelOptions& m, const std::string& name) {
  m.gelu_backward_slab = name == "fastest" ? 32 : std::stoll(name);
}

void use_residual_norm(ModelOptions& m, const std::string& name) {
  m.residual_norm_held_forward = name == "held" || name == "held_forward";
  m.residual_norm_held_backward = name == "held" || name == "held_backward";
}

void to_json(nlohmann::json& j, const StepSpec& s) {
  const auto& m = s.model;
  j = {{"model",
        {{"preset", m.preset}, {"vocab_size", m.vocab_size}, {"padded_vocab", m.padded_vocab()},
         {"context", m.context}, {"n_embd", m.n_embd}, {"n_head", m.n_head}, {"n_layer", m.n_layer},
         {"dropout", m.dropout}, {"qkv_bias", m.qkv_bias}, {"tie_weights", m.tie_weights},
         {"attention", to_string(m.attention)}, {"layers", to_string(m.layers)}, {"fused_qkv", m.fused_qkv},
         {"fused_bias_gelu", m.fused_bias_gelu}, {"classifier_chunk", m.classifier_chunk},
         {"fused_gelu_backward", m.fused_gelu_backward}, {"gelu_backward_slab", m.gelu_backward_slab},
         {"fused_residual_norm", m.fused_residual_norm},
         {"residual_norm_held",
          {{"forward", m.residual_norm_held_forward}, {"backward", m.residual_norm_held_backward}}},
         {"classifier_threads", m.classifier_threads},
         {"classifier_staged", m.classifier_staged}, {"classifier_exp2", m.classifier_exp2},
         {"classifier_beside", m.classifier_beside},
         {"gelu_epilogues", m.gelu_epilogues}, {"fp8_linears", m.fp8_linears}, {"cudnn_attention", m.cudnn_attention},
         {"cudnn_plans", {{"forward", m.cudnn_forward_plan}, {"backward", m.cudnn_backward_plan}}},
         {"lt_linears", m.lt_linears},
         {"gemm_algorithms", m.gemm_algorithms},
         {"parameters", parameter_count(m)}}},
       {"precision", to_string(s.precision)},
       {"tf32", s.tf32},
       {"math_mode", to_string(math_mode(s))},
       {"optimizer",
        {{"kind", to_string(s.optimizer.kind)}, {"lr", s.optimizer.lr}, {"weight_decay", s.optimizer.weight_decay},
         {"beta1", s.optimizer.beta1}, {"beta2", s.optimizer.beta2}, {"eps", s.optimizer.eps},
         {"in_backward", s.optimizer.in_backward}}},
       {"loader", {{"pinned", s.loader.pinned}}},
       {"executor", to_string(s.executor)},
       {"sdpa_backend", to_string(s.sdpa_backend)},
       {"batch", s.batch},
       {"search_batch", s.search_batch},
       {"sync_every_step", s.sync_every_step},
       {"dist", {{"world_size", s.dist.world_size}, {"backend", s.dist.backend}}},
       {"settings",
        {{"sdpa_backend", to_string(s.settings.sdpa_backend)}, {"vocab_multiple", s.settings.vocab_multiple},
         {"max_batch", s.settings.max_batch}, {"cpu_memory_budget", s.settings.cpu_memory_budget},
         {"classifier_chunk", s.settings.classifier_chunk_fastest ? nlohmann::json("fastest")
                                                                  : nlohmann::json(s.settings.classifier_chunk)},
         {"classifier_kernel", s.settings.classifier_kernel},
         {"gelu_backward_slab", s.settings.gelu_backward_slab},
         {"residual_norm", s.settings.residual_norm}}}};
  if (s.micro_batch > 0) j["micro_batch"] = s.micro_batch;  // the parity reference's alone: rungs.json stays as it was
}


}  // namespace gpt2
