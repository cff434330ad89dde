// defines: make_cupti_collector — the CUPTI activity collector (cupti_collector.cpp, CUDA build only).
#pragma once
#include <memory>

#include "bench/measure/profiler.h"

namespace gpt2::cuda {

std::unique_ptr<Collector> make_cupti_collector();

}  // namespace gpt2::cuda
