// Any bytes as a token shard: read_shard returns exactly the declared tokens or throws DataError.
#include "fuzz_util.h"
#include "model/shard.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = gpt2::fuzz::scratch_file(data, size, ".bin");
  try {
    const auto tokens = gpt2::read_shard(path);
    if (size != static_cast<size_t>(gpt2::kShardHeaderBytes) + 2 * tokens.size()) __builtin_trap();
  } catch (const gpt2::DataError&) {
  }
  return 0;
}
