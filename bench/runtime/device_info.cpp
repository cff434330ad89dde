#include "bench/runtime/device_info.h"

#include <nlohmann/json.hpp>

#include "common/enum_names.h"

namespace gpt2 {

NLOHMANN_JSON_SERIALIZE_ENUM(MathMode, {{MathMode::kFp32, "fp32"}, {MathMode::kTf32, "tf32"},
                                        {MathMode::kBf16, "bf16"}, {MathMode::kFp16, "fp16"}})
NLOHMANN_JSON_SERIALIZE_ENUM(ExecutorKind, {{ExecutorKind::kEager, "eager"}, {ExecutorKind::kCudaGraph, "cuda_graph"}})

std::string to_string(MathMode v) { return enum_name(v); }
std::string to_string(ExecutorKind v) { return enum_name(v); }

void to_json(nlohmann::json& j, const DeviceInfo& d) {
  j = {{"type", d.cuda() ? "cuda" : "cpu"}, {"index", d.index}, {"name", d.name},
       {"compute_capability", std::to_string(d.cc_major) + "." + std::to_string(d.cc_minor)},
       {"sm_count", d.sm_count}, {"total_memory", d.total_memory}, {"driver_version", d.driver_version},
       {"runtime_version", d.runtime_version}, {"bf16", d.bf16}, {"tf32", d.tf32},
       {"flash_attention", d.flash_attention}, {"world_size", d.world_size}};
  if (!d.pci_bus_id.empty()) j["pci_bus_id"] = d.pci_bus_id;
  if (!d.uuid.empty()) j["uuid"] = d.uuid;
  if (!d.cpu_model_id.empty()) j["cpu_model_id"] = d.cpu_model_id;
  if (!d.bf16_support.empty()) j["bf16_support"] = d.bf16_support;
  j["fp16"] = d.fp16;
  if (!d.fp16_support.empty()) j["fp16_support"] = d.fp16_support;
}

std::string gpu_uuid(const char (&bytes)[16]) {
  static const char* hex = "0123456789abcdef";
  std::string out = "GPU-";
  for (int i = 0; i < 16; ++i) {
    if (i == 4 || i == 6 || i == 8 || i == 10) out += '-';
    const auto b = static_cast<unsigned char>(bytes[i]);
    out += hex[b >> 4];
    out += hex[b & 15];
  }
  return out;
}

}  // namespace gpt2
