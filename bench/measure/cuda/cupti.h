// defines: make_cupti_collector — the CUPTI activity collector (cupti_collector.cpp in the CUDA
//          build; no_cupti.cpp, which returns nullptr, in the CPU-only one).
#pragma once
#include <memory>

#include "bench/measure/profiler.h"

namespace gpt2 {

std::unique_ptr<Collector> make_cupti_collector();

}  // namespace gpt2
