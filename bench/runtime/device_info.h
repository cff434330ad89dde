// defines: DeviceType, DeviceInfo, MathMode, ExecutorKind — what the runtime and the variants know
//          of a device, as plain data (so tests can fake a GPU), and to_json for rungs.json.
// No libtorch here.
#pragma once
#include <nlohmann/json_fwd.hpp>

#include <cstdint>
#include <string>

namespace gpt2 {

enum class DeviceType { kCpu, kCuda };

// What the resolver and the variants know of the device: plain data, so tests can fake a GPU.
struct DeviceInfo {
  DeviceType type = DeviceType::kCpu;
  int index = 0;
  std::string name = "cpu";
  int cc_major = 0, cc_minor = 0;  // compute capability (CUDA)
  int sm_count = 0;                // CUDA SMs, or CPU threads used by ATen
  int64_t total_memory = 0;        // bytes
  std::string driver_version, runtime_version;
  std::string pci_bus_id;          // CUDA: the device's PCI bus id (NVML finds it by that)
  std::string uuid;                // CUDA: the card's UUID as nvidia-smi prints it (gpu_uuid), "" elsewhere
  std::string cpu_model_id;        // CPU: "family 25 model 1 stepping 1" (/proc/cpuinfo), "" elsewhere
  std::string bf16_support;        // CPU: "native (amx_bf16)", "native (avx512_bf16)" or "emulated (...)"
  bool bf16 = true;                // bf16 arithmetic supported
  std::string fp16_support;        // CPU: "native (AMX-FP16)", "native (AVX512-FP16)" or "none (...)"
  bool fp16 = true;                // fp16 arithmetic with a fast path (every CUDA GPU; a CPU with the flags above)
  bool tf32 = false;               // TF32 tensor cores (sm80+)
  bool flash_attention = false;    // the flash SDPA kernel can run here
  int world_size = 1;              // processes in this run (--nproc N / torchrun)
  bool cuda() const { return type == DeviceType::kCuda; }
};

// What the matmuls compute in, which picks the peak FLOP/s that MFU is taken against.
enum class MathMode { kFp32, kTf32, kBf16, kFp16 };
enum class ExecutorKind { kEager, kCudaGraph };

std::string to_string(MathMode m);
std::string to_string(ExecutorKind k);
void to_json(nlohmann::json& j, const DeviceInfo& d);
// A card's 16-byte UUID (cudaDeviceProp::uuid) as nvidia-smi prints it: "GPU-" and 8-4-4-4-12 hex digits.
std::string gpu_uuid(const char (&bytes)[16]);

}  // namespace gpt2
