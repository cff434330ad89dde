// defines: project_python — the interpreter for the Python parts (the report step, the reference rungs)
#pragma once
#include <cstdlib>
#include <string>

namespace gpt2 {

// $GPT2BENCH_PYTHON, else the project's venv (GPT2BENCH_PYTHON, compiled in by CMake).
inline std::string project_python() {
  const char* env = std::getenv("GPT2BENCH_PYTHON");
  return env && *env ? env : GPT2BENCH_PYTHON;
}

}  // namespace gpt2
