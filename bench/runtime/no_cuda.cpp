// The CPU-only build's answer to "is there a CUDA backend": no. The CUDA build compiles
// cuda/cuda_backend.cpp in this file's place (CMakeLists.txt).
#include "bench/runtime/backend.h"

namespace gpt2 {
const Backend* cuda_backend() { return nullptr; }
}  // namespace gpt2
