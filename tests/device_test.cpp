// Device logic: datasheet peaks and capability rules tested with faked devices on the CPU; tests
// that need a real GPU end in _CUDA and report "skipped: no CUDA device" where there is none.
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include "bench/device.h"
#include "bench/memory.h"
#include "bench/train_step.h"
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
  EXPECT_FALSE(datasheet_peak_flops(fake_gpu("NVIDIA GeForce RTX 4090", 8), MathMode::kFp32).has_value());
  EXPECT_FALSE(datasheet_peak_flops(detect_device("cpu"), MathMode::kFp32).has_value());
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

TEST(Device, MeasuredMatmulPeakIsPositive) {
  EXPECT_GT(measure_matmul_peak(detect_device("cpu"), MathMode::kFp32), 1e8);
}

class CudaTest : public ::testing::Test {
 protected:
  void SetUp() override {
    try {
      dev_ = detect_device("cuda");
    } catch (const std::exception& e) {
      GTEST_SKIP() << "skipped: no CUDA device (" << e.what() << ")";
    }
  }
  DeviceInfo dev_;
};

TEST_F(CudaTest, DescribesTheDevice_CUDA) {
  EXPECT_TRUE(dev_.cuda());
  EXPECT_FALSE(dev_.name.empty());
  EXPECT_GT(dev_.sm_count, 0);
  EXPECT_GT(dev_.total_memory, 0);
  EXPECT_FALSE(dev_.runtime_version.empty());
}

TEST_F(CudaTest, EventTimerTimesDeviceWork_CUDA) {
  auto a = at::randn({4096, 4096}, at::device(torch_device(dev_)));
  auto timer = make_timer(dev_);
  timer->start();
  for (int i = 0; i < 10; ++i) a = at::matmul(a, a).div_(4096);
  timer->stop();
  EXPECT_GT(timer->seconds(), 0.0);
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

TEST_F(CudaTest, TrainStepMatchesTheCpu_CUDA) {
  StepSpec s = baseline_spec(test::tiny_model(), 4, dev_);
  const auto tokens = to_token_tensor(synthetic_corpus(97, 20000, 1));
  auto gpu = loss_trajectory(s, dev_, tokens, 3, 3).losses;
  s.optimizer.kind = OptimizerKind::kAdamwLoop;
  auto cpu = loss_trajectory(s, detect_device("cpu"), tokens, 3, 3).losses;
  for (size_t i = 0; i < gpu.size(); ++i) EXPECT_NEAR(gpu[i], cpu[i], 1e-3) << i;
}

}  // namespace
}  // namespace gpt2
