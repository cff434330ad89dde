// defines: the gemm_algorithms extra's choice (bench/measure/choice.h): each GEMM of the linears the step runs through
//          kernels::lt_linear, timed alone on its shape, ATen's call against every algorithm of cuBLASLt's heuristic
//          list; the winners become the step's table (ModelOptions::gemm_algorithms).
#pragma once
#include <string>
#include <vector>

#include "bench/measure/choice.h"
#include "kernels/gemm_layout.h"

namespace gpt2 {

// A GEMM of the step's linears that the table may name and its epilogue: "bias" (the forward's, where the layer adds
// it in the GEMM: not the projection's and fc2's under fused_residual_norm, whose kernel adds them),
// "gelu_aux_bias" (fc1's forward under fused_gelu_backward), "" (none).
struct LinearGemm {
  kernels::StepGemm gemm;
  std::string epilogue;
};
// The GEMMs of the linears the step calls through lt_linear (QKV or query, key and value; the projection; fc1 and
// fc2 where no MLP fusion takes them) and of fused_gelu_backward's fc1, at the spec's batch; one of each key.
std::vector<LinearGemm> lt_linear_gemms(const StepSpec& spec);
// "rows=8192 BFloat16: qkv 768->2304 bias, proj 768->768, fc1 768->3072 gelu_aux_bias, fc2 3072->768": rungs with
// the same GEMMs share one timing.
std::string gemm_algorithms_key(const StepSpec& spec);

// Each GEMM: ATen's call ("aten") and, on a CUDA device with cuBLASLt in a 16-bit dtype, "lt0", "lt1" ... (the
// place in the heuristic's list), each timed alone (each round the mean of `iters` calls); what runs without the
// table kept unless another is faster by more than 1%: ATen's call, or the list's first for the GELU_AUX_BIAS
// forward, which ATen has not (off CUDA: "aten", the reference). Chosen: "qkv.forward:lt2,qkv.dX:aten,...". Its
// tries: each GEMM's time without the table and its fastest other.
Choice choose_gemm_algorithms(const StepSpec& spec, const DeviceInfo& dev, int rounds = 9, int iters = 10);
// The chosen algorithms into the step's table, keyed by each GEMM's gemm_key; an entry naming no GEMM of this step
// throws.
void use_gemm_algorithms(StepSpec& spec, const std::string& chosen);

}  // namespace gpt2
