// defines: test::CudaTest — the fixture of the `_CUDA` tests: the first CUDA device, or the test skipped
//          with the reason (a CPU build, no GPU).
#pragma once
#include <gtest/gtest.h>

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

}  // namespace gpt2::test
