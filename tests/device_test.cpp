// Device logic: datasheet peaks and capability rules tested with faked devices on the CPU; tests
// that need a real GPU end in _CUDA and report "skipped: no CUDA device" where there is none.
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include <sys/resource.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <thread>
#include <tuple>
#include <nlohmann/json.hpp>

#include "bench/runtime/datasheet.h"
#include "bench/runtime/device.h"
#include "bench/runtime/memory.h"
#include "bench/step/train_step.h"
#include "cuda_test.h"
#include "helpers.h"

namespace gpt2 {
namespace {

DeviceInfo fake_gpu(const std::string& name, int major) {
  DeviceInfo d;
  d.type = DeviceType::kCuda;
  d.name = name;
  d.cc_major = major;
  d.tf32 = d.bf16 = d.flash_attention = major >= 8;
  return d;
}

TEST(Device, DatasheetPeaks) {
  EXPECT_EQ(datasheet_peak_flops(fake_gpu("NVIDIA A100-SXM4-40GB", 8), MathMode::kBf16), 312e12);
  EXPECT_EQ(datasheet_peak_flops(fake_gpu("NVIDIA A100 80GB PCIe", 8), MathMode::kTf32), 156e12);
  EXPECT_EQ(datasheet_peak_flops(fake_gpu("NVIDIA H100 80GB HBM3", 9), MathMode::kBf16), 989e12);
  EXPECT_EQ(datasheet_peak_flops(fake_gpu("NVIDIA H100 PCIe", 9), MathMode::kBf16), 756e12);
  EXPECT_EQ(datasheet_peak_flops(fake_gpu("NVIDIA H200", 9), MathMode::kTf32), 494e12);
  // The NVL cards are not the SXM ones: 835 TFLOP/s dense bf16, 418 TF32 (datasheets).
  EXPECT_EQ(datasheet_peak_flops(fake_gpu("NVIDIA H100 NVL", 9), MathMode::kBf16), 835e12);
  EXPECT_EQ(datasheet_peak_flops(fake_gpu("NVIDIA H100 NVL", 9), MathMode::kTf32), 418e12);
  EXPECT_EQ(datasheet_peak_flops(fake_gpu("NVIDIA H200 NVL", 9), MathMode::kBf16), 835e12);
  EXPECT_EQ(datasheet_peak_flops(fake_gpu("NVIDIA H200 NVL", 9), MathMode::kTf32), 418e12);
  EXPECT_EQ(datasheet_peak_flops(fake_gpu("NVIDIA A10", 8), MathMode::kBf16), 125e12);  // not an A100
  EXPECT_EQ(datasheet_peak_flops(fake_gpu("NVIDIA L4", 8), MathMode::kBf16), 121e12);   // not an L40S
  EXPECT_EQ(datasheet_peak_flops(fake_gpu("NVIDIA GeForce RTX 4090", 8), MathMode::kBf16), 165.2e12);
  // V100: no bf16 tensor cores, no TF32 (fp32 matmuls run at the fp32 rate).
  EXPECT_FALSE(datasheet_peak_flops(fake_gpu("Tesla V100-SXM2-32GB", 7), MathMode::kBf16).has_value());
  EXPECT_EQ(datasheet_peak_flops(fake_gpu("Tesla V100-SXM2-32GB", 7), MathMode::kTf32), 15.7e12);
  // An unknown GPU and the CPU get no datasheet figure: never a guess.
  EXPECT_FALSE(datasheet_peak_flops(fake_gpu("NVIDIA A10G", 8), MathMode::kBf16).has_value());
  EXPECT_FALSE(datasheet_peak_flops(fake_gpu("Some Future GPU", 10), MathMode::kBf16).has_value());
  EXPECT_FALSE(datasheet_peak_flops(detect_device("cpu"), MathMode::kFp32).has_value());
}

TEST(Device, EveryDatasheetRowHasASourceAndDensePositiveFigures) {
  for (const auto& r : datasheets()) {
    EXPECT_FALSE(r.source.empty()) << r.model;
    EXPECT_GT(r.fp32_tflops, 0) << r.model;
    EXPECT_GT(r.memory_bandwidth_gbs, 0) << r.model;
    EXPECT_GE(r.fp16_tflops, r.bf16_tflops) << r.model;
    // Each row is found by its own model name (no row hidden behind a broader pattern).
    const auto found = find_datasheet("NVIDIA " + r.model);
    ASSERT_TRUE(found) << r.model;
    EXPECT_EQ(found->model, r.model);
  }
  EXPECT_EQ(find_datasheet("NVIDIA A100-SXM4-80GB")->memory_bandwidth_gbs, 2039);
  EXPECT_EQ(find_datasheet("NVIDIA A100-SXM4-40GB")->memory_bandwidth_gbs, 1555);
  EXPECT_EQ(find_datasheet("NVIDIA H100 80GB HBM3")->model, "H100 SXM");
}

// MFU's denominator: the dense bf16 datasheet peak on a known GPU, none on an unknown one (only the
// measured-peak efficiency, flagged), the best measured matmul rate on a CPU.
TEST(Device, MfuPeakIsTheBf16DatasheetPeakOrNone) {
  const std::map<MathMode, double> measured = {{MathMode::kFp32, 50e12}, {MathMode::kBf16, 798e12}};
  auto [peak, basis] = mfu_peak_for(fake_gpu("NVIDIA H100 80GB HBM3", 9), measured);
  EXPECT_EQ(peak, 989e12);
  EXPECT_NE(basis.find("dense bf16 tensor-core peak, 989 TFLOP/s"), std::string::npos) << basis;
  std::tie(peak, basis) = mfu_peak_for(fake_gpu("NVIDIA Some Future GPU", 10), measured);
  EXPECT_FALSE(peak.has_value());
  EXPECT_NE(basis.find("no datasheet MFU"), std::string::npos) << basis;
  std::tie(peak, basis) = mfu_peak_for(detect_device("cpu"), {{MathMode::kFp32, 120e9}, {MathMode::kBf16, 40e9}});
  EXPECT_EQ(peak, 120e9);
  EXPECT_NE(basis.find("highest matmul rate measured on this CPU in any precision, 120.0 GFLOP/s (fp32)"),
            std::string::npos) << basis;
}

TEST(Device, CpuDetectionAndErrors) {
  const DeviceInfo d = detect_device("cpu");
  EXPECT_FALSE(d.cuda());
  EXPECT_FALSE(d.name.empty());
  EXPECT_GT(d.total_memory, 0);
  EXPECT_THROW(detect_device("tpu"), std::runtime_error);
  if (!build_has_cuda()) {
    try {
      detect_device("cuda");
      FAIL();
    } catch (const std::runtime_error& e) {
      EXPECT_NE(std::string(e.what()).find("this build has no CUDA"), std::string::npos);
    }
  }
}

// How often best_rate runs an op: once to warm up, then until the time asked for has passed, at least 3 times
// (the best of them), at most 20 — and once in all where that first run alone takes that long (an emulated-bf16
// GEMM's 2.4 s: it is timed, not run again).
TEST(Device, BestRateTimesAnOpAtLeastThreeTimesUnlessOneRunTakesTheWholeTime) {
  const DeviceInfo cpu = detect_device("cpu");
  auto runs_of = [&](double op_s, double min_total_s) {
    int runs = 0;
    const double rate = best_rate(cpu, 1.0, min_total_s, [&] {
      ++runs;
      std::this_thread::sleep_for(std::chrono::duration<double>(op_s));
    });
    EXPECT_GT(rate, 0.0);
    EXPECT_LE(rate, 1.0 / op_s);  // the best of what was timed: no run is shorter than the sleep
    return runs;
  };
  EXPECT_EQ(runs_of(0.25, 0.2), 1);    // the first run is the whole time: timed, no warm-up
  EXPECT_EQ(runs_of(0.02, 0.058), 4);  // the time passes at the 3rd run (a run would need 2.9x its sleep to end it first)
  EXPECT_EQ(runs_of(0.001, 10.0), 21);  // never past 20 timed runs
}

TEST(Device, MeasuredMatmulPeakIsPositive) {
  EXPECT_GT(measure_matmul_peak(detect_device("cpu"), MathMode::kFp32), 1e8);
}

// A freed 24 MiB block (most of a cpu-mini step's activations are this size or less) stays with the allocator:
// taken again, it faults no page in, where glibc's defaults could unmap it and fault it in anew. Handed back
// between rungs.
TEST(HostAllocator, AFreedBlockIsTakenAgainWithoutPageFaultsAndHandedBackBetweenRungs) {
#if defined(__SANITIZE_ADDRESS__)
  GTEST_SKIP() << "ASan's allocator stands in front of glibc's";
#else
  const std::string host = settle_host_allocator();
  EXPECT_NE(host.find(", here and in the Python reference rungs"), std::string::npos) << host;
  if (host.rfind("tcmalloc", 0) == 0)  // for the processes started from here
    EXPECT_NE(std::string(std::getenv("LD_PRELOAD")).find("tcmalloc"), std::string::npos);
  else
    EXPECT_STREQ(std::getenv("MALLOC_MMAP_THRESHOLD_"), "33554432");
  constexpr size_t kBytes = size_t{24} << 20;
  auto take_touch_free = [] {
    auto* p = static_cast<char*>(std::malloc(kBytes));
    ASSERT_NE(p, nullptr);
    std::memset(p, 1, kBytes);
    asm volatile("" : : "r"(p) : "memory");  // the writes happen: malloc + memset + free is not elided
    std::free(p);
  };
  auto minor_faults = [] {
    rusage u{};
    getrusage(RUSAGE_SELF, &u);
    return u.ru_minflt;
  };
  auto resident = [] {  // bytes, /proc/self/statm's second field (pages)
    std::ifstream f("/proc/self/statm");
    long size = 0, pages = 0;
    f >> size >> pages;
    return pages * sysconf(_SC_PAGESIZE);
  };
  take_touch_free();  // the heap grows to hold it once
  const long before = minor_faults();
  for (int i = 0; i < 3; ++i) take_touch_free();
  EXPECT_LT(minor_faults() - before, 256) << "a 24 MiB block is 6,144 pages: refaulted 3 times, 18,432 faults";
  const long kept = resident();
  empty_cache(detect_device("cpu"));  // the ladder's release between rungs
  EXPECT_GT(kept - resident(), static_cast<long>(kBytes / 2)) << "the freed block is still resident";
#endif
}

TEST(Device, MeasuredCopyBandwidthIsPlausible) {  // bytes/s: more than 100 MB/s, less than any memory's 100 TB/s
  const double bw = measure_copy_bandwidth(detect_device("cpu"));
  EXPECT_GT(bw, 1e8);
  EXPECT_LT(bw, 1e14);
}

using test::CudaTest;

TEST_F(CudaTest, DescribesTheDevice_CUDA) {
  EXPECT_TRUE(dev_.cuda());
  EXPECT_FALSE(dev_.name.empty());
  EXPECT_GT(dev_.sm_count, 0);
  EXPECT_GT(dev_.total_memory, 0);
  EXPECT_FALSE(dev_.runtime_version.empty());
  // the card's UUID as nvidia-smi has it, where nvidia-smi is there
  const auto smi = test::run_command("nvidia-smi --query-gpu=uuid --format=csv,noheader -i " + dev_.pci_bus_id);
  if (smi.exit_code == 0) {
    EXPECT_EQ(smi.output.substr(0, smi.output.find('\n')), dev_.uuid) << smi.output;
  }
  EXPECT_EQ(dev_.uuid.rfind("GPU-", 0), 0u) << dev_.uuid;
}

// A card's UUID as nvidia-smi prints it (rungs.json's device.uuid and cards).
TEST(Device, GpuUuidIsNvidiaSmisForm) {
  char b[16];
  for (int i = 0; i < 16; ++i) b[i] = static_cast<char>(i * 17);  // 00 11 22 ... ff
  EXPECT_EQ(gpu_uuid(b), "GPU-00112233-4455-6677-8899-aabbccddeeff");
}

// The ladder's check after a rung's error (lost_context): an out-of-memory leaves the device usable, a kernel's
// fault does not. The fault is a device-side assert (an index past the table, as a token past the vocabulary
// would be): sticky, as an illegal address is. It loses its process's context, so it runs in a process of its own.
TEST_F(CudaTest, AFaultLosesTheDeviceAndAnOutOfMemoryDoesNot_CUDA) {
  EXPECT_THROW(at::empty({int64_t{1} << 50}, at::device(torch_device(dev_)).dtype(at::kByte)), c10::OutOfMemoryError);
  EXPECT_EQ(lost_context(dev_), "");
  const auto r = test::run_command(std::string(GPT2BENCH_TESTS_BINARY) +
                                   " --gtest_also_run_disabled_tests --gtest_filter=CudaTest.DISABLED_AFaultLosesTheContext");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("lost_context: cudaError"), std::string::npos) << r.output;
}

// Run by the test above in a process of its own (disabled elsewhere: it loses the process's CUDA context).
TEST_F(CudaTest, DISABLED_AFaultLosesTheContext) {
  const auto on = at::device(torch_device(dev_));
  const auto table = at::zeros({8, 4}, on);
  const auto past = at::full({16}, int64_t{1} << 20, on.dtype(at::kLong));
  EXPECT_ANY_THROW({
    (void)table.index_select(0, past);
    synchronize(dev_);
  });
  const std::string why = lost_context(dev_);
  std::printf("lost_context: %s\n", why.c_str());
  EXPECT_FALSE(why.empty());
  EXPECT_EQ(lost_context(dev_), why);  // every later look says the same
  std::fflush(nullptr);
  std::_Exit(HasFailure() ? 1 : 0);  // no teardown on a lost device: what it would free is not this test's question
}

// The same on a real device, in a ladder: a rung with pinned batches (record_stream) hits a real fault (a
// device-side assert, GPT2BENCH_FAULT_DEVICE=<rung>:device) wherever the device reports it: the rung is recorded
// with its error, the process exits 3 (not std::terminate's abort), and --resume runs the rest in a new process.
TEST_F(CudaTest, AFaultLosesTheDeviceInALadderRungAndResumeGoesOnPastIt_CUDA) {
  test::TempDir d;
  const auto profile = test::write_tiny_profile(
      d, "name: f\nmodel: tiny\ndata: {synthetic_tokens: 20000}\ndevice: cuda\nbatch: 4\nwarmup_steps: 1\n"
         "steps: 2\nrepetitions: 2\nparity_steps: 2\nbreakdown_steps: 0\nvariants: [fused_adamw, pinned_memory, cuda_graph]\n");
  auto r = test::run_command("GPT2BENCH_FAULT_DEVICE=02_pinned_memory:device " + std::string(GPT2BENCH_BINARY) +
                             " ladder --profile " + profile + " --out " + (d / "run"));
  ASSERT_EQ(r.exit_code, 3) << r.output;
  EXPECT_NE(r.output.find("gpt2bench: 02_pinned_memory left the device unusable (cudaError"), std::string::npos)
      << r.output;
  auto rungs = test::read_json(d / "run/rungs.json");
  EXPECT_EQ(rungs["status"], "aborted");
  EXPECT_EQ(rungs["rungs"][1]["status"], "ok");
  EXPECT_EQ(rungs["rungs"][2]["status"], "error");
  EXPECT_EQ(rungs["rungs"][2].value("device_fault", false), true) << rungs["rungs"][2].dump(2);
  EXPECT_EQ(rungs["rungs"][3]["status"], "pending");
  std::printf("the fault, as the device reported it: %s\n", rungs["rungs"][2].value("error", "").c_str());

  r = test::run_command(std::string(GPT2BENCH_BINARY) + " ladder --resume " + (d / "run"));
  EXPECT_EQ(r.exit_code, 1) << r.output;  // the rung's error stands
  rungs = test::read_json(d / "run/rungs.json");
  EXPECT_EQ(rungs["rungs"][2].value("device_fault", false), true);
  EXPECT_EQ(rungs["rungs"][3]["status"], "ok") << rungs["rungs"][3].dump(2);
}

TEST_F(CudaTest, EventTimerTimesDeviceWork_CUDA) {
  auto a = at::randn({4096, 4096}, at::device(torch_device(dev_)));
  auto timer = make_step_timer(dev_);
  timer->mark();
  for (int i = 0; i < 10; ++i) a = at::matmul(a, a).div_(4096);
  timer->mark();
  a = at::matmul(a, a);
  timer->mark();
  const auto s = timer->intervals();
  ASSERT_EQ(s.size(), 2u);
  EXPECT_GT(s[0], s[1]);  // ten matmuls take longer than one
  EXPECT_GT(s[1], 0.0);
  EXPECT_TRUE(timer->intervals().empty());  // it starts over
}

TEST_F(CudaTest, CachingAllocatorPeaksResetPerRung_CUDA) {
  auto meter = make_memory_meter(dev_);
  empty_cache(dev_);
  meter->reset_peak();
  {
    auto t = at::empty({64 << 20}, at::device(torch_device(dev_)).dtype(at::kByte));
    EXPECT_GE(meter->read().allocated, 64 << 20);
  }
  const MemoryStats s = meter->read();
  EXPECT_GE(s.peak_allocated, 64 << 20);
  EXPECT_GE(s.peak_reserved, s.peak_allocated);
  meter->reset_peak();
  EXPECT_LT(meter->read().peak_allocated, 64 << 20);
}

// H100: this test alone failed with "Invalid device argument" (allocator calls before the CUDA
// state existed); it passed after other CUDA tests. Run alone, in a process of its own.
TEST_F(CudaTest, AllocatorStatsWorkInAFreshProcess_CUDA) {
  const auto r = test::run_command(std::string(GPT2BENCH_TESTS_BINARY) +
                                   " --gtest_filter=CudaTest.CachingAllocatorPeaksResetPerRung_CUDA");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("[  PASSED  ] 1 test"), std::string::npos) << r.output;
}

