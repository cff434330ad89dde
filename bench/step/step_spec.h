// defines: StepSpec — the plain description of one training step that variants edit and the
//          TrainStep is built from — with its enums and to_json for rungs.json.
// No libtorch here: variants and the CLI include it.
#pragma once
#include <nlohmann/json_fwd.hpp>

#include <cstdint>
#include <string>

#include "bench/runtime/device_info.h"
#include "model/config.h"

namespace gpt2 {

enum class Precision {
  kFp32,
  kBf16Cast,      // weights, grads and optimizer state in bf16 (seed 000 rung 5)
  kBf16Autocast,  // fp32 master weights, autocast to bf16 over forward and loss
  kFp16Autocast,  // fp32 master weights, autocast to fp16, with a gradient scaler
};
// kAdamwOneLaunch: torch's fused AdamW arithmetic, every parameter in one kernel of ours (kernels/adamw.h).
enum class OptimizerKind { kAdamwLoop, kAdamwForeach, kAdamwFused, kAdamwOneLaunch };
// kAuto: PyTorch's own choice; kFastest: each kernel timed on the rung's attention, the fastest kept
// (bench/measure/choosers.h); the others force that kernel.
enum class SdpaBackend { kAuto, kFlash, kEfficient, kCudnn, kMath, kFastest };

struct LoaderOptions {
  bool pinned = false;  // stage batches in pinned host memory, copy non_blocking on a side stream
  bool operator==(const LoaderOptions&) const = default;
};

struct DistOptions {
  int world_size = 1;            // processes in this run (--nproc / torchrun)
  std::string backend = "none";  // none: this process alone | c10d: DDP over all of them (Gloo on CPU, NCCL on CUDA)
  bool operator==(const DistOptions&) const = default;
};

struct OptimizerOptions {
  OptimizerKind kind = OptimizerKind::kAdamwLoop;
  double lr = 5e-4, weight_decay = 0.1, beta1 = 0.9, beta2 = 0.999, eps = 1e-8;  // the seed's AdamW
  bool in_backward = false;  // each block's update issued as backward completes its gradients, on a side stream
  bool operator==(const OptimizerOptions&) const = default;
};

// Knobs from the profile's `settings:` that some variants read when they apply.
struct Settings {
  SdpaBackend sdpa_backend = SdpaBackend::kAuto;  // sdpa: the kernel to ask for
  int64_t vocab_multiple = 64;                    // vocab_padding: round the vocabulary up to this
  int64_t max_batch = 512;                        // batch_scaling: never try more
  int64_t cpu_memory_budget = int64_t(8) << 30;   // batch_scaling on the CPU: peak tensor bytes allowed
  int64_t classifier_chunk = 1024;                // fused_classifier: tokens a chunk (with fastest: the first tried)
  bool classifier_chunk_fastest = false;          // fused_classifier: chunk timed per head (bench/measure/choosers.h)
  std::string classifier_kernel = "512";  // fused_classifier's CUDA kernel: 512 | 256 | 1024 | staged, each also
                                          // "<it> exp2" | fastest
  std::string gelu_backward_slab = "32";          // fused_gelu_backward's CUDA kernel, rows a block: 32 | 16 | 8 | 64 | fastest
  std::string residual_norm = "sweeps";  // fused_residual_norm's CUDA kernels: sweeps | held | held_forward | fastest
  bool operator==(const Settings&) const = default;
};

struct StepSpec {
  ModelOptions model;
  Precision precision = Precision::kFp32;
  bool tf32 = false;              // float32 matmuls on TF32 tensor cores ("high" matmul precision)
  OptimizerOptions optimizer;
  LoaderOptions loader;
  ExecutorKind executor = ExecutorKind::kEager;
  SdpaBackend sdpa_backend = SdpaBackend::kAuto;
  int64_t batch = 8;              // B per rank
  int64_t micro_batch = 0;        // rows a forward and backward take, gradients summed to the batch's (0: all)
  bool search_batch = false;      // find the largest power-of-two batch that fits
  Settings settings;
  bool sync_every_step = false;   // read the loss on the host every step (an anti-variant)
  DistOptions dist;
  bool operator==(const StepSpec&) const = default;
};

// The seed's baseline for a device: fp32, from-scratch layers, mask buffer, and the AdamW that
// PyTorch's Python AdamW picks by default there (for-loop on the CPU, foreach on CUDA).
StepSpec baseline_spec(const ModelOptions& model, int64_t batch, const DeviceInfo& dev);

MathMode math_mode(const StepSpec& s);
// What the step's matmuls compute in, as a reference rung is matched to the C++ rungs: math_mode's name, or "fp8"
// where the blocks' linear layers run in FP8.
std::string matmul_format(const StepSpec& s);
// Ranks that share one step (1 unless the step is data-parallel) and the tokens one step trains on.
int ranks(const StepSpec& s);
int64_t tokens_per_step(const StepSpec& s);
std::string to_string(Precision p);
Precision precision_from(const std::string& name);  // throws std::invalid_argument on an unknown name
std::string to_string(OptimizerKind k);
std::string to_string(SdpaBackend b);
SdpaBackend sdpa_backend_from(const std::string& name);  // throws std::invalid_argument on an unknown name
// The fused classifier's CUDA kernel by its name in settings.classifier_kernel ("fastest": the default until chosen;
// a name ending " exp2": its exponentials in base 2).
void use_classifier_kernel(ModelOptions& m, const std::string& name);
// The fused GELU backward's rows a block by its name in settings.gelu_backward_slab (the same for "fastest").
void use_gelu_backward_slab(ModelOptions& m, const std::string& name);
// The fused residual norm's row traversal by its name in settings.residual_norm: held (rows in registers both ways),
// held_forward (the forward alone), else the sweeps.
void use_residual_norm(ModelOptions& m, const std::string& name);
void to_json(nlohmann::json& j, const StepSpec& s);

}  // namespace gpt2
