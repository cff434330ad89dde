// The CPU-only build has no CUPTI collector; the CUDA build compiles cuda/cupti_collector.cpp in
// this file's place (CMakeLists.txt).
#include "bench/measure/cuda/cupti.h"

namespace gpt2 {
std::unique_ptr<Collector> make_cupti_collector() { return nullptr; }
}  // namespace gpt2