// The profiling pass on CUDA (H100: "error: Invalid device argument"), and its phases cover the
// kernel time: cuBLAS's kernels come through the driver API. Every kernel of the eager steps is launched inside
// an ATen op, and the external correlation records name it (the trace's args.op): ATen's generic reductions
// are categorized by it.
TEST_F(CudaTest, ProfilingPassAttributesKernelsToPhases_CUDA) {
  test::TempDir d;
  const auto profile = test::write_tiny_profile(
      d, "name: p\nmodel: tiny\ndata: {synthetic_tokens: 20000}\ndevice: cuda\nbatch: 4\nwarmup_steps: 1\n"
         "steps: 2\nrepetitions: 2\nparity_steps: 0\nbreakdown_steps: 2\nvariants: [fused_adamw, cuda_graph]\n");
  const auto r = test::run_command(std::string(GPT2BENCH_BINARY) + " breakdown --profile " + profile + " --out " + (d / "p"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  for (const char* rung : {"00_baseline", "01_fused_adamw", "02_cuda_graph"}) {
    const auto j = test::read_json(d / (std::string("p/breakdown/") + rung + ".json"));
    EXPECT_GE(j["phase_coverage"].get<double>(), 0.95) << rung << ": " << j.dump(2);
    EXPECT_GE(j["op_coverage"].get<double>(), 0.95) << rung;
    const auto trace = test::read_json(d / (std::string("p/breakdown/") + rung + ".trace.json"));
    for (const auto& e : trace["traceEvents"]) {
      if (e["cat"] == "kernel" && e["name"].get<std::string>().find("reduce_kernel") != std::string::npos) {
        EXPECT_TRUE(e["args"].contains("op")) << rung << ": " << e.dump();
      }
    }
  }
}

// What a rung's step allocated goes back to the device once the step is freed and the cache emptied (the ladder's
// release between rungs), whatever kind of step it was: on an H100 27-49 GB stayed reserved from rung to rung and
// the extras ran out of memory at a batch the top had run at (memory.h: settle_device_allocator). Eager and CUDA-graph
// steps, fp32 and bf16, one after another, each with blocks of the large pool (activations of several MB).
TEST_F(CudaTest, AFreedStepLeavesNoDeviceMemoryBehind_CUDA) {
  EXPECT_NE(settle_device_allocator().find("expandable_segments"), std::string::npos) << settle_device_allocator();
  auto meter = make_memory_meter(dev_);
  ModelOptions m = test::tiny_model();
  m.context = 256;
  m.n_embd = 256;
  const auto tokens = to_token_tensor(synthetic_corpus(97, 200000, 1));
  synchronize(dev_);
  empty_cache(dev_);
  const MemoryStats before = meter->read();
  for (bool graph : {false, true}) {
    for (Precision p : {Precision::kFp32, Precision::kBf16Cast}) {
      StepSpec s = baseline_spec(m, 16, dev_);
      s.optimizer.kind = OptimizerKind::kAdamwFused;
      s.precision = p;
      if (graph) s.executor = ExecutorKind::kCudaGraph;
      int64_t used = 0;
      {
        TrainStep ts(s, dev_, tokens, 3);
        for (int i = 0; i < 3; ++i) ts.step();
        synchronize(dev_);
        used = meter->read().reserved - before.reserved;
      }
      synchronize(dev_);
      empty_cache(dev_);
      const MemoryStats after = meter->read();
      const std::string what = std::string(graph ? "graph" : "eager") + (p == Precision::kFp32 ? " fp32" : " bf16");
      EXPECT_GT(used, int64_t{16} << 20) << what << ": the step's own memory";
      EXPECT_LE(after.allocated - before.allocated, int64_t{1} << 20) << what;
      EXPECT_LE(after.reserved - before.reserved, int64_t{32} << 20) << what << " (" << used << " bytes while it lived)";
    }
  }
}

// Each graph replay's loss is its own tensor: the next replay must not change the last one.
TEST_F(CudaTest, GraphStepsReturnTheirOwnLoss_CUDA) {
  StepSpec s = baseline_spec(test::tiny_model(), 4, dev_);
  s.optimizer.kind = OptimizerKind::kAdamwFused;
  s.executor = ExecutorKind::kCudaGraph;
  TrainStep ts(s, dev_, to_token_tensor(synthetic_corpus(97, 20000, 1)), 3);
  const auto a = ts.step();
  const double first = a.item<double>();
  const auto b = ts.step();
  EXPECT_EQ(a.item<double>(), first);
  EXPECT_NE(b.item<double>(), first);
}

// gpt2bench kernels' passes: captured after three warm-up runs, each call one replay; a pass that cannot be captured
// (an item() waits for the device) throws and leaves the device usable, and that side is timed eagerly.
TEST_F(CudaTest, AGraphedPassReplaysItsWorkAndAFailedCaptureSaysWhy_CUDA) {
  at::Tensor x = at::zeros({4}, at::device(torch_device(dev_)));
  const auto replay = graphed(dev_, [&x] { x.add_(1); });
  EXPECT_EQ(x.sum().item<double>(), 4 * 3.0);  // the warm-up runs ran, the capture did not
  replay();
  replay();
  EXPECT_EQ(x.sum().item<double>(), 4 * 5.0);
  try {
    (void)graphed(dev_, [&x] { (void)x.sum().item<double>(); });
    ADD_FAILURE() << "an item() was captured";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("CUDA graph capture failed"), std::string::npos) << e.what();
  }
  EXPECT_EQ(lost_context(dev_), "");
  EXPECT_EQ(x.add(1).sum().item<double>(), 4 * 6.0);
}

TEST_F(CudaTest, TrainStepMatchesTheCpu_CUDA) {
  StepSpec s = baseline_spec(test::tiny_model(), 4, dev_);
  const auto tokens = to_token_tensor(synthetic_corpus(97, 20000, 1));
  const Trajectory gpu = loss_trajectory(s, dev_, tokens, 3, 3);
  s.optimizer.kind = OptimizerKind::kAdamwLoop;
  const Trajectory cpu = loss_trajectory(s, detect_device("cpu"), tokens, 3, 3);
  for (size_t i = 0; i < gpu.losses.size(); ++i) EXPECT_NEAR(gpu.losses[i], cpu.losses[i], 1e-3) << i;
  EXPECT_NEAR(gpu.first_grad_norm / cpu.first_grad_norm, 1.0, 1e-3);  // the parity check's gradient, too
}

// The parity check reads the first step's gradient from AdamW's first moment: under a CUDA graph that holds
// only if the capture's warm-up steps (which really train) are undone before the first replay.
TEST_F(CudaTest, GraphStepsFirstGradientIsTheEagerOne_CUDA) {
  StepSpec s = baseline_spec(test::tiny_model(), 4, dev_);
  s.optimizer.kind = OptimizerKind::kAdamwFused;
  const auto tokens = to_token_tensor(synthetic_corpus(97, 20000, 1));
  const Trajectory eager = loss_trajectory(s, dev_, tokens, 3, 3);
  s.executor = ExecutorKind::kCudaGraph;
  const Trajectory graph = loss_trajectory(s, dev_, tokens, 3, 3);
  ASSERT_GT(eager.first_grad_norm, 0);
  EXPECT_NEAR(graph.first_grad_norm / eager.first_grad_norm, 1.0, 1e-4);
  for (size_t i = 0; i < eager.losses.size(); ++i) EXPECT_NEAR(graph.losses[i], eager.losses[i], 1e-3) << i;
}

}  // namespace
}  // namespace gpt2
