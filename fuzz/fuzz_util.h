// defines: scratch_file — fuzz inputs go through the real file-reading code paths
#pragma once
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <string>

namespace gpt2::fuzz {

// Writes the input to a per-process scratch file and returns its path.
inline std::string scratch_file(const uint8_t* data, size_t size, const char* suffix) {
  const std::string path = "/tmp/gpt2bench-fuzz-" + std::to_string(::getpid()) + suffix;
  FILE* f = std::fopen(path.c_str(), "wb");
  std::fwrite(data, 1, size, f);
  std::fclose(f);
  return path;
}

}  // namespace gpt2::fuzz
