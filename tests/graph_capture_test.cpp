// The CUDA-graph capture protocol (bench/graph_capture.h) with a fake device: the order of the
// steps, and what a failed capture leaves behind. The error text is what the H100 printed.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "bench/runtime/graph_capture.h"

namespace gpt2 {
namespace {

const char* kH100Error =
    "CUDA error: operation not permitted when stream is capturing\n"
    "CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below might be "
    "incorrect.\nFor debugging consider passing CUDA_LAUNCH_BLOCKING=1";

struct FakeCapture : CaptureSteps {
  std::vector<std::string> log;
  bool fail_end = false;
  void quiesce() override { log.push_back("quiesce"); }
  void begin() override { log.push_back("begin"); }
  void end() override {
    log.push_back("end");
    if (fail_end) throw std::runtime_error("CUDA error: operation failed due to a previous error during capture");
  }
  void abandon() noexcept override { log.push_back("abandon"); }
};

using Log = std::vector<std::string>;

TEST(GraphCapture, QuiescesBeforeBeginningThenEnds) {
  FakeCapture f;
  const int out = capture_with(f, [&] {
    f.log.push_back("body");
    return 7;
  });
  EXPECT_EQ(out, 7);
  EXPECT_EQ(f.log, (Log{"quiesce", "begin", "body", "end"}));
}

TEST(GraphCapture, AFailedCaptureIsAbandonedAndReportedOnOneLineFirst) {
  FakeCapture f;
  try {
    capture_with(f, [&]() -> int { TORCH_CHECK(false, kH100Error); });
    FAIL() << "no error";
  } catch (const std::runtime_error& e) {
    const std::string what = e.what();
    EXPECT_EQ(first_line(what), "CUDA graph capture failed: CUDA error: operation not permitted when stream is capturing");
    EXPECT_NE(what.find("CUDA_LAUNCH_BLOCKING"), std::string::npos);  // the full text stays for rungs.json
  }
  EXPECT_EQ(f.log, (Log{"quiesce", "begin", "abandon"}));
}

TEST(GraphCapture, AFailedEndIsAbandonedToo) {
  FakeCapture f;
  f.fail_end = true;
  EXPECT_THROW(capture_with(f, [] { return 1; }), std::runtime_error);
  EXPECT_EQ(f.log, (Log{"quiesce", "begin", "end", "abandon"}));
}

TEST(GraphCapture, OutOfMemoryStaysOutOfMemory) {
  FakeCapture f;
  EXPECT_THROW(capture_with(f, []() -> int { TORCH_CHECK_WITH(OutOfMemoryError, false, "CUDA out of memory. Tried to allocate 2.00 GiB"); }),
               c10::OutOfMemoryError);
  EXPECT_EQ(f.log, (Log{"quiesce", "begin", "abandon"}));
}

}  // namespace
}  // namespace gpt2
