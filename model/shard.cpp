#include "model/shard.h"

#include <fstream>

#include "common/files.h"

namespace gpt2 {
std::vector<uint16_t> read_shard(const std::string& path) {
  if (!files::is_file(path)) throw DataError(path + ": cannot open token shard (no such file)");
  std::ifstream f(path, std::ios::binary);
  if (!f) throw DataError(path + ": cannot open token shard");
  int64_t size = 0;
  try {
    size = files::file_size(path);
  } catch (const std::runtime_error& e) {
    throw DataError(e.what());
  }
  if (size < kShardHeaderBytes)
    throw DataError(path + ": " + std::to_string(size) + " bytes is too short for the " +
                    std::to_string(kShardHeaderBytes) + "-byte llm.c shard header");
  int32_t header[256];
  f.read(reinterpret_cast<char*>(header), sizeof(header));
  if (header[0] != kShardMagic)
    throw DataError(path + ": bad magic " + std::to_string(header[0]) + " (expected " +
                    std::to_string(kShardMagic) + "): not an llm.c token shard");
  if (header[1] != kShardVersion)
    throw DataError(path + ": unsupported shard version " + std::to_string(header[1]) + " (expected " +
                    std::to_string(kShardVersion) + ")");
  const int64_t count = header[2];
  const int64_t payload = size - kShardHeaderBytes;
  if (count < 0 || count * 2 != payload)
    throw DataError(path + ": header declares " + std::to_string(count) + " tokens (" +
                    std::to_string(count * 2) + " bytes) but the file holds " + std::to_string(payload) +
                    " bytes of tokens");
  std::vector<uint16_t> tokens(count);
  f.read(reinterpret_cast<char*>(tokens.data()), payload);
  if (!f) throw DataError(path + ": read failed");
  return tokens;
}

void write_shard(const std::string& path, const std::vector<uint16_t>& tokens) {
  if (tokens.size() > static_cast<size_t>(INT32_MAX)) throw DataError(path + ": too many tokens for one shard");
  int32_t header[256] = {kShardMagic, kShardVersion, static_cast<int32_t>(tokens.size())};
  const std::string tmp = path + ".tmp";
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    if (!f) throw DataError(path + ": cannot write");
    f.write(reinterpret_cast<const char*>(header), sizeof(header));
    f.write(reinterpret_cast<const char*>(tokens.data()), static_cast<std::streamsize>(tokens.size() * 2));
    if (!f) throw DataError(path + ": write failed");
  }
  files::rename(tmp, path);
}

}  // namespace gpt2
