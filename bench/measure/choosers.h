// defines: the settings settled by timing (bench/measure/choice.h): settings.sdpa_backend: fastest, the SDPA kernel
//          timed on the rung's attention; settings.classifier_chunk: fastest, the fused classifier's chunk timed on
//          its LM head; settings.classifier_kernel: fastest, its CUDA kernel's launch timed on a chunk's logits;
//          settings.gelu_backward_slab: fastest, the fused GELU backward kernel's rows a block timed on the MLP's
//          pre-activation; settings.residual_norm: fastest, the fused residual norm's row traversal timed on its rows.
//          pick_*: the rule on a trial's times; choose_*: the same on the device; *_key: what is timed.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "bench/measure/choice.h"

namespace gpt2 {

// Seconds of one `pass`, the mean of `iters`, the device synchronized around them: each chooser's trial.
double seconds_per_pass(const DeviceInfo& dev, int iters, const std::function<void()>& pass);

// The kernels tried, in this order: flash, efficient (memory-efficient), cudnn, math.
const std::vector<SdpaBackend>& sdpa_candidates();
// `trial(b)` runs with only kernel b allowed; where b cannot run, ATen's warnings (which say why) are kept with the
// error. PyTorch's own choice is kept unless another is faster by more than `margin` (the measurement's noise).
Choice pick_sdpa_backend(const std::string& pytorch_choice, double margin, int rounds,
                         const std::function<double(SdpaBackend)>& trial);
// On the step's attention (batch, heads, context, head size, dtype, dropout; q/k/v laid out as the model makes
// them), each round the mean of `iters` forward + backward passes.
Choice choose_sdpa_backend(const StepSpec& spec, const DeviceInfo& dev, int rounds = 9, int iters = 10);
// "B=4 H=12 T=256 D=64 BFloat16 dropout=0": rungs with the same attention share one timing, so that the kernel
// does not change from rung to rung with the timing's noise (on a 2-core CPU math won three rungs of one run).
std::string sdpa_attention_key(const StepSpec& spec);

// `first`, twice, four times ... that many tokens, the last all `tokens` in one chunk: each chunk past the first
// reads and writes the head's fp32 gradient once more, a larger one holds more logits at once.
std::vector<int64_t> classifier_chunk_candidates(int64_t first, int64_t tokens);
// `trial(chunk)`: one forward + backward at that chunk; the fastest median wins.
Choice pick_classifier_chunk(const std::vector<int64_t>& candidates, int rounds,
                             const std::function<double(int64_t)>& trial);
// With a side stream (CUDA): each candidate but the last (all tokens, one chunk) also as "<chunk> beside", its
// softmax passes on the side stream; `trial(chunk, beside)`.
Choice pick_classifier_chunk(const std::vector<int64_t>& candidates, int rounds,
                             const std::function<double(int64_t, bool)>& trial, bool beside);
// On the step's LM head and loss (kernels::linear_cross_entropy): its tokens, width, padded vocabulary and dtype.
Choice choose_classifier_chunk(const StepSpec& spec, const DeviceInfo& dev, int rounds = 7, int iters = 2);
// "N=8192 C=768 V=50304 BFloat16 from 1024": rungs with the same head share one timing.
std::string classifier_chunk_key(const StepSpec& spec);

// 512 threads a row (the default), 256, 1024 and 1024 with the row staged in shared memory on a CUDA device;
// elsewhere 512 alone (ATen's reference runs whatever the launch).
std::vector<std::string> classifier_kernel_candidates(const DeviceInfo& dev);
// `trial(name)`: the kernel alone on a chunk's logits; 512 kept unless another is faster by more than the margin.
Choice pick_classifier_kernel(const std::vector<std::string>& candidates, int rounds,
                              const std::function<double(const std::string&)>& trial);
// On one chunk's logits (the rung's chunk, at most its tokens; its padded vocabulary and dtype), in place.
Choice choose_classifier_kernel(const StepSpec& spec, const DeviceInfo& dev, int rounds = 9, int iters = 10);
// "rows=8192 V=50304 BFloat16": rungs with the same chunk of logits share one timing.
std::string classifier_kernel_key(const StepSpec& spec);

// 32 rows a block (the default), 16, 8 and 64 on a CUDA device; elsewhere 32 alone (the reference runs).
std::vector<std::string> gelu_backward_slab_candidates(const DeviceInfo& dev);
// `trial(name)`: the kernel alone; 32 kept unless another is faster by more than the margin.
Choice pick_gelu_backward_slab(const std::vector<std::string>& candidates, int rounds,
                               const std::function<double(const std::string&)>& trial);
// On the MLP's (batch × context, 4C) gradient and pre-activation in the rung's dtype.
Choice choose_gelu_backward_slab(const StepSpec& spec, const DeviceInfo& dev, int rounds = 9, int iters = 10);
// "N=8192 F=3072 BFloat16": rungs with the same MLP share one timing.
std::string gelu_backward_slab_key(const StepSpec& spec);

// sweeps, held and held_forward on a CUDA device; elsewhere sweeps alone (each is ATen's reference there).
std::vector<std::string> residual_norm_candidates(const DeviceInfo& dev);
// `trial(name)`: one forward + backward; the sweeps (the kernels as they were) kept unless another is faster by
// more than the margin.
Choice pick_residual_norm(const std::vector<std::string>& candidates, int rounds,
                          const std::function<double(const std::string&)>& trial);
// On the step's rows (batch × context, width, dtype, the blocks' dropout and the branch's bias).
Choice choose_residual_norm(const StepSpec& spec, const DeviceInfo& dev, int rounds = 9, int iters = 10);
// "N=8192 C=768 BFloat16 dropout=0.1": rungs with the same rows share one timing.
std::string residual_norm_key(const StepSpec& spec);

}  // namespace gpt2
