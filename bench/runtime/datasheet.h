// defines: Datasheet, find_datasheet, mfu_peak_for — the dense (not 2:4-sparse) peak FLOP/s per precision and the
//          memory bandwidth of known GPUs, each row with its source. Plain data, no libtorch.
// An unknown device has no row: it gets no datasheet MFU (never a guess), only the measured peak.
#pragma once
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "bench/runtime/device_info.h"

namespace gpt2 {

struct Datasheet {
  std::string model;       // "H100 SXM"
  std::string pattern;     // ECMAScript regex over the CUDA device name
  double fp32_tflops = 0;  // no tensor cores
  double tf32_tflops = 0;  // 0: no TF32 tensor cores (fp32 matmuls run at fp32_tflops)
  double bf16_tflops = 0;  // 0: no bf16 tensor cores
  double fp16_tflops = 0;  // fp16 tensor cores, fp32 accumulate
  double memory_bandwidth_gbs = 0;  // GB/s (10^9 bytes)
  std::string source;
};

// The rows, most specific first (H100 NVL before H100 SXM, A100 before A10).
const std::vector<Datasheet>& datasheets();
// The row whose pattern matches a CUDA device name ("NVIDIA H100 80GB HBM3"), or none.
std::optional<Datasheet> find_datasheet(const std::string& device_name);

// MFU's one denominator for a run, and what it is in words. A GPU: its datasheet's dense bf16
// tensor-core peak (as PaLM, nanoGPT and llm.c take MFU, whatever a rung's precision); a GPU without
// a row: none (never a guess). A CPU has no datasheet: the best of the matmul rates `measured` on it.
std::pair<std::optional<double>, std::string> mfu_peak_for(const DeviceInfo& dev,
                                                           const std::map<MathMode, double>& measured);
// The precision of the best rate in `measured` (fp32 if none): a CPU's MFU basis.
MathMode best_measured(const std::map<MathMode, double>& measured);

}  // namespace gpt2
