// The profiling pass: the CPU collector on a real step, the CUPTI aggregation on synthetic records,
// the Chrome trace, and the memory breakdown.
#include <gtest/gtest.h>

#include <ATen/ATen.h>
#include <ATen/record_function.h>

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "bench/runtime/device.h"
#include "bench/measure/breakdown.h"
#include "bench/measure/profiler.h"
#include "helpers.h"
#include "kernels/fp8_linear.h"
#include "kernels/gemm_survey.h"
#include "model/gpt2.h"

namespace gpt2 {
namespace {

using test::cpu;

at::Tensor profiled_corpus(int64_t vocab) { return to_token_tensor(synthetic_corpus(vocab, 20000, 4)); }

Breakdown profile(const StepSpec& s, int steps = 2) {
  auto meter = make_memory_meter(cpu());
  return breakdown_rung(s, cpu(), profiled_corpus(s.model.vocab_size), 1, 1, steps, *meter);
}

StepSpec tiny(int64_t batch = 2) { return baseline_spec(test::tiny_model(), batch, cpu()); }

TEST(CpuProfiler, PhasesPresentStableAndWithinTheStep) {
  const Breakdown a = profile(tiny()), b = profile(tiny());
  for (const char* phase : {"data", "forward", "loss", "backward", "optimizer"}) {
    EXPECT_GT(a.summary.phase_events.count(phase) ? a.summary.phase_events.at(phase) : 0.0, 0.0) << phase;
    EXPECT_GT(a.summary.phase_ms.at(phase), 0.0) << phase;
  }
  EXPECT_EQ(a.summary.events_per_step, b.summary.events_per_step);  // the same ops every time
  EXPECT_EQ(a.summary.phase_events, b.summary.phase_events);
  double phases = 0;
  for (const auto& [_, ms] : a.summary.phase_ms) phases += ms;
  EXPECT_LE(phases, a.summary.step_ms * 1.001);
  EXPECT_EQ(a.summary.source, "aten_record_function");
  EXPECT_GT(a.summary.busy_fraction, 0.0);
  EXPECT_LE(a.summary.busy_fraction, 1.0);
  EXPECT_FALSE(a.summary.top.empty());
}

TEST(CpuProfiler, TraceHasOneEventPerRecordedOp) {
  const Breakdown p = profile(tiny(), 1);
  const auto parsed = nlohmann::json::parse(p.trace.dump());  // it round-trips as JSON
  size_t ops = 0, phases = 0;
  for (const auto& e : parsed["traceEvents"]) {
    EXPECT_EQ(e["ph"], "X");
    (e["cat"] == "phase" ? phases : ops)++;
  }
  EXPECT_EQ(static_cast<double>(ops), p.summary.events_per_step);  // one step profiled
  EXPECT_EQ(phases, 5u);
}

TEST(CpuProfiler, SdpaHasFewerAttentionOpsThanTheBaseline) {
  StepSpec base = tiny();  // dropout 0: ATen's fused CPU attention kernel can run
  StepSpec sdpa = base;
  sdpa.model.attention = AttentionImpl::kSdpa;
  const auto attention = [](const Breakdown& p) { return p.summary.category_events.at("attention"); };
  EXPECT_LT(attention(profile(sdpa)), attention(profile(base)));
}

TEST(MemoryBreakdown, MatchesParameterCountAndDtypes) {
  StepSpec s = tiny();
  const int64_t n = parameter_count(s.model);
  Breakdown p = profile(s);
  EXPECT_EQ(p.memory.parameters, 4 * n);
  EXPECT_EQ(p.memory.gradients, 4 * n);
  EXPECT_EQ(p.memory.optimizer_state, 2 * 4 * n);  // exp_avg + exp_avg_sq
  EXPECT_EQ(p.memory.buffers, s.model.n_layer * s.model.context * s.model.context * 4);  // the T×T masks
  EXPECT_GE(p.memory.peak_allocated, p.memory.parameters + p.memory.gradients + p.memory.optimizer_state);
  s.precision = Precision::kBf16Cast;
  s.optimizer.kind = OptimizerKind::kAdamwFused;
  s.model.attention = AttentionImpl::kManualOnTheFly;
  p = profile(s);
  const int64_t tensors = static_cast<int64_t>(GPT2(s.model)->parameters().size());
  EXPECT_EQ(p.memory.parameters, 2 * n);
  EXPECT_EQ(p.memory.gradients, 2 * n);
  EXPECT_EQ(p.memory.optimizer_state, 2 * 2 * n + 4 * tensors);  // + one fp32 step counter per tensor
  EXPECT_EQ(p.memory.buffers, 0);  // mask on the fly: no buffer
}

// CUPTI's aggregation, fed synthetic activity records: no GPU needed.
TEST(CuptiAggregation, PhasesByCorrelationCategoriesAndLaunches) {
  const std::vector<PhaseInterval> phases = {{"forward", 100, 200}, {"backward", 200, 400}, {"optimizer", 400, 500}};
  std::unordered_map<int64_t, int64_t> launch_at = {{1, 110}, {2, 150}, {3, 250}, {4, 410}, {5, 120}};
  std::vector<TraceEvent> device = {
      // Kernels run after their launch, on the GPU's clock: only the correlation id ties them to a phase.
      {"ampere_sgemm_128x64_tn", "kernel", "", 1000, 300, 0, 0, 7, 1},
      {"void at::native::vectorized_elementwise_kernel<4, at::native::GeluCUDAKernelImpl>", "kernel", "", 1300, 100,
       0, 0, 7, 2},
      {"pytorch_flash::flash_bwd_kernel", "kernel", "", 1450, 200, 0, 0, 7, 3},
      {"void at::native::multi_tensor_apply_kernel<FusedAdamMathFunctor>", "kernel", "", 1700, 100, 0, 0, 7, 4},
      {"memcpy", "memcpy", "", 1050, 100, 0, 4096, 8, 5},  // overlaps the gemm on another stream
      {"orphan_kernel", "kernel", "", 1900, 50, 0, 0, 7, 99},
  };
  attribute_phases(device, launch_at, phases);
  EXPECT_EQ(device[0].phase, "forward");
  EXPECT_EQ(device[2].phase, "backward");
  EXPECT_EQ(device[3].phase, "optimizer");
  EXPECT_EQ(device[4].phase, "forward");
  EXPECT_EQ(device[5].phase, "");
  const ProfileSummary s = summarize(device, 2, 2e-6, "cupti");  // 2 steps over 2 µs of wall time
  EXPECT_DOUBLE_EQ(s.events_per_step, 2.5);  // 5 kernel launches (copies are not launches) / 2 steps
  EXPECT_DOUBLE_EQ(s.category_events.at("matmul"), 0.5);
  EXPECT_DOUBLE_EQ(s.category_events.at("elementwise"), 0.5);
  EXPECT_DOUBLE_EQ(s.category_events.at("attention"), 0.5);
  EXPECT_DOUBLE_EQ(s.category_events.at("optimizer"), 0.5);
  EXPECT_DOUBLE_EQ(s.category_events.at("memcpy"), 0.5);
  EXPECT_DOUBLE_EQ(s.phase_ms.at("forward"), (300 + 100 + 100) / 1e6 / 2);
  EXPECT_DOUBLE_EQ(s.phase_ms.at("other"), 50 / 1e6 / 2);
  EXPECT_DOUBLE_EQ(s.bytes_copied_per_step, 2048);
  // Busy: the union of [1000,1400) [1450,1650) [1700,1800) [1900,1950) = 750 ns of 2000.
  EXPECT_DOUBLE_EQ(s.busy_fraction, 750.0 / 2000.0);
  EXPECT_EQ(s.top.front().name, "ampere_sgemm_128x64_tn");
  // every name, by time (the eager gap sets them beside torch.profiler's), the top ten its head
  ASSERT_EQ(s.by_name.size(), 6u);
  EXPECT_EQ(s.by_name.front().name, "ampere_sgemm_128x64_tn");
  EXPECT_DOUBLE_EQ(s.by_name.front().count, 0.5);
  for (size_t i = 1; i < s.by_name.size(); ++i) EXPECT_GE(s.by_name[i - 1].total_ms, s.by_name[i].total_ms);
  EXPECT_EQ(to_json(s)["by_name"].size(), 6u);
  EXPECT_EQ(to_json(s)["by_name"][5]["name"], "orphan_kernel");
}

// CUPTI can leave its activity collection off for the rest of a process (an earlier session did so on CUDA 13.0:
// lightseekorg/tokenspeed#1348, 0 kernel events where there were 933,304): steps that ran on the GPU with no kernel
// recorded are an error, not a breakdown of zeros. A CPU pass (ops) and no steps are not.
TEST(CuptiAggregation, StepsWithNoKernelRecordedAreAnErrorNotZeros) {
  const std::vector<TraceEvent> copies_only = {{"memcpy", "memcpy", "", 1000, 100, 0, 4096, 8, 5}};
  try {
    summarize(copies_only, 3, 1e-3, "cupti");
    FAIL() << "no error";
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(), "CUPTI recorded no kernel over 3 profiled steps (1 other records): its activity "
                           "collection is off in this process; no breakdown rather than one of zeros");
  }
  EXPECT_THROW(summarize({}, 3, 1e-3, "cupti"), std::runtime_error);
  std::vector<TraceEvent> with_a_kernel = copies_only;
  with_a_kernel.push_back({"ampere_sgemm_128x64_tn", "kernel", "", 1200, 300, 0, 0, 7, 1});
  EXPECT_DOUBLE_EQ(summarize(with_a_kernel, 3, 1e-3, "cupti").events_per_step, 1.0 / 3);
  EXPECT_NO_THROW(summarize({}, 0, 0, "cupti"));  // nothing profiled
  EXPECT_NO_THROW(summarize({}, 3, 1e-3, "aten_record_function"));  // the CPU's ops: another check's (no ops, no phases)
}

// What the H100 showed on 07_sdpa: cuBLAS's GEMMs (nvjet/sm90 kernels) are launched through the
// driver API (cuLaunchKernel), ATen's own kernels through the runtime API. With both API layers'
// records, every kernel gets its launch phase and the phases hold >= 95% of the kernel time.
TEST(CuptiAggregation, KernelsLaunchedThroughTheDriverApiAreAttributed) {
  const auto kinds = std::vector<std::string>(std::begin(kCuptiActivityKinds), std::end(kCuptiActivityKinds));
  for (const char* k : {"concurrent_kernel", "memcpy", "runtime", "driver"})
    EXPECT_NE(std::find(kinds.begin(), kinds.end(), k), kinds.end()) << k;
  const std::vector<PhaseInterval> phases = {{"data", 0, 50},        {"forward", 50, 200}, {"loss", 200, 220},
                                             {"backward", 220, 400}, {"optimizer", 400, 480}};
  std::unordered_map<int64_t, int64_t> launch_at;
  launch_at[11] = 10;   // runtime: cudaMemcpyAsync (the batch)
  launch_at[12] = 60;   // driver: cuLaunchKernel from cuBLAS (forward GEMM)
  launch_at[13] = 90;   // runtime: cudaLaunchKernel (GELU)
  launch_at[14] = 205;  // runtime: cross-entropy
  launch_at[15] = 230;  // driver: cuBLAS backward GEMM
  launch_at[16] = 410;  // runtime: fused AdamW
  std::vector<TraceEvent> device = {
      {"memcpy", "memcpy", "", 1000, 20, 0, 65536, 7, 11},
      {"nvjet_tst_128x256_64x4_1x2_h_bz_coopA_NTT", "kernel", "", 1030, 4000, 0, 0, 7, 12},
      {"void at::native::vectorized_elementwise_kernel<4, GeluCUDAKernelImpl>", "kernel", "", 5040, 300, 0, 0, 7, 13},
      {"void at::native::cunn_SoftMaxForward<4>", "kernel", "", 5350, 400, 0, 0, 7, 14},
      {"sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x256x64", "kernel", "", 5760, 8000, 0, 0, 7, 15},
      {"void at::native::multi_tensor_apply_kernel<FusedAdamMathFunctor>", "kernel", "", 13770, 600, 0, 0, 7, 16},
      {"void at::native::reduce_kernel<512, 1>", "kernel", "", 14380, 50, 0, 0, 7, 99},  // its launch record lost
  };
  attribute_phases(device, launch_at, phases);
  EXPECT_EQ(device[1].phase, "forward");
  EXPECT_EQ(device[4].phase, "backward");
  const ProfileSummary s = summarize(device, 1, 14e-6, "cupti");
  double total = 0;
  for (const auto& e : device) total += e.dur_ns / 1e6;
  EXPECT_NEAR(s.phase_ms.at("other"), 50 / 1e6, 1e-12);
  EXPECT_NEAR(s.phase_coverage, 1.0 - (50 / 1e6) / total, 1e-9);
  EXPECT_GE(s.phase_coverage, 0.95);
  double phases_sum = 0;
  for (const auto& [_, ms] : s.phase_ms) phases_sum += ms;
  EXPECT_NEAR(phases_sum, total, 1e-12);  // every kernel and copy counted once
}

// That every op the profiled steps ran is inside one of the step's phases but the detach of the loss it returns
// (the harness's, after the optimizer): counted, not timed — a time share fails whenever that microsecond op is
// preempted (2 ms of a 10 ms step once, on 2 busy cores).
void expect_phases_cover_the_step(const Breakdown& p, int steps) {
  int outside = 0, inside = 0;
  for (const auto& e : p.trace["traceEvents"]) {
    if (e.value("cat", "") != "op") continue;
    if (e["args"].value("phase", "").empty()) {
      ++outside;
      EXPECT_TRUE(e["name"] == "aten::detach" || e["name"] == "detach") << e.dump();
    } else {
      ++inside;
    }
  }
  EXPECT_LE(outside, 2 * steps);  // aten::detach and the detach it calls, once a step
  EXPECT_GT(inside, 100 * outside);
  EXPECT_NEAR(p.summary.phase_events.count("other") ? p.summary.phase_events.at("other") : 0.0, outside / double(steps),
              1e-9);
}

TEST(CpuProfiler, PhasesCoverTheStep) {
  const Breakdown p = profile(tiny(), 2);
  expect_phases_cover_the_step(p, 2);
  EXPECT_NE(p.summary.attribution.find("top-level ATen op"), std::string::npos);
}

// A CUDA-graph rung's breakdown comes from an eager pass of the same step, and says so.
TEST(CpuProfiler, AGraphRungIsProfiledThroughItsEagerTwin) {
  StepSpec s = tiny();
  s.optimizer.kind = OptimizerKind::kAdamwFused;
  s.executor = ExecutorKind::kCudaGraph;
  const Breakdown p = profile(s, 2);
  EXPECT_NE(p.summary.attribution.find("eager pass of the same step"), std::string::npos) << p.summary.attribution;
  EXPECT_GT(p.summary.phase_ms.at("forward"), 0.0);
  expect_phases_cover_the_step(p, 2);
}

TEST(FlopCount, OpFlopsFromShapes) {
  EXPECT_EQ(op_flops("aten::mm", {{8, 32}, {32, 96}}, false), 2.0 * 8 * 32 * 96);
  EXPECT_EQ(op_flops("aten::addmm", {{96}, {8, 32}, {32, 96}}, false), 2.0 * 8 * 32 * 96);
  EXPECT_EQ(op_flops("aten::bmm", {{4, 16, 8}, {4, 8, 16}}, false), 2.0 * 4 * 16 * 8 * 16);
  EXPECT_EQ(op_flops("aten::_scaled_mm", {{8, 32}, {32, 96}, {}, {}}, false), 2.0 * 8 * 32 * 96);
  EXPECT_EQ(op_flops(kernels::kLtGemmRecord, {{8, 96, 32}}, false), 2.0 * 8 * 32 * 96);  // {M, N, K}
  // SDPA kernels: 4·B·H·T·S·D forward, halved when causal; backward twice the forward.
  const std::vector<std::vector<int64_t>> qkv = {{2, 4, 16, 8}, {2, 4, 16, 8}, {2, 4, 16, 8}};
  EXPECT_EQ(op_flops("aten::_scaled_dot_product_flash_attention", qkv, false), 4.0 * 2 * 4 * 16 * 16 * 8);
  EXPECT_EQ(op_flops("aten::_scaled_dot_product_flash_attention", qkv, true), 2.0 * 2 * 4 * 16 * 16 * 8);
  auto bwd = qkv;
  bwd.insert(bwd.begin(), {2, 4, 16, 8});  // grad_out first
  EXPECT_EQ(op_flops("aten::_scaled_dot_product_cudnn_attention_backward", bwd, true), 4.0 * 2 * 4 * 16 * 16 * 8);
  // Composite ops are counted through the GEMMs they run, never themselves.
  EXPECT_EQ(op_flops("aten::_scaled_dot_product_attention_math", qkv, true), 0.0);
  EXPECT_EQ(op_flops("aten::linear", {{8, 32}, {96, 32}}, false), 0.0);
  EXPECT_EQ(op_flops("aten::matmul", {{8, 32}, {32, 96}}, false), 0.0);
}

// The count over a real step of the baseline equals the FLOP model's non-causal variant (the manual
// attention computes the full T×T matrix): 6·(L·12·C² + V·C) + 12·L·C·T per token.
TEST(FlopCount, BaselineStepMatchesTheFormula) {
  const StepSpec s = tiny(2);
  const Breakdown p = profile(s, 1);
  const double tokens = static_cast<double>(s.batch * s.model.context);
  EXPECT_NEAR(p.summary.counted_flops_per_step / tokens, flop_model(s.model).per_token_full_attention(), 1e-6);
}

// Our cuBLASLt GEMMs run no ATen matmul: lt_gemm's record ({M, N, K}, as lt_gemm opens it) is what is counted.
TEST(FlopCount, CountsOurCublasLtGemmsByTheirRecord) {
  const kernels::StepGemm g = kernels::linear_gemms("fc1", 64, 32, 128)[2];  // dW: M=128 N=32 K=64
  FlopCounter flops;
  flops.start();
  {
    RECORD_FUNCTION(kernels::kLtGemmRecord, kernels::lt_gemm_record_inputs(g));
  }
  flops.stop();
  EXPECT_EQ(flops.flops(), 2.0 * 128 * 32 * 64);
  EXPECT_EQ(flops.by_op().at(kernels::kLtGemmRecord), flops.flops());
}

TEST(CuptiAggregation, Categories) {
  EXPECT_EQ(category("sm90_xmma_gemm_bf16bf16_bf16f32", "kernel"), "matmul");
  EXPECT_EQ(category("void cutlass::Kernel<cutlass_80_tensorop_gemm>", "kernel"), "matmul");
  EXPECT_EQ(category("void at::native::(anonymous namespace)::cunn_SoftMaxForward<4>", "kernel"), "attention");
  EXPECT_EQ(category("void at::native::vectorized_layer_norm_kernel<float>", "kernel"), "normalization");
  EXPECT_EQ(category("void at::native::nll_loss_forward_reduce_cuda_kernel_2d", "kernel"), "loss");
  // As CUPTI names them once demangled (torch 2.14's libtorch_cuda.so, our kernels' objects): the loss's
  // log-softmax is not the attention's softmax; our fused kernels land where the ops they replace did.
  EXPECT_EQ(category("void at::native::(anonymous namespace)::cunn_SoftMaxForward<8, c10::BFloat16, float, "
                     "c10::BFloat16, at::native::(anonymous namespace)::LogSoftMaxForwardEpilogue>(c10::BFloat16*, "
                     "c10::BFloat16 const*, int)", "kernel"), "loss");
  EXPECT_EQ(category("void at::native::(anonymous namespace)::cunn_SoftMaxBackward<8, c10::BFloat16, float, "
                     "c10::BFloat16, at::native::(anonymous namespace)::LogSoftMaxBackwardEpilogue>(c10::BFloat16*, "
                     "c10::BFloat16 const*, c10::BFloat16 const*, long)", "kernel"), "loss");
  EXPECT_EQ(category("void at::native::(anonymous namespace)::cunn_SoftMaxForward<8, c10::BFloat16, float, "
                     "c10::BFloat16, at::native::(anonymous namespace)::SoftMaxForwardEpilogue>(c10::BFloat16*, "
                     "c10::BFloat16 const*, int)", "kernel"), "attention");
  EXPECT_EQ(category("void gpt2::kernels::(anonymous namespace)::softmax_xent_backward_kernel<c10::BFloat16, 8>("
                     "c10::BFloat16*, long const*, float*, long, float)", "kernel"), "loss");
  EXPECT_EQ(category("void gpt2::kernels::(anonymous namespace)::scaled_gradient_kernel<c10::BFloat16, 8, float>("
                     "float const*, c10::BFloat16*, float const*, long)", "kernel"), "loss");
  for (const char* k : {"void at::native::(anonymous namespace)::GammaBetaBackwardCUDAKernelTemplate<c10::BFloat16, "
                        "float, 32u, 16u, 128u, false, true>(long, long, c10::BFloat16 const*, c10::BFloat16 const*, "
                        "float const*, float const*, c10::BFloat16*, c10::BFloat16*)",
                        "void at::native::(anonymous namespace)::RowwiseMomentsCUDAKernel<c10::BFloat16, float, false>("
                        "long, long, float, c10::BFloat16 const*, float*, float*)"})
    EXPECT_EQ(category(k, "kernel"), "normalization") << k;
  for (const char* way : {"forward", "backward"})
    EXPECT_EQ(category(std::string("void gpt2::kernels::(anonymous namespace)::add_ln_") + way +
                           "_kernel<c10::BFloat16, 8>(c10::BFloat16 const*, c10::BFloat16 const*, long, long)", "kernel"),
              "normalization") << way;
  for (const char* k : {"void at::native::vectorized_gather_kernel<16, long>(char*, char*, long*, int, long, long, long, "
                        "long, bool)",
                        "void at::native::(anonymous namespace)::sum_and_scatter<c10::BFloat16, long>(long const*, "
                        "c10::BFloat16*, long, long const*, long const*, float const*, long const*, long, long)",
                        "void at::native::(anonymous namespace)::compute_grad_weight<c10::BFloat16, long>()",
                        "void at::native::(anonymous namespace)::krn_partials_per_segment<long>(long*, long const*, "
                        "long const*, long)",
                        "void at_cuda_detail::cub::DeviceRadixSortOnesweepKernel<at_cuda_detail::cub::"
                        "DeviceRadixSortPolicy<long, long, unsigned long>::Policy900>()"})
    EXPECT_EQ(category(k, "kernel"), "embedding") << k;
  EXPECT_EQ(category("void at::native::(anonymous namespace)::multi_tensor_apply_kernel<at::native::(anonymous "
                     "namespace)::TensorListMetadata<1>, at::native::(anonymous namespace)::BinaryOpScalarFunctor<float, "
                     "1, 1, 0>, std::multiplies<float>, float>()", "kernel"), "optimizer");
  EXPECT_EQ(category("void gpt2::kernels::(anonymous namespace)::bias_gelu_backward_kernel<c10::BFloat16, 8>("
                     "c10::BFloat16 const*, c10::BFloat16 const*, c10::BFloat16*, float*, long, long)", "kernel"),
            "elementwise");
  EXPECT_EQ(category("memset", "memset"), "memcpy");
  // torch.compile's step by its kernels' names alone (the H100 run of 2026-11-27, ref_torch_compile at B=128):
  // inductor's fused kernels go where their ops would, cuDNN's attention helpers to attention.
  for (const auto& [k, want] : std::vector<std::pair<const char*, const char*>>{
           {"triton_per_fused_add_native_dropout_backward_native_layer_norm_native_layer_norm_backward_view_9",
            "normalization"},
           {"triton_per_fused_add_native_dropout_native_layer_norm_view_4", "normalization"},
           {"triton_red_fused__log_softmax_prepare_softmax_online_5", "loss"},
           {"triton_poi_fused_gelu_gelu_backward_view_5", "elementwise"},
           {"triton_red_fused_native_dropout_backward_sum_view_3", "elementwise"},
           {"triton_poi_fused_embedding_dense_backward_17", "embedding"},
           {"nvjet_sm90_tst_192x192_64x3_2x1_v_bz_coopB_splitK_NTN", "matmul"},
           {"void cublasLt::splitKreduce_kernel<32, 16, int, float, __nv_bfloat16, float, __nv_bfloat16, false, float>()",
            "matmul"},
           {"cudnn_generated_fort_native_sdpa_sm90_flash_bprop_wgmma_f16_knob_26_64x64x64_1x4x1_cga1x1x1_kernel0_0",
            "attention"},
           {"void cudnn::fusion::compute_dot_do_o_specialized<true, 64>(void const*, void const*, void*, void*, "
            "unsigned int)", "attention"},
           {"void cudnn::fusion::convert_dq_to_16bits<true>(void const*, void*, unsigned int, unsigned int)",
            "attention"}})
    EXPECT_EQ(category(k, "kernel"), want) << k;
  EXPECT_EQ(category("aten::addmm"), "matmul");
  EXPECT_EQ(category("aten::bmm"), "attention");
  EXPECT_EQ(category("aten::add"), "elementwise");
}

// ATen's generic CUDA kernels, as CUPTI demangles them (torch 2.14's libtorch_cuda.so), say their arithmetic, not
// what it served: a reduce_kernel's sum is a bias gradient (the Linear's), a manual LayerNorm's scale gradient, or
// anything else; they take the category of the top-level op that launched them. Before this, every reduce_kernel
// counted as normalization: on native-layer rungs, where LayerNorm runs kernels of its own, those were the
// Linears' bias gradients.
TEST(CuptiAggregation, GenericKernelsTakeTheCategoryOfTheOpThatLaunchedThem) {
  const std::string sum =
      "void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, at::native::func_wrapper_t<float, "
      "at::native::sum_functor<float, float, float>::operator()(at::TensorIterator&)::{lambda(float, float)#1}>, "
      "unsigned int, float, 4, 4> >(at::native::ReduceOp<float, at::native::func_wrapper_t<float, "
      "at::native::sum_functor<float, float, float>::operator()(at::TensorIterator&)::{lambda(float, float)#1}>, "
      "unsigned int, float, 4, 4>)";
  const std::string mul =
      "void at::native::unrolled_elementwise_kernel<at::native::BUnaryFunctor<c10::BFloat16, c10::BFloat16, "
      "c10::BFloat16, at::native::binary_internal::MulFunctor<float> >, std::array<char*, 2ul>, 4, "
      "TrivialOffsetCalculator<1, unsigned int>, TrivialOffsetCalculator<1, unsigned int>, "
      "at::native::memory::LoadWithCast<1>, at::native::memory::StoreWithCast<1> >(int)";
  const std::string node = "autograd::engine::evaluate_function: ";
  EXPECT_EQ(category(sum, "kernel", node + "AddmmBackward0"), "matmul");
  EXPECT_EQ(category(sum, "kernel", node + "MulBackward0"), "elementwise");
  EXPECT_EQ(category(sum, "kernel", node + "NllLossBackward0"), "loss");
  EXPECT_EQ(category(sum, "kernel"), "other");  // no op recorded: not guessed
  EXPECT_EQ(category(mul, "kernel", node + "MaskedFillBackward0"), "attention");
  EXPECT_EQ(category(mul, "kernel", node + "VarBackward0"), "normalization");
  EXPECT_EQ(category(mul, "kernel", "aten::mul"), "elementwise");
  EXPECT_EQ(category(mul, "kernel"), "elementwise");
  for (const char* ops : {"MeanOps<float, float, float, float>", "WelfordOps<float, float, int, cuda::std::__4::pair"
                                                                 "<float, float> >"})
    EXPECT_EQ(category(std::string("void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, "
                                   "at::native::") + ops + ", unsigned int, float, 4, 4> >()", "kernel", "aten::var"),
              "normalization") << ops;
  // A kernel whose name says its work keeps it: our GELU backward inside our Function's node is elementwise.
  EXPECT_EQ(category("void gpt2::kernels::(anonymous namespace)::bias_gelu_backward_kernel<c10::BFloat16, 8>()",
                     "kernel", node + "torch::autograd::CppNode<gpt2::LinearGeluFn>"), "elementwise");
  EXPECT_EQ(category("void splitKreduce_kernel<32, 16, int, float, float, float, float, true, false, false>()", "kernel"),
            "matmul");
  // On the CPU an autograd node counts as the op it differentiates.
  const std::pair<const char*, const char*> nodes[] = {
      {"NllLossBackward0", "loss"},          {"LogSoftmaxBackward0", "loss"},
      {"VarBackward0", "normalization"},     {"MeanBackward1", "normalization"},
      {"NativeLayerNormBackward0", "normalization"},
      {"MaskedFillBackward0", "attention"},  {"ScaledDotProductFlashAttentionForCpuBackward0", "attention"},
      {"BmmBackward0", "attention"},         {"AddmmBackward0", "matmul"},
      {"MulBackward0", "elementwise"},       {"ToCopyBackward0", "memcpy"},
      {"EmbeddingBackward0", "embedding"},   {"torch::autograd::AccumulateGrad", "other"}};
  for (const auto& [name, want] : nodes) EXPECT_EQ(category(node + name), want) << name;
}

// The collector's external-correlation records give each launch its op; a kernel takes the op of the launch with
// its correlation id, and a kernel with no record none.
TEST(CuptiAggregation, KernelsGetTheOpOfTheirLaunch) {
  const auto kinds = std::vector<std::string>(std::begin(kCuptiActivityKinds), std::end(kCuptiActivityKinds));
  EXPECT_NE(std::find(kinds.begin(), kinds.end(), "external_correlation"), kinds.end());
  const std::vector<std::string> names = {"aten::linear", "autograd::engine::evaluate_function: AddmmBackward0"};
  const std::unordered_map<int64_t, uint64_t> op_of = {{12, 0}, {15, 1}, {16, 7}};  // 7: no such name
  std::vector<TraceEvent> device = {
      {"nvjet_tst_128x256_64x4_1x2_h_bz_coopA_NTT", "kernel", "", 0, 10, 0, 0, 7, 12},
      {"void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, at::native::func_wrapper_t<float, "
       "at::native::sum_functor<float, float, float> > > >()", "kernel", "", 20, 10, 0, 0, 7, 15},
      {"void at::native::reduce_kernel<512, 1>()", "kernel", "", 40, 10, 0, 0, 7, 16},
      {"void at::native::reduce_kernel<512, 1>()", "kernel", "", 60, 10, 0, 0, 7, 17},
  };
  attribute_ops(device, op_of, names);
  EXPECT_EQ(device[0].op, "aten::linear");
  EXPECT_EQ(device[1].op, names[1]);
  EXPECT_EQ(device[2].op, "");
  EXPECT_EQ(device[3].op, "");
  const ProfileSummary s = summarize(device, 1, 1e-7, "cupti");
  EXPECT_DOUBLE_EQ(s.category_events.at("matmul"), 2.0);  // the GEMM and its bias gradient's sum
  EXPECT_DOUBLE_EQ(s.category_events.at("other"), 2.0);
  EXPECT_EQ(s.category_events.count("normalization"), 0u);
  EXPECT_DOUBLE_EQ(*s.op_coverage, 0.5);  // two of four equal kernels have their op
  EXPECT_EQ(chrome_trace(device, {})["traceEvents"][1]["args"]["op"], names[1]);
}

// On the CPU every top-level op of a step has a category but gradient accumulation (autograd's AccumulateGrad, no
// op's derivative): the backward's nodes count where their forward ops do, our Functions' where their work is.
TEST(CpuProfiler, EveryTopLevelOpButGradientAccumulationHasACategory) {
  StepSpec fused = tiny();
  fused.model.classifier_chunk = 24, fused.model.gelu_epilogues = true, fused.model.fused_residual_norm = true;
  for (const StepSpec& s : {tiny(), fused}) {
    const Breakdown p = profile(s);
    for (const auto& n : p.summary.by_name) {
      if (n.total_ms > 0 && category(n.name) == "other") {
        EXPECT_NE(n.name.find("AccumulateGrad"), std::string::npos) << n.name;
      }
    }
    EXPECT_GT(p.summary.category_ms.at("normalization"), 0.0);
    EXPECT_GT(p.summary.category_ms.at(s.model.classifier_chunk ? "matmul" : "loss"), 0.0);
    EXPECT_FALSE(p.summary.op_coverage);  // a GPU's figure
    EXPECT_FALSE(to_json(p.summary).contains("op_coverage"));
  }
}

// FP8's quantizations and layouts (issue 50: "the scaling kernels are part of its cost") run inside its linear's
// backward node, a top-level op named "...Fp8Linear" that counts as matmul: their own scope keeps their time as
// fp8_scaling, taken out of the node's, none counted twice.
TEST(CpuProfiler, Fp8ScalingInsideTheLinearsBackwardIsItsOwnKindOfWork) {
  at::manual_seed(4);
  const at::Tensor x = at::randn({64, 128}).requires_grad_(), w = (at::randn({96, 128}) * 0.02).requires_grad_();
  auto collector = make_collector(cpu());
  collector->start();
  kernels::fp8_linear(x, w, std::nullopt).sum().backward();
  collector->stop();
  const std::vector<TraceEvent> events = collector->events();
  const auto node = std::find_if(events.begin(), events.end(), [](const TraceEvent& e) {
    return e.depth == 0 && e.name.find("Fp8Linear") != std::string::npos;
  });
  ASSERT_NE(node, events.end());
  EXPECT_EQ(category(node->name), "matmul");
  int64_t own_ns = 0, owns = 0, total_ns = 0;
  for (const auto& e : events) {
    if (e.own && e.start_ns >= node->start_ns && e.start_ns + e.dur_ns <= node->start_ns + node->dur_ns) {
      own_ns += e.dur_ns, ++owns;
    }
    if (e.own) {
      EXPECT_EQ(e.name, kernels::kFp8ScalingRecord);
    }
    if (e.depth == 0 || e.own) total_ns += e.dur_ns - e.nested_own_ns;
  }
  EXPECT_EQ(owns, 3);  // the gradient's quantization and the layouts of the two matmuls
  EXPECT_EQ(node->nested_own_ns, own_ns);
  EXPECT_GT(own_ns, 0);
  const ProfileSummary s = summarize(events, 1, 1.0, "aten_record_function");
  double counted = 0;
  for (const auto& [_, ms] : s.category_ms) counted += ms;
  EXPECT_NEAR(counted, total_ns / 1e6, 1e-9);
  // forward: x's and w's quantizations and a layout, top-level scopes; backward: the three above
  EXPECT_GT(s.category_ms.at("fp8_scaling"), own_ns / 1e6);
  EXPECT_DOUBLE_EQ(s.category_events.at("fp8_scaling"), 6.0);
  // the first forward scope, x's quantization: its amax, two scalar ops making the inverse scale, the scaling (a
  // launch each on a GPU; ATen's scale arithmetic before took eight), and here the transposed copy, which a GPU
  // makes in the scaling's pass
  const auto first = std::find_if(events.begin(), events.end(), [](const TraceEvent& e) {
    return e.depth == 0 && e.name == kernels::kFp8ScalingRecord;
  });
  ASSERT_NE(first, events.end());
  std::vector<std::string> ops;
  for (const auto& e : events) {
    const bool inside = e.start_ns >= first->start_ns && e.start_ns + e.dur_ns <= first->start_ns + first->dur_ns;
    if (e.depth == 1 && inside && e.name != "aten::empty_like" && e.name != "aten::view") ops.push_back(e.name);
  }
  std::sort(ops.begin(), ops.end());
  EXPECT_EQ(ops, (std::vector<std::string>{"aten::clamp_min_", "aten::contiguous", "aten::div", "aten::div_",
                                            "aten::linalg_vector_norm", "aten::t"}));
}

// On CUDA any kernel an own scope launched takes the scope's category, a copy kernel too; a cuBLASLt GEMM under
// our lt_gemm record stays a matmul.
TEST(CuptiAggregation, KernelsOfAnOwnScopeTakeItsCategory) {
  const std::string copy = "void at::native::elementwise_kernel<128, 4, at::native::gpu_kernel_impl_nocast<"
                           "at::native::direct_copy_kernel_cuda(at::TensorIteratorBase&)::{lambda()#3}> >(int)";
  EXPECT_EQ(category(copy, "kernel", "aten::clone"), "memcpy");
  EXPECT_EQ(category(copy, "kernel", kernels::kFp8ScalingRecord), "fp8_scaling");
  EXPECT_EQ(category("nvjet_tst_128x256_64x4_1x2_h_bz_coopA_NTT", "kernel", kernels::kLtGemmRecord), "matmul");
  EXPECT_EQ(category(kernels::kFp8ScalingRecord), "fp8_scaling");
  EXPECT_TRUE(own_scope(kernels::kFp8ScalingRecord) && own_scope(kernels::kLtGemmRecord));
  EXPECT_FALSE(own_scope("aten::mul") || own_scope("autograd::engine::evaluate_function: AddmmBackward0"));
}

}  // namespace
}  // namespace gpt2
