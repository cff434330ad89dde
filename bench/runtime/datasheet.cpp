#include "bench/runtime/datasheet.h"
#include "common/format.h"

#include <regex>

namespace gpt2 {

// Dense TFLOP/s (NVIDIA quotes tensor-core figures "with sparsity" too: those are twice these),
// memory bandwidth in GB/s. GeForce cards: the fp32-accumulate tensor rate (the one training uses).
const std::vector<Datasheet>& datasheets() {
  static const std::vector<Datasheet> rows = {
      {"H100 NVL", R"(H100.*NVL)", 60, 418, 835, 835, 3900, "NVIDIA H100 NVL product brief / H100 datasheet (NVL column)"},
      {"H100 PCIe", R"(H100.*PCIe)", 51, 378, 756, 756, 2000, "NVIDIA H100 Tensor Core GPU datasheet (PCIe column)"},
      {"GH200", R"(GH200)", 67, 494, 989, 989, 4000, "NVIDIA GH200 Grace Hopper Superchip datasheet (96 GB HBM3)"},
      {"H100 SXM", R"(H100)", 67, 494, 989, 989, 3350, "NVIDIA H100 Tensor Core GPU datasheet (SXM column)"},
      {"H200 NVL", R"(H200.*NVL)", 60, 418, 835, 835, 4800, "NVIDIA H200 Tensor Core GPU datasheet (NVL column)"},
      {"H200 SXM", R"(H200)", 67, 494, 989, 989, 4800, "NVIDIA H200 Tensor Core GPU datasheet (SXM column)"},
      {"B200", R"(B200)", 75, 1125, 2250, 2250, 8000, "NVIDIA HGX B200 datasheet (8-GPU figures / 8, sparse / 2)"},
      {"A100 SXM 80GB", R"(A100.*SXM.*80GB)", 19.5, 156, 312, 312, 2039, "NVIDIA A100 Tensor Core GPU datasheet"},
      {"A100 SXM 40GB", R"(A100.*SXM)", 19.5, 156, 312, 312, 1555, "NVIDIA A100 Tensor Core GPU datasheet"},
      {"A100 PCIe 80GB", R"(A100.*80GB.*PCIe|A100.*PCIE.*80GB)", 19.5, 156, 312, 312, 1935,
       "NVIDIA A100 Tensor Core GPU datasheet"},
      {"A100 PCIe 40GB", R"(A100)", 19.5, 156, 312, 312, 1555, "NVIDIA A100 Tensor Core GPU datasheet"},
      {"A10", R"(\bA10\b)", 31.2, 62.5, 125, 125, 600, "NVIDIA A10 Tensor Core GPU datasheet"},
      {"L40S", R"(L40S)", 91.6, 183, 362, 362, 864, "NVIDIA L40S datasheet"},
      {"L4", R"(\bL4\b)", 30.3, 60, 121, 121, 300, "NVIDIA L4 Tensor Core GPU datasheet"},
      {"RTX 4090", R"(RTX 4090)", 82.6, 82.6, 165.2, 165.2, 1008, "NVIDIA Ada GPU architecture whitepaper (RTX 4090)"},
      {"RTX 3090", R"(RTX 3090)", 35.6, 35.6, 71, 71, 936, "NVIDIA Ampere GA102 GPU architecture whitepaper (RTX 3090)"},
      {"V100 SXM2", R"(V100.*SXM)", 15.7, 0, 0, 125, 900, "NVIDIA Tesla V100 datasheet (SXM2)"},
      {"V100 PCIe", R"(V100)", 14, 0, 0, 112, 900, "NVIDIA Tesla V100 datasheet (PCIe)"},
  };
  return rows;
}

std::optional<Datasheet> find_datasheet(const std::string& device_name) {
  for (const auto& r : datasheets())
    if (std::regex_search(device_name, std::regex(r.pattern, std::regex::icase))) return r;
  return std::nullopt;
}

// MFU's denominator, one for the whole run, and what it is, in words. A GPU: its datasheet's dense
// bf16 tensor-core peak (PaLM, nanoGPT and llm.c take MFU so, whatever the rung's precision); an
// unknown GPU has none (never a guess). A CPU has no datasheet: the best matmul rate measured on it.
MathMode best_measured(const std::map<MathMode, double>& measured) {
  MathMode best = MathMode::kFp32;
  double rate = 0;
  for (const auto& [m, r] : measured)
    if (r > rate) best = m, rate = r;
  return best;
}

std::pair<std::optional<double>, std::string> mfu_peak_for(const DeviceInfo& dev, const std::map<MathMode, double>& measured) {
  if (dev.cuda()) {
    const auto row = find_datasheet(dev.name);
    if (!row || row->bf16_tflops <= 0)
      return {std::nullopt, strf("no datasheet MFU: '%s' has no dense bf16 datasheet row (see mfu_vs_measured_peak)",
                                 dev.name.c_str())};
    return {row->bf16_tflops * 1e12, strf("the %s's dense bf16 tensor-core peak, %.0f TFLOP/s (%s)",
                                          row->model.c_str(), row->bf16_tflops, row->source.c_str())};
  }
  const MathMode best = best_measured(measured);
  const double rate = measured.count(best) ? measured.at(best) : 0;
  return {rate, strf("the highest matmul rate measured on this CPU in any precision, %.1f GFLOP/s (%s)", rate / 1e9,
                     to_string(best).c_str())};
}

}  // namespace gpt2
