// defines: test::CudaTest — the fixture of the `_CUDA` tests: the first CUDA device, or the test skipped
//          with the reason (a CPU build, no GPU); test::KernelsCuda, our kernels' (the GPU runbook runs them first).
#pragma once
#include <gtest/gtest.h>

#include <c10/core/TensorOptions.h>

#include <exception>

#include "bench/runtime/device.h"

namespace gpt2::test {

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

class KernelsCuda : public CudaTest {
 protected:
  at::TensorOptions on_gpu() const { return at::device(torch_device(dev_)); }
};

}  // namespace gpt2::test
