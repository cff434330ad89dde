// defines: NvtxRange — an RAII NVTX 3 range (header-only NVTX; a no-op where the headers were not
//          found at configure time). With no profiler attached a push/pop costs a few nanoseconds.
#pragma once
#ifdef GPT2BENCH_WITH_NVTX
#include <nvtx3/nvToolsExt.h>
#endif

namespace gpt2 {

class NvtxRange {
 public:
  explicit NvtxRange(const char* name) {
#ifdef GPT2BENCH_WITH_NVTX
    nvtxRangePushA(name);
#else
    (void)name;
#endif
  }
  ~NvtxRange() {
#ifdef GPT2BENCH_WITH_NVTX
    nvtxRangePop();
#endif
  }
  NvtxRange(const NvtxRange&) = delete;
  NvtxRange& operator=(const NvtxRange&) = delete;
};

}  // namespace gpt2
