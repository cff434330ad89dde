// defines: DataError, token shards in llm.c's format (read/write with validation), DataOptions
// No libtorch here: the profile parser and the fuzz targets include it.
#pragma once
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace gpt2 {

struct DataError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// llm.c shard: 256 int32 header — [0] magic, [1] version, [2] token count — then uint16 tokens.
constexpr int32_t kShardMagic = 20240520;
constexpr int32_t kShardVersion = 1;
constexpr int64_t kShardHeaderBytes = 256 * 4;

std::vector<uint16_t> read_shard(const std::string& path);  // DataError names the file and the fault
void write_shard(const std::string& path, const std::vector<uint16_t>& tokens);

struct DataOptions {
  bool synthetic = true;
  int64_t synthetic_tokens = 1 << 20;  // per split
  std::string train_glob, val_glob;    // shard patterns when not synthetic
};

}  // namespace gpt2
