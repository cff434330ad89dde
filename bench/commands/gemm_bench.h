// defines: gemm_survey, fp8_gemm_survey — `gpt2bench kernels`' matmuls, each alone: the top rung's at ATen's at::mm
//          against cuBLASLt's heuristic algorithms (does ATen get cuBLAS's best kernel?), and the blocks' at ATen's
//          against FP8's _scaled_mm as fp8_linear runs them (does FP8 pay at these shapes, before its scaling?).
#pragma once
#include <functional>
#include <nlohmann/json_fwd.hpp>

namespace gpt2 {

struct StepSpec;
struct DeviceInfo;
struct Timing;

// s: the top rung's spec (its fused QKV, the classifier's chunk, its dtype). One JSON entry a matmul ({"name",
// "error"} where it failed, counted in `failed`), `on_each` called with the list so far after each; where the
// survey cannot run, {"skipped": why}.
using OnEachGemm = std::function<void(const nlohmann::json& so_far)>;
nlohmann::json gemm_survey(const StepSpec& s, const DeviceInfo& dev, int rounds, const Timing& timing, int& failed,
                           const OnEachGemm& on_each);
// The blocks' matmuls (not the LM head's): on sm89+ CUDA alone, as the fp8_linears variant says.
nlohmann::json fp8_gemm_survey(const StepSpec& s, const DeviceInfo& dev, int rounds, const Timing& timing, int& failed,
                               const OnEachGemm& on_each);

}  // namespace gpt2
