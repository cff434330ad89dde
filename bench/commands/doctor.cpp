#include "bench/commands/doctor.h"

#include <torch/version.h>

#include <ATen/Parallel.h>
#include <ATen/Context.h>

#include <iostream>

#include "bench/ladder/run_dir.h"
#include "bench/measure/clocks.h"
#include "bench/runtime/backend.h"
#include "bench/runtime/datasheet.h"
#include "bench/runtime/device.h"
#include "bench/runtime/memory.h"
#include "kernels/attention.h"
#include "kernels/gemm_survey.h"

namespace gpt2 {

int run_doctor(const std::string& device) {
  std::cout << "gpt2bench " << git_sha() << ", torch " << TORCH_VERSION << "\n";
#ifdef GPT2BENCH_WITH_NVTX
  constexpr bool nvtx = true;
#else
  constexpr bool nvtx = false;
#endif
  std::cout << "build: " << (build_has_cuda() ? "CUDA" : "CPU only") << ", NVTX 3 ranges compiled in: "
            << (nvtx ? "yes" : "no (headers not found at configure time)") << ", cuBLASLt calls: "
            << (kernels::gemm_survey_built() ? "yes" : "no") << ", cuDNN frontend graphs: "
            << (kernels::cudnn_attention_built() ? "yes" : "no") << "\n";
  std::cout << "ATen: " << at::get_num_threads() << " threads, MKL " << (at::hasMKL() ? "yes" : "no") << ", MKL-DNN "
            << (at::hasMKLDNN() ? "yes" : "no") << "\n";
  if (const Backend* cuda = cuda_backend()) {
    std::cout << "CUDA caching allocator: " << settle_device_allocator() << "\n";
    std::cout << cuda->library_report();
    if (cuda->device_count() == 0) std::cout << "no CUDA device found: GPU rungs would run on the CPU instead\n";
  }
  const DeviceInfo dev = detect_device(device);
  std::cout << "device: " << dev.name << " (" << (dev.cuda() ? "cuda" : "cpu")
            << (dev.cpu_model_id.empty() ? "" : ", " + dev.cpu_model_id) << ")\n";
  if (dev.cuda())
    std::cout << "  compute capability " << dev.cc_major << "." << dev.cc_minor << ", " << dev.sm_count << " SMs, "
              << dev.total_memory / (1 << 20) << " MiB, driver " << dev.driver_version << ", runtime "
              << dev.runtime_version << "\n";
  std::cout << "  bf16: " << (dev.bf16 ? "yes" : "no") << (dev.bf16_support.empty() ? "" : ", " + dev.bf16_support)
            << "\n  fp16: " << (dev.fp16 ? "yes" : "no") << (dev.fp16_support.empty() ? "" : ", " + dev.fp16_support)
            << "\n  TF32: " << (dev.tf32 ? "yes" : "no") << ", flash attention: " << (dev.flash_attention ? "yes" : "no")
            << "\n";
  if (dev.cuda()) {
    if (const auto row = find_datasheet(dev.name))
      std::cout << "  datasheet (" << row->model << ", dense): bf16 " << row->bf16_tflops << " TFLOP/s, TF32 "
                << row->tf32_tflops << ", fp32 " << row->fp32_tflops << ", memory " << row->memory_bandwidth_gbs
                << " GB/s (" << row->source << ")\n";
    else
      std::cout << "  datasheet: none for this GPU: MFU is given against the measured matmul peak only\n";
  }
  const auto clocks = make_clock_sampler(dev)->take();
  std::cout << "  clocks (NVML): " << (clocks.available ? "sampled during timed repetitions" : clocks.unavailable_why)
            << "\n";
  return 0;
}

}  // namespace gpt2
